"""Robustness stage: does the answer survive distractors (noise, gate.stages.noise), and does the system refuse
what it cannot or must not answer (rejection, gate.core.rejection: it reads the answers the target already gave;
a judge may classify the answers no refusal phrase settled)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gate.core.catalog import NOISE_METRICS
from gate.core.model import GoldenCase, TargetOutput
from gate.core.rejection import DEFAULT_REFUSAL_PHRASES, detect_refusal, rejection_part
from gate.core.report import CaseResult, NoiseInfo, StageMeasurement, Usage
from gate.deadline import NO_DEADLINE, Deadline
from gate.judges import JudgeSettings
from gate.stages.judging import JudgeProgress, judge_settings, merge_usage
from gate.stages.noise import correctness_plan, noise_test

if TYPE_CHECKING:
    from gate.judges.cache import ScoreCache

CANNOT_INJECT = ("not evaluated: this target cannot answer from injected contexts (results file: add noise.noisy_answer "
                 "to its lines; python: set target.python.contexts_function; http: the service must accept "
                 "{question, contexts})")


async def classify_refusals(rows: Sequence[tuple[GoldenCase, str]], settings: JudgeSettings,
                            cache: ScoreCache) -> tuple[dict[str, bool], Usage]:
    """The judge's refusal verdict for answers no phrase settled (cached as text)."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import REFUSAL, classify_refusal, prompt_fingerprint, refusal_payload

    telemetry_off()
    client = JudgeClient(settings)
    fp = prompt_fingerprint(REFUSAL)

    async def one(case: GoldenCase, answer: str) -> tuple[str, bool | None]:
        key = cache.key_text("refusal", fp, settings.model, settings.temperature, refusal_payload(case.question, answer))
        hit = cache.get_text(key)
        if hit is not None:
            return case.id, hit == "true"
        try:
            verdict = await classify_refusal(client, settings, case.question, answer)
        except JudgeError:
            return case.id, None  # stays decided by the phrases
        cache.put_text(key, "true" if verdict else "false", {"kind": "refusal", "case": case.id})
        return case.id, verdict

    try:
        results = await asyncio.gather(*(one(c, a) for c, a in rows))
        return {cid: v for cid, v in results if v is not None}, client.usage()
    finally:
        await client.aclose()


def _noise(cfg: Mapping[str, Any], settings: JudgeSettings | None, why_not: str | None, cases: Sequence[GoldenCase],
           outputs: Mapping[str, TargetOutput], target: Any, cache: ScoreCache, match: Mapping[str, Any],
           precomputed: Mapping[str, Mapping[str, Any]] | None, file_distractors: Mapping[str, list[str]],
           metrics: dict[str, float], not_evaluated: dict[str, str], deadline: Deadline = NO_DEADLINE,
           only: Collection[str] | None = None, progress: JudgeProgress | None = None,
           ) -> tuple[list[CaseResult], int, NoiseInfo | None]:
    """The noise test, when it can run: its rows, target calls and how it ran; its metrics (or why not) go into
    ``metrics`` and ``not_evaluated``."""
    plan = correctness_plan(cfg)
    can_answer = hasattr(target, "answer_from") and (getattr(target, "contexts_function", True) is not None)
    reason = None
    if plan.engine != "offline" and settings is None:
        reason = f"not evaluated: the judge is needed for correctness and {why_not}"
    elif cfg.get("source") == "generated" and settings is None:
        reason = f"not evaluated: generated distractors need the judge and {why_not}"
    elif not can_answer and not precomputed:
        reason = CANNOT_INJECT
    if reason:
        not_evaluated.update(dict.fromkeys(NOISE_METRICS, reason))
        return [], 0, None
    samples, calls, noise = noise_test(cfg, plan, settings, cases, outputs, target if can_answer else None,
                                       int(getattr(target, "concurrency", 1)), cache, match,
                                       precomputed if not can_answer else None, file_distractors, deadline, only, progress)
    noise_metrics(samples, metrics, not_evaluated)
    return samples, calls, noise


