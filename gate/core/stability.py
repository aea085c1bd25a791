"""The stability test's arithmetic: how far a question's retrieval, answers and correctness move when it is asked again.
Pure.

A sampled question is asked ``repeats`` more times; with the run's own answer that makes ``repeats + 1`` asks. A call
that failed is left out of its case's figures, and a case with fewer than two asks answered has none (it is errored).

    jaccard         mean over every pair of asks of |A ∩ B| / |A ∪ B| on the top-k ids (1.0: the same passages)
    agreement       mean over every pair of answers of their agreement (token F1, or the judge's same-meaning verdict)
    flipped         the asks disagree on correctness (None: not decided on every ask, or fewer than two)

``retrieval_stability@k`` and ``answer_stability`` are the means of ``jaccard`` and ``agreement`` over the cases
that have one; ``correctness_flip_rate`` is the share of flipped cases among those decided, with its 95 % Wilson
score interval (a share of a few dozen cases is uncertain: 0 flips in 30 cases still allows up to 11 %).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TypeVar

from gate.core.report import StabilityCase

T = TypeVar("T")

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval
AGREE = 1.0 - 1e-9  # an agreement from here on is full agreement (token F1 of identical bags is 1.0 up to rounding)


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """|A ∩ B| / |A ∪ B| of the two sets of ids; 1.0 when both are empty (nothing retrieved, twice alike)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def pairwise_mean(items: Sequence[T], score: Callable[[T, T], float | None]) -> float | None:
    """The mean of ``score`` over every unordered pair of ``items``; None with fewer than two items, or when a pair has
    no score (the pairs' mean would leave it out silently)."""
    scores = [score(a, b) for a, b in combinations(items, 2)]
    if not scores or any(s is None for s in scores):
        return None
    return math.fsum(s for s in scores if s is not None) / len(scores)


def flipped(correct: Sequence[bool | None]) -> bool | None:
    """Whether the asks disagree on correctness; None when one of them is not decided or there are fewer than two."""
    if len(correct) < 2 or any(c is None for c in correct):
        return None
    return len(set(correct)) > 1


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of the proportion successes / n (two-sided, at the level of ``z``: 95 % by default).
    ValueError when n < 1 or successes is outside 0..n."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"a proportion needs 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def unstable(case: StabilityCase) -> bool:
    """The case flipped, or its answers do not all agree."""
    agreement = case["agreement"]
    return bool(case["flipped"]) or (agreement is not None and agreement < AGREE)


@dataclass
class StabilitySummary:
    """The test's metrics over its cases (or why one is missing), the flip rate's interval, the unstable cases."""

    metrics: dict[str, float] = field(default_factory=dict)
    not_evaluated: dict[str, str] = field(default_factory=dict)
    flip_interval: list[float] = field(default_factory=list)  # empty: no case had its correctness decided
    unstable: list[str] = field(default_factory=list)


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def summarise(cases: Sequence[StabilityCase], k: int) -> StabilitySummary:
    """retrieval_stability@k, answer_stability and correctness_flip_rate over ``cases`` (each over the cases that have
    its figure), the 95 % Wilson interval of the flip rate, and the ids of the unstable cases."""
    out = StabilitySummary(unstable=[c["id"] for c in cases if unstable(c)])
    retrieval = f"retrieval_stability@{k}"
    jaccards = [c["jaccard"] for c in cases if c["jaccard"] is not None]
    agreements = [c["agreement"] for c in cases if c["agreement"] is not None]
    decided = [c["flipped"] for c in cases if c["flipped"] is not None]
    if jaccards:
        out.metrics[retrieval] = _mean(jaccards)
    else:
        out.not_evaluated[retrieval] = "no sampled case was answered on two asks or more"
    if agreements:
        out.metrics["answer_stability"] = _mean(agreements)
    else:
        out.not_evaluated["answer_stability"] = "no sampled case has two answers or more to compare"
    if decided:
        flips = sum(decided)
        out.metrics["correctness_flip_rate"] = flips / len(decided)
        out.flip_interval = list(wilson_interval(flips, len(decided)))
    else:
        out.not_evaluated["correctness_flip_rate"] = ("no sampled case has a ground truth and its correctness decided on "
                                                      "two asks or more")
    return out
