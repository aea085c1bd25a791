"""Robustness stage: does the answer survive distractors (noise, gate.stages.noise), and does the system refuse
what it cannot or must not answer (rejection, gate.core.rejection: it reads the answers the target already gave;
a judge may classify the answers no refusal phrase settled). A run's stage and a merge of shards' (gate.run.merge)
end in the same ``finish``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.core.catalog import NOISE_METRICS
from gate.core.model import GoldenCase, TargetOutput
from gate.core.rejection import detect_refusal, refusal_phrases, rejection_part
from gate.core.report import CaseResult, NoiseInfo, StageMeasurement, Usage
from gate.core.settings import NoiseSettings, RejectionSettings, RobustnessSettings
from gate.core.usage import sum_usage
from gate.judges import JudgeSettings
from gate.stages.context import StageContext
from gate.stages.noise import NoiseSources, noise_test
from gate.stages.variants import VariantPart

if TYPE_CHECKING:
    from gate.core.redact import Redactor
    from gate.judges.cache import ScoreCache
    from gate.targets import Target

CANNOT_INJECT = ("not evaluated: this target cannot answer from injected contexts (results file: add noise.noisy_answer "
                 "to its lines; python: set target.python.contexts_function; http: the service must accept "
                 "{question, contexts})")


@dataclass
class NoisePart:
    """The noise test's share of the stage: its rows, how it ran (None: it could not run), the target calls it made,
    and its metrics or why not."""

    rows: list[CaseResult] = field(default_factory=list)
    info: NoiseInfo | None = None
    target_calls: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    not_evaluated: dict[str, str] = field(default_factory=dict)

    @property
    def scored(self) -> int:
        """The answers the noise test scored (clean and noisy)."""
        return sum(1 for s in self.rows for m in ("clean_correct", "noisy_correct") if s.get(m) is not None)


async def classify_refusals(rows: Sequence[tuple[GoldenCase, str]], settings: JudgeSettings,
                            cache: ScoreCache, redactor: Redactor) -> tuple[dict[str, bool], Usage]:
    """The judge's refusal verdict for answers no phrase settled (cached as text). The question and the answer are
    redacted first (``redactor``: the run's secrets), in the prompt and in the key they are cached under."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import REFUSAL, classify_refusal, prompt_fingerprint, refusal_payload

    telemetry_off()
    client = JudgeClient(settings)
    fp = prompt_fingerprint(REFUSAL)

    async def one(case: GoldenCase, answer: str) -> tuple[str, bool | None]:
        question, answer = redactor(case.question), redactor(answer)
        key = cache.key_text("refusal", fp, settings.model, settings.temperature, refusal_payload(question, answer))
        hit = cache.get_text(key)
        if hit is not None:
            return case.id, hit == "true"
        try:
            verdict = await classify_refusal(client, settings, question, answer)
        except JudgeError:
            return case.id, None  # stays decided by the phrases
        cache.put_text(key, "true" if verdict else "false", {"kind": "refusal", "case": case.id})
        return case.id, verdict

    try:
        results = await asyncio.gather(*(one(c, a) for c, a in rows))
        return {cid: v for cid, v in results if v is not None}, client.usage()
    finally:
        await client.aclose()


def cannot_run(settings: NoiseSettings, ctx: StageContext, target: Target | None) -> str | None:
    """Why the noise test cannot run in this run, if it cannot."""
    if settings.correctness.judged and ctx.judge is None:
        return f"not evaluated: the judge is needed for correctness and {ctx.no_judge}"
    if settings.source == "generated" and ctx.judge is None:
        return f"not evaluated: generated distractors need the judge and {ctx.no_judge}"
    if (target is None or not target.answers_from_contexts) and not (target and target.precomputed_noise):
        return CANNOT_INJECT
    return None


def noise_part(settings: RobustnessSettings, ctx: StageContext, target: Target | None,
               file_distractors: Mapping[str, list[str]]) -> NoisePart:
    """The noise test, when it is configured and can run."""
    part = NoisePart()
    if settings.noise is None:
        return part
    reason = cannot_run(settings.noise, ctx, target)
    if reason:
        part.not_evaluated.update(dict.fromkeys(NOISE_METRICS, reason))
        return part
    asks = target is not None and target.answers_from_contexts
    sources = NoiseSources(None if asks or target is None else target.precomputed_noise, file_distractors)
    part.rows, part.target_calls, part.info = noise_test(settings.noise, ctx, target if asks else None, settings.match, sources)
    noise_metrics(part.rows, part.metrics, part.not_evaluated)
    return part


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


def robustness_stage(settings: RobustnessSettings, ctx: StageContext, target: Target | None,
                     file_distractors: Mapping[str, list[str]] | None = None) -> StageMeasurement:
    """Run the stage: what it measured (its gates are applied by gate.core.verdict.gate_stage). In a shard
    (``ctx.only``) the noise sample is drawn from every case, then restricted to the shard's."""
    mine = ctx.mine(ctx.cases)
    noise = noise_part(settings, ctx, target, file_distractors or {})
    usage: list[Usage] = [noise.info] if noise.info is not None else []
    judged: dict[str, bool] = {}
    if settings.rejection.judge and ctx.judge is not None:
        phrases = refusal_phrases(settings.rejection)
        unsettled = [(c, ctx.outputs[c.id].answer or "") for c in mine
                     if ctx.outputs[c.id].error is None and detect_refusal(ctx.outputs[c.id].answer, phrases) is None]
        if unsettled:
            judged, refusal_usage = asyncio.run(classify_refusals(unsettled, ctx.judge, ctx.cache, ctx.redactor))
            usage.append(refusal_usage)
    variants = asked_again(settings, ctx, target)
    usage += [v.usage for v in variants if v.usage is not None]
    return finish(noise, settings.rejection, Answers(mine, ctx.outputs, judged), usage, variants)


def asked_again(settings: RobustnessSettings, ctx: StageContext, target: Target | None) -> list[VariantPart]:
    """The paraphrase and stability tests, when configured: each asks the target again."""
    parts = []
    if settings.paraphrase is not None:
        from gate.core.paraphrase import shortfall
        from gate.stages.paraphrase import paraphrase_part

        part = paraphrase_part(settings.paraphrase, ctx, target, settings.match)
        part.warnings += shortfall(part.info, settings.paraphrase.generate) if part.info is not None else []
        parts.append(part)
    if settings.stability is not None:
        from gate.stages.stability import stability_part

        parts.append(stability_part(settings.stability, ctx, target))
    return parts


@dataclass(frozen=True)
class Answers:
    """What the rejection part reads: the cases, the target's answers, and the judge's refusal verdicts (by case id)
    for the answers no phrase settled."""

    cases: Sequence[GoldenCase]
    outputs: Mapping[str, TargetOutput]
    judged: Mapping[str, bool]


def finish(noise: NoisePart, rejection: RejectionSettings, answers: Answers, usage: Sequence[Usage],
           variants: Sequence[VariantPart] = ()) -> StageMeasurement:
    """The stage from its noise part, the rejection part (from every answer and the judge's refusal verdicts) and the
    tests that asked the target again (``variants``), with its counts, and why it is skipped when it has no metric."""
    metrics, not_evaluated = dict(noise.metrics), dict(noise.not_evaluated)
    for v in variants:
        metrics.update(v.metrics)
        not_evaluated.update(v.not_evaluated)
    stage: StageMeasurement = {"metrics": metrics, "not_evaluated": not_evaluated, "samples": noise.rows, "warnings": []}
    if noise.info is not None:
        stage["noise"] = noise.info
    if usage:
        stage["usage"] = sum_usage(usage)
    rej_metrics, rej_rows, rej_not = rejection_part(rejection, answers.cases, answers.outputs, answers.judged)
    metrics.update(rej_metrics)
    not_evaluated.update(rej_not)
    errored = sum(1 for s in noise.rows if s.get("error"))
    stage.update({
        "rejection": {"cases": rej_rows, "phrases_default": not rejection.phrases, "judge": bool(answers.judged)},
        "target_calls": noise.target_calls + sum(v.target_calls for v in variants),
        "scores": {"attempted": len(noise.rows), "errored": errored, "error_rate": errored / len(noise.rows) if noise.rows else 0.0},
        "scored": noise.scored,
    })
    for v in variants:
        if v.info is not None:
            stage[v.key] = v.info  # type: ignore[literal-required]
        stage["warnings"] += v.warnings
    if not metrics:
        stage["skipped"] = "; ".join(sorted(set(not_evaluated.values()))) or "nothing to evaluate"
    return stage
