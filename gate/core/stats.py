"""Paired comparison of per-case scores: is this run worse than the reference run? Pure.

A judge wobbles from call to call, so comparing two means of noisy samples raises false
alarms (in bench/bench_verdict_trust.py, 8-17 % of unchanged PRs with a plain mean-drop rule).
With a fixed sample and cached scores, unchanged cases give identical scores on both
sides and the per-case deltas isolate real change. A one-sided paired bootstrap of the
mean delta then says how sure we can be that the run is worse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NORMAL_ABOVE = 1000  # above this many pairs, a normal approximation replaces resampling


@dataclass(frozen=True)
class PairedResult:
    n: int  # cases present on both sides
    mean_drop: float  # mean of (reference - current), in the "worse" direction
    p_value: float  # bootstrap estimate of P(mean drop <= 0): small = surely worse
    changed: int  # cases whose score differs at all

    def significant(self, confidence: float) -> bool:
        return self.p_value < 1.0 - confidence


def paired_bootstrap(
    reference: Sequence[float],
    current: Sequence[float],
    *,
    higher_is_better: bool = True,
    resamples: int = 2000,
    seed: int = 0,
) -> PairedResult:
    """One-sided paired bootstrap on the per-case deltas (reference[i] vs current[i]).

    Deterministic for a given input and seed. With every delta 0 (nothing changed) the
    p-value is 1: no evidence of a drop.
    """
    if len(reference) != len(current):
        raise ValueError("reference and current must pair up case by case")
    sign = 1.0 if higher_is_better else -1.0
    return drop_test([sign * (r - c) for r, c in zip(reference, current, strict=True)], resamples=resamples, seed=seed)


def drop_test(drops: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> PairedResult:
    """The one-sided paired bootstrap on per-case drops (positive: worse). A drop that is not a finite number is a
    ValueError: it would make every resample's mean NaN, and a NaN compares as "not worse"."""
    if not all(math.isfinite(d) for d in drops):
        raise ValueError("a per-case drop is not a finite number")
    n = len(drops)
    if n == 0:
        return PairedResult(0, 0.0, 1.0, 0)
    mean = math.fsum(drops) / n
    changed = sum(1 for d in drops if d != 0.0)
    if changed == 0:
        return PairedResult(n, 0.0, 1.0, 0)
    if n > NORMAL_ABOVE:
        # many cases: the bootstrap distribution of the mean is normal (CLT); same answer, no resampling cost
        var = math.fsum((d - mean) ** 2 for d in drops) / (n - 1)
        se = math.sqrt(var / n)
        p = 0.5 * math.erfc(mean / se / math.sqrt(2)) if se > 0 else (0.0 if mean > 0 else 1.0)
        return PairedResult(n, mean, p, changed)
    import random  # only where it resamples: a run of exact figures never does

    rng = random.Random(seed)
    not_worse = 0
    for _ in range(resamples):
        total = math.fsum(rng.choices(drops, k=n))
        if total <= 0.0:
            not_worse += 1
    # +1 smoothing: a finite bootstrap never proves p = 0
    return PairedResult(n, mean, (not_worse + 1) / (resamples + 1), changed)
