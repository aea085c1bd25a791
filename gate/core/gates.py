"""Gate decisions: a pure function of (gate, value, baseline, direction).

A gate holds any of ``min``/``max`` (absolute) and ``max_drop`` (against the baseline,
absolute points or "3%" relative to the baseline). "Drop" means "got worse": for a
lower-is-better metric (latency, error rate) it is a rise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gate.core.pairs import MIN_PAIRS, case_drops
from gate.core.report import GateRecord, GroupGate, MetricPairs, Status, WindowMetric
from gate.core.stats import PairedResult

EPS = 1e-9  # float noise allowed at a threshold: 0.88 >= 0.88 must hold after any arithmetic


@dataclass(frozen=True)
class Check:
    kind: str  # min | max | max_drop | trend | case_drop | value
    limit: float | str
    status: Status
    detail: str
    method: str = ""  # relative checks: which comparison decided it


@dataclass(frozen=True)
class GateDecision:
    stage: str
    metric: str
    status: Status
    value: float | None
    baseline: float | None
    delta: float | None
    higher_is_better: bool
    checks: list[Check] = field(default_factory=list)
    configured: str = ""  # the gate as the spec writes it (shown even when no check could run)
    groups: list[GroupGate] = field(default_factory=list)  # a per-group gate (by): each group's decision

    @property
    def rule(self) -> str:
        return self.configured or ", ".join(f"{c.kind} {c.limit}" for c in self.checks if c.kind != "value") or "-"

    @property
    def method(self) -> str:
        """Which comparison decided the relative checks: 'same-run pairs' (the reference's changed answers judged again in
        this run), 'paired bootstrap' (on stored per-case scores) or 'difference of means'."""
        methods = [c.method for c in self.checks if c.kind in ("max_drop", "trend", "case_drop") and c.method]
        return ", ".join(dict.fromkeys(methods))

    @property
    def reason(self) -> str:
        bad = [c.detail for c in self.checks if c.status in ("fail", "error")]
        return "; ".join(dict.fromkeys(bad or [c.detail for c in self.checks]))  # one reason once (min and trend may share it)

    def to_dict(self) -> GateRecord:
        """The gate as report.json holds it."""
        return {
            "stage": self.stage, "metric": self.metric, "status": self.status, "value": self.value, "baseline": self.baseline,
            "delta": self.delta, "higher_is_better": self.higher_is_better,
            "checks": [{"kind": c.kind, "limit": c.limit, "status": c.status, "detail": c.detail} for c in self.checks],
            "rule": self.rule, "reason": self.reason, "method": self.method,
            **({"groups": self.groups} if self.groups else {}),  # type: ignore[typeddict-item]
        }


def allowed_drop(limit: float | str, baseline: float) -> float:
    """max_drop as absolute points: 0.03 stays 0.03, "3%" is 3 % of the baseline's size."""
    if isinstance(limit, str):
        return float(limit.rstrip("%")) / 100.0 * abs(baseline)
    return float(limit)


def fmt(x: float) -> str:
    return f"{x:.4g}"


@dataclass(frozen=True)
class Comparison:
    """What a relative check compares with: a plain value, and per-case evidence when there is some.

    ``value`` is the baseline value (for max_drop) or the mean of the history window (for
    trend); ``paired`` is the paired test of this run's per-case scores against the
    reference's per-case scores, when both sides have them.
    """

    value: float | None
    paired: PairedResult | None = None
    runs: int = 1  # history entries behind ``value`` (trend)
    pairs: MetricPairs | None = None  # same-run pairs (gate.core.pairs): the reference's changed answers judged again now
    label: str = ""  # the reference run in words, when it is one run
    detectable: float | None = None  # the smallest drop on every case these pairs would detect
    note: str = ""  # why the stored scores were compared (the reference kept no answers)
    window: WindowMetric | None = None  # a traces window against its reference window(s): the unpaired, anchored test


DEFAULT_CONFIDENCE = 0.99
SAME_RUN = "same-run pairs"  # the method of a check decided on pairs judged on both sides in this run


