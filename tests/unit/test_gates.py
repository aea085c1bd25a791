"""Decision table for gate.core.gates.decide (in the spirit of coverage.py's should_fail_under table)."""

from __future__ import annotations

import pytest

from gate.core.gates import Gated, GateDecision, decide, stage_status

UP, DOWN = True, False  # higher is better / lower is better

# (id, gate, value, baseline, higher_is_better, mismatch, expected status, {check kind: expected check status})
TABLE = [
    # --- min / max
    ("min pass", {"min": 0.88}, 0.9, None, UP, None, "pass", {"min": "pass"}),
    ("min fail", {"min": 0.88}, 0.87, None, UP, None, "fail", {"min": "fail"}),
    ("min exactly", {"min": 0.88}, 0.88, None, UP, None, "pass", {"min": "pass"}),
    ("min 0.1+0.2 vs 0.3", {"min": 0.3}, 0.1 + 0.2, None, UP, None, "pass", {"min": "pass"}),
    ("min 0.7+0.1+0.1 vs 0.9", {"min": 0.9}, 0.7 + 0.1 + 0.1, None, UP, None, "pass", {"min": "pass"}),  # 0.8999999999999999
    ("min 1 - 0.9 vs 0.1", {"min": 0.1}, 1 - 0.9, None, UP, None, "pass", {"min": "pass"}),  # 0.09999999999999998
    ("min just below (not noise)", {"min": 0.88}, 0.8799, None, UP, None, "fail", {"min": "fail"}),
    ("max pass", {"max": 800}, 650.0, None, DOWN, None, "pass", {"max": "pass"}),
    ("max fail", {"max": 800}, 801.0, None, DOWN, None, "fail", {"max": "fail"}),
    ("max exactly", {"max": 0.0}, 0.0, None, DOWN, None, "pass", {"max": "pass"}),
    ("max 0.1+0.2 vs 0.3", {"max": 0.3}, 0.1 + 0.2, None, DOWN, None, "pass", {"max": "pass"}),  # 0.30000000000000004
    ("max just above (not noise)", {"max": 0.3}, 0.3001, None, DOWN, None, "fail", {"max": "fail"}),
    ("min and max inside", {"min": 0.2, "max": 0.8}, 0.5, None, UP, None, "pass", {"min": "pass", "max": "pass"}),
    ("min and max, max broken", {"min": 0.2, "max": 0.8}, 0.9, None, UP, None, "fail", {"min": "pass", "max": "fail"}),
    # --- max_drop, absolute points, higher is better
    ("drop within", {"max_drop": 0.03}, 0.88, 0.90, UP, None, "pass", {"max_drop": "pass"}),
    ("drop above", {"max_drop": 0.03}, 0.86, 0.90, UP, None, "fail", {"max_drop": "fail"}),
    ("drop exactly (0.9-0.87 > 0.03 in floats)", {"max_drop": 0.03}, 0.87, 0.90, UP, None, "pass", {"max_drop": "pass"}),
    ("improvement", {"max_drop": 0.0}, 0.95, 0.90, UP, None, "pass", {"max_drop": "pass"}),
    ("max_drop 0, equal", {"max_drop": 0}, 0.9, 0.9, UP, None, "pass", {"max_drop": "pass"}),
    ("max_drop 0, tiny drop", {"max_drop": 0}, 0.8999, 0.9, UP, None, "fail", {"max_drop": "fail"}),
    # --- max_drop relative ("3%" of the baseline)
    ("3% within", {"max_drop": "3%"}, 0.78, 0.80, UP, None, "pass", {"max_drop": "pass"}),  # allowed 0.024
    ("3% above", {"max_drop": "3%"}, 0.77, 0.80, UP, None, "fail", {"max_drop": "fail"}),  # drop 0.03 > 0.024
    ("3% exactly", {"max_drop": "3%"}, 0.485, 0.5, UP, None, "pass", {"max_drop": "pass"}),  # allowed 0.015
    ("3% is not 3 points", {"max_drop": "3%"}, 0.40, 0.42, UP, None, "fail", {"max_drop": "fail"}),  # 0.02 > 0.0126
    ("0.5% decimal", {"max_drop": "0.5%"}, 0.994, 1.0, UP, None, "fail", {"max_drop": "fail"}),
    # --- lower is better: a rise is the drop
    ("latency rise within 10%", {"max_drop": "10%"}, 105.0, 100.0, DOWN, None, "pass", {"max_drop": "pass"}),
    ("latency rise above 5%", {"max_drop": "5%"}, 110.0, 100.0, DOWN, None, "fail", {"max_drop": "fail"}),
    ("latency falls (better)", {"max_drop": "5%"}, 50.0, 100.0, DOWN, None, "pass", {"max_drop": "pass"}),
    ("error_rate rise points", {"max_drop": 0.01}, 0.05, 0.02, DOWN, None, "fail", {"max_drop": "fail"}),
    ("same numbers, higher-better passes", {"max_drop": 0.01}, 0.05, 0.02, UP, None, "pass", {"max_drop": "pass"}),
    ("higher-better fall, lower-better passes", {"max_drop": 0.01}, 0.02, 0.05, DOWN, None, "pass", {"max_drop": "pass"}),
    ("higher-better fall fails", {"max_drop": 0.01}, 0.02, 0.05, UP, None, "fail", {"max_drop": "fail"}),
    # --- no baseline: the max_drop check is skipped
    ("no baseline, only max_drop", {"max_drop": 0.03}, 0.5, None, UP, None, "skipped", {"max_drop": "skipped"}),
    ("no baseline, min passes", {"min": 0.4, "max_drop": 0.03}, 0.5, None, UP, None, "pass", {"min": "pass", "max_drop": "skipped"}),
    ("no baseline, min fails", {"min": 0.6, "max_drop": 0.03}, 0.5, None, UP, None, "fail", {"min": "fail", "max_drop": "skipped"}),
    ("no baseline, relative", {"max_drop": "3%"}, 0.5, None, UP, None, "skipped", {"max_drop": "skipped"}),
    # --- mismatched baseline (fingerprints differ)
    ("mismatch warn compares (fail)", {"max_drop": 0.03}, 0.80, 0.90, UP, "warn", "fail", {"max_drop": "fail"}),
    ("mismatch warn compares (pass)", {"max_drop": 0.03}, 0.89, 0.90, UP, "warn", "pass", {"max_drop": "pass"}),
    ("mismatch skip", {"max_drop": 0.03}, 0.10, 0.90, UP, "skip", "skipped", {"max_drop": "skipped"}),
    ("mismatch skip keeps min", {"min": 0.5, "max_drop": 0.03}, 0.10, 0.90, UP, "skip", "fail", {"min": "fail", "max_drop": "skipped"}),
    ("mismatch skip, min passes", {"min": 0.05, "max_drop": 0.03}, 0.10, 0.90, UP, "skip", "pass", {"min": "pass", "max_drop": "skipped"}),
    ("mismatch fail even when better", {"max_drop": 0.03}, 0.95, 0.90, UP, "fail", "fail", {"max_drop": "fail"}),
    ("mismatch fail, min-only gate unaffected", {"min": 0.5}, 0.95, 0.90, UP, "fail", "pass", {"min": "pass"}),
    ("mismatch but no baseline value", {"max_drop": 0.03}, 0.95, None, UP, "fail", "skipped", {"max_drop": "skipped"}),
    # --- value not computed
    ("value None", {"min": 0.5}, None, 0.9, UP, None, "error", {}),
    ("value None, max_drop", {"max_drop": 0.03}, None, 0.9, UP, None, "error", {}),
    ("value None, no baseline", {"max_drop": 0.03}, None, None, DOWN, "skip", "error", {}),
]


