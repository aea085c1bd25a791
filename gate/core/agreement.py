"""How well a judge agrees with people, the part with no third-party package: Cohen's kappa, the agreement between
labellers, and the prediction-powered estimate of a metric on the people's scale: the run's judge mean plus the
labelled cases' mean (human - judge), with a 95 % interval from both parts' variances (prediction-powered inference,
its mean estimator). gate.judges.agreement has the figures that need scipy. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gate.core.report import HumanScale

Z95 = 1.959963984540054


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' yes/no; None when it is undefined (both always say the same one thing)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def ppi_mean(run_scores: Sequence[float], judge_labelled: Sequence[float], human_labelled: Sequence[float]) -> HumanScale | None:
    """The prediction-powered estimate of the run's mean on the people's scale, and its 95 % interval: the judge's
    mean over the run's ``run_scores`` corrected by the mean (human - judge) over the labelled cases. None with
    fewer than two labels or two scores."""
    n, big_n = len(human_labelled), len(run_scores)
    if n < 2 or big_n < 2 or len(judge_labelled) != n:
        return None
    judge_mean = math.fsum(run_scores) / big_n
    rectifier = [h - j for h, j in zip(human_labelled, judge_labelled, strict=True)]
    correction = math.fsum(rectifier) / n
    var_run = math.fsum((x - judge_mean) ** 2 for x in run_scores) / (big_n - 1)
    var_rect = math.fsum((r - correction) ** 2 for r in rectifier) / (n - 1)
    half = Z95 * math.sqrt(var_run / big_n + var_rect / n)
    estimate = judge_mean + correction
    return {"estimate": estimate, "low": estimate - half, "high": estimate + half, "judge_mean": judge_mean,
            "judge_low": judge_mean - Z95 * math.sqrt(var_run / big_n), "judge_high": judge_mean + Z95 * math.sqrt(var_run / big_n),
            "labels": float(n)}


def labeller_kappa(by_labeller: dict[str, dict[str, float]], threshold: float) -> float | None:
    """The mean pairwise Cohen's kappa between labellers on the cases both labelled (None with fewer than two, or no
    shared case)."""
    names = sorted(by_labeller)
    kappas = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = sorted(set(by_labeller[a]) & set(by_labeller[b]))
            if shared:
                k = cohen_kappa([by_labeller[a][c] >= threshold for c in shared], [by_labeller[b][c] >= threshold for c in shared])
                if k is not None:
                    kappas.append(k)
    return math.fsum(kappas) / len(kappas) if kappas else None
