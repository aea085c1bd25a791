"""Generation stage: judge metrics on a fixed sample of answerable cases.

Flow: which metrics can run (an LLM metric needs the judge), the sample, every (case, metric) looked up in the
cache, the misses judged concurrently through the engines (one shared client and limit), fresh scores stored, a
few cases judged again for the self-check, the paired runs' changed answers judged beside this run's, then
``assemble``: the per-case results and each metric's mean. A merge of shards (gate.run.merge) ends in the same
``assemble``. A score that cannot be computed is recorded per case with its reason: never NaN, never 0, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gate.core.catalog import EngineMetric
from gate.core.model import GoldenCase, TargetOutput
from gate.core.pairs import PairedRun, output_ref
from gate.core.report import CaseResult, JudgeInfo, MetricDiff, OutputRef, Pairing, SampleInfo, SelfCheck, StageMeasurement, Usage
from gate.core.settings import GenerationSettings
from gate.stages.answers import AnswersPart, answer_checks, joined
from gate.stages.context import StageContext
from gate.stages.judging import JudgeSession, Result, Task, judge_input, missing_input, ticking
from gate.stages.pairing import PairSet, confirmed, pair_up, records, settle, to_confirm
from gate.stages.traffic import with_traffic
from gate.stages.windows import WindowRefs, anchor_scores, anchor_tasks, window_records


@dataclass
class TaskList:
    """Which (case, metric) pairs to judge, and the reasons the others cannot be."""

    runnable: list[EngineMetric]  # the metrics this run can compute (an LLM metric needs the judge)
    tasks: list[Task]
    errors: dict[str, dict[str, str]]  # case id -> metric -> why it was not judged


def make_tasks(sample: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], runnable: Sequence[EngineMetric],
               session: JudgeSession) -> TaskList:
    tasks: list[Task] = []
    errors: dict[str, dict[str, str]] = {c.id: {} for c in sample}
    for case in sample:
        out = outputs[case.id]
        item = judge_input(case, out)
        for m in runnable:
            if out.error is not None:
                errors[case.id][m.name] = "the target call failed for this case"
                continue
            missing = missing_input(session.needs(m), item)
            if missing:
                errors[case.id][m.name] = missing
                continue
            tasks.append(session.task(case.id, m, item))
    return TaskList(list(runnable), tasks, errors)


@dataclass
class SelfCheckScores:
    """The self-check's |first - second| per metric over the re-judged cases, and the re-judgings with no pair."""

    diffs: dict[str, list[float]]
    errored: int
    cases: int


@dataclass
class GenerationScores:
    """What the stage judged, case by case: a run's (or a shard's), or the merge of its shards'. ``assemble`` makes
    the stage from it."""

    info: SampleInfo  # the sample as drawn from the whole golden set
    sample: list[GoldenCase]  # the cases judged here (a shard's: its own)
    runnable: list[EngineMetric]
    per_case: dict[str, dict[str, float]]
    errors: dict[str, dict[str, str]]
    not_evaluated: dict[str, str]
    judge: JudgeInfo
    usage: Usage
    budget_exceeded: bool = False
    outputs: dict[str, OutputRef] = field(default_factory=dict)  # case id -> its judged answer and contexts (by text id)
    texts: dict[str, str] = field(default_factory=dict)  # text id -> text
    pairing: dict[str, Pairing] | None = None
    self_check: SelfCheckScores | None = None


def generation_stage(settings: GenerationSettings, ctx: StageContext, paired: Sequence[PairedRun] = (),
                     windows: Sequence[WindowRefs] = ()) -> StageMeasurement:
    """The stage (``judged_stage``); in a traces run with the traffic shares, and each window comparison (``windows``:
    the earlier windows its relative gates compare with, their anchor traces judged again in this run)."""
    anchors = Anchors()
    stage = judged_stage(settings, ctx, paired, windows, anchors)
    stage = with_traffic(stage, ctx.mine(ctx.cases), ctx.outputs, ctx.traffic)
    if ctx.traffic is not None and stage.get("skipped") is None:  # a traces window, compared with the ones before it
        per_case = {s["id"]: s["metrics"] for s in stage["samples"]}
        stage["windows"] = window_records(windows, per_case, list(stage["metrics"]), anchors.scores, anchors.judgings)
    return stage


