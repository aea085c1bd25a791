"""paired_bootstrap: edge cases, direction, determinism, and agreement with independent tests."""

from __future__ import annotations

import math
import random

import pytest

from gate.core import stats
from gate.core.stats import PairedResult, paired_bootstrap


def noisy_pair(n: int, mean_drop: float, sigma: float, seed: int) -> tuple[list[float], list[float]]:
    """Reference scores in [0.5, 1] and current = reference - (mean_drop + noise)."""
    rng = random.Random(seed)
    ref = [rng.uniform(0.5, 1.0) for _ in range(n)]
    cur = [r - (mean_drop + rng.gauss(0.0, sigma)) for r in ref]
    return ref, cur


def normal_p(drops: list[float]) -> float:
    """One-sided p of 'mean drop <= 0' from the normal approximation, written independently of gate.core.stats."""
    n = len(drops)
    m = sum(drops) / n
    sd = math.sqrt(sum((d - m) ** 2 for d in drops) / (n - 1))
    z = m / (sd / math.sqrt(n))
    return 0.5 * math.erfc(z / math.sqrt(2.0))


# --------------------------------------------------------------------------- edge cases


def test_all_deltas_zero_means_no_evidence():
    scores = [0.9, 0.7, 0.85, 1.0, 0.6] * 8
    r = paired_bootstrap(scores, list(scores))
    assert r == PairedResult(n=40, mean_drop=0.0, p_value=1.0, changed=0)
    assert not r.significant(0.5001)


def test_empty_input_is_no_evidence():
    assert paired_bootstrap([], []) == PairedResult(0, 0.0, 1.0, 0)


@pytest.mark.parametrize("resamples", [200, 2000, 5000])
def test_consistent_drop_reaches_the_floor(resamples):
    ref = [0.9] * 30
    cur = [0.8] * 30
    r = paired_bootstrap(ref, cur, resamples=resamples)
    assert r.p_value == pytest.approx(1 / (resamples + 1))
    assert r.mean_drop == pytest.approx(0.1)
    assert r.changed == 30 and r.n == 30
    assert r.significant(0.99)


def test_consistent_improvement_gives_p_one():
    r = paired_bootstrap([0.7] * 25, [0.8] * 25)
    assert r.p_value == pytest.approx(1.0)
    assert r.mean_drop == pytest.approx(-0.1)
    assert not r.significant(0.9)


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="pair"):
        paired_bootstrap([0.1, 0.2, 0.3], [0.1, 0.2])


def test_changed_counts_cases_that_differ_at_all():
    r = paired_bootstrap([0.5, 0.5, 0.5, 0.5], [0.5, 0.4, 0.5, 0.6])
    assert r.changed == 2
    assert r.mean_drop == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------- direction


@pytest.mark.parametrize(
    ("higher_is_better", "ref", "cur", "worse"),
    [
        (True, 0.9, 0.8, True),  # faithfulness fell: worse
        (True, 0.8, 0.9, False),  # faithfulness rose: better
        (False, 0.1, 0.2, True),  # false rejection rate rose: worse
        (False, 0.2, 0.1, False),  # false rejection rate fell: better
    ],
)
def test_direction(higher_is_better, ref, cur, worse):
    r = paired_bootstrap([ref] * 20, [cur] * 20, higher_is_better=higher_is_better)
    assert (r.mean_drop > 0) is worse
    assert r.mean_drop == pytest.approx(0.1 if worse else -0.1)
    assert r.significant(0.99) is worse


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_result_different_seed_may_differ():
    ref, cur = noisy_pair(40, 0.01, 0.05, seed=3)
    a = paired_bootstrap(ref, cur, seed=11)
    assert paired_bootstrap(ref, cur, seed=11) == a
    others = {paired_bootstrap(ref, cur, seed=s).p_value for s in range(12, 20)}
    assert others - {a.p_value}  # the seed does drive the resampling
    # but the answer barely depends on it
    assert all(abs(p - a.p_value) < 0.05 for p in others)


# --------------------------------------------------------------------------- agreement with independent estimates