@dataclass(frozen=True)
class Gated:
    """The metric a gate is on: its stage, its name, and which way is better."""

    stage: str
    metric: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class Relative:
    """One relative check (max_drop or trend) to decide: its limit, what it compares with in words, and the gate's
    rules for evidence."""

    kind: str  # max_drop | trend
    limit: float | str
    against: str  # "baseline", "mean of last 7 runs"
    higher_is_better: bool
    confidence: float
    min_pairs: int

    @property
    def word(self) -> str:
        return "drop" if self.higher_is_better else "rise"

    def limit_text(self, allowed: float) -> str:
        return f"{self.limit} = {fmt(allowed)}" if isinstance(self.limit, str) else f"{self.limit}"


def _relative_check(rel: Relative, value: float, ref: Comparison) -> Check:
    assert ref.value is not None
    kind, limit, against, word = rel.kind, rel.limit, rel.against, rel.word
    if not math.isfinite(ref.value):
        return Check(kind, limit, "error", f"the {against} value is not a number ({ref.value}): the reference is broken")
    allowed = allowed_drop(limit, ref.value)
    if ref.window is not None:
        return _window_check(rel, ref, allowed)
    if ref.pairs is not None:
        return _same_run_check(rel, ref, allowed)
    if ref.paired is not None and ref.paired.n > 0:
        p = ref.paired
        if 0 < p.changed < rel.min_pairs:
            return Check(kind, limit, "skipped", f"insufficient evidence: {p.changed} case(s) differ from {against} in stored scores, "
                                                 f"fewer than min_pairs {rel.min_pairs}" + (f" ({ref.note})" if ref.note else ""),
                         "paired bootstrap")
        significant = p.significant(rel.confidence)
        bad = p.mean_drop > allowed + EPS and significant
        detail = (
            f"paired test over {p.n} cases vs {against}: mean per-case {word} {fmt(max(p.mean_drop, 0.0))} "
            f"({'above' if p.mean_drop > allowed + EPS else 'within'} {rel.limit_text(allowed)}), p = {p.p_value:.3g} "
            f"({'significant' if significant else 'not significant'} at {rel.confidence:g})"
        )
        return Check(kind, limit, "fail" if bad else "pass", detail + (f"; {ref.note}" if ref.note else ""), "paired bootstrap")
    worse = (ref.value - value) if rel.higher_is_better else (value - ref.value)
    ok = worse <= allowed + EPS
    detail = f"{word} {fmt(max(worse, 0.0))} vs {against} {fmt(ref.value)} ({'within' if ok else 'above'} {rel.limit_text(allowed)})"
    return Check(kind, limit, "pass" if ok else "fail", detail, "difference of means")


def _same_run_check(rel: Relative, ref: Comparison, allowed: float) -> Check:
    """The paired test on same-run pairs: every unchanged pair a delta of exactly 0, every changed pair judged on both
    sides in this run. Fewer than ``min_pairs`` changed pairs is no evidence either way: skipped, and said."""
    assert ref.pairs is not None and ref.paired is not None
    kind, limit, word = rel.kind, rel.limit, rel.word
    mp, p = ref.pairs, ref.paired
    judged = mp["changed"] - mp["errored"]
    errored = f"; {mp['errored']} changed pair(s) could not be judged and are left out" if mp["errored"] else ""
    if mp["changed"] == 0:
        return Check(kind, limit, "pass", f"no judged answer changed since {ref.label} ({mp['pairs']} pairs): nothing can have dropped",
                     SAME_RUN)
    if judged < rel.min_pairs:
        return Check(kind, limit, "skipped", f"insufficient evidence: {judged} changed pair(s) vs {ref.label}, fewer than min_pairs "
                                             f"{rel.min_pairs} ({mp['pairs']} pairs in all){errored}", SAME_RUN)
    significant = p.significant(rel.confidence)
    above = p.mean_drop > allowed + EPS
    detail = (f"paired test over {p.n} cases vs {ref.label} ({judged} changed, both sides judged in this run): mean per-case {word} "
              f"{fmt(max(p.mean_drop, 0.0))} ({'above' if above else 'within'} {rel.limit_text(allowed)}), p = {p.p_value:.3g} "
              f"({'significant' if significant else 'not significant'} at {rel.confidence:g})")
    if ref.detectable is not None:
        detail += f"; smallest detectable {word} {fmt(ref.detectable)}"
    return Check(kind, limit, "fail" if above and significant else "pass", detail + errored, SAME_RUN)


