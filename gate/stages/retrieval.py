"""Retrieval stage: deterministic metrics from retrieved ids against relevant ids. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gate.core.catalog import MetricName
from gate.core.model import GoldenCase, TargetOutput
from gate.core.ranking import CaseScorer, aggregate, dedupe, health_metrics, id_mapper, map_relevant
from gate.core.report import CaseResult, GroupMetrics, StageMeasurement


def ranked_ids(output: TargetOutput, to_id: Callable[[str], str]) -> list[str]:
    return dedupe(to_id(d.id) for d in output.retrieved)


def _aggregate_all(metrics: Sequence[MetricName], scorers: list[CaseScorer], values: dict[str, list[float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in metrics:
        v = aggregate(m, scorers, values[m.name])
        if v is not None:
            out[m.name] = v
    return out


def retrieval_stage(
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    metrics: Sequence[MetricName],
    match: Mapping[str, Any],
    groups: dict[str, dict[str, list[str]]] | None = None,
    reference_k: int | None = None,
) -> StageMeasurement:
    """Metrics, per-case samples, breakdowns and health figures of the retrieval stage.

    Only answerable cases are scored; errored cases are listed, never scored as 0. ``reference_k`` is the
    cut-off a relevant id must stay within (the smallest k of the metrics): the worse-case list says when one left it.
    """
    to_id = id_mapper(match)
    samples: list[CaseResult] = []
    scorers: list[CaseScorer] = []
    values: dict[str, list[float]] = {m.name: [] for m in metrics}
    scored: dict[str, tuple[CaseScorer, dict[str, float]]] = {}
    excluded: dict[str, int] = {}
    for case in cases:
        out = outputs[case.id]
        if not case.answerable:
            excluded[case.type] = excluded.get(case.type, 0) + 1
            continue
        if out.error is not None:
            samples.append({"id": case.id, "metrics": {}, "error": out.error})
            continue
        ranked = ranked_ids(out, to_id)
        relevant = map_relevant(case.relevant, to_id)
        scorer = CaseScorer(ranked, relevant)
        per_case = {m.name: scorer.score(m) for m in metrics}
        for name, v in per_case.items():
            values[name].append(v)
        scorers.append(scorer)
        scored[case.id] = (scorer, per_case)
        ranks: dict[str, int | None] = dict.fromkeys(relevant)
        for rank, rid in enumerate(ranked, 1):
            if rid in ranks:
                ranks[rid] = rank
        samples.append({"id": case.id, "metrics": per_case, "error": None, "relevant_ranks": ranks})

    calls = len(cases)
    errors = sum(1 for c in cases if outputs[c.id].error is not None)
    latencies = [o.latency_ms for o in outputs.values() if o.error is None and o.latency_ms is not None]
    stage: StageMeasurement = {
        "metrics": {**_aggregate_all(metrics, scorers, values), **health_metrics(latencies, calls, errors)},
        "n": len(scorers),
        "errored": sum(1 for s in samples if s["error"] is not None),
        "excluded": excluded,
        "samples": samples,
        "not_evaluated": {m.name: "no answerable case was scored" for m in metrics if not scorers},
        "warnings": [],
    }
    if reference_k is not None:
        stage["reference_k"] = reference_k
    if groups:
        stage["breakdown"] = breakdown(groups, scored, metrics)
    return stage


def breakdown(
    groups: dict[str, dict[str, list[str]]],
    scored: dict[str, tuple[CaseScorer, dict[str, float]]],
    metrics: Sequence[MetricName],
) -> dict[str, dict[str, GroupMetrics]]:
    """Metrics per category and per tag, over the scored cases of each group."""
    out: dict[str, dict[str, GroupMetrics]] = {}
    for dimension in ("category", "tag"):
        rows: dict[str, GroupMetrics] = {}
        for group, ids in sorted(groups.get(dimension, {}).items()):
            members = [scored[i] for i in ids if i in scored]
            if not members:
                continue
            scorers = [s for s, _ in members]
            values = {m.name: [pc[m.name] for _, pc in members] for m in metrics}
            rows[group] = {"n": len(members), "metrics": _aggregate_all(metrics, scorers, values)}
        if rows:
            out[dimension] = rows
    return out
