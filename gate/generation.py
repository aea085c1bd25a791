"""Generation stage: judge metrics on a fixed sample of answerable cases.

Flow: plan the metrics (which engine computes which), pick the sample, look every
(case, metric) up in the cache, judge the misses concurrently through the engines (one
shared client and limit), store the new scores, re-judge a few cases for the self-check,
and aggregate. A score that cannot be computed is recorded per case with its reason:
never NaN, never 0, never dropped.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.judges import Engine, JudgeBudgetExceeded, JudgeError, JudgeInput, JudgeSettings
from gate.model import GoldenCase, TargetOutput
from gate.sampling import select_sample

RAGAS_METRICS = frozenset({"faithfulness", "answer_relevancy", "context_precision", "context_recall", "answer_correctness",
                           "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"})
DEEPEVAL_METRICS = frozenset(
    {"faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevancy", "hallucination"}
)
OFFLINE_METRICS = frozenset({"exact_match", "token_f1", "rouge_l"})


@dataclass(frozen=True)
class MetricPlan:
    name: str  # the name in the report
    engine: str  # ragas | deepeval | offline
    metric: str  # the engine's metric name


def plan_metrics(cfg: Mapping[str, Any]) -> list[MetricPlan]:
    """Which engine computes which metric, and the report names. ValueError with a sentence if unknown.

    A metric keeps its plain name unless two engines compute it, then the second is
    engine-prefixed (``faithfulness`` and ``deepeval/faithfulness``).
    """
    default = cfg.get("engine", "ragas")
    criteria = dict(cfg.get("criteria", {}))
    raw: list[tuple[str, str, str]] = []  # (as written, engine, metric)
    for written in cfg["metrics"]:
        engine, _, metric = written.rpartition("/")
        if metric in OFFLINE_METRICS:
            if engine:
                raise ValueError(f"{written!r}: {metric} needs no LLM engine; write it without a prefix")
            raw.append((written, "offline", metric))
            continue
        if metric in criteria:
            if engine not in ("", "deepeval"):
                raise ValueError(f"{written!r}: custom criteria are judged by deepeval (GEval)")
            raw.append((written, "deepeval", metric))
            continue
        engine = engine or default
        known = RAGAS_METRICS if engine == "ragas" else DEEPEVAL_METRICS
        if metric not in known:
            both = sorted(RAGAS_METRICS | DEEPEVAL_METRICS | OFFLINE_METRICS)
            raise ValueError(
                f"{written!r} is not a {engine} metric; known: {', '.join(both)} (ragas: {', '.join(sorted(RAGAS_METRICS))}; "
                f"deepeval: {', '.join(sorted(DEEPEVAL_METRICS))}), or a name from criteria"
            )
        raw.append((written, engine, metric))
    for name in criteria:
        if name not in [m for _, _, m in raw]:
            raw.append((name, "deepeval", name))
    counts: dict[str, int] = {}
    for _, _, metric in raw:
        counts[metric] = counts.get(metric, 0) + 1
    plans, seen = [], set()
    for written, engine, metric in raw:
        name = metric if counts[metric] == 1 or engine == default else f"{engine}/{metric}"
        if name in seen:
            raise ValueError(f"metric {written!r} is listed twice")
        seen.add(name)
        plans.append(MetricPlan(name, engine, metric))
    return plans


def judge_settings(judge: Mapping[str, Any], env: Mapping[str, str]) -> tuple[JudgeSettings | None, str | None]:
    """(settings, None), or (None, why the judge cannot be used in this run)."""
    key = None
    if judge.get("api_key_env"):
        key = env.get(judge["api_key_env"]) or None
        if key is None:
            return None, f"the judge's key {judge['api_key_env']} is not set in this run (a fork's pull request has no secrets)"
    return JudgeSettings(
        base_url=judge["base_url"], model=judge["model"], api_key=key, temperature=float(judge.get("temperature", 0)),
        timeout_s=float(judge.get("timeout_s", 60)), max_retries=int(judge.get("max_retries", 3)),
        concurrency=int(judge.get("concurrency", 16)), embeddings_model=judge.get("embeddings_model"),
        max_judge_calls=judge.get("max_judge_calls"), prices=dict(judge.get("prices", {})), max_tokens=judge.get("max_tokens"),
    ), None


@dataclass
class Task:
    case_id: str
    plan: MetricPlan
    item: JudgeInput
    key: str


EngineFactory = Callable[[set[str], JudgeSettings | None, dict[str, str]], tuple[dict[str, Engine], Any]]


def build_engines(names: set[str], settings: JudgeSettings | None, criteria: dict[str, str]) -> tuple[dict[str, Engine], Any]:
    """The engines a run needs, sharing one JudgeClient (returned second, None without LLM engines)."""
    engines: dict[str, Engine] = {}
    client = None
    if "offline" in names:
        from gate.judges.offline import OfflineEngine

        engines["offline"] = OfflineEngine()
    llm = names - {"offline"}
    if llm and settings is not None:
        from gate.judges import telemetry_off

        telemetry_off()
        from gate.judges.client import JudgeClient

        client = JudgeClient(settings)
        if "ragas" in llm:
            from gate.judges.ragas_engine import RagasEngine

            engines["ragas"] = RagasEngine(client, settings, max_tokens=settings.max_tokens)
        if "deepeval" in llm:
            from gate.judges.deepeval_engine import DeepEvalEngine

            engines["deepeval"] = DeepEvalEngine(client, settings, criteria, max_tokens=settings.max_tokens)
    return engines, client


def _input_for(case: GoldenCase, out: TargetOutput) -> JudgeInput:
    return JudgeInput(question=case.question, answer=out.answer or "", contexts=tuple(out.contexts), reference=case.ground_truth)


def _missing_input(needs: set[str], item: JudgeInput) -> str | None:
    if not item.answer.strip():
        return "the target gave no answer"
    if "contexts" in needs and not item.contexts:
        return "the target returned no contexts"
    if "reference" in needs and not item.reference:
        return "the golden case has no ground_truth"
    return None


def split_cached(tasks: Sequence[Task], cache: Any) -> tuple[dict[str, float], list[Task]]:
    """(the cached scores by key, the tasks still to judge: one per distinct key, so identical
    inputs are judged once)."""
    cached = cache.get_many([t.key for t in tasks])
    return cached, list({t.key: t for t in tasks if t.key not in cached}.values())


def store_judged(todo: Sequence[Task], results: Mapping[int, float | str], cache: Any, model: str) -> dict[str, float | str]:
    """The fresh results by key (score, or the reason it failed); scores go into the cache, errors never."""
    by_key: dict[str, float | str] = {}
    for i, t in enumerate(todo):
        by_key[t.key] = results[i]
        if isinstance(results[i], float):
            cache.put(t.key, results[i], {"engine": t.plan.engine, "metric": t.plan.metric, "model": model})
    return by_key


async def _judge(tasks: Sequence[Task], engines: Mapping[str, Engine]) -> dict[int, float | str]:
    """Score every task concurrently (the client's semaphore bounds the calls). index -> score or reason."""

    async def one(i: int, task: Task) -> tuple[int, float | str]:
        try:
            value = await engines[task.plan.engine].score(task.plan.metric, task.item)
        except JudgeBudgetExceeded as exc:
            return i, f"not judged: {exc}"
        except JudgeError as exc:
            return i, str(exc) or type(exc).__name__
        except Exception as exc:  # a library bug for this case must not lose the others
            return i, f"{type(exc).__name__}: {exc}"
        if not isinstance(value, (int, float)) or math.isnan(value):
            return i, f"the engine returned {value!r}, not a score"
        return i, float(value)

    results = await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))
    return dict(results)