TWO_SAMPLE = "two-sample test"  # the method of a check decided on two windows of traces (gate.core.windows)


def _window_check(rel: Relative, ref: Comparison, allowed: float) -> Check:
    """Two windows of traces: fails when the drop (judge drift cancelled) is above the limit and significant."""
    w = ref.window
    assert w is not None
    kind, limit, word = rel.kind, rel.limit, rel.word
    method = TWO_SAMPLE if w["drift"] is None else f"{TWO_SAMPLE}, anchored"
    if "insufficient" in w or w["delta"] is None or w["p_value"] is None:
        return Check(kind, limit, "skipped", f"insufficient evidence: {w.get('insufficient') or 'nothing to compare'}", method)
    drop = -w["delta"] if rel.higher_is_better else w["delta"]
    significant = w["p_value"] < 1.0 - rel.confidence
    above = drop > allowed + EPS
    then = f"{fmt(w['reference_mean'] or 0.0)} as judged then"
    if w["drift"] is not None:
        then += f", {fmt(w['corrected'] or 0.0)} as judged today (judge drift {w['drift']:+.3f} on {w['anchor_n']} anchor traces)"
    detail = (f"this window ({w['n']} traces, {fmt(w['mean'] or 0.0)}) vs {ref.label} ({w['reference_n']} traces, {then}): "
              f"{word} {fmt(max(drop, 0.0))} ({'above' if above else 'within'} {rel.limit_text(allowed)}), p = {w['p_value']:.3g} "
              f"({'significant' if significant else 'not significant'} at {rel.confidence:g})")
    return Check(kind, limit, "fail" if above and significant else "pass", detail, method)


def _case_drop_check(limit: float, pairs_from: Comparison | None, higher_is_better: bool) -> Check:
    """case_drop: no changed case may fall by more than ``limit`` (its two sides judged twice each, to confirm)."""
    if pairs_from is None or pairs_from.pairs is None:
        return Check("case_drop", limit, "skipped", "needs a reference run that kept its answers (to judge them again in this run)")
    rows = case_drops(pairs_from.pairs, higher_is_better)
    over = [r for r in rows if r[1] > limit + EPS]
    if not over:
        worst = f"largest {fmt(rows[0][1])}" if rows else "no changed case"
        return Check("case_drop", limit, "pass", f"no case fell more than {limit} vs {pairs_from.label} ({worst})", SAME_RUN)
    cid, drop, ref, cur, sure = over[0]
    detail = (f"{len(over)} case(s) fell more than {limit} vs {pairs_from.label}; worst {cid}: {fmt(ref)} → {fmt(cur)} "
              f"({'both sides judged twice' if sure else 'judged once: the confirming judging failed'})")
    return Check("case_drop", limit, "fail" if any(r[4] for r in over) else "error", detail, SAME_RUN)


