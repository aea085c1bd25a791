"""Retrieval stage: deterministic metrics from retrieved ids against relevant ids. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from gate.core.catalog import MetricName
from gate.core.model import GoldenCase, TargetOutput
from gate.core.ranking import CaseScorer, aggregate, first_ranks, health_metrics, id_mapper, map_relevant, metric_function
from gate.core.report import CaseResult, GroupMetrics, StageMeasurement

_ID = attrgetter("id")


def _ids(output: TargetOutput, to_id: Callable[[str], str] | None) -> list[str]:
    """The ids of the ranked list (``to_id`` None: as they are)."""
    ids = map(_ID, output.retrieved)
    return list(ids if to_id is None else map(to_id, ids))


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
    exact = match.get("level", "exact") != "document"
    to_id = id_mapper(match)
    names = [m.name for m in metrics]
    functions = [metric_function(m) for m in metrics]
    samples: list[CaseResult] = []
    scorers: list[CaseScorer] = []
    rows: list[list[float]] = []
    scored: dict[str, tuple[CaseScorer, list[float]]] = {}
    excluded: dict[str, int] = {}
    for case in cases:
        out = outputs[case.id]
        if not case.answerable:
            excluded[case.type] = excluded.get(case.type, 0) + 1
            continue
        if out.error is not None:
            samples.append({"id": case.id, "metrics": {}, "error": out.error})
            continue
        relevant = case.relevant if exact else map_relevant(case.relevant, to_id)
        ranks = first_ranks(_ids(out, None if exact else to_id), relevant)
        scorer = CaseScorer.from_ranks(ranks, relevant)
        row = [f(scorer) for f in functions]
        rows.append(row)
        scorers.append(scorer)
        scored[case.id] = (scorer, row)
        samples.append({"id": case.id, "metrics": dict(zip(names, row, strict=True)), "error": None, "relevant_ranks": ranks})
    values = _columns(names, rows)

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


def _columns(names: Sequence[str], rows: list[list[float]]) -> dict[str, list[float]]:
    """Per metric name, its value in each row (rows hold one value per name, in the order of ``names``)."""
    columns = zip(*rows, strict=True) if rows else ([] for _ in names)
    return {name: list(column) for name, column in zip(names, columns, strict=True)}


def breakdown(
    groups: dict[str, dict[str, list[str]]],
    scored: dict[str, tuple[CaseScorer, list[float]]],
    metrics: Sequence[MetricName],
) -> dict[str, dict[str, GroupMetrics]]:
    """Metrics per category and per tag, over the scored cases of each group (``scored``: case id -> its scorer and
    its value of each metric, in the order of ``metrics``)."""
    names = [m.name for m in metrics]
    out: dict[str, dict[str, GroupMetrics]] = {}
    for dimension in ("category", "tag"):
        rows: dict[str, GroupMetrics] = {}
        for group, ids in sorted(groups.get(dimension, {}).items()):
            members = [scored[i] for i in ids if i in scored]
            if not members:
                continue
            scorers = [s for s, _ in members]
            values = _columns(names, [row for _, row in members])
            rows[group] = {"n": len(members), "metrics": _aggregate_all(metrics, scorers, values)}
        if rows:
            out[dimension] = rows
    return out
