"""Trend and paired gate rules (gate.core.gates.decide), and the seed's situation through gate.core.verdict."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gate.core.catalog import higher_is_better
from gate.core.gates import DEFAULT_CONFIDENCE, Comparison, Gated, GateDecision, decide
from gate.core.records import entry_from_report
from gate.core.stats import PairedResult
from gate.core.verdict import CompareWith, decide_gates

TREND = {"trend": {"window": 7, "max_drop": 0.03}}
TREND_PCT = {"trend": {"window": 7, "max_drop": "3%"}}
DROP = {"max_drop": 0.03}


def paired(mean_drop: float, p: float, n: int = 40) -> PairedResult:
    return PairedResult(n=n, mean_drop=mean_drop, p_value=p, changed=n // 2)


def check(d: GateDecision, kind: str):  # type: ignore[no-untyped-def]
    (c,) = [c for c in d.checks if c.kind == kind]
    return c


# --------------------------------------------------------------------------- trend: difference of means


# (id, gate, value, trend reference, higher_is_better, status, method)
TREND_TABLE = [
    ("no history", TREND, 0.80, None, True, "skipped", ""),
    ("history without the metric", TREND, 0.80, Comparison(None), True, "skipped", ""),
    ("drop above limit", TREND, 0.81, Comparison(0.85, runs=7), True, "fail", "difference of means"),
    ("drop below limit", TREND, 0.83, Comparison(0.85, runs=7), True, "pass", "difference of means"),
    ("drop exactly at limit", TREND, 0.82, Comparison(0.85, runs=7), True, "pass", "difference of means"),
    ("improvement", TREND, 0.95, Comparison(0.85, runs=7), True, "pass", "difference of means"),
    ("3% of 0.80 is 0.024: drop 0.02", TREND_PCT, 0.78, Comparison(0.80, runs=3), True, "pass", "difference of means"),
    ("3% of 0.80 is 0.024: drop 0.03", TREND_PCT, 0.77, Comparison(0.80, runs=3), True, "fail", "difference of means"),
    ("lower-is-better rose 0.04", TREND, 0.14, Comparison(0.10, runs=7), False, "fail", "difference of means"),
    ("lower-is-better rose 0.02", TREND, 0.12, Comparison(0.10, runs=7), False, "pass", "difference of means"),
    ("lower-is-better fell 0.08", TREND, 0.02, Comparison(0.10, runs=7), False, "pass", "difference of means"),
    ("paired evidence over no cases falls back", TREND, 0.81, Comparison(0.85, paired(0.0, 1.0, n=0), runs=7), True, "fail",
     "difference of means"),
]


@pytest.mark.parametrize(("gate", "value", "trend", "hib", "status", "method"), [r[1:] for r in TREND_TABLE],
                         ids=[r[0] for r in TREND_TABLE])
def test_trend_by_difference_of_means(gate, value, trend, hib, status, method):
    d = decide(Gated("generation", "m", hib), gate, value, None, trend=trend)
    assert d.status == status
    assert check(d, "trend").status == status
    assert d.method == method
    assert d.to_dict()["method"] == method


def test_trend_detail_names_the_window_and_the_numbers():
    d = decide(Gated("generation", "faithfulness"), TREND, 0.81, None, trend=Comparison(0.85, runs=7))
    c = check(d, "trend")
    assert "mean of last 7 runs" in c.detail and "0.85" in c.detail and "0.04" in c.detail
    one = decide(Gated("generation", "faithfulness"), TREND, 0.81, None, trend=Comparison(0.85, runs=1))
    assert "mean of last 1 run " in check(one, "trend").detail
    skipped = decide(Gated("generation", "faithfulness"), TREND, 0.81, None, trend=None)
    assert "no history" in check(skipped, "trend").detail


# --------------------------------------------------------------------------- paired evidence, for max_drop and trend


# (id, gate extra, value, reference value, paired evidence, higher_is_better, status)
PAIRED_TABLE = [
    ("above limit, not significant", {}, 0.80, 0.85, paired(0.05, 0.20), True, "pass"),
    ("above limit, significant", {}, 0.80, 0.85, paired(0.05, 0.001), True, "fail"),
    ("significant, below limit", {}, 0.84, 0.85, paired(0.02, 0.0005), True, "pass"),
    ("at the p floor, at the limit", {}, 0.82, 0.85, paired(0.03, 1 / 2001), True, "pass"),
    ("borderline p at default 0.99", {}, 0.80, 0.85, paired(0.05, 0.05), True, "pass"),
    ("borderline p at confidence 0.9", {"confidence": 0.9}, 0.80, 0.85, paired(0.05, 0.05), True, "fail"),
    ("p just under 1 - 0.99", {}, 0.80, 0.85, paired(0.05, 0.0099), True, "fail"),
    ("p equal to 1 - confidence is not significant", {"confidence": 0.9}, 0.80, 0.85, paired(0.05, 0.1), True, "pass"),
    # means say 0.15 down, but the cases both runs judged did not move: the pairs decide
    ("means disagree, pairs unchanged", {}, 0.70, 0.85, paired(0.0, 1.0), True, "pass"),
    # means say fine, but the paired cases dropped significantly
    ("means fine, pairs dropped", {}, 0.85, 0.85, paired(0.06, 0.001), True, "fail"),
    ("lower-is-better rose on the pairs", {}, 0.16, 0.10, paired(0.06, 0.001), False, "fail"),
    ("lower-is-better fell on the pairs", {}, 0.04, 0.10, paired(-0.06, 1.0), False, "pass"),
]


@pytest.mark.parametrize("kind", ["max_drop", "trend"])
@pytest.mark.parametrize(("extra", "value", "ref", "evidence", "hib", "status"), [r[1:] for r in PAIRED_TABLE],
                         ids=[r[0] for r in PAIRED_TABLE])
def test_paired_rules(kind, extra, value, ref, evidence, hib, status):
    if kind == "max_drop":
        gate = {**DROP, **extra}
        d = decide(Gated("generation", "m", hib), gate, value, Comparison(ref, evidence))
    else:
        gate = {**TREND, **extra}
        d = decide(Gated("generation", "m", hib), gate, value, None, trend=Comparison(ref, evidence, runs=7))
    assert d.status == status
    assert check(d, kind).status == status
    assert d.method == "paired bootstrap"
    c = check(d, kind)
    assert c.detail.startswith(f"paired test over {evidence.n} cases")
    assert ("not significant" in c.detail) is (not evidence.significant(float(extra.get("confidence", DEFAULT_CONFIDENCE))))


def test_paired_detail_says_rise_for_lower_is_better_and_reports_p():
    d = decide(Gated("robustness", "false_rejection_rate", False), DROP, 0.16, Comparison(0.10, paired(0.06, 0.001)))
    c = check(d, "max_drop")
    assert "rise 0.06" in c.detail and "p = 0.001" in c.detail and "significant at 0.99" in c.detail
    assert "vs baseline" in c.detail


def test_relative_limit_with_paired_evidence_uses_the_reference_value():
    # 3% of 0.80 = 0.024: a significant 0.03 mean drop fails, a significant 0.02 passes
    fail = decide(Gated("generation", "m"), TREND_PCT, 0.77, None, trend=Comparison(0.80, paired(0.03, 0.001), runs=7))
    ok = decide(Gated("generation", "m"), TREND_PCT, 0.78, None, trend=Comparison(0.80, paired(0.02, 0.001), runs=7))
    assert (fail.status, ok.status) == ("fail", "pass")
    assert "3% = 0.024" in check(fail, "trend").detail


def test_mixed_evidence_method_and_both_checks():
    gate = {"max_drop": 0.03, "trend": {"window": 7, "max_drop": 0.03}}
    d = decide(Gated("generation", "m"), gate, 0.84, Comparison(0.85), trend=Comparison(0.85, paired(0.01, 0.3), runs=7))
    assert [c.kind for c in d.checks] == ["max_drop", "trend"]
    assert d.status == "pass"
    assert d.method == "difference of means, paired bootstrap"  # each check says how it was decided
    # one failing check fails the gate
    d = decide(Gated("generation", "m"), gate, 0.80, Comparison(0.85), trend=Comparison(0.85, paired(0.0, 1.0), runs=7))
    assert (check(d, "max_drop").status, check(d, "trend").status, d.status) == ("fail", "pass", "fail")


def test_missing_value_is_an_error_not_a_pass():
    d = decide(Gated("generation", "m"), TREND, None, None, trend=Comparison(0.85, paired(0.0, 1.0), runs=7))
    assert d.status == "error"
    assert d.method == ""


# --------------------------------------------------------------------------- the seed's situation, end to end


N_CASES = 40


def base_scores(metric: str = "faithfulness") -> dict[str, float]:
    rng = random.Random(7)
    if not higher_is_better(metric):
        return {f"q{i:02d}": round(rng.uniform(0.0, 0.3), 3) for i in range(N_CASES)}
    return {f"q{i:02d}": round(rng.uniform(0.7, 1.0), 3) for i in range(N_CASES)}


def stage_of(scores: dict[str, float], metric: str = "faithfulness") -> dict[str, Any]:
    return {
        "status": "pass",
        "metrics": {metric: sum(scores.values()) / len(scores)},
        "samples": [{"id": cid, "metrics": {metric: v}, "errors": {}, "error": None} for cid, v in scores.items()],
        "not_evaluated": {},
        "warnings": [],
    }


def history_of(scores: dict[str, float], metric: str = "faithfulness", runs: int = 7, stage: str = "generation") -> list[dict[str, Any]]:
    """Default-branch runs through the real entry_from_report; each rejudged 3 changed cases with a little noise."""
    rng = random.Random(99)
    entries = []
    for r in range(runs):
        run_scores = dict(scores)
        for cid in rng.sample(sorted(scores), 3):
            run_scores[cid] = min(1.0, max(0.0, run_scores[cid] + rng.gauss(0.0, 0.03)))
        report = {"verdict": "pass", "run": {"commit": f"c{r}", "created_at": f"2026-11-0{r + 1}T00:00:00+00:00"},
                  "fingerprints": {}, "stages": {stage: stage_of(run_scores, metric)}}
        entries.append(entry_from_report(report, branch="main"))
    return entries


def gen_decision(current: dict[str, float], history: list[dict[str, Any]], metric: str = "faithfulness",
                 gate: dict[str, Any] | None = None, stage: str = "generation") -> GateDecision:
    gates = {metric: gate or TREND}
    (d,) = decide_gates(stage, stage_of(current, metric), gates, CompareWith(history=history))
    return d


def test_seed_unchanged_scores_pass_by_paired_bootstrap():
    scores = base_scores()
    d = gen_decision(scores, history_of(scores))
    assert d.status == "pass"
    assert d.method == "paired bootstrap"
    assert "paired test over 40 cases" in check(d, "trend").detail
    assert "mean of last 7 runs" in check(d, "trend").detail


def test_seed_a_third_of_cases_dropping_by_015_fails():
    scores = base_scores()
    hit = sorted(scores)[::3]  # 14 of 40
    current = {cid: (v - 0.15 if cid in hit else v) for cid, v in scores.items()}
    d = gen_decision(current, history_of(scores))
    assert d.status == "fail"
    assert d.method == "paired bootstrap"
    assert "significant" in check(d, "trend").detail and "not significant" not in check(d, "trend").detail


def test_seed_noise_on_a_few_cases_passes():
    scores = base_scores()
    rng = random.Random(3)
    current = dict(scores)
    for cid in rng.sample(sorted(scores), 4):
        current[cid] = min(1.0, max(0.0, current[cid] + rng.choice([-0.05, 0.05])))
    d = gen_decision(current, history_of(scores))
    assert d.status == "pass"
    assert d.method == "paired bootstrap"


def test_seed_noise_that_means_alone_would_flag_passes_with_pairs():
    """Two cases judged much lower: the mean falls by more than the limit, but two cases out of 40
    are not significant at 0.99, so the paired test does not call it a regression."""
    scores = base_scores()
    current = dict(scores)
    for cid in sorted(scores)[:2]:
        current[cid] = max(0.0, current[cid] - 0.7)  # mean drop 0.035 > 0.03
    history = history_of(scores)
    d = gen_decision(current, history)
    assert d.status == "pass" and d.method == "paired bootstrap"
    # the same figures without per-case scores in the history: difference of means, and it fails
    bare = [{**e, "stages": {"generation": {"metrics": e["stages"]["generation"]["metrics"]}}} for e in history]
    d = gen_decision(current, bare)
    assert d.status == "fail" and d.method == "difference of means"


@pytest.mark.parametrize(("stage", "metric", "lower_is_better"),
                         [("generation", "faithfulness", False), ("robustness", "false_rejection_rate", True)])
def test_seed_direction_end_to_end(stage, metric, lower_is_better):
    """The paired test takes the metric's direction: for a lower-is-better metric a rise fails."""
    assert higher_is_better(metric) is not lower_is_better
    scores = base_scores(metric)
    hit = sorted(scores)[::3]
    up = {cid: (v + 0.15 if cid in hit else v) for cid, v in scores.items()}
    down = {cid: (v - 0.15 if cid in hit else v) for cid, v in scores.items()}
    worse, better = (up, down) if lower_is_better else (down, up)
    history = history_of(scores, metric, stage=stage)
    assert gen_decision(worse, history, metric, stage=stage).status == "fail"
    assert gen_decision(better, history, metric, stage=stage).status == "pass"
    assert gen_decision(better, history, metric, stage=stage).method == "paired bootstrap"


