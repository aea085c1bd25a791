"""Retrieval stage: deterministic metrics from retrieved ids against relevant ids. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any

from gate.core.catalog import MetricName
from gate.core.model import GoldenCase, TargetOutput
from gate.core.ranking import health_metrics, map_relevant, total_tokens, usage_metrics
from gate.core.report import CaseResult, GroupMetrics, StageMeasurement
from gate.core.retrieval_onepass import case_scorer, mean_of, scorer_plan
from gate.core.settings import MatchSettings, RetrievalSettings
from gate.core.textmatch import text_matches

try:  # _clearly_fresh and the loop of _score_all in C, where gate.core._native is built (tests/unit/test_native.py)
    from gate.core._native import clearly_fresh as _clearly_fresh_c
    from gate.core._native import score_cases as _score_cases_c
except ImportError:
    _clearly_fresh_c = _score_cases_c = None

_ID = attrgetter("id")
Scored = tuple[list[int], int, list[float]]  # a scored case: the ranks of its relevant ids found, how many it has, its values


def _ids(output: TargetOutput, to_id: Callable[[str], str] | None) -> list[str]:
    """The ids of the ranked list (``to_id`` None: as they are)."""
    ids = map(_ID, output.retrieved)
    return list(ids if to_id is None else map(to_id, ids))


def text_ids(texts: Sequence[str], output: TargetOutput, min_overlap: float) -> tuple[list[str], dict[str, int]]:
    """match.level text: each retrieved passage as "text:N" when it matches the case's Nth relevant text (the first
    it matches; gate.core.textmatch.text_matches), else as its own id; and the relevant "ids" text:1..n."""
    ids = []
    for doc in output.retrieved:
        found = next((j for j, t in enumerate(texts, 1) if doc.text and text_matches(t, doc.text, min_overlap)), None)
        ids.append(doc.id if found is None else f"text:{found}")
    return ids, {f"text:{j}": 1 for j in range(1, len(texts) + 1)}


def stale_labels(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], match: MatchSettings, cutoff: int) -> str | None:
    """The sentence saying the relevance labels look stale, when under 1 % of the distinct ids the target retrieved
    within the ``cutoff`` (the rank the metrics look to) for answerable cases are relevant to any golden case (at the
    matching level): a re-chunked or re-keyed corpus renames every id, and every retrieval gate would report a
    collapse that is not one. None otherwise (or under 20 ids). Passages below the cut-off are no metric's concern."""
    level, min_overlap, to_id = match.level, match.min_overlap, match.to_id()
    known: set[str] = set()
    retrieved: set[str] = set()
    answered = [c for c in cases if c.answerable and outputs[c.id].error is None]
    if level == "exact" and (_clearly_fresh_c or _clearly_fresh)(answered, outputs, cutoff):
        return None
    if level != "text":
        exact = level == "exact"
        known = {r for c in cases for r in c.relevant} if exact else {to_id(r) for c in cases for r in c.relevant}
        for c in answered:
            top_ids = map(_ID, outputs[c.id].retrieved[:cutoff])
            retrieved.update(top_ids if exact else map(to_id, top_ids))
    for c in answered if level == "text" else ():
        top = replace(outputs[c.id], retrieved=outputs[c.id].retrieved[:cutoff])
        ids, relevant = text_ids(c.relevant_texts, top, min_overlap)
        known |= {f"{c.id}\x00{i}" for i in ids if i in relevant}
        retrieved |= {f"{c.id}\x00{i}" if i in relevant else i for i in ids}
    hits = len(retrieved & known)
    if len(retrieved) < 20 or hits * 100 >= len(retrieved):
        return None
    return (f"relevance labels look stale: {hits:,} of the {len(retrieved):,} distinct ids retrieved within the top {cutoff} for "
            f"{len(answered):,} answerable "
            "cases are relevant to any golden case (re-chunked or re-keyed corpus?). Update relevant_doc_ids, or give the cases "
            "relevant_texts and set match.level: text, which survives re-chunking")


def _clearly_fresh(answered: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], cutoff: int) -> bool:
    """Whether the labels are not stale by a bound that needs no set of every retrieved id (match.level exact): the
    distinct ids relevant to their own case and retrieved for it within the cut-off are some of the hits, and the
    passages within the cut-off are at least as many as the distinct ids among them. When the former are 1 % of the
    latter, ``stale_labels`` would find at least that share too."""
    found: set[str] = set()
    within = 0
    for c in answered:
        top = list(map(_ID, outputs[c.id].retrieved[:cutoff]))
        within += len(top)
        found.update([r for r in c.relevant if r in top])
    return len(found) * 100 >= within


def _aggregate_all(metrics: Sequence[MetricName], scored: Sequence[Scored], values: dict[str, list[float]]) -> dict[str, float]:
    micro = any(m.base == "context_recall" for m in metrics)  # the only one that reads the ranks themselves
    rank_lists, n_relevant = ([s[0] for s in scored], [s[1] for s in scored]) if micro else ([], [])
    out: dict[str, float] = {}
    for m in metrics:
        v = mean_of(m, values[m.name], rank_lists, n_relevant)
        if v is not None:
            out[m.name] = v
    return out


