"""Robustness stage: does the answer survive distractors (noise), and does the system refuse
what it cannot or must not answer (rejection)?

Noise: for each sampled answerable case the target answers from its own retrieved contexts
(clean), then from the same contexts with k distractors injected (noisy); both answers are
judged correct or not against ground_truth. ``noise_robustness`` = correct noisy / correct
clean (the seed's ratio). Rejection reads the answers the target already gave.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gate.generation import MetricPlan, Task, _judge, build_engines, judge_settings, split_cached, store_judged
from gate.judges import JudgeInput, JudgeSettings
from gate.judges.offline import squad_tokens
from gate.model import GoldenCase, TargetOutput
from gate.rejection import DEFAULT_REFUSAL_PHRASES, REJECTION_METRICS, detect_refusal, leaked, rejection_part
from gate.retrieval import id_mapper
from gate.sampling import select_sample
from gate.targets import Answer

__all__ = ["DEFAULT_REFUSAL_PHRASES", "REJECTION_METRICS", "detect_refusal", "leaked", "rejection_part", "robustness_stage"]

NOISE_METRICS = ("noise_robustness", "clean_accuracy", "noisy_accuracy")


# ---------------------------------------------------------------------------------- distractors


def corpus_candidates(outputs: Mapping[str, TargetOutput]) -> dict[str, str]:
    """Every passage (id -> text) the target retrieved for any question: the pool of hard negatives."""
    pool: dict[str, str] = {}
    for out in outputs.values():
        for doc in out.retrieved:
            if doc.text and doc.id not in pool:
                pool[doc.id] = doc.text
    return pool


def pick_corpus_distractors(
    case: GoldenCase, contexts: Sequence[str], pool: Mapping[str, str], k: int, match: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The k passages of the pool closest to the question in words, never a relevant one (at the
    matching level the retrieval stage uses) nor one already among the case's contexts."""
    to_id = id_mapper(dict(match))
    relevant = {to_id(r) for r in case.relevant} | set(case.relevant)
    q = set(squad_tokens(case.question))
    own = set(contexts)
    scored = []
    for doc_id, text in pool.items():
        if doc_id in relevant or to_id(doc_id) in relevant or text in own:
            continue
        words = set(squad_tokens(text))
        overlap = len(q & words) / (len(q | words) or 1)
        scored.append((-overlap, doc_id, text))
    scored.sort()
    return [(doc_id, text) for _, doc_id, text in scored[:k]]


def inject(contexts: Sequence[str], distractors: Sequence[str], position: str, rng: random.Random) -> list[str]:
    """The contexts with the distractors placed at the front, the back, or one random place."""
    if position == "front":
        return [*distractors, *contexts]
    if position == "back":
        return [*contexts, *distractors]
    at = rng.randint(0, len(contexts))
    return [*contexts[:at], *distractors, *contexts[at:]]


def load_distractor_file(path: Any) -> dict[str, list[str]]:
    """A JSONL file of {"id": case id, "distractors": [passage, ...]}; InputError naming the line otherwise."""
    from gate.errors import InputError
    from gate.golden import iter_jsonl

    out: dict[str, list[str]] = {}
    for lineno, row in iter_jsonl(path):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise InputError("each line needs an 'id' (the golden case's id)", file=str(path), line=lineno)
        d = row.get("distractors")
        if not isinstance(d, list) or not d or not all(isinstance(x, str) and x.strip() for x in d):
            raise InputError("'distractors' must be a non-empty list of passages (strings)", file=str(path), line=lineno)
        out[row["id"]] = d
    return out


# ---------------------------------------------------------------------------------- the stage


def _answer_all(target: Any, jobs: Sequence[tuple[GoldenCase, list[str]]]) -> list[Answer]:
    def one(job: tuple[GoldenCase, list[str]]) -> Answer:
        try:
            return target.answer_from(job[0], job[1])
        except Exception as exc:  # a bug in a target must not lose the other cases
            return Answer(None, f"{type(exc).__name__}: {exc}")

    workers = max(1, min(int(getattr(target, "concurrency", 1)), len(jobs) or 1))
    if workers == 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-gate-noise") as pool:
        return list(pool.map(one, jobs))


CORRECTNESS_CRITERION = (
    "The actual output gives the same answer as the expected output (ground truth) to the question asked: the facts, "
    "numbers and conclusion agree; wording may differ; an answer that contradicts it or refuses is wrong."
)