def generation_stage(
    cfg: Mapping[str, Any],
    judge: Mapping[str, Any] | None,
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    cache: Any,
    *,
    env: Mapping[str, str] | None = None,
    engine_factory: EngineFactory = build_engines,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the stage. Returns the stage dict of report.json (without gates)."""
    from gate.redact import redact

    env = os.environ if env is None else env
    plans = plan_metrics(cfg)
    not_evaluated: dict[str, str] = {}
    settings, why_not = (None, "no judge configured (add judge: to the spec)") if not judge else judge_settings(judge, env)
    runnable = []
    for p in plans:
        if p.engine != "offline" and settings is None:
            not_evaluated[p.name] = f"not evaluated: {why_not}"
        else:
            runnable.append(p)
    sample_cfg = cfg.get("sample", {})
    answerable = [c for c in cases if c.answerable]
    sample = select_sample(answerable, sample_cfg.get("size", "all"), int(sample_cfg.get("seed", 0)),
                           sample_cfg.get("always", {}).get("tags", []))
    base: dict[str, Any] = {"sample": {"size": len(sample), "of": len(answerable), "ids": [c.id for c in sample]}}
    if not runnable:
        return {"status": "skipped", "reason": "; ".join(sorted(set(not_evaluated.values()))) or "no metric to run",
                "metrics": {}, "gates": [], "samples": [], "not_evaluated": not_evaluated, **base}

    engines, client = engine_factory({p.engine for p in runnable}, settings, dict(cfg.get("criteria", {})))
    model = settings.model if settings else ""
    temperature = settings.temperature if settings else 0.0
    per_case: dict[str, dict[str, float]] = {c.id: {} for c in sample}
    errors: dict[str, dict[str, str]] = {c.id: {} for c in sample}
    tasks: list[Task] = []
    for case in sample:
        out = outputs[case.id]
        item = _input_for(case, out)
        for p in runnable:
            engine = engines[p.engine]
            if out.error is not None:
                errors[case.id][p.name] = "the target call failed for this case"
                continue
            missing = _missing_input(engine.needs(p.metric), item)
            if missing:
                errors[case.id][p.name] = missing
                continue
            key = cache.key(engine.name, engine.version, p.metric, model if p.engine != "offline" else "",
                            temperature if p.engine != "offline" else 0.0, engine.prompt_fingerprint(p.metric), item)
            tasks.append(Task(case.id, p, item, key))
    cached, todo = split_cached(tasks, cache)

    self_cfg = cfg.get("self_check")
    check_ids = [c.id for c in sample[: int(self_cfg.get("cases", 10))]] if self_cfg else []
    recheck = [t for t in tasks if t.case_id in check_ids and t.plan.engine != "offline"]

    async def main() -> tuple[dict[int, float | str], dict[int, float | str]]:
        try:
            first, second = await asyncio.gather(_judge(todo, engines), _judge(recheck, engines))
            return first, second
        finally:
            for e in engines.values():
                await e.aclose()
            if client is not None:
                await client.aclose()

    first, second = asyncio.run(main())
    results: dict[str, float | str] = {**cached, **store_judged(todo, first, cache, model)}
    for t in tasks:
        result = results[t.key]
        if isinstance(result, float):
            per_case[t.case_id][t.plan.name] = result
        else:
            errors[t.case_id][t.plan.name] = redact(result, secrets)

    self_check = None
    if self_cfg:
        self_check = _self_check(recheck, second, per_case, float(self_cfg.get("max_diff", 0.02)), self_cfg.get("on_unstable", "warn"))

    samples = []
    for case in sample:
        errs = errors[case.id]
        samples.append({
            "id": case.id,
            "metrics": per_case[case.id],
            "errors": errs,
            "error": "; ".join(f"{m}: {r}" for m, r in errs.items()) or None,
        })
    metrics: dict[str, float] = {}
    for p in runnable:
        values = [per_case[c.id][p.name] for c in sample if p.name in per_case[c.id]]
        if values:
            metrics[p.name] = math.fsum(values) / len(values)
        else:
            not_evaluated[p.name] = "every judged case errored" if sample else "the sample is empty"
    attempted = sum(1 for c in sample for p in runnable)
    failed = sum(len(e) for e in errors.values())
    usage = client.usage() if client is not None else {"calls": 0}
    usage.update({"cache_hits": sum(1 for t in tasks if t.key in cached), "cache_misses": len(todo)})
    stage = {
        "status": "pass",
        **base,
        "metrics": metrics,
        "samples": samples,
        "not_evaluated": not_evaluated,
        "judge": {"model": model or None, "temperature": temperature if settings else None,
                  "engines": {name: e.version for name, e in engines.items()}},
        "usage": usage,
        "scores": {"attempted": attempted, "errored": failed, "error_rate": failed / attempted if attempted else 0.0},
        "budget_exceeded": bool(client is not None and getattr(client, "budget_exceeded", False)),
    }
    if self_check is not None:
        stage["self_check"] = self_check
    return stage


def _self_check(
    recheck: Sequence[Task], second: Mapping[int, float | str], per_case: Mapping[str, Mapping[str, float]],
    max_diff: float, on_unstable: str,
) -> dict[str, Any]:
    """Largest and mean |first - second| per metric over the re-judged cases."""
    diffs: dict[str, list[float]] = {}
    errored = 0
    for i, t in enumerate(recheck):
        again = second.get(i)
        first = per_case.get(t.case_id, {}).get(t.plan.name)
        if not isinstance(again, float) or first is None:
            errored += 1
            continue
        diffs.setdefault(t.plan.name, []).append(abs(first - again))
    per_metric = {
        m: {"cases": len(d), "max_diff": max(d), "mean_diff": math.fsum(d) / len(d)} for m, d in diffs.items()
    }
    unstable = sorted(m for m, d in per_metric.items() if d["max_diff"] > max_diff + 1e-12)
    return {"limit": max_diff, "on_unstable": on_unstable, "metrics": per_metric, "unstable": unstable, "errored": errored,
            "cases": len({t.case_id for t in recheck})}