def retrieval_stage(
    settings: RetrievalSettings,
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    groups: dict[str, dict[str, list[str]]] | None = None,
    cutoff: int | None = None,
) -> StageMeasurement:
    """Metrics, per-case samples, breakdowns and health figures of the retrieval stage.

    Only answerable cases are scored; errored cases are listed, never scored as 0. ``cutoff`` is the rank a
    relevant id must stay within (the smallest k of the metrics): the worse-case list says when one left it.
    """
    metrics = settings.metrics
    names = [m.name for m in metrics]
    samples, rows, scored, excluded = _score_all(settings, names, cases, outputs)
    values = _columns(names, [row for _, _, row in rows])

    health, unused = _health(cases, outputs)
    stage: StageMeasurement = {
        "metrics": {**_aggregate_all(metrics, rows, values), **health},
        "n": len(rows),
        "errored": sum(1 for s in samples if s["error"] is not None),
        "excluded": excluded,
        "samples": samples,
        "not_evaluated": {**{m.name: "no answerable case was scored" for m in metrics if not rows},
                          **{m: why for m, why in unused.items() if m in settings.gates}},  # said only where a gate asks
        "warnings": [],
    }
    if cutoff is not None:
        stage["reference_k"] = cutoff  # the report's name for the cut-off
    if groups:
        stage["breakdown"] = breakdown(groups, scored, metrics)
    return stage


def health_stage(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], gates: Mapping[str, Any]) -> StageMeasurement:
    """A traces run's retrieval stage: its traces carry no relevance labels, so the health figures alone (latency,
    errors, tokens, cache hits of the production calls)."""
    health, unused = _health(cases, outputs)
    return {"metrics": health, "n": 0, "errored": sum(1 for c in cases if outputs[c.id].error is not None), "excluded": {},
            "samples": [], "not_evaluated": {m: why for m, why in unused.items() if m in gates}, "warnings": []}


def _health(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> tuple[dict[str, float], dict[str, str]]:
    """The target's health: its latency and errors, and the tokens and cache hits it reported; (metrics, why one of
    the reported figures is not evaluated)."""
    errors = sum(1 for c in cases if outputs[c.id].error is not None)
    answered = [o for o in outputs.values() if o.error is None]
    latencies = [o.latency_ms for o in answered if o.latency_ms is not None]
    used, unused = usage_metrics([t for o in answered if o.usage and (t := total_tokens(o.usage)) is not None],
                                 [o.cached for o in answered if o.cached is not None])
    return {**health_metrics(latencies, len(cases), errors), **used}, unused


Ranked = Callable[[GoldenCase, TargetOutput], "tuple[list[str], dict[str, int]] | str"]
NO_RELEVANT = "the case has no relevant_doc_ids (its relevant_texts count with match.level: text)"


def _score_all(settings: RetrievalSettings, names: list[str], cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
               ) -> tuple[list[CaseResult], list[Scored], dict[str, Scored], dict[str, int]]:
    """Every case scored: (the samples, the scored rows, the rows by case id, the unanswerable cases by type). In C
    where gate.core._native is built and the ids are compared as they are (match.level exact)."""
    metrics = settings.metrics
    if _score_cases_c is not None and not settings.match.by_text and settings.match.level != "document":
        return _score_cases_c(scorer_plan(metrics), tuple(names), cases, outputs, NO_RELEVANT, case_scorer(metrics, native=False))
    score = case_scorer(metrics)
    ranked = _ranking(settings.match)
    samples: list[CaseResult] = []
    rows: list[Scored] = []
    scored: dict[str, Scored] = {}
    excluded: dict[str, int] = {}
    for case in cases:
        out = outputs[case.id]
        if not case.answerable:
            excluded[case.type] = excluded.get(case.type, 0) + 1
            continue
        got = ranked(case, out) if out.error is None else out.error
        if isinstance(got, str):
            samples.append({"id": case.id, "metrics": {}, "error": got})
            continue
        ranks, rank_list, row = score(*got)
        scored[case.id] = one = (rank_list, len(got[1]), row)
        rows.append(one)
        samples.append({"id": case.id, "metrics": dict(zip(names, row, strict=True)), "error": None, "relevant_ranks": ranks})
    return samples, rows, scored, excluded


def _ranking(match: MatchSettings) -> Ranked:
    """The function that gives a case's ranked ids and relevant ids at the matching level, or why it cannot be scored."""
    to_id = match.to_id()
    exact = match.level != "document"

    def by_text(case: GoldenCase, out: TargetOutput) -> tuple[list[str], dict[str, int]] | str:
        if not case.relevant_texts:
            return "the case has no relevant_texts (match.level: text)"
        return text_ids(case.relevant_texts, out, match.min_overlap)

    def by_id(case: GoldenCase, out: TargetOutput) -> tuple[list[str], dict[str, int]] | str:
        if not case.relevant:
            return NO_RELEVANT
        return _ids(out, None if exact else to_id), case.relevant if exact else map_relevant(case.relevant, to_id)

    return by_text if match.by_text else by_id


def _columns(names: Sequence[str], rows: list[list[float]]) -> dict[str, list[float]]:
    """Per metric name, its value in each row (rows hold one value per name, in the order of ``names``)."""
    columns = zip(*rows, strict=True) if rows else ([] for _ in names)
    return {name: list(column) for name, column in zip(names, columns, strict=True)}


def breakdown(
    groups: dict[str, dict[str, list[str]]],
    scored: Mapping[str, Scored],
    metrics: Sequence[MetricName],
) -> dict[str, dict[str, GroupMetrics]]:
    """Metrics per category and per tag, over the scored cases of each group (``scored``: case id -> its ranks found,
    its number of relevant ids and its value of each metric, in the order of ``metrics``)."""
    names = [m.name for m in metrics]
    out: dict[str, dict[str, GroupMetrics]] = {}
    for dimension in ("category", "tag"):
        rows: dict[str, GroupMetrics] = {}
        for group, ids in sorted(groups.get(dimension, {}).items()):
            members = [scored[i] for i in ids if i in scored]
            if not members:
                continue
            values = _columns(names, [row for _, _, row in members])
            rows[group] = {"n": len(members), "metrics": _aggregate_all(metrics, members, values)}
        if rows:
            out[dimension] = rows
    return out
