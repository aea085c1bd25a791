"""Retrieval and system-health metric math. Pure: lists in, floats out.

Definitions (they equal trec_eval's; see DESIGN.md): per case, on the target's ranked
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
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# name -> (needs k, may take k)
_RETRIEVAL_BASES: dict[str, tuple[bool, bool]] = {
    "hit_rate": (True, True),
    "mrr": (False, True),
    "recall": (True, True),
    "precision": (True, True),
    "ndcg": (False, True),
    "map": (False, True),
    "context_recall": (True, True),
}
HEALTH_METRICS: dict[str, str] = {
    "error_rate": "share of target calls that failed",
    "mean_latency_ms": "mean latency of the target calls that succeeded",
    "p50_latency_ms": "median latency of the target calls that succeeded",
    "p95_latency_ms": "95th percentile latency of the target calls that succeeded",
    "p99_latency_ms": "99th percentile latency of the target calls that succeeded",
}
_NAME = re.compile(r"^([a-z_]+)(?:@([1-9][0-9]*))?$")


@dataclass(frozen=True, slots=True)
class MetricName:
    """A parsed metric name such as ``ndcg@10``."""

    name: str
    base: str
    k: int | None
    higher_is_better: bool = True


def parse_metric(name: str) -> MetricName:
    """Parse a retrieval or health metric name; ValueError with a sentence if unknown."""
    if name in HEALTH_METRICS:
        return MetricName(name, name, None, higher_is_better=False)
    m = _NAME.fullmatch(name)  # fullmatch: "$" alone would accept a trailing newline ("mrr\n")
    if not m or m.group(1) not in _RETRIEVAL_BASES:
        known = ", ".join([f"{b}@k" if _RETRIEVAL_BASES[b][0] else f"{b}[@k]" for b in _RETRIEVAL_BASES])
        raise ValueError(f"unknown metric {name!r}; retrieval metrics are {known}; health metrics are {', '.join(HEALTH_METRICS)}")
    base, k = m.group(1), m.group(2)
    if _RETRIEVAL_BASES[base][0] and k is None:
        raise ValueError(f"metric {name!r} needs a cut-off, e.g. {base}@5")
    return MetricName(name, base, int(k) if k else None)


def higher_is_better(name: str) -> bool:
    """Direction of a metric by name; unknown names (judge metrics) count as higher-better."""
    # deepeval 4's hallucination is higher-is-better; ragas's noise sensitivity (share of misled claims) is not
    lower = {"false_rejection_rate", "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"} | set(HEALTH_METRICS)
    return name not in lower


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
