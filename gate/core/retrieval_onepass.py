"""A case's retrieval metrics, all of them at once. Pure.

``case_scorer(metrics)`` gives the function the retrieval stage calls once per case: it finds each relevant id's rank
in the ranked list once (in C: a lookup per relevant id, which costs less than walking the list for the few a case
has), then walks the relevant ids found, in rank order, once, and reads every metric from that walk: the first
hit's rank (hit_rate, mrr), the hits within each k (recall, precision, context_recall), the discounted gains (ndcg)
and the precisions at each relevant rank (map). Its values are ``gate.core.ranking.CaseScorer``'s, bit for bit: the
same float operations in the same order (tests/unit/test_metrics_onepass.py holds the two to it on random lists).
Where gate.core._native is built, its ``score_case`` runs the same steps in C, to the same values (tests/unit/test_native.py).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import repeat

from gate.core.catalog import MetricName

try:
    from gate.core._native import score_case as _native_score
except ImportError:  # not built (no C compiler where it was installed): the same steps in Python
    _native_score = None

Ranks = dict[str, "int | None"]
# (each relevant id's rank or None, the ranks found in order, the value of each metric in the order given)
CaseScores = tuple[Ranks, list[int], list[float]]

_KINDS = {"hit_rate": 0, "mrr": 1, "recall": 2, "context_recall": 2, "precision": 3, "ndcg": 4, "map": 5}
_LOG2 = [0.0, *(math.log2(r + 1) for r in range(1, 1001))]  # math.log2(rank + 1) by rank: the same float, looked up


def _log2(rank: int) -> float:
    return _LOG2[rank] if rank < len(_LOG2) else math.log2(rank + 1)


IdealDCG = dict[tuple["int | None", tuple[int, ...]], float]  # by k and a case's grades: the same few, over and over


def _idcg(cache: IdealDCG, k: int | None, relevant: dict[str, int]) -> float:
    """The DCG of the ideal list of a case's grades, cut at ``k`` (``CaseScorer``'s, kept per set of grades)."""
    key = (k, tuple(relevant.values()))
    value = cache.get(key)
    if value is None:
        grades = sorted(relevant.values(), reverse=True)
        ideal = grades if k is None else grades[:k]
        value = cache[key] = sum([g / _log2(r) for r, g in enumerate(ideal, 1)])
    return value


def case_scorer(metrics: Sequence[MetricName], native: bool = True) -> Callable[[list[str], dict[str, int]], CaseScores]:
    """The function scoring one case (its ranked ids, repeats kept, and its relevant ids with their grades) on
    ``metrics``: each relevant id's rank once repeated ids are dropped (None: not retrieved; ``first_ranks``), the
    ranks found in increasing order, and each metric's value. ``native``: in C where gate.core._native is built (the
    Python steps run for what it does not take, which it says by returning None)."""
    steps = scorer_plan(metrics)
    python = _python_scorer(list(steps))
    if not native or _native_score is None:
        return python
    in_c = _native_score

    def score(ids: list[str], relevant: dict[str, int]) -> CaseScores:
        got: CaseScores | None = in_c(steps, ids, relevant)
        return python(ids, relevant) if got is None else got

    return score


def scorer_plan(metrics: Sequence[MetricName]) -> tuple[tuple[int, int | None], ...]:
    """(kind, k) of each metric, as the scorers read them; ValueError naming one that is no retrieval metric."""
    for m in metrics:
        if m.base not in _KINDS:
            raise ValueError(f"not a retrieval metric: {m.name}")
    return tuple((_KINDS[m.base], m.k) for m in metrics)


def _python_scorer(plan: list[tuple[int, int | None]]) -> Callable[[list[str], dict[str, int]], CaseScores]:
    ideal_dcg: IdealDCG = {}

    def score(ids: list[str], relevant: dict[str, int]) -> CaseScores:
        ranks: Ranks = {}
        places: list[tuple[int, int, str]] = []  # (first place in ids, grade, id) of the relevant ids retrieved
        for rid, grade in relevant.items():
            if rid in ids:
                places.append((ids.index(rid), grade, rid))
            ranks[rid] = None  # the ranks found are set below: the keys keep the order of ``relevant``
        found: list[tuple[int, int]] = []  # (rank, grade), in rank order
        if places:
            if len(places) > 1:
                places.sort()  # places are distinct
            last = places[-1][0]
            unique = len(set(ids[:last])) == last  # no repeated id before the last relevant one: a rank is its place + 1
            for i, grade, rid in places:
                ranks[rid] = rank = i + 1 if unique else len(set(ids[:i])) + 1  # the distinct ids before its first place
                found.append((rank, grade))
        rank_list = [r for r, _ in found]
        n = len(relevant)
        first = rank_list[0] if rank_list else 0
        row: list[float] = []
        for kind, k in plan:
            if not n:
                row.append(0.0)
            elif kind == 0:  # hit_rate@k
                row.append(1.0 if first and first <= k else 0.0)  # type: ignore[operator]
            elif kind == 1:  # mrr[@k]
                row.append(0.0 if not first or (k is not None and first > k) else 1.0 / first)
            elif kind == 2:  # recall@k, context_recall@k (its micro average is taken over the cases)
                row.append((len(rank_list) if k is None else bisect_right(rank_list, k)) / n)
            elif kind == 3:  # precision@k
                row.append(bisect_right(rank_list, k) / k)  # type: ignore[type-var,operator]
            elif kind == 4:  # ndcg[@k]
                row.append(sum([g / _log2(r) for r, g in found if k is None or r <= k]) / _idcg(ideal_dcg, k, relevant))
            else:  # map[@k]
                total = 0.0
                for j, r in enumerate(rank_list, 1):
                    if k is not None and r > k:
                        break
                    total += j / r
                row.append(total / n)
        return ranks, rank_list, row

    return score


def mean_of(metric: MetricName, per_case: Sequence[float], rank_lists: Sequence[list[int]], n_relevant: Sequence[int]) -> float | None:
    """A metric over the cases (``per_case`` its values, ``rank_lists`` and ``n_relevant`` each case's ranks found and
    number of relevant ids): their mean; ``context_recall@k`` is the micro average (the hits of every case within k
    over every relevant id). None if no case. ``gate.core.ranking.aggregate``'s value."""
    if not per_case:
        return None
    if metric.base == "context_recall":
        total = sum(n_relevant)
        k = metric.k
        hits = sum(map(len, rank_lists)) if k is None else sum(map(bisect_right, rank_lists, repeat(k)))
        return hits / total if total else None
    return math.fsum(per_case) / len(per_case)
