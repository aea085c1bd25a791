"""How well a judge agrees with people, the figures that need numpy and scipy (loaded only by `rag-gate calibrate`):

    spearman, kendall   scipy.stats.spearmanr / kendalltau (tau-b) of the judge's scores against the labels
    kappa               Cohen's kappa of pass/fail (score >= threshold) between the judge and the labels
    mae, bias           mean |judge - human|, mean (judge - human)
    intervals           95 % percentile bootstrap over the labelled cases (seeded: the same labels give the same file)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gate.core.agreement import cohen_kappa

RESAMPLES = 2000


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _statistics(judge: Any, human: Any, threshold: float) -> dict[str, float | None]:
    from scipy import stats

    with_variance = len(set(judge.tolist())) > 1 and len(set(human.tolist())) > 1
    spearman = stats.spearmanr(judge, human).statistic if with_variance else float("nan")
    kendall = stats.kendalltau(judge, human).statistic if with_variance else float("nan")
    return {"spearman": _finite(spearman), "kendall": _finite(kendall),
            "kappa": cohen_kappa(list(judge >= threshold), list(human >= threshold)),
            "mae": float(abs(judge - human).mean()), "bias": float((judge - human).mean())}


def agreement(judge: Sequence[float], human: Sequence[float], threshold: float, *, seed: int = 0,
              resamples: int = RESAMPLES) -> dict[str, Any]:
    """The judge's agreement with the labels of the same cases (``judge[i]`` and ``human[i]`` score one case)."""
    import numpy as np

    j, h = np.asarray(judge, dtype=float), np.asarray(human, dtype=float)
    n = len(j)
    out: dict[str, Any] = {"n": n, "threshold": threshold, **_statistics(j, h, threshold)}
    jp, hp = j >= threshold, h >= threshold
    out["confusion"] = {"both_pass": int((jp & hp).sum()), "judge_pass_human_fail": int((jp & ~hp).sum()),
                        "judge_fail_human_pass": int((~jp & hp).sum()), "both_fail": int((~jp & ~hp).sum())}
    out["intervals"] = bootstrap_intervals(j, h, threshold, seed=seed, resamples=resamples) if n >= 2 else {}
    return out


def bootstrap_intervals(j: Any, h: Any, threshold: float, *, seed: int = 0, resamples: int = RESAMPLES) -> dict[str, list[float]]:
    """95 % percentile bootstrap intervals of each statistic, resampling the labelled cases."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(j)
    picks = rng.integers(0, n, size=(resamples, n))
    jb, hb = j[picks], h[picks]
    draws: dict[str, list[float]] = {"mae": list(abs(jb - hb).mean(axis=1)), "bias": list((jb - hb).mean(axis=1))}
    kappas: list[float] = []
    spearmans: list[float] = []
    kendalls: list[float] = []
    for row_j, row_h in zip(jb, hb, strict=True):
        stats = _statistics(row_j, row_h, threshold) if len(set(row_j.tolist())) > 1 and len(set(row_h.tolist())) > 1 else {}
        for name, into in (("kappa", kappas), ("spearman", spearmans), ("kendall", kendalls)):
            value = stats.get(name)
            if value is not None:
                into.append(value)
    draws.update(kappa=kappas, spearman=spearmans, kendall=kendalls)
    return {name: [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] for name, values in draws.items() if values}


def mean_interval(j: Any, h: Any, *, seed: int = 0, resamples: int = RESAMPLES) -> tuple[list[float], list[float]]:
    """The bootstrap intervals of the mean absolute error and the bias alone (vectorised: the coverage checks use it)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(j), size=(resamples, len(j)))
    d = j[picks] - h[picks]
    mae, bias = abs(d).mean(axis=1), d.mean(axis=1)
    return [float(np.percentile(mae, 2.5)), float(np.percentile(mae, 97.5))], [float(np.percentile(bias, 2.5)), float(np.percentile(bias, 97.5))]
