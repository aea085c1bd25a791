"""Retrieval stage: deterministic metrics from retrieved ids against relevant ids. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gate.metrics import CaseScorer, MetricName, aggregate, dedupe, health_metrics
from gate.model import GoldenCase, TargetOutput


def id_mapper(match: dict[str, Any]) -> Callable[[str], str]:
    """exact: ids as they are; document: 'doc#chunk_7' -> 'doc' (the part before the separator)."""
    if match.get("level", "exact") != "document":
        return lambda x: x
    sep = match.get("separator", "#")
    return lambda x: x.split(sep, 1)[0]


def map_relevant(relevant: dict[str, int], to_id: Callable[[str], str]) -> dict[str, int]:
    """Relevant ids at the matching level; a document's grade is its best chunk's."""
    out: dict[str, int] = {}
    for rid, grade in relevant.items():
        key = to_id(rid)
        out[key] = max(grade, out.get(key, 0))
    return out


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
    outputs: dict[str, TargetOutput],
    metrics: Sequence[MetricName],
    match: dict[str, Any],
    groups: dict[str, dict[str, list[str]]] | None = None,
) -> dict[str, Any]:
    """Metrics, per-case samples, breakdowns and health figures of the retrieval stage.

    Only answerable cases are scored; errored cases are listed, never scored as 0.
    """
    to_id = id_mapper(match)
    samples: list[dict[str, Any]] = []
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
        ranks = {rid: None for rid in relevant}
        for rank, rid in enumerate(ranked, 1):
            if rid in ranks:
                ranks[rid] = rank  # type: ignore[assignment]
        samples.append({"id": case.id, "metrics": per_case, "error": None, "relevant_ranks": ranks})

    calls = len(cases)
    errors = sum(1 for c in cases if outputs[c.id].error is not None)
    latencies = [o.latency_ms for o in outputs.values() if o.error is None and o.latency_ms is not None]
    stage: dict[str, Any] = {
        "metrics": {**_aggregate_all(metrics, scorers, values), **health_metrics(latencies, calls, errors)},
        "n": len(scorers),
        "errored": sum(1 for s in samples if s["error"] is not None),
        "excluded": excluded,
        "samples": samples,
        "not_evaluated": {m.name: "no answerable case was scored" for m in metrics if not scorers},
    }
    if groups:
        stage["breakdown"] = breakdown(groups, scored, metrics)
    return stage


def breakdown(
    groups: dict[str, dict[str, list[str]]],
    scored: dict[str, tuple[CaseScorer, dict[str, float]]],
    metrics: Sequence[MetricName],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Metrics per category and per tag, over the scored cases of each group."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for dimension in ("category", "tag"):
        rows: dict[str, dict[str, Any]] = {}
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