@dataclass
class Anchors:
    """The anchor traces' scores judged today: (window, trace id, metric) -> score, and how many judgings it took."""

    scores: dict[tuple[str, str, str], float] = field(default_factory=dict)
    judgings: int = 0


def judged_stage(settings: GenerationSettings, ctx: StageContext, paired: Sequence[PairedRun], windows: Sequence[WindowRefs],
                 anchors: Anchors) -> StageMeasurement:
    """Run the stage: what it measured (its gates are applied by gate.core.verdict.gate_stage). ``paired``: the runs
    its relative gates compare with; every judged case is paired with each (gate.stages.pairing). In a shard
    (``ctx.only``) the sample and the self-check's cases are drawn from every case, then restricted to the shard's,
    so the shards together judge what one run would, and the self-check keeps its differences for the merge."""
    runnable = [m for m in settings.metrics if m.engine == "offline" or ctx.judge is not None]
    not_evaluated = {m.name: f"not evaluated: {ctx.no_judge}" for m in settings.metrics if m not in runnable}
    drawn = settings.sample.draw(ctx.cases) if settings.metrics else []  # metrics: [] runs the answer checks alone
    info: SampleInfo = {"size": len(drawn), "of": sum(1 for c in ctx.cases if c.answerable), "ids": [c.id for c in drawn]}
    check_ids = {c.id for c in drawn[: settings.self_check.cases]} if settings.self_check else set()
    sample = ctx.mine(drawn)
    answers = answer_checks(settings.checks, ctx.mine(ctx.cases), ctx.outputs, ctx.golden_dir)
    if not runnable and not answers.cases:
        return {"skipped": "; ".join(sorted(set(not_evaluated.values()))) or "no metric to run", "metrics": {}, "samples": [],
                "not_evaluated": not_evaluated, "warnings": [], "sample": info}
    if not runnable:  # no judge metric can run, but the answer checks need none
        stage: StageMeasurement = {"metrics": {}, "samples": [], "not_evaluated": not_evaluated, "warnings": [], "sample": info}
        return with_answers(stage, answers, settings, [c.id for c in ctx.cases])
    session = JudgeSession.open({m.engine for m in runnable}, ctx, settings.criteria)
    work = make_tasks(sample, ctx.outputs, runnable, session)
    judged = Judging(settings, ctx, session, work, check_ids)
    # only a judge's scores are paired: an offline metric is an exact figure of the answers, compared as it is stored
    llm = [m.name for m in runnable if m.engine != "offline"]
    paired = paired if llm else ()
    pairs = pair_up(paired, sample, {c.id for c in ctx.cases}, [t for t in work.tasks if t.scored.engine != "offline"],
                    {t.key for t in judged.todo}, session)
    import asyncio  # here: a stage that judges nothing (the answer checks alone) does not load the event loop

    again = anchor_tasks(windows, runnable, session)
    first, second, anchored = asyncio.run(judged.run(pairs, again))
    anchors.scores, anchors.judgings = anchor_scores(again, anchored), len(again)
    scores = judged.scores(sample, info, first, not_evaluated)
    if paired:
        scores.pairing = records(pairs, llm, scores.judge)
    if settings.self_check:
        scores.self_check = self_check_scores(judged.recheck, second, scores.per_case)
    return with_answers(assemble(scores, settings, keep_diffs=ctx.only is not None), answers, settings, [c.id for c in ctx.cases])