def decide(on: Gated, gate: Mapping[str, Any], value: float | None, baseline: float | Comparison | None = None,
           trend: Comparison | None = None, mismatch: str | None = None) -> GateDecision:
    """Decide one gate.

    ``baseline`` is the baseline's value (or a Comparison with per-case evidence), ``trend`` the history window's mean
    (and evidence); ``mismatch`` is the baseline policy when fingerprints differ (warn/skip/fail), else None. With
    per-case evidence a relative check fails only when the mean per-case drop is above the limit AND the paired test
    is significant at ``gate["confidence"]`` (default 0.99).
    """
    base = baseline if isinstance(baseline, Comparison) else Comparison(baseline)
    delta = None if value is None or base.value is None else value - base.value
    if value is None or not math.isfinite(value):
        why = "metric was not computed (every case errored or none applies)" if value is None else f"metric value is {value}, not a number"
        check = Check("value", "-", "error", why)
        return GateDecision(on.stage, on.metric, "error", None, base.value, None, on.higher_is_better, [check], configured_rule(gate))
    checks = _absolute_checks(gate, value)
    confidence, min_pairs = float(gate.get("confidence", DEFAULT_CONFIDENCE)), int(gate.get("min_pairs", MIN_PAIRS))

    def relative(kind: str, limit: float | str, against: str) -> Relative:
        return Relative(kind, limit, against, on.higher_is_better, confidence, min_pairs)

    if "max_drop" in gate:
        limit = gate["max_drop"]
        if base.value is None:
            checks.append(Check("max_drop", limit, "skipped", base.note or "no baseline value to compare with"))
        elif mismatch == "skip" and base.pairs is None:
            checks.append(Check("max_drop", limit, "skipped", "baseline made from a different golden set or spec"))
        elif mismatch == "fail" and base.pairs is None:
            checks.append(Check("max_drop", limit, "fail", "baseline made from a different golden set or spec"))
        else:
            checks.append(_relative_check(relative("max_drop", limit, "baseline"), value, base))
    if "trend" in gate:
        limit = gate["trend"]["max_drop"]
        if trend is None or trend.value is None:
            checks.append(Check("trend", limit, "skipped", (trend.note if trend else "") or "no history entries to compare with yet"))
        else:
            against = f"mean of last {trend.runs} run{'s' if trend.runs != 1 else ''}"
            checks.append(_relative_check(relative("trend", limit, against), value, trend))
    if "case_drop" in gate:
        source = base if base.pairs is not None else trend if trend is not None and trend.pairs is not None else None
        checks.append(_case_drop_check(float(gate["case_drop"]), source, on.higher_is_better))
    return GateDecision(on.stage, on.metric, _status(checks), value, base.value, delta, on.higher_is_better, checks, configured_rule(gate))


def _status(checks: Iterable[Check]) -> Status:
    statuses = {c.status for c in checks}
    return "error" if "error" in statuses else "fail" if "fail" in statuses else "pass" if "pass" in statuses else "skipped"


SHARE_KEYS = ("share_below", "share_above")
SHOWN_CASES = 10  # case ids a share check names


def share_check(gate: Mapping[str, Any], values: Mapping[str, float], judged: bool) -> Check | None:
    """A share gate (``share_below: {value, max}``, ``share_above``): the share of scored cases (``values``: case id ->
    its value) on the wrong side of ``value`` must be at most ``max``; the cases on the wrong side are named. ``judged``:
    the values are a judge's over a sample, so a ``max`` smaller than one case's share is refused (it would mean "no case
    at all", which max 0 says). None when the gate has no share key."""
    key = next((k for k in SHARE_KEYS if k in gate), None)
    if key is None:
        return None
    spec = gate[key]
    value, limit, n = float(spec["value"]), float(spec["max"]), len(values)
    if n == 0:
        return Check(key, limit, "skipped", "no scored case to count")
    if judged and 0 < limit < 1 / n:
        need = math.ceil(1 / limit)
        return Check(key, limit, "error", f"max {limit:.2%} over {n} judged cases means no case at all (one case is {1 / n:.1%} of "
                                          f"them): judge at least {need} cases (sample.size), or write max: 0 for none")
    side = "below" if key == "share_below" else "above"
    wrong = [cid for cid, v in values.items() if (v < value - EPS if side == "below" else v > value + EPS)]  # in case order
    share = len(wrong) / n
    ok = share <= limit + EPS
    named = f": {', '.join(wrong[:SHOWN_CASES])}{' ...' if len(wrong) > SHOWN_CASES else ''}" if wrong else ""
    detail = (f"{len(wrong)} of {n} {'judged ' if judged else ''}cases ({share:.1%}) {side} {fmt(value)} "
              f"({'within' if ok else 'more than'} max {limit:.1%}){named}")
    return Check(key, limit, "pass" if ok else "fail", detail)