def _correctness_plan(cfg: Mapping[str, Any]) -> MetricPlan:
    """ragas answer_correctness, a deepeval GEval correctness criterion, or offline token F1."""
    c = cfg.get("correctness", {})
    if c.get("method", "offline") != "judge":
        return MetricPlan("correctness", "offline", "token_f1")
    if c.get("engine", "ragas") == "deepeval":
        return MetricPlan("correctness", "deepeval", "correctness")
    return MetricPlan("correctness", "ragas", "answer_correctness")


async def _generate(cases: Sequence[GoldenCase], contexts: Mapping[str, list[str]], k: int, settings: JudgeSettings,
                    cache: Any) -> tuple[dict[str, list[str] | str], dict[str, Any]]:
    """k judge-written conflicting passages per case (cached as text). case id -> passages, or the reason it failed."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import DISTRACTOR, distractor_payload, generate_distractor, prompt_fingerprint

    telemetry_off()
    client = JudgeClient(settings)
    fp = prompt_fingerprint(DISTRACTOR)

    async def one(case: GoldenCase) -> tuple[str, list[str] | str]:
        out: list[str] = []
        context: str | None = contexts[case.id][0] if contexts[case.id] else None
        try:
            for _ in range(k):  # each passage asked to differ from those already written
                payload = distractor_payload(case.question, case.ground_truth or "", context, avoid=out)
                key = cache.key_text("distractor", fp, settings.model, settings.temperature, payload)
                text = cache.get_text(key)
                if text is None:
                    text = await generate_distractor(client, settings, case.question, case.ground_truth or "", context, avoid=out)
                    cache.put_text(key, text, {"kind": "distractor", "case": case.id})
                out.append(text)
        except JudgeError as exc:
            return case.id, f"generating a distractor failed: {exc}"
        return case.id, out

    try:
        return dict(await asyncio.gather(*(one(c) for c in cases))), client.usage()
    finally:
        await client.aclose()


async def _classify(rows: Sequence[tuple[GoldenCase, str]], settings: JudgeSettings, cache: Any) -> tuple[dict[str, bool], dict[str, Any]]:
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


def merge_usage(*usages: Mapping[str, Any]) -> dict[str, Any]:
    """Sum the numeric counters of several judge clients' usage (cost stays None when none has one)."""
    out: dict[str, Any] = {}
    for u in usages:
        for k, v in u.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            out[k] = out.get(k, 0) + v
    return out


