"""Generation stage: judge metrics on a fixed sample of answerable cases.

Flow: plan the metrics (which engine computes which), pick the sample, look every (case,
metric) up in the cache, judge the misses concurrently through the engines (one shared client
and limit), store the new scores, re-judge a few cases for the self-check, and aggregate. A
score that cannot be computed is recorded per case with its reason: never NaN, never 0, never
dropped.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gate.core.catalog import EngineMetric, engine_metrics
from gate.core.model import GoldenCase, TargetOutput
from gate.core.pairs import PairedRun, output_ref
from gate.core.report import CaseResult, JudgeInfo, MetricDiff, SampleInfo, SelfCheck, StageMeasurement
from gate.core.sampling import JUDGED_CASES, sample_from
from gate.deadline import NO_DEADLINE, Deadline
from gate.judges import Engine, JudgeSettings
from gate.stages.judging import (
    EngineFactory,
    JudgeProgress,
    Task,
    build_engines,
    close_all,
    in_flight,
    judge_input,
    judge_settings,
    judge_tasks,
    missing_input,
    split_cached,
    storing,
    task_key,
    ticking,
)
from gate.stages.pairing import confirmed, plan_pairs, records, settle, to_confirm

if TYPE_CHECKING:
    from gate.judges.cache import ScoreCache


@dataclass
class Plan:
    """Which (case, metric) pairs to judge, and the reasons the others cannot be."""

    tasks: list[Task]
    errors: dict[str, dict[str, str]]  # case id -> metric -> why it was not judged


def plan_tasks(sample: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], runnable: Sequence[EngineMetric],
               engines: Mapping[str, Engine], settings: JudgeSettings | None, cache: ScoreCache) -> Plan:
    tasks: list[Task] = []
    errors: dict[str, dict[str, str]] = {c.id: {} for c in sample}
    for case in sample:
        out = outputs[case.id]
        item = judge_input(case, out)
        for p in runnable:
            engine = engines[p.engine]
            if out.error is not None:
                errors[case.id][p.name] = "the target call failed for this case"
                continue
            missing = missing_input(engine.needs(p.metric), item)
            if missing:
                errors[case.id][p.name] = missing
                continue
            tasks.append(Task(case.id, p, item, task_key(cache, engine, p, settings, item)))
    return Plan(tasks, errors)


def generation_stage(
    cfg: Mapping[str, Any],
    judge: Mapping[str, Any] | None,
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    cache: ScoreCache,
    *,
    env: Mapping[str, str] | None = None,
    engine_factory: EngineFactory = build_engines,
    secrets: Sequence[str] = (),
    deadline: Deadline = NO_DEADLINE,
    references: Sequence[PairedRun] = (),
    only: Collection[str] | None = None,
    progress: JudgeProgress | None = None,
) -> StageMeasurement:
    """Run the stage: what it measured (its gates are applied by gate.core.verdict.gate_stage). ``references``: the
    runs its relative gates compare with; every judged case is paired with each (gate.stages.pairing). ``only``: a
    shard's case ids: the sample and the self-check's cases are drawn from every case, then restricted to them (so
    the shards together judge what one run would), and the self-check keeps its differences for the merge."""
    plans = engine_metrics(cfg)
    not_evaluated: dict[str, str] = {}
    settings, why_not = judge_settings(judge, os.environ if env is None else env, secrets=secrets)
    runnable = []
    for p in plans:
        if p.engine != "offline" and settings is None:
            not_evaluated[p.name] = f"not evaluated: {why_not}"
        else:
            runnable.append(p)
    answerable = [c for c in cases if c.answerable]
    sample = sample_from({"size": JUDGED_CASES, **cfg.get("sample", {})}, answerable)
    info: SampleInfo = {"size": len(sample), "of": len(answerable), "ids": [c.id for c in sample]}
    self_cfg = cfg.get("self_check")
    check_ids = {c.id for c in sample[: int(self_cfg.get("cases", 10))]} if self_cfg else set()
    if only is not None:
        sample = [c for c in sample if c.id in only]
    if not runnable:
        return {"skipped": "; ".join(sorted(set(not_evaluated.values()))) or "no metric to run", "metrics": {}, "samples": [],
                "not_evaluated": not_evaluated, "warnings": [], "sample": info}

    engines, client = engine_factory({p.engine for p in runnable}, settings, dict(cfg.get("criteria", {})), cache)
    model = settings.model if settings else ""
    plan = plan_tasks(sample, outputs, runnable, engines, settings, cache)
    cached, todo = split_cached(plan.tasks, cache)
    recheck = [t for t in plan.tasks if t.case_id in check_ids and t.plan.engine != "offline"]
    pairing = plan_pairs(references, sample, {c.id for c in cases}, plan.tasks, {t.key for t in todo}, engines, settings, cache)
    fresh = list(pairing.fresh.values())
    case_drop = {m: float(g["case_drop"]) for m, g in (cfg.get("gates") or {}).items() if "case_drop" in g}
    store = storing(cache, model)
    limit = in_flight(settings)
    if progress is not None:
        progress.start("generation", len(todo) + len(recheck) + len(fresh), usage=client.usage if client else None)

    async def judge_all() -> tuple[dict[int, float | str], dict[int, float | str]]:
        try:
            stored, counted = ticking(progress, "generation", store), ticking(progress, "generation")
            first, second, again = await asyncio.gather(judge_tasks(todo, engines, on_result=stored, deadline=deadline, in_flight=limit),
                                                        judge_tasks(recheck, engines, on_result=counted, deadline=deadline, in_flight=limit),
                                                        judge_tasks(fresh, engines, on_result=stored, deadline=deadline, in_flight=limit))
            settle(pairing, {t.key: first[i] for i, t in enumerate(todo)}, {t.key: again[i] for i, t in enumerate(fresh)}, cache, model)
            confirm = to_confirm(pairing, case_drop, cache)
            if confirm:  # a drop above case_drop: both sides judged once more before the gate may fail on it
                tasks = [t for _, ref, cur in confirm for t in (ref, cur)]
                confirmed(confirm, await judge_tasks(tasks, engines, deadline=deadline, in_flight=limit), cache, model)
            return first, second
        finally:
            await close_all(engines, client)

    first, second = asyncio.run(judge_all())
    results: dict[str, float | str] = {**cached, **{t.key: first[i] for i, t in enumerate(todo)}}
    per_case: dict[str, dict[str, float]] = {c.id: {} for c in sample}
    errors = plan.errors
    for t in plan.tasks:
        result = results[t.key]
        if isinstance(result, float):
            per_case[t.case_id][t.plan.name] = result
        else:
            errors[t.case_id][t.plan.name] = result  # the judge client redacted it (and the report is redacted whole)

    samples, metrics = aggregate(sample, runnable, per_case, errors, not_evaluated)
    texts: dict[str, str] = {}
    for s in samples:
        out = outputs[s["id"]]
        if out.error is None:
            s["output"] = output_ref(out.answer, out.contexts, texts)
    attempted = len(sample) * len(runnable)
    failed = sum(len(e) for e in errors.values())
    usage = client.usage() if client is not None else {"calls": 0}
    usage.update({"cache_hits": sum(1 for t in plan.tasks if t.key in cached), "cache_misses": len(todo) + len(fresh)})
    judge_info: JudgeInfo = {"model": model or None, "temperature": settings.temperature if settings else None,
                             "engines": {name: e.version for name, e in engines.items()},
                             "prompts": {p.name: engines[p.engine].prompt_fingerprint(p.metric) for p in runnable}}
    stage: StageMeasurement = {
        "sample": info,
        "metrics": metrics,
        "samples": samples,
        "not_evaluated": not_evaluated,
        "warnings": [],
        "judge": judge_info,
        "usage": usage,
        "scores": {"attempted": attempted, "errored": failed, "error_rate": failed / attempted if attempted else 0.0},
        "budget_exceeded": bool(client is not None and getattr(client, "budget_exceeded", False)),
    }
    if references:
        stage["pairing"] = records(pairing, [p.name for p in runnable], judge_info)
    stage["texts"] = texts
    if self_cfg:
        diffs, errored = self_check_diffs(recheck, second, per_case)
        stage["self_check"] = self_check(diffs, errored, len({t.case_id for t in recheck}), [p.name for p in runnable],
                                         float(self_cfg.get("max_diff", 0.02)), self_cfg.get("on_unstable", "warn"))
        if only is not None:
            stage["self_check"]["diffs"] = diffs
    return stage


def aggregate(sample: Sequence[GoldenCase], runnable: Sequence[EngineMetric], per_case: Mapping[str, dict[str, float]],
              errors: Mapping[str, dict[str, str]], not_evaluated: dict[str, str]) -> tuple[list[CaseResult], dict[str, float]]:
    """The per-case results and each metric's mean over the cases that have it (a metric no case has goes into
    ``not_evaluated`` with the reason)."""
    samples: list[CaseResult] = [
        {"id": c.id, "metrics": per_case[c.id], "errors": errors[c.id],
         "error": "; ".join(f"{m}: {r}" for m, r in errors[c.id].items()) or None}
        for c in sample
    ]
    metrics: dict[str, float] = {}
    for p in runnable:
        values = [per_case[c.id][p.name] for c in sample if p.name in per_case[c.id]]
        if values:
            metrics[p.name] = math.fsum(values) / len(values)
        else:
            not_evaluated[p.name] = "every judged case errored" if sample else "the sample is empty"
    return samples, metrics


def self_check_diffs(recheck: Sequence[Task], second: Mapping[int, float | str],
                     per_case: Mapping[str, Mapping[str, float]]) -> tuple[dict[str, list[float]], int]:
    """|first - second| per metric over the re-judged cases, and how many re-judgings had no pair to compare."""
    diffs: dict[str, list[float]] = {}
    errored = 0
    for i, t in enumerate(recheck):
        again = second.get(i)
        first = per_case.get(t.case_id, {}).get(t.plan.name)
        if not isinstance(again, float) or first is None:
            errored += 1
            continue
        diffs.setdefault(t.plan.name, []).append(abs(first - again))
    return diffs, errored


def self_check(diffs: Mapping[str, Sequence[float]], errored: int, cases: int, metrics: Sequence[str], max_diff: float,
               on_unstable: str) -> SelfCheck:
    """Largest and mean |first - second| per metric (in ``metrics`` order; fsum: the same value whatever the order of
    the differences, so a merge of shards gets the figures one run would)."""
    per_metric: dict[str, MetricDiff] = {m: {"cases": len(d), "max_diff": max(d), "mean_diff": math.fsum(d) / len(d)}
                                         for m in metrics if (d := diffs.get(m))}
    unstable = sorted(m for m, d in per_metric.items() if d["max_diff"] > max_diff + 1e-12)
    return {"limit": max_diff, "on_unstable": on_unstable, "metrics": per_metric, "unstable": unstable,
            "errored": errored, "cases": cases}