def with_answers(stage: StageMeasurement, answers: AnswersPart, settings: GenerationSettings, order: Sequence[str]) -> StageMeasurement:
    """The stage with its answer checks: their metrics, each case's values in its row (a judged case's row gets them
    beside its judge scores; another answerable case gets a row of its own), what they found (``checks``), and why a
    gated check metric could not be computed. Nothing is added when no check applies to any case."""
    if answers.cases:
        stage["metrics"].update(answers.metrics)
        stage["samples"] = joined(stage["samples"], answers.cases, order)
        stage["checks"] = answers.record()
    for metric, why in answers.not_evaluated.items():
        if metric in settings.gates:  # said only where a gate asks for it
            stage["not_evaluated"].setdefault(metric, why)
    return stage


class Judging:
    """One stage's judging: the cache looked up, the misses, the self-check's and the pairs' tasks judged together."""

    def __init__(self, settings: GenerationSettings, ctx: StageContext, session: JudgeSession, work: TaskList,
                 check_ids: set[str]) -> None:
        self.settings, self.ctx, self.session, self.work = settings, ctx, session, work
        self.cached, self.todo = session.split_cached(work.tasks)
        self.recheck = [t for t in work.tasks if t.case_id in check_ids and t.scored.engine != "offline"]
        self.fresh: list[Task] = []

    async def run(self, pairs: PairSet, anchors: Sequence[Task] = ()) -> tuple[dict[int, Result], dict[int, Result], dict[int, Result]]:
        """(the main tasks' results, the self-check's second judgings, the anchor traces' judgings), by index; the pairs
        settled and confirmed. The anchors are judged afresh, never looked up in the cache nor stored in it."""
        import asyncio

        session, deadline, progress = self.session, self.ctx.deadline, self.ctx.progress
        self.fresh = list(pairs.fresh.values())
        if progress is not None:
            progress.start("generation", len(self.todo) + len(self.recheck) + len(self.fresh) + len(anchors),
                           usage=session.client.usage if session.client else None)
        try:
            stored, counted = ticking(progress, "generation", session.store), ticking(progress, "generation")
            first, second, again, anchored = await asyncio.gather(
                session.judge(self.todo, on_result=stored, deadline=deadline), session.judge(self.recheck, on_result=counted, deadline=deadline),
                session.judge(self.fresh, on_result=stored, deadline=deadline), session.judge(anchors, on_result=counted, deadline=deadline))
            settle(pairs, {t.key: first[i] for i, t in enumerate(self.todo)}, {t.key: again[i] for i, t in enumerate(self.fresh)},
                   session)
            confirm = to_confirm(pairs, self.settings.case_drop, session.cache)
            if confirm:  # a drop above case_drop: both sides judged once more before the gate may fail on it
                tasks = [t for _, ref, cur in confirm for t in (ref, cur)]
                confirmed(confirm, await session.judge(tasks, deadline=deadline), session)
            return first, second, anchored
        finally:
            await session.aclose()

    def scores(self, sample: list[GoldenCase], info: SampleInfo, first: Mapping[int, Result],
               not_evaluated: dict[str, str]) -> GenerationScores:
        """The per-case scores and errors, the judged outputs, the judge and its usage."""
        results: dict[str, Result] = {**self.cached, **{t.key: first[i] for i, t in enumerate(self.todo)}}
        per_case: dict[str, dict[str, float]] = {c.id: {} for c in sample}
        errors = self.work.errors
        for t in self.work.tasks:
            result = results[t.key]
            if isinstance(result, float):
                per_case[t.case_id][t.scored.name] = result
            else:
                errors[t.case_id][t.scored.name] = result  # the judge client redacted it (and the report is redacted whole)
        session, runnable = self.session, self.work.runnable
        usage = session.usage()
        usage.update({"cache_hits": sum(1 for t in self.work.tasks if t.key in self.cached),
                      "cache_misses": len(self.todo) + len(self.fresh)})
        judge: JudgeInfo = {"model": session.model or None, "temperature": session.settings.temperature if session.settings else None,
                            "engines": {name: e.version for name, e in session.engines.items()},
                            "prompts": {m.name: session.engines[m.engine].prompt_fingerprint(m.metric) for m in runnable}}
        scores = GenerationScores(info, sample, runnable, per_case, errors, not_evaluated, judge, usage, session.budget_exceeded)
        for c in sample:
            out = self.ctx.outputs[c.id]
            if out.error is None:
                scores.outputs[c.id] = output_ref(out.answer, out.contexts, scores.texts, c.question if self.ctx.traffic else None)
        return scores