# (n, true mean drop, noise sigma, data seed): chosen so the p-values land between ~0.01 and ~0.6
AGREEMENT = [
    (40, 0.010, 0.05, 1),
    (40, 0.015, 0.05, 2),
    (40, 0.000, 0.05, 3),
    (40, 0.020, 0.08, 4),
    (200, 0.005, 0.05, 5),
    (200, 0.008, 0.06, 6),
    (200, 0.000, 0.05, 7),
]


@pytest.mark.parametrize(("n", "drop", "sigma", "seed"), AGREEMENT)
def test_p_value_agrees_with_normal_approximation(n, drop, sigma, seed):
    ref, cur = noisy_pair(n, drop, sigma, seed)
    drops = [r - c for r, c in zip(ref, cur, strict=True)]
    expected = normal_p(drops)
    r = paired_bootstrap(ref, cur, resamples=5000, seed=seed)
    assert r.mean_drop == pytest.approx(sum(drops) / n)
    assert abs(r.p_value - expected) < 0.04, (r.p_value, expected)


@pytest.mark.parametrize(("n", "drop", "sigma", "seed"), AGREEMENT)
def test_p_value_agrees_with_scipy_t_test(n, drop, sigma, seed):
    scipy_stats = pytest.importorskip("scipy.stats")
    ref, cur = noisy_pair(n, drop, sigma, seed)
    drops = [r - c for r, c in zip(ref, cur, strict=True)]
    expected = float(scipy_stats.ttest_1samp(drops, 0.0, alternative="greater").pvalue)
    r = paired_bootstrap(ref, cur, resamples=5000, seed=seed)
    assert abs(r.p_value - expected) < 0.04, (r.p_value, expected)


def test_agreement_cases_are_not_trivial():
    """The table above must exercise the middle of the p range, where a wrong formula would show."""
    ps = [normal_p([r - c for r, c in zip(*noisy_pair(n, d, s, seed), strict=True)]) for n, d, s, seed in AGREEMENT]
    assert min(ps) < 0.1 and max(ps) > 0.3
    assert sum(1 for p in ps if 0.01 < p < 0.9) >= 5


# --------------------------------------------------------------------------- the normal branch for many cases


def test_normal_branch_agrees_with_bootstrap_above_the_threshold(monkeypatch):
    ref, cur = noisy_pair(1200, 0.002, 0.05, seed=22)
    assert len(ref) > stats.NORMAL_ABOVE
    normal = paired_bootstrap(ref, cur)
    monkeypatch.setattr(stats, "NORMAL_ABOVE", 10**9)
    boot = paired_bootstrap(ref, cur, resamples=3000, seed=1)
    assert 0.01 < boot.p_value < 0.5  # a p where the two could visibly disagree
    assert normal.mean_drop == pytest.approx(boot.mean_drop)
    assert normal.n == boot.n == 1200 and normal.changed == boot.changed
    assert abs(normal.p_value - boot.p_value) < 0.03, (normal.p_value, boot.p_value)


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_normal_branch_agrees_with_bootstrap_on_small_data(monkeypatch, seed):
    ref, cur = noisy_pair(60, 0.008, 0.05, seed=seed)
    boot = paired_bootstrap(ref, cur, resamples=5000, seed=seed)
    monkeypatch.setattr(stats, "NORMAL_ABOVE", 10)
    normal = paired_bootstrap(ref, cur)
    assert abs(normal.p_value - boot.p_value) < 0.04, (normal.p_value, boot.p_value)


def test_normal_branch_direction_and_extremes():
    n = 1001
    drop = paired_bootstrap([0.9] * n, [0.9 - 0.1 - 0.01 * (i % 3) for i in range(n)])
    assert drop.p_value < 1e-6 and drop.significant(0.999)
    rise = paired_bootstrap([0.9] * n, [0.95 + 0.01 * (i % 3) for i in range(n)])
    assert rise.p_value > 1 - 1e-6
    assert paired_bootstrap([0.5] * n, [0.5] * n).p_value == 1.0
