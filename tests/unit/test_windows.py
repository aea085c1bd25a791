"""The traces window comparison (gate.core.windows) and its gates: the drift measured on the anchor traces moves the
reference to today's judge; the two-sample standard error; insufficient evidence; consecutive_decline on the recorded
judge-corrected changes."""

from __future__ import annotations

import math
import statistics

import pytest

from gate.core.gates import Comparison, Gated, decide
from gate.core.windows import ReferenceWindow, anchor_ids, compare, one_sided_p, window_decline_check


def test_the_anchor_drift_moves_the_reference_to_todays_judge() -> None:
    then = {f"r{i}": 0.5 + (i % 5) / 10 for i in range(40)}  # 0.5 .. 0.9
    now_anchor = {i: v - 0.1 for i, v in list(then.items())[:10]}  # today's judge: 0.1 harsher on the same answers
    current = [0.5 + (i % 5) / 10 - 0.1 for i in range(50)]  # the same system, judged today
    w = compare(current, [ReferenceWindow("last week", then, now_anchor)], higher_is_better=True, min_sample=30, anchored=True)
    assert w["reference_mean"] == pytest.approx(statistics.fmean(then.values()))
    assert w["drift"] == pytest.approx(-0.1) and w["anchor_n"] == 10
    assert w["corrected"] == pytest.approx(w["reference_mean"] - 0.1)
    assert w["delta"] == pytest.approx(statistics.fmean(current) - w["corrected"])
    assert abs(w["delta"]) < 1e-9 and "insufficient" not in w
    # the standard error holds both windows and the drift's (here 0: every anchor moved by exactly 0.1)
    se = math.sqrt(statistics.variance(current) / 50 + statistics.variance(then.values()) / 40)
    assert w["se"] == pytest.approx(se)
    raw = compare(current, [ReferenceWindow("last week", then, now_anchor)], higher_is_better=True, min_sample=30, anchored=False)
    assert raw["drift"] is None and raw["delta"] == pytest.approx(-0.1, abs=0.01) and raw["anchor_n"] == 0
    assert raw["p_value"] < 0.01 < w["p_value"]  # without the anchor the harsher judge reads as a significant fall


def test_a_side_under_min_sample_or_an_anchor_that_could_not_be_judged_is_insufficient() -> None:
    then = {f"r{i}": 0.8 for i in range(40)}
    small = compare([0.7] * 12, [ReferenceWindow("w", then, {"r1": 0.8, "r2": 0.8})], higher_is_better=True, min_sample=30, anchored=True)
    assert small["insufficient"] == "12 scored traces in this window, fewer than min_sample 30"
    lost = compare([0.7] * 40, [ReferenceWindow("the window judged 2026-11-24", then, {"r1": 0.8})], higher_is_better=True,
                   min_sample=30, anchored=True)
    assert "1 anchor trace of the window judged 2026-11-24" in lost["insufficient"]
    none = compare([0.7] * 40, [ReferenceWindow("w", then, {})], higher_is_better=True, min_sample=30, anchored=True)
    assert none["drift"] is None and none["delta"] is None and "insufficient" in none


def test_the_gate_fails_only_on_a_significant_drop_above_the_limit() -> None:
    def gate(delta: float, se: float, insufficient: str | None = None) -> str:
        w = {"n": 300, "mean": 0.8 + delta, "sd": 0.1, "reference_n": 300, "reference_mean": 0.82, "anchor_n": 40, "drift": -0.02,
             "corrected": 0.8, "delta": delta, "se": se, "p_value": one_sided_p(-delta, se)}
        if insufficient:
            w["insufficient"] = insufficient
        d = decide(Gated("generation", "faithfulness"), {"max_drop": 0.03}, 0.8 + delta, Comparison(0.8, label="the previous window", window=w))
        return d.checks[0].status
    assert gate(-0.05, 0.01) == "fail"  # above 0.03, z = 5
    assert gate(-0.05, 0.03) == "pass"  # above the limit, not significant at 0.99
    assert gate(-0.02, 0.001) == "pass"  # significant, within the limit
    assert gate(-0.2, 0.01, "12 scored traces in this window, fewer than min_sample 30") == "skipped"
    assert one_sided_p(0.0, 0.0) == 1.0 and one_sided_p(0.1, 0.0) == 0.0
    assert one_sided_p(2.326 * 0.01, 0.01) == pytest.approx(0.01, abs=1e-4)


def test_consecutive_decline_needs_every_window_to_fall_and_the_total_fall_to_be_significant() -> None:
    def check(changes: list[tuple[float, float] | None], hib: bool = True, runs: int = 3) -> str:
        return window_decline_check(runs, changes, hib, 0.99).status

    assert check([None, (-0.01, 0.001), (-0.02, 0.001)]) == "skipped"
    assert check([(-0.01, 0.001), (-0.02, 0.001), (-0.03, 0.001)]) == "fail"
    assert check([(0.01, 0.001), (-0.02, 0.001), (-0.03, 0.001)]) == "pass"  # two falls are not three
    assert check([(-0.01, 0.001), None, (-0.02, 0.001), (-0.03, 0.001)]) == "skipped"  # an unknown window breaks the run
    assert check([(0.01, 0.001), (0.02, 0.001)], hib=False, runs=2) == "fail"  # lower is better: two rises
    # three small falls of noise: each a fall, the total (0.006) within its standard error (0.017): not an alarm
    noisy = window_decline_check(3, [(-0.002, 0.01), (-0.002, 0.01), (-0.002, 0.01)], True, 0.99)
    assert noisy.status == "pass" and "within noise" in noisy.detail and "p = 0.3" in noisy.detail
    assert "2 known in a row" in window_decline_check(3, [(-0.1, 0.01), (-0.2, 0.01)], True, 0.99).detail


def test_the_anchor_sample_is_the_same_for_the_same_window_and_seed() -> None:
    ids = [f"t{i}" for i in range(100)]
    first = anchor_ids(ids, 40, 7)
    assert first == anchor_ids(list(reversed(ids)), 40, 7) and len(set(first)) == 40
    assert first != anchor_ids(ids, 40, 8)
    assert sorted(anchor_ids(ids[:10], 40, 7)) == sorted(ids[:10])  # a window smaller than the anchor: all of it