def assemble(scores: GenerationScores, settings: GenerationSettings, *, keep_diffs: bool = False) -> StageMeasurement:
    """The stage from its per-case scores: each metric's mean over the cases that have it, the error counts, the
    judged outputs, the pairs and the self-check (``keep_diffs``: a shard keeps its differences for the merge)."""
    samples, metrics = aggregate(scores.sample, scores.runnable, scores.per_case, scores.errors, scores.not_evaluated)
    for s in samples:
        if s["id"] in scores.outputs:
            s["output"] = scores.outputs[s["id"]]
    attempted = len(scores.sample) * len(scores.runnable)
    failed = sum(len(e) for e in scores.errors.values())
    stage: StageMeasurement = {
        "sample": scores.info, "metrics": metrics, "samples": samples, "not_evaluated": scores.not_evaluated, "warnings": [],
        "judge": scores.judge, "usage": scores.usage,
        "scores": {"attempted": attempted, "errored": failed, "error_rate": failed / attempted if attempted else 0.0},
        "budget_exceeded": scores.budget_exceeded,
    }
    if scores.pairing is not None:
        stage["pairing"] = scores.pairing
    stage["texts"] = scores.texts
    check = settings.self_check
    if check is not None and scores.self_check is not None:
        sc = scores.self_check
        stage["self_check"] = self_check(sc.diffs, sc.errored, sc.cases, [m.name for m in scores.runnable], check.max_diff,
                                         check.on_unstable)
        if keep_diffs:
            stage["self_check"]["diffs"] = sc.diffs
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
    for m in runnable:
        values = [per_case[c.id][m.name] for c in sample if m.name in per_case[c.id]]
        if values:
            metrics[m.name] = math.fsum(values) / len(values)
        else:
            not_evaluated[m.name] = "every judged case errored" if sample else "the sample is empty"
    return samples, metrics


def self_check_scores(recheck: Sequence[Task], second: Mapping[int, Result],
                      per_case: Mapping[str, Mapping[str, float]]) -> SelfCheckScores:
    """|first - second| per metric over the re-judged cases, and how many re-judgings had no pair to compare."""
    diffs: dict[str, list[float]] = {}
    errored = 0
    for i, t in enumerate(recheck):
        again = second.get(i)
        first = per_case.get(t.case_id, {}).get(t.scored.name)
        if not isinstance(again, float) or first is None:
            errored += 1
            continue
        diffs.setdefault(t.scored.name, []).append(abs(first - again))
    return SelfCheckScores(diffs, errored, len({t.case_id for t in recheck}))


def self_check(diffs: Mapping[str, Sequence[float]], errored: int, cases: int, metrics: Sequence[str], max_diff: float,
               on_unstable: str) -> SelfCheck:
    """Largest and mean |first - second| per metric (in ``metrics`` order; fsum: the same value whatever the order of
    the differences, so a merge of shards gets the figures one run would)."""
    per_metric: dict[str, MetricDiff] = {m: {"cases": len(d), "max_diff": max(d), "mean_diff": math.fsum(d) / len(d)}
                                         for m in metrics if (d := diffs.get(m))}
    unstable = sorted(m for m, d in per_metric.items() if d["max_diff"] > max_diff + 1e-12)
    return {"limit": max_diff, "on_unstable": on_unstable, "metrics": per_metric, "unstable": unstable,
            "errored": errored, "cases": cases}