def noise_metrics(samples: Sequence[CaseResult], metrics: dict[str, float], not_evaluated: dict[str, str]) -> None:
    """The noise test's metrics from its rows (into ``metrics``, or why not into ``not_evaluated``)."""
    clean = [s for s in samples if s.get("clean_correct") is not None and s.get("noisy_correct") is not None]
    if not clean:
        not_evaluated.update(dict.fromkeys(NOISE_METRICS, "every sampled case errored"))
        return
    clean_ok = sum(s["clean_correct"] for s in clean)
    noisy_ok = sum(s["noisy_correct"] for s in clean)
    metrics["clean_accuracy"] = clean_ok / len(clean)
    metrics["noisy_accuracy"] = noisy_ok / len(clean)
    if clean_ok:
        metrics["noise_robustness"] = noisy_ok / clean_ok
    else:
        not_evaluated["noise_robustness"] = "no clean answer was correct: the ratio is undefined"


def robustness_stage(
    cfg: Mapping[str, Any],
    judge: Mapping[str, Any] | None,
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    target: Any,
    cache: ScoreCache,
    *,
    match: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    precomputed: Mapping[str, Mapping[str, Any]] | None = None,
    file_distractors: Mapping[str, list[str]] | None = None,
    secrets: Sequence[str] = (),
    deadline: Deadline = NO_DEADLINE,
    only: Collection[str] | None = None,
    progress: JudgeProgress | None = None,
) -> StageMeasurement:
    """Run the stage: what it measured (its gates are applied by gate.core.verdict.gate_stage). ``only``: a shard's
    case ids (``outputs`` holds theirs; the noise sample is drawn from every case, then restricted to them)."""
    mine = cases if only is None else [c for c in cases if c.id in only]
    settings, why_not = judge_settings(judge, os.environ if env is None else env, "no judge configured", secrets)
    metrics: dict[str, float] = {}
    not_evaluated: dict[str, str] = {}
    stage: StageMeasurement = {"metrics": metrics, "not_evaluated": not_evaluated, "samples": [], "warnings": []}
    target_calls = 0

    noise_cfg = cfg.get("noise")
    samples: list[CaseResult] = []
    if noise_cfg:
        samples, target_calls, noise = _noise(noise_cfg, settings, why_not, cases, outputs, target, cache, match or {},
                                              precomputed, file_distractors or {}, metrics, not_evaluated, deadline, only,
                                              progress)
        if noise is not None:
            stage["noise"] = noise
            stage["usage"] = merge_usage(noise)

    rej_cfg = cfg.get("rejection", {})
    judged: dict[str, bool] = {}
    if rej_cfg.get("judge") and settings is not None:
        phrases = list(rej_cfg.get("phrases") or DEFAULT_REFUSAL_PHRASES)
        unsettled = [(c, outputs[c.id].answer or "") for c in mine
                     if outputs[c.id].error is None and detect_refusal(outputs[c.id].answer, phrases) is None]
        if unsettled:
            judged, refusal_usage = asyncio.run(classify_refusals(unsettled, settings, cache))
            stage["usage"] = merge_usage(stage.get("usage", {}), refusal_usage)
    finish(stage, rej_cfg, mine, outputs, judged, samples, target_calls=target_calls,
           scored=sum(1 for s in samples for m in ("clean_correct", "noisy_correct") if s.get(m) is not None))
    return stage


def finish(stage: StageMeasurement, rej_cfg: Mapping[str, Any], cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
           judged: Mapping[str, bool], samples: list[CaseResult], *, target_calls: int, scored: int) -> None:
    """The stage's rejection part (from every answer and the judge's refusal verdicts), its noise rows and counts, and
    why it is skipped when it has no metric. The run's stage and a merge of shards' (gate.shards) end here alike."""
    metrics, not_evaluated = stage["metrics"], stage["not_evaluated"]
    rej_metrics, rej_rows, rej_not = rejection_part(rej_cfg, cases, outputs, judged)
    metrics.update(rej_metrics)
    not_evaluated.update(rej_not)
    errored = sum(1 for s in samples if s.get("error"))
    stage.update({
        "samples": samples,
        "rejection": {"cases": rej_rows, "phrases_default": not rej_cfg.get("phrases"), "judge": bool(judged)},
        "target_calls": target_calls,
        "scores": {"attempted": len(samples), "errored": errored, "error_rate": errored / len(samples) if samples else 0.0},
        "scored": scored,
    })
    if not metrics:
        stage["skipped"] = "; ".join(sorted(set(not_evaluated.values()))) or "nothing to evaluate"