def test_seed_without_history_the_trend_is_skipped():
    d = gen_decision(base_scores(), [])
    assert d.status == "skipped"
    assert check(d, "trend").status == "skipped"


def test_seed_window_uses_only_the_last_n_entries():
    scores = base_scores()
    old_good = {cid: min(1.0, v + 0.2) for cid, v in scores.items()}
    # 5 old runs far better, then 3 runs at today's level: window 3 sees no drop, window 8 does
    history = history_of(old_good, runs=5) + history_of(scores, runs=3)
    assert gen_decision(scores, history, gate={"trend": {"window": 3, "max_drop": 0.03}}).status == "pass"
    assert gen_decision(scores, history, gate={"trend": {"window": 8, "max_drop": 0.03}}).status == "fail"


def test_seed_baseline_max_drop_uses_paired_test_too():
    scores = base_scores()
    hit = sorted(scores)[::3]
    current = {cid: (v - 0.15 if cid in hit else v) for cid, v in scores.items()}
    base_stage = {"metrics": stage_of(scores)["metrics"], "samples": [{"id": cid, "metrics": {"faithfulness": v}} for cid, v in scores.items()]}
    (d,) = decide_gates("generation", stage_of(current), {"faithfulness": DROP}, CompareWith(baseline=base_stage))
    assert d.status == "fail" and d.method == "paired bootstrap"
    (d,) = decide_gates("generation", stage_of(scores), {"faithfulness": DROP}, CompareWith(baseline=base_stage))
    assert d.status == "pass" and d.method == "paired bootstrap"
