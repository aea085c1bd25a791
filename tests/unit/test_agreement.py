"""The agreement figures against scipy and a hand computation, and the intervals' coverage in simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from gate.core.agreement import cohen_kappa, labeller_kappa, ppi_mean
from gate.judges.agreement import agreement, mean_interval


def test_rank_correlations_are_scipys_and_kappa_is_the_hand_computation() -> None:
    rng = np.random.default_rng(4)
    judge = rng.random(40)
    human = np.clip(judge + rng.normal(0, 0.25, 40), 0, 1)
    got = agreement(list(judge), list(human), 0.5, resamples=200)
    assert got["spearman"] == pytest.approx(stats.spearmanr(judge, human).statistic)
    assert got["kendall"] == pytest.approx(stats.kendalltau(judge, human).statistic)
    a, b = judge >= 0.5, human >= 0.5
    po = float(np.mean(a == b))
    pe = a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean())
    assert got["kappa"] == pytest.approx((po - pe) / (1 - pe))
    assert got["mae"] == pytest.approx(float(np.abs(judge - human).mean())) and got["bias"] == pytest.approx(float((judge - human).mean()))
    c = got["confusion"]
    assert c["both_pass"] + c["both_fail"] + c["judge_pass_human_fail"] + c["judge_fail_human_pass"] == 40
    lo, hi = got["intervals"]["kappa"]
    assert lo <= got["kappa"] <= hi


def test_kappa_by_hand_on_a_small_table() -> None:
    # 10 cases: 4 both yes, 3 both no, 2 judge yes / human no, 1 judge no / human yes
    judge = [True] * 4 + [False] * 3 + [True] * 2 + [False]
    human = [True] * 4 + [False] * 3 + [False] * 2 + [True]
    # po = 0.7; pe = 0.6*0.5 + 0.4*0.5 = 0.5; kappa = 0.4
    assert cohen_kappa(judge, human) == pytest.approx(0.4)
    assert cohen_kappa([True, True], [True, True]) is None  # nothing to tell apart
    assert labeller_kappa({"a": {"x": 1.0, "y": 0.0}, "b": {"x": 1.0, "y": 0.0}}, 0.5) == pytest.approx(1.0)
    assert labeller_kappa({"a": {"x": 1.0}}, 0.5) is None


def test_the_bootstrap_intervals_cover_the_true_bias_and_error_at_their_stated_rate() -> None:
    rng = np.random.default_rng(11)
    true_bias, hits_bias, hits_mae, draws = 0.1, 0, 0, 1000
    true_mae = None
    for i in range(draws):
        human = rng.random(60)
        judge = human + true_bias + rng.normal(0, 0.2, 60)
        if true_mae is None:  # the error's true mean, from a large sample of the same law
            big = rng.random(2_000_000)
            true_mae = float(np.abs(true_bias + rng.normal(0, 0.2, big.size)).mean())
        mae_ci, bias_ci = mean_interval(judge, human, seed=i, resamples=1000)
        hits_bias += bias_ci[0] <= true_bias <= bias_ci[1]
        hits_mae += mae_ci[0] <= true_mae <= mae_ci[1]
    assert 0.92 <= hits_bias / draws <= 0.98, hits_bias
    assert 0.92 <= hits_mae / draws <= 0.98, hits_mae


def test_the_prediction_powered_estimate_covers_the_human_mean_where_the_biased_judge_does_not() -> None:
    rng = np.random.default_rng(5)
    draws, ppi_hits, judge_hits, true_mean = 1000, 0, 0, 0.6
    target = float(np.clip(rng.normal(true_mean, 0.2, 4_000_000), 0, 1).mean())  # the people's mean over every case that could come
    for _ in range(draws):
        human_run = np.clip(rng.normal(true_mean, 0.2, 400), 0, 1)  # what people would score the run's cases
        judge_run = np.clip(human_run + 0.1 + rng.normal(0, 0.1, 400), 0, 1.2)  # a judge biased by +0.1
        labelled = rng.choice(400, 50, replace=False)
        est = ppi_mean(list(judge_run), list(judge_run[labelled]), list(human_run[labelled]))
        assert est is not None
        ppi_hits += est["low"] <= target <= est["high"]
        judge_hits += est["judge_low"] <= target <= est["judge_high"]
    assert 0.92 <= ppi_hits / draws <= 0.98, ppi_hits
    assert judge_hits / draws < 0.05, judge_hits