@pytest.mark.parametrize(
    "gate, value, baseline, hib, mismatch, expected, checks", [r[1:] for r in TABLE], ids=[r[0] for r in TABLE]
)
def test_decide_table(gate, value, baseline, hib, mismatch, expected, checks):
    d = decide(Gated("retrieval", "m", hib), gate, value, baseline, mismatch=mismatch)
    assert isinstance(d, GateDecision)
    assert d.status == expected
    assert (d.stage, d.metric, d.value, d.baseline, d.higher_is_better) == ("retrieval", "m", value, baseline, hib)
    if value is None:
        assert d.delta is None
        assert [c.status for c in d.checks] == ["error"]
        assert "not computed" in d.reason
        return
    assert {c.kind: c.status for c in d.checks} == checks
    assert d.delta == (None if baseline is None else pytest.approx(value - baseline))
    for c in d.checks:
        assert c.limit == gate[c.kind]
    if expected == "fail":  # the reason names what failed, not what passed
        failing = [c for c in d.checks if c.status == "fail"]
        assert d.reason == "; ".join(c.detail for c in failing)


def test_decision_to_dict_is_json_ready():
    import json

    d = decide(Gated("retrieval", "hit_rate@5"), {"min": 0.8, "max_drop": "3%"}, 0.7, 0.9)
    out = json.loads(json.dumps(d.to_dict()))
    assert out["metric"] == "hit_rate@5" and out["status"] == "fail"
    assert out["rule"] == "min 0.8, max_drop 3%"
    assert "0.7" in out["reason"] and "min" in out["reason"]
    assert [c["kind"] for c in out["checks"]] == ["min", "max_drop"]


def test_relative_drop_detail_states_the_allowed_points():
    d = decide(Gated("retrieval", "mrr"), {"max_drop": "10%"}, 0.5, 0.6)
    assert d.status == "fail"
    assert "10%" in d.reason and "0.06" in d.reason  # 10 % of 0.6


def test_lower_is_better_detail_says_rise():
    d = decide(Gated("retrieval", "p95_latency_ms", False), {"max_drop": 10}, 130.0, 100.0)
    assert d.status == "fail"
    assert "rise" in d.reason


@pytest.mark.parametrize(
    "statuses, expected",
    [
        ([], "pass"),
        (["pass"], "pass"),
        (["skipped"], "pass"),
        (["skipped", "skipped"], "pass"),
        (["pass", "skipped"], "pass"),
        (["pass", "fail"], "fail"),
        (["fail", "skipped"], "fail"),
        (["error"], "error"),
        (["pass", "error"], "error"),
        (["fail", "error", "pass"], "error"),
    ],
)
def test_stage_status(statuses, expected):
    decisions = [GateDecision("retrieval", f"m{i}", s, 0.5, None, None, True) for i, s in enumerate(statuses)]
    assert stage_status(decisions) == expected


def test_stage_status_from_real_decisions():
    only_skipped = decide(Gated("retrieval", "mrr"), {"max_drop": 0.03}, 0.5, None)
    failing = decide(Gated("retrieval", "hit_rate@5"), {"min": 0.9}, 0.5, None)
    errored = decide(Gated("retrieval", "ndcg"), {"min": 0.9}, None, None)
    assert stage_status([only_skipped]) == "pass"
    assert stage_status([only_skipped, failing]) == "fail"
    assert stage_status([only_skipped, failing, errored]) == "error"