def robustness_stage(
    cfg: Mapping[str, Any],
    judge: Mapping[str, Any] | None,
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    target: Any,
    cache: Any,
    *,
    match: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    precomputed: Mapping[str, Mapping[str, Any]] | None = None,
    file_distractors: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Run the stage; returns its report dict (without gates)."""
    import os

    env = os.environ if env is None else env
    settings, why_not = (None, "no judge configured") if not judge else judge_settings(judge, env)
    metrics: dict[str, float] = {}
    not_evaluated: dict[str, str] = {}
    stage: dict[str, Any] = {"status": "pass"}
    target_calls = 0

    noise_cfg = cfg.get("noise")
    samples: list[dict[str, Any]] = []
    if noise_cfg:
        plan = _correctness_plan(noise_cfg)
        can_answer = hasattr(target, "answer_from") and (getattr(target, "contexts_function", True) is not None)
        reason = None
        if plan.engine != "offline" and settings is None:
            reason = f"not evaluated: the judge is needed for correctness and {why_not}"
        elif noise_cfg.get("source") == "generated" and settings is None:
            reason = f"not evaluated: generated distractors need the judge and {why_not}"
        elif not can_answer and not precomputed:
            reason = ("not evaluated: this target cannot answer from injected contexts (results file: add noise.noisy_answer "
                      "to its lines; python: set target.python.contexts_function; http: the service must accept "
                      "{question, contexts})")
        if reason:
            for m in NOISE_METRICS:
                not_evaluated[m] = reason
        else:
            samples, calls, judge_usage = _noise_part(noise_cfg, plan, settings, cases, outputs, target, cache, match or {},
                                                      precomputed if not can_answer else None, file_distractors or {})
            target_calls += calls
            stage["noise"] = judge_usage
            stage["usage"] = merge_usage(judge_usage)
            clean = [s for s in samples if s.get("clean_correct") is not None and s.get("noisy_correct") is not None]
            if clean:
                clean_ok = sum(s["clean_correct"] for s in clean)
                noisy_ok = sum(s["noisy_correct"] for s in clean)
                metrics["clean_accuracy"] = clean_ok / len(clean)
                metrics["noisy_accuracy"] = noisy_ok / len(clean)
                if clean_ok:
                    metrics["noise_robustness"] = noisy_ok / clean_ok
                else:
                    not_evaluated["noise_robustness"] = "no clean answer was correct: the ratio is undefined"
            else:
                for m in NOISE_METRICS:
                    not_evaluated[m] = "every sampled case errored"

    rej_cfg = cfg.get("rejection", {})
    judged: dict[str, bool] = {}
    if rej_cfg.get("judge") and settings is not None:
        phrases = list(rej_cfg.get("phrases") or DEFAULT_REFUSAL_PHRASES)
        unsettled = [(c, outputs[c.id].answer or "") for c in cases
                     if outputs[c.id].error is None and detect_refusal(outputs[c.id].answer, phrases) is None]
        if unsettled:
            judged, refusal_usage = asyncio.run(_classify(unsettled, settings, cache))
            stage["usage"] = merge_usage(stage.get("usage", {}), refusal_usage)
    rej_metrics, rej_rows, rej_not = rejection_part(rej_cfg, cases, outputs, judged)
    metrics.update(rej_metrics)
    not_evaluated.update(rej_not)

    scored = sum(1 for s in samples for m in ("clean_correct", "noisy_correct") if s.get(m) is not None)
    errored = sum(1 for s in samples if s.get("error"))
    stage.update({
        "metrics": metrics,
        "not_evaluated": not_evaluated,
        "samples": samples,
        "rejection": {"cases": rej_rows, "phrases_default": not rej_cfg.get("phrases"), "judge": bool(judged)},
        "target_calls": target_calls,
        "scores": {"attempted": len(samples), "errored": errored, "error_rate": errored / len(samples) if samples else 0.0},
        "scored": scored,
    })
    if not metrics:
        stage["status"] = "skipped"
        stage["reason"] = "; ".join(sorted(set(not_evaluated.values()))) or "nothing to evaluate"
    return stage


def _noise_part(
    cfg: Mapping[str, Any], plan: MetricPlan, settings: JudgeSettings | None, cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput], target: Any, cache: Any, match: Mapping[str, Any],
    precomputed: Mapping[str, Mapping[str, Any]] | None, file_distractors: Mapping[str, list[str]],
) -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
    """Per-case noise rows, the number of target calls made, and the judge usage."""
    sample_cfg = cfg.get("sample", {})
    answerable = [c for c in cases if c.answerable and outputs[c.id].error is None]
    sample = select_sample(answerable, sample_cfg.get("size", "all"), int(sample_cfg.get("seed", 0)),
                           sample_cfg.get("always", {}).get("tags", []))
    k = int(cfg.get("distractors", 2))
    position = cfg.get("position", "front")
    rng = random.Random(int(cfg.get("seed", 0)))
    contexts = {c.id: list(outputs[c.id].contexts) for c in sample}
    rows: dict[str, dict[str, Any]] = {c.id: {"id": c.id, "metrics": {}, "error": None} for c in sample}

    # 1. distractors
    chosen: dict[str, list[dict[str, str | None]]] = {}
    generation_usage: dict[str, Any] = {}
    source = cfg.get("source", "corpus")
    if precomputed is not None:
        for c in sample:
            chosen[c.id] = [{"id": None, "text": t} for t in precomputed.get(c.id, {}).get("distractors", [])]
    elif source == "corpus":
        pool = corpus_candidates(outputs)
        for c in sample:
            chosen[c.id] = [{"id": i, "text": t} for i, t in pick_corpus_distractors(c, contexts[c.id], pool, k, match)]
    elif source == "file":
        for c in sample:
            chosen[c.id] = [{"id": None, "text": t} for t in file_distractors.get(c.id, [])[:k]]
    else:
        assert settings is not None
        made, generation_usage = asyncio.run(_generate(sample, contexts, k, settings, cache))
        for c in sample:
            got = made[c.id]
            if isinstance(got, str):
                rows[c.id]["error"] = got
                chosen[c.id] = []
            else:
                chosen[c.id] = [{"id": f"generated-{i + 1}", "text": t} for i, t in enumerate(got)]
    for c in sample:  # precomputed answers need no distractor text (it is optional on the results line)
        if rows[c.id]["error"] is None and not chosen[c.id] and precomputed is None:
            rows[c.id]["error"] = "no distractor available for this case"

    # 2. clean and noisy answers
    live = [c for c in sample if rows[c.id]["error"] is None]
    calls = 0
    if precomputed is not None:
        for c in live:
            pre = precomputed.get(c.id)
            if pre is None:
                rows[c.id]["error"] = "no noise.noisy_answer for this case in the results file"
                continue
            rows[c.id].update(clean_answer=pre.get("clean_answer", outputs[c.id].answer), noisy_answer=pre["noisy_answer"],
                              position="(precomputed)")
    else:
        noisy_ctx = {c.id: inject(contexts[c.id], [d["text"] or "" for d in chosen[c.id]], position, rng) for c in live}
        jobs = [(c, contexts[c.id]) for c in live] + [(c, noisy_ctx[c.id]) for c in live]
        answers = _answer_all(target, jobs)
        calls = len(jobs)
        for i, c in enumerate(live):
            clean, noisy = answers[i], answers[len(live) + i]
            bad = clean.error or noisy.error
            if bad:
                rows[c.id]["error"] = f"the target's answer from contexts failed: {bad}"
                continue
            rows[c.id].update(clean_answer=clean.text, noisy_answer=noisy.text, position=position)
    for c in sample:
        rows[c.id]["distractors"] = chosen.get(c.id, [])

    # 3. correctness of both answers
    engines, client = build_engines({plan.engine}, settings, {"correctness": CORRECTNESS_CRITERION})
    engine = engines[plan.engine]
    threshold = float(cfg.get("correctness", {}).get("threshold", 0.5))
    model = settings.model if settings and plan.engine != "offline" else ""
    temperature = settings.temperature if settings and plan.engine != "offline" else 0.0
    tasks: list[Task] = []
    for c in sample:
        row = rows[c.id]
        if row["error"] is not None:
            continue
        if not c.ground_truth:
            row["error"] = "the golden case has no ground_truth to judge correctness against"
            continue
        # correctness is judged against ground_truth; both answers get the same (clean) contexts so that
        # identical answers share one cache entry and one judge call
        for which, ctx in (("clean", contexts[c.id]), ("noisy", contexts[c.id])):
            item = JudgeInput(question=c.question, answer=row[f"{which}_answer"] or "", contexts=tuple(ctx), reference=c.ground_truth)
            key = cache.key(engine.name, engine.version, plan.metric, model, temperature, engine.prompt_fingerprint(plan.metric), item)
            tasks.append(Task(f"{c.id}\x00{which}", plan, item, key))
    cached, todo = split_cached(tasks, cache)  # identical clean and noisy answers: judged once

    async def judge_all() -> dict[int, float | str]:
        try:
            return await _judge(todo, engines)
        finally:
            await engine.aclose()
            if client is not None:
                await client.aclose()

    fresh = asyncio.run(judge_all()) if todo else {}
    by_key: dict[str, float | str] = {**cached, **store_judged(todo, fresh, cache, model)}
    scores = {t.case_id: by_key[t.key] for t in tasks}
    for c in sample:
        row = rows[c.id]
        if row["error"] is not None:
            continue
        for which in ("clean", "noisy"):
            score = scores.get(f"{c.id}\x00{which}")
            if isinstance(score, float):
                row["metrics"][f"{which}_score"] = score
                row[f"{which}_correct"] = score >= threshold
            else:
                row["error"] = f"judging the {which} answer failed: {score}"
        if row["error"] is None:
            row["flipped"] = bool(row["clean_correct"] and not row["noisy_correct"])
    usage = merge_usage(client.usage() if client is not None else {"calls": 0}, generation_usage)
    usage.update({"method": "judge" if plan.engine != "offline" else "offline (token F1 with ground_truth)",
                  "threshold": threshold, "source": "precomputed" if precomputed is not None else source,
                  "distractors": k, "position": position, "cache_hits": len(tasks) - len(todo), "cache_misses": len(todo)})
    return [rows[c.id] for c in sample], calls, usage
