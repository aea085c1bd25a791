"""Retrieval and system-health metric math. Pure: lists in, floats out.

Definitions (they equal trec_eval's): per case, on the target's ranked
list after dropping repeated ids, with R = the number of relevant ids of the case.

    hit_rate@k        success_k      1 if a relevant id is in the top k
    mrr[@k]           recip_rank     1 / rank of the first relevant id (within k), else 0
    recall@k          recall_k       relevant ids in the top k / R
    precision@k       P_k            relevant ids in the top k / k
    ndcg[@k]          ndcg[_cut_k]   DCG / IDCG, gain = grade, discount log2(rank + 1)
    map[@k]           map[_cut_k]    sum of precision at each relevant rank (<= k) / R
    context_recall@k  (micro)        micro average: relevant ids in top k over all cases
                                     / all relevant ids (per case it is recall@k)
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from gate.core.catalog import MetricName


def dedupe(ids: Iterable[str]) -> list[str]:
    """Drop repeated ids, keeping the first occurrence (its rank)."""
    return list(dict.fromkeys(ids))


def relevant_ranks(ranked: Sequence[str], relevant: dict[str, int]) -> list[tuple[int, int]]:
    """(1-based rank, grade) of every relevant id in ``ranked`` (already de-duplicated)."""
    return [(i, relevant[d]) for i, d in enumerate(ranked, 1) if d in relevant]


def first_ranks(ids: list[str], relevant: Iterable[str]) -> dict[str, int | None]:
    """Each relevant id's 1-based rank in ``ids`` once repeated ids are dropped (None: not in the list). Each one is
    looked up in the list (in C), which costs less than indexing the whole list for the few relevant ids a case has."""
    unique = len(set(ids)) == len(ids)
    out: dict[str, int | None] = {}
    for rid in relevant:
        if rid in ids:
            i = ids.index(rid)
            out[rid] = i + 1 if unique else len(set(ids[:i])) + 1  # the distinct ids before its first place
        else:
            out[rid] = None
    return out


def _dcg(gains: Iterable[tuple[int, int]]) -> float:
    return sum(g / math.log2(r + 1) for r, g in gains)


class CaseScorer:
    """Scores one case's ranked list against its relevant ids, for any metric name."""

    __slots__ = ("ranks", "rank_list", "n_relevant", "grades")

    def __init__(self, ranked: Sequence[str], relevant: dict[str, int]) -> None:
        self._set(relevant_ranks(ranked, relevant), relevant)

    @classmethod
    def from_ranks(cls, ranks: Mapping[str, int | None], relevant: dict[str, int]) -> CaseScorer:
        """The scorer of a list where each relevant id has the rank ``ranks`` gives it (``first_ranks``)."""
        scorer = cls.__new__(cls)
        scorer._set(sorted([(r, relevant[d]) for d, r in ranks.items() if r is not None]), relevant)  # ranks are distinct
        return scorer

    def _set(self, ranks: list[tuple[int, int]], relevant: dict[str, int]) -> None:
        self.ranks = ranks  # (rank, grade) of the relevant ids retrieved, in rank order
        self.rank_list = [r for r, _ in ranks]
        self.n_relevant = len(relevant)
        self.grades = sorted(relevant.values(), reverse=True)

    def hits_at(self, k: int | None) -> int:
        return len(self.rank_list) if k is None else bisect_right(self.rank_list, k)

    def score(self, metric: MetricName) -> float:
        return metric_function(metric)(self)


@functools.cache
def metric_function(metric: MetricName) -> Callable[[CaseScorer], float]:
    """The function that scores one case for ``metric`` (CaseScorer.score calls it): the metric's branch is chosen once
    for a run, not once per case and metric."""
    base, k = metric.base, metric.k
    if base == "hit_rate":
        return lambda s: 1.0 if s.n_relevant and s.ranks and s.ranks[0][0] <= k else 0.0  # type: ignore[operator]
    if base == "mrr":
        return lambda s: 0.0 if not s.n_relevant or not s.ranks or (k is not None and s.ranks[0][0] > k) else 1.0 / s.ranks[0][0]
    if base in ("recall", "context_recall"):
        return lambda s: s.hits_at(k) / s.n_relevant if s.n_relevant else 0.0
    if base == "precision":
        return lambda s: s.hits_at(k) / k if s.n_relevant else 0.0  # type: ignore[operator]
    if base == "ndcg":
        ideal_dcg: dict[tuple[int, ...], float] = {}  # by the grades a case's ideal list holds: the same few, over and over

        def ndcg(s: CaseScorer) -> float:
            if not s.n_relevant:
                return 0.0
            ideal = tuple(s.grades if k is None else s.grades[:k])
            idcg = ideal_dcg.get(ideal)
            if idcg is None:
                idcg = ideal_dcg[ideal] = _dcg(enumerate(ideal, 1))
            return _dcg((r, g) for r, g in s.ranks if k is None or r <= k) / idcg
        return ndcg
    if base == "map":
        def average_precision(s: CaseScorer) -> float:
            if not s.n_relevant:
                return 0.0
            total = 0.0
            for j, (r, _) in enumerate(s.ranks, 1):
                if k is not None and r > k:
                    break
                total += j / r
            return total / s.n_relevant
        return average_precision
    raise ValueError(f"not a retrieval metric: {metric.name}")


