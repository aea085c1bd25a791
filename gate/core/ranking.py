"""Retrieval and system-health metric math. Pure: lists in, floats out.

Definitions (they equal trec_eval's): per case, on the target's ranked
list after dropping repeated ids, with R = the number of relevant ids of the case.

    hit_rate@k        success_k      1 if a relevant id is in the top k
    mrr[@k]           recip_rank     1 / rank of the first relevant id (within k), else 0
    recall@k          recall_k       relevant ids in the top k / R
    precision@k       P_k            relevant ids in the top k / k
    ndcg[@k]          ndcg[_cut_k]   DCG / IDCG, gain = grade, discount log2(rank + 1)
    map[@k]           map[_cut_k]    sum of precision at each relevant rank (<= k) / R
    context_recall@k  (seed)         micro average: relevant ids in top k over all cases
                                     / all relevant ids (per case it is recall@k)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gate.core.catalog import MetricName


def dedupe(ids: Iterable[str]) -> list[str]:
    """Drop repeated ids, keeping the first occurrence (its rank)."""
    return list(dict.fromkeys(ids))


def relevant_ranks(ranked: Sequence[str], relevant: dict[str, int]) -> list[tuple[int, int]]:
    """(1-based rank, grade) of every relevant id in ``ranked`` (already de-duplicated)."""
    return [(i, relevant[d]) for i, d in enumerate(ranked, 1) if d in relevant]


def _dcg(gains: Iterable[tuple[int, int]]) -> float:
    return sum(g / math.log2(r + 1) for r, g in gains)


class CaseScorer:
    """Scores one case's ranked list against its relevant ids, for any metric name."""

    __slots__ = ("ranks", "n_relevant", "grades")

    def __init__(self, ranked: Sequence[str], relevant: dict[str, int]) -> None:
        self.ranks = relevant_ranks(ranked, relevant)
        self.n_relevant = len(relevant)
        self.grades = sorted(relevant.values(), reverse=True)

    def hits_at(self, k: int | None) -> int:
        return sum(1 for r, _ in self.ranks if k is None or r <= k)

    def score(self, metric: MetricName) -> float:
        base, k = metric.base, metric.k
        if self.n_relevant == 0:
            return 0.0
        if base == "hit_rate":
            return 1.0 if self.ranks and self.ranks[0][0] <= k else 0.0  # type: ignore[operator]
        if base == "mrr":
            if not self.ranks or (k is not None and self.ranks[0][0] > k):
                return 0.0
            return 1.0 / self.ranks[0][0]
        if base in ("recall", "context_recall"):
            return self.hits_at(k) / self.n_relevant
        if base == "precision":
            return self.hits_at(k) / k  # type: ignore[operator]
        if base == "ndcg":
            ideal = self.grades if k is None else self.grades[:k]
            idcg = _dcg(enumerate(ideal, 1))
            return _dcg((r, g) for r, g in self.ranks if k is None or r <= k) / idcg
        if base == "map":
            total = 0.0
            for j, (r, _) in enumerate(self.ranks, 1):
                if k is not None and r > k:
                    break
                total += j / r
            return total / self.n_relevant
        raise ValueError(f"not a retrieval metric: {metric.name}")


def aggregate(metric: MetricName, scorers: Sequence[CaseScorer], per_case: Sequence[float]) -> float | None:
    """Average per-case values; ``context_recall@k`` is the micro average. None if no case."""
    if not scorers:
        return None
    if metric.base == "context_recall":
        total = sum(s.n_relevant for s in scorers)
        return sum(s.hits_at(metric.k) for s in scorers) / total if total else None
    return math.fsum(per_case) / len(per_case)


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    data = sorted(values)
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
        out["mean_latency_ms"] = statistics.fmean(latencies_ms)
        for q in (50, 95, 99):
            out[f"p{q}_latency_ms"] = percentile(latencies_ms, q)  # type: ignore[assignment]
    return out


def id_mapper(match: Mapping[str, Any]) -> Callable[[str], str]:
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
