"""Gate decisions: a pure function of (gate, value, baseline, direction).

A gate holds any of ``min``/``max`` (absolute) and ``max_drop`` (against the baseline,
absolute points or "3%" relative to the baseline). "Drop" means "got worse": for a
lower-is-better metric (latency, error rate) it is a rise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.core.report import GateRecord, Status
from gate.core.stats import PairedResult

EPS = 1e-9  # float noise allowed at a threshold: 0.88 >= 0.88 must hold after any arithmetic

# How to treat max_drop when the baseline's fingerprints differ from this run's.
MISMATCH_POLICIES = ("warn", "skip", "fail")


@dataclass(frozen=True)
class Check:
    kind: str  # min | max | max_drop | trend | value
    limit: float | str
    status: Status
    detail: str


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

    @property
    def rule(self) -> str:
        return self.configured or ", ".join(f"{c.kind} {c.limit}" for c in self.checks if c.kind != "value") or "-"

    @property
    def method(self) -> str:
        """Which test decided the relative checks: 'paired bootstrap' or 'difference of means'."""
        rel = [c for c in self.checks if c.kind in ("max_drop", "trend") and c.status != "skipped"]
        if not rel:
            return ""
        return "paired bootstrap" if any(c.detail.startswith("paired test") for c in rel) else "difference of means"

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
        }


def allowed_drop(limit: float | str, baseline: float) -> float:
    """max_drop as absolute points: 0.03 stays 0.03, "3%" is 3 % of the baseline's size."""
    if isinstance(limit, str):
        return float(limit.rstrip("%")) / 100.0 * abs(baseline)
    return float(limit)


def fmt(x: float) -> str:
    return f"{x:.4g}"


@dataclass(frozen=True)
class Reference:
    """What a relative check compares with: a plain value, and per-case evidence when there is some.

    ``value`` is the baseline value (for max_drop) or the mean of the history window (for
    trend); ``paired`` is the paired test of this run's per-case scores against the
    reference's per-case scores, when both sides have them.
    """

    value: float | None
    paired: PairedResult | None = None
    runs: int = 1  # history entries behind ``value`` (trend)


DEFAULT_CONFIDENCE = 0.99


def _relative_check(
    kind: str, limit: float | str, value: float, ref: Reference, higher_is_better: bool, confidence: float, against: str
) -> Check:
    assert ref.value is not None
    allowed = allowed_drop(limit, ref.value)
    word = "drop" if higher_is_better else "rise"
    limit_text = f"{limit} = {fmt(allowed)}" if isinstance(limit, str) else f"{limit}"
    if ref.paired is not None and ref.paired.n > 0:
        p = ref.paired
        significant = p.significant(confidence)
        bad = p.mean_drop > allowed + EPS and significant
        detail = (
            f"paired test over {p.n} cases vs {against}: mean per-case {word} {fmt(max(p.mean_drop, 0.0))} "
            f"({'above' if p.mean_drop > allowed + EPS else 'within'} {limit_text}), p = {p.p_value:.3g} "
            f"({'significant' if significant else 'not significant'} at {confidence:g})"
        )
        return Check(kind, limit, "fail" if bad else "pass", detail)
    worse = (ref.value - value) if higher_is_better else (value - ref.value)
    ok = worse <= allowed + EPS
    detail = f"{word} {fmt(max(worse, 0.0))} vs {against} {fmt(ref.value)} ({'within' if ok else 'above'} {limit_text})"
    return Check(kind, limit, "pass" if ok else "fail", detail)


def decide(
    stage: str,
    metric: str,
    gate: Mapping[str, Any],
    value: float | None,
    baseline: float | Reference | None,
    higher_is_better: bool = True,
    mismatch: str | None = None,
    trend: Reference | None = None,
) -> GateDecision:
    """Decide one gate.

    ``baseline`` is the baseline's value (or a Reference with per-case evidence), ``trend`` the
    history window's mean (and evidence); ``mismatch`` is the baseline policy when
    fingerprints differ (warn/skip/fail), else None. With per-case evidence a relative check
    fails only when the mean per-case drop is above the limit AND the paired test is
    significant at ``gate["confidence"]`` (default 0.99).
    """
    base = baseline if isinstance(baseline, Reference) else Reference(baseline)
    delta = None if value is None or base.value is None else value - base.value
    if value is None:
        check = Check("value", "-", "error", "metric was not computed (every case errored or none applies)")
        return GateDecision(stage, metric, "error", None, base.value, None, higher_is_better, [check], configured_rule(gate))
    confidence = float(gate.get("confidence", DEFAULT_CONFIDENCE))
    checks: list[Check] = []
    if "min" in gate:
        ok = value >= gate["min"] - EPS
        checks.append(Check("min", gate["min"], "pass" if ok else "fail", f"{fmt(value)} {'>=' if ok else '<'} min {fmt(gate['min'])}"))
    if "max" in gate:
        ok = value <= gate["max"] + EPS
        checks.append(Check("max", gate["max"], "pass" if ok else "fail", f"{fmt(value)} {'<=' if ok else '>'} max {fmt(gate['max'])}"))
    if "max_drop" in gate:
        limit = gate["max_drop"]
        if base.value is None:
            checks.append(Check("max_drop", limit, "skipped", "no baseline value to compare with"))
        elif mismatch == "skip":
            checks.append(Check("max_drop", limit, "skipped", "baseline made from a different golden set or spec"))
        elif mismatch == "fail":
            checks.append(Check("max_drop", limit, "fail", "baseline made from a different golden set or spec"))
        else:
            checks.append(_relative_check("max_drop", limit, value, base, higher_is_better, confidence, "baseline"))
    if "trend" in gate:
        spec = gate["trend"]
        limit = spec["max_drop"]
        if trend is None or trend.value is None:
            checks.append(Check("trend", limit, "skipped", "no history entries to compare with yet"))
        else:
            against = f"mean of last {trend.runs} run{'s' if trend.runs != 1 else ''}"
            checks.append(_relative_check("trend", limit, value, trend, higher_is_better, confidence, against))
    statuses = {c.status for c in checks}
    status: Status = "fail" if "fail" in statuses else "pass" if "pass" in statuses else "skipped"
    return GateDecision(stage, metric, status, value, base.value, delta, higher_is_better, checks)


def configured_rule(gate: Mapping[str, Any]) -> str:
    """The gate's rule in words, from the spec: "min 0.8, max_drop 0.02, trend 0.03"."""
    parts = [f"{kind} {gate[kind]}" for kind in ("min", "max", "max_drop") if kind in gate]
    if "trend" in gate:
        parts.append(f"trend {gate['trend']['max_drop']}")
    return ", ".join(parts)


def skipped(stage: str, metric: str, gate: Mapping[str, Any], reason: str, higher_is_better: bool = True) -> GateDecision:
    """A gate that cannot be decided in this run (its metric was not evaluated: no judge, no key): skipped with the
    reason, never passed or failed."""
    checks = [Check(kind, gate[kind] if kind != "trend" else gate[kind]["max_drop"], "skipped", reason)
              for kind in ("min", "max", "max_drop", "trend") if kind in gate]
    return GateDecision(stage, metric, "skipped", None, None, None, higher_is_better, checks)


def stage_status(decisions: Iterable[GateDecision]) -> Status:
    """error > fail > pass; a stage whose gates were all skipped (or has none) passes."""
    statuses = {d.status for d in decisions}
    if "error" in statuses:
        return "error"
    if "fail" in statuses:
        return "fail"
    return "pass"