def aggregate(metric: MetricName, scorers: Sequence[CaseScorer], per_case: Sequence[float]) -> float | None:
    """Average per-case values; ``context_recall@k`` is the micro average. None if no case."""
    if not scorers:
        return None
    if metric.base == "context_recall":
        total = sum(map(_N_RELEVANT, scorers))
        k = metric.k
        hits = sum(map(len, map(_RANK_LIST, scorers))) if k is None else sum(map(bisect_right, map(_RANK_LIST, scorers), repeat(k)))
        return hits / total if total else None
    return math.fsum(per_case) / len(per_case)


_N_RELEVANT, _RANK_LIST = attrgetter("n_relevant"), attrgetter("rank_list")


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    return _percentile_of_sorted(sorted(values), q)


def _percentile_of_sorted(data: Sequence[float], q: float) -> float:
    """``percentile`` of values already sorted (at least one)."""
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def health_metrics(latencies_ms: Sequence[float], calls: int, errors: int) -> dict[str, float]:
    """System-health figures of the target calls (latency over successful calls only)."""
    out: dict[str, float] = {}
    if calls:
        out["error_rate"] = errors / calls
    if latencies_ms:
        out["mean_latency_ms"] = _mean(latencies_ms)
        ordered = sorted(latencies_ms)  # once for the three
        for q in (50, 95, 99):
            out[f"p{q}_latency_ms"] = _percentile_of_sorted(ordered, q)
    return out


def _mean(values: Sequence[float]) -> float:
    """statistics.fmean of a non-empty sequence (its very arithmetic: fsum, then one division), without importing
    statistics (and fractions) for it."""
    return math.fsum(values) / len(values)


def total_tokens(usage: Mapping[str, Any] | None) -> float | None:
    """The tokens of one call as the RAG system reported them: total_tokens, else prompt + completion, else input +
    output (OpenAI's and Anthropic's names); None when it reported none."""
    if not usage:
        return None
    if _count(usage.get("total_tokens")) is not None:
        return _count(usage["total_tokens"])
    for a, b in (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens")):
        x, y = _count(usage.get(a)), _count(usage.get(b))
        if x is not None or y is not None:
            return (x or 0.0) + (y or 0.0)
    return None


def _count(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


NO_USAGE = ("not evaluated: the target reported no usage (usage.total_tokens, prompt_tokens + completion_tokens, or "
            "input_tokens + output_tokens)")
NO_CACHED = "not evaluated: the target reported no cached flag (cached: true or false)"


def usage_metrics(tokens: Sequence[float], cached: Sequence[bool]) -> tuple[dict[str, float], dict[str, str]]:
    """The RAG system's own health: the tokens it reported per call and the share it answered from its cache; (metrics,
    why each is not evaluated). Over the successful calls that reported them."""
    metrics: dict[str, float] = {}
    missing: dict[str, str] = {}
    if tokens:
        metrics["mean_total_tokens"] = _mean(tokens)
        metrics["p95_total_tokens"] = percentile(tokens, 95)  # type: ignore[assignment]
    else:
        missing.update(mean_total_tokens=NO_USAGE, p95_total_tokens=NO_USAGE)
    if cached:
        metrics["cache_hit_rate"] = sum(cached) / len(cached)
    else:
        missing["cache_hit_rate"] = NO_CACHED
    return metrics, missing


def map_relevant(relevant: dict[str, int], to_id: Callable[[str], str]) -> dict[str, int]:
    """Relevant ids at the matching level; a document's grade is its best chunk's."""
    out: dict[str, int] = {}
    for rid, grade in relevant.items():
        key = to_id(rid)
        out[key] = max(grade, out.get(key, 0))
    return out