def decline_check(runs: int, series: Sequence[float], higher_is_better: bool) -> Check:
    """``consecutive_decline: N``: fails when the metric got worse in each of the last N runs (``series``: the earlier
    runs' values, oldest first, then this run's); skipped until there are N earlier runs to compare with."""
    if len(series) < runs + 1:
        earlier = len(series) - 1
        return Check("consecutive_decline", runs, "skipped", f"needs {runs} earlier run{'s' if runs != 1 else ''} in the history, "
                                                            f"has {earlier}")
    last = list(series[-(runs + 1):])
    worse = [(b < a - EPS) if higher_is_better else (b > a + EPS) for a, b in zip(last, last[1:], strict=False)]
    path = " → ".join(fmt(v) for v in last)
    if all(worse):
        return Check("consecutive_decline", runs, "fail", f"worse in each of the last {runs} runs: {path}")
    return Check("consecutive_decline", runs, "pass", f"not worse in each of the last {runs} runs: {path}")


def with_check(decision: GateDecision, check: Check) -> GateDecision:
    """The decision with one more check, its status recomputed."""
    checks = [*decision.checks, check]
    return replace(decision, checks=checks, status=_status(checks))


def _absolute_checks(gate: Mapping[str, Any], value: float) -> list[Check]:
    """min and max."""
    checks: list[Check] = []
    if "min" in gate:
        ok = value >= gate["min"] - EPS
        checks.append(Check("min", gate["min"], "pass" if ok else "fail", f"{fmt(value)} {'>=' if ok else '<'} min {fmt(gate['min'])}"))
    if "max" in gate:
        ok = value <= gate["max"] + EPS
        checks.append(Check("max", gate["max"], "pass" if ok else "fail", f"{fmt(value)} {'<=' if ok else '>'} max {fmt(gate['max'])}"))
    return checks


def configured_rule(gate: Mapping[str, Any]) -> str:
    """The gate's rule in words, from the spec: "min 0.8, max_drop 0.02, trend 0.03"."""
    parts = [f"{kind} {gate[kind]}" for kind in ("min", "max", "max_drop") if kind in gate]
    parts += [f"{kind} {gate[kind]['value']} max {gate[kind]['max']:.1%}" for kind in SHARE_KEYS if kind in gate]
    if "by" in gate:
        parts.append(f"by {gate['by']}")
    if "trend" in gate:
        parts.append(f"trend {gate['trend']['max_drop']}")
    if "case_drop" in gate:
        parts.append(f"case_drop {gate['case_drop']}")
    if "consecutive_decline" in gate:
        parts.append(f"consecutive_decline {gate['consecutive_decline']}")
    return ", ".join(parts)


def skipped(stage: str, metric: str, gate: Mapping[str, Any], reason: str, higher_is_better: bool = True) -> GateDecision:
    """A gate that cannot be decided in this run (its metric was not evaluated: no judge, no key): skipped with the
    reason, never passed or failed."""
    limits = {"trend": lambda g: g["max_drop"], "share_below": lambda g: g["max"], "share_above": lambda g: g["max"]}
    checks = [Check(kind, limits[kind](gate[kind]) if kind in limits else gate[kind], "skipped", reason)
              for kind in ("min", "max", "max_drop", "trend", "case_drop", *SHARE_KEYS, "consecutive_decline") if kind in gate]
    return GateDecision(stage, metric, "skipped", None, None, None, higher_is_better, checks)


def stage_status(decisions: Iterable[GateDecision]) -> Status:
    """error > fail > pass; a stage whose gates were all skipped (or has none) passes."""
    statuses = {d.status for d in decisions}
    if "error" in statuses:
        return "error"
    if "fail" in statuses:
        return "fail"
    return "pass"
