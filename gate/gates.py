"""Gate decisions: a pure function of (gate, value, baseline, direction).

A gate holds any of ``min``/``max`` (absolute) and ``max_drop`` (against the baseline,
absolute points or "3%" relative to the baseline). "Drop" means "got worse": for a
lower-is-better metric (latency, error rate) it is a rise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

EPS = 1e-9  # float noise allowed at a threshold: 0.88 >= 0.88 must hold after any arithmetic

# How to treat max_drop when the baseline's fingerprints differ from this run's.
MISMATCH_POLICIES = ("warn", "skip", "fail")


@dataclass(frozen=True)
class Check:
    kind: str  # min | max | max_drop
    limit: float | str
    status: str  # pass | fail | skipped
    detail: str


@dataclass(frozen=True)
class GateDecision:
    stage: str
    metric: str
    status: str  # pass | fail | skipped | error
    value: float | None
    baseline: float | None
    delta: float | None
    higher_is_better: bool
    checks: list[Check] = field(default_factory=list)

    @property
    def rule(self) -> str:
        return ", ".join(f"{c.kind} {c.limit}" for c in self.checks) or "-"

    @property
    def reason(self) -> str:
        bad = [c.detail for c in self.checks if c.status in ("fail", "error")]
        return "; ".join(bad) if bad else "; ".join(c.detail for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rule"] = self.rule
        d["reason"] = self.reason
        return d


def allowed_drop(limit: float | str, baseline: float) -> float:
    """max_drop as absolute points: 0.03 stays 0.03, "3%" is 3 % of the baseline's size."""
    if isinstance(limit, str):
        return float(limit.rstrip("%")) / 100.0 * abs(baseline)
    return float(limit)


def fmt(x: float) -> str:
    return f"{x:.4g}"


def decide(
    stage: str,
    metric: str,
    gate: dict[str, Any],
    value: float | None,
    baseline: float | None,
    higher_is_better: bool = True,
    mismatch: str | None = None,
) -> GateDecision:
    """Decide one gate. ``mismatch`` is the baseline policy when fingerprints differ (warn/skip/fail), else None."""
    delta = None if value is None or baseline is None else value - baseline
    if value is None:
        check = Check("value", "-", "error", "metric was not computed (every case errored or none applies)")
        return GateDecision(stage, metric, "error", None, baseline, None, higher_is_better, [check])
    checks: list[Check] = []
    if "min" in gate:
        ok = value >= gate["min"] - EPS
        checks.append(Check("min", gate["min"], "pass" if ok else "fail", f"{fmt(value)} {'>=' if ok else '<'} min {fmt(gate['min'])}"))
    if "max" in gate:
        ok = value <= gate["max"] + EPS
        checks.append(Check("max", gate["max"], "pass" if ok else "fail", f"{fmt(value)} {'<=' if ok else '>'} max {fmt(gate['max'])}"))
    if "max_drop" in gate:
        limit = gate["max_drop"]
        if baseline is None:
            checks.append(Check("max_drop", limit, "skipped", "no baseline value to compare with"))
        elif mismatch == "skip":
            checks.append(Check("max_drop", limit, "skipped", "baseline made from a different golden set or spec"))
        elif mismatch == "fail":
            checks.append(Check("max_drop", limit, "fail", "baseline made from a different golden set or spec"))
        else:
            worse = (baseline - value) if higher_is_better else (value - baseline)
            allowed = allowed_drop(limit, baseline)
            ok = worse <= allowed + EPS
            word = "drop" if higher_is_better else "rise"
            detail = f"{word} {fmt(max(worse, 0.0))} vs baseline {fmt(baseline)} ({'within' if ok else 'above'} {limit}"
            detail += f" = {fmt(allowed)})" if isinstance(limit, str) else ")"
            checks.append(Check("max_drop", limit, "pass" if ok else "fail", detail))
    statuses = {c.status for c in checks}
    status = "fail" if "fail" in statuses else "pass" if "pass" in statuses else "skipped"
    return GateDecision(stage, metric, status, value, baseline, delta, higher_is_better, checks)


def stage_status(decisions: list[GateDecision]) -> str:
    """error > fail > pass; a stage whose gates were all skipped (or has none) passes."""
    statuses = {d.status for d in decisions}
    if "error" in statuses:
        return "error"
    if "fail" in statuses:
        return "fail"
    return "pass"
