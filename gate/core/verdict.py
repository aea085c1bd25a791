"""From measurements to a verdict. Pure.

``gate_stage`` applies a stage's gates to what it measured, the same way for every stage, and
reads the comparison (worse cases, their causes); ``run_errors`` applies the error-rate policy;
``decide_verdict`` turns stage statuses and run errors into pass, fail or error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from gate.core.catalog import PER_CASE_STAGES, higher_is_better, judge_noise
from gate.core.compare import (
    attribute,
    baseline_comparison,
    case_scores,
    mean_cases,
    paired_worse_cases,
    recall_trap,
    same_run_comparison,
    trend_comparison,
    worse_cases,
)
from gate.core.gates import (
    DEFAULT_CONFIDENCE,
    SHARE_KEYS,
    Check,
    Comparison,
    Gated,
    GateDecision,
    decide,
    decline_check,
    share_check,
    skipped,
    stage_status,
    with_check,
)
from gate.core.report import (
    CaseResult,
    GroupGate,
    GroupMetrics,
    HistoryEntry,
    Pairing,
    StageMeasurement,
    StageResult,
    Status,
    StoredRun,
    StoredStage,
    Verdict,
    WindowComparison,
)

DEFAULT_WINDOW = 7
DEFAULT_GROUP_SIZE = 5  # a per-group gate's smallest gated group


@dataclass(frozen=True)
class CompareWith:
    """What one stage of this run is compared with."""

    baseline: StoredStage | None = None  # the baseline's stage
    history: Sequence[HistoryEntry] = ()  # entries of runs measured the same way, oldest first
    mismatch_policy: str | None = None  # baseline.on_mismatch when the baseline was measured differently, else None
    retrieval: StageResult | None = None  # this run's gated retrieval stage: attributes a judge stage's worse cases
    groups: Mapping[str, Mapping[str, Sequence[str]]] | None = None  # by -> group -> case ids (per-group gates)


def decide_gates(name: str, measured: StageMeasurement, gates: Mapping[str, Mapping[str, Any]],
                 refs: CompareWith) -> list[GateDecision]:
    """One decision per gate. A metric this run could not evaluate (no judge, no key) is skipped with the reason,
    never passed or failed."""
    decisions = []
    stage_skipped = measured.get("skipped")
    for metric, gate in gates.items():
        hib = higher_is_better(metric)
        why = measured["not_evaluated"].get(metric, "")
        if stage_skipped is not None or (metric not in measured["metrics"] and why.startswith("not evaluated")):
            decisions.append(skipped(name, metric, gate, why or stage_skipped or "stage skipped", hib))
            continue
        samples, value = measured["samples"], measured["metrics"].get(metric)
        windows = measured.get("windows")
        base: Comparison | None
        base, trend = window_references(windows, metric, gate) if windows is not None else references(name, measured, metric, gate, refs)
        decision = decide(Gated(name, metric, hib), gate, value, base, trend, refs.mismatch_policy)
        shared = decision.status != "error" and any(k in gate for k in SHARE_KEYS)  # (the per-case values read only then)
        share = share_check(gate, case_scores(samples, metric), judge_noise(name, metric)) if shared else None
        if share is not None:
            decision = with_check(decision, share)
        if "consecutive_decline" in gate and decision.status != "error" and value is not None:
            decision = with_check(decision, declines(name, measured, metric, int(gate["consecutive_decline"]), refs,
                                                     float(gate.get("confidence", DEFAULT_CONFIDENCE))))
        if "by" in gate and decision.status != "error":
            decision = by_group(decision, gate, samples, refs)
        decisions.append(decision)
    return decisions


def references(name: str, measured: StageMeasurement, metric: str, gate: Mapping[str, Any],
               refs: CompareWith) -> tuple[Comparison | None, Comparison | None]:
    """(baseline, trend) comparisons of a golden-set run: same-run pairs where the judged answers were judged again in
    this run, else the stored scores."""
    samples, value = measured["samples"], measured["metrics"].get(metric)
    pairing = measured.get("pairing", {}) if judge_noise(name, metric) else {}  # an exact figure is never paired
    confidence = float(gate.get("confidence", DEFAULT_CONFIDENCE))
    trend = None
    if "trend" in gate:
        window = int(gate["trend"].get("window", DEFAULT_WINDOW))
        trend = (same_run_comparison(pairing.get(f"trend:{window}"), metric, value, confidence, window)
                 or _noted(trend_comparison(name, samples, refs.history, metric, window), pairing.get(f"trend:{window}")))
    base = (same_run_comparison(pairing.get("baseline"), metric, value, confidence)
            or _noted(baseline_comparison(name, samples, refs.baseline, metric), pairing.get("baseline")))
    return base, trend


NO_WINDOW = "no earlier traces window in the history to compare with yet"


def window_references(windows: Mapping[str, WindowComparison], metric: str,
                      gate: Mapping[str, Any]) -> tuple[Comparison, Comparison | None]:
    """(previous window, trend) comparisons of a traces run (gate.core.windows): two samples, judge drift cancelled."""

    def of(key: str, runs: int = 1) -> Comparison:
        record = windows.get(key)
        w = record["metrics"].get(metric) if record else None
        if record is None or w is None:
            return Comparison(None, note=NO_WINDOW)
        level = w["corrected"] if w["corrected"] is not None else w["reference_mean"]
        return Comparison(level if level is not None else w["mean"], runs=runs, label=record["label"], window=w)

    trend = None
    if "trend" in gate:
        size = int(gate["trend"].get("window", DEFAULT_WINDOW))
        trend = of(f"trend:{size}", size)
    return of("previous"), trend


def _recorded(stage: StoredStage | None, metric: str) -> tuple[float, float] | None:
    """A history entry's recorded (judge-corrected change, its standard error) of a traces window, if it has one."""
    if stage is None or metric not in stage.get("window_deltas", {}) or metric not in stage.get("window_se", {}):
        return None
    return stage["window_deltas"][metric], stage["window_se"][metric]


def declines(name: str, measured: StageMeasurement, metric: str, runs: int, refs: CompareWith, confidence: float) -> Check:
    """consecutive_decline: on a traces window's metric, the judge-corrected changes the windows recorded; otherwise the
    runs' values."""
    hib = higher_is_better(metric)
    windows = measured.get("windows")
    if windows is not None:
        now = windows["previous"]["metrics"].get(metric) if "previous" in windows else None
        mine = (now["delta"], now["se"]) if now and "insufficient" not in now and now["delta"] is not None and now["se"] is not None else None
        earlier = [_recorded(e["stages"].get(name), metric) for e in refs.history]
        from gate.core.windows import window_decline_check  # a traces window's metric only

        return window_decline_check(runs, [*earlier, mine], hib, confidence)
    earlier_values = [e["stages"][name]["metrics"][metric] for e in refs.history
                      if name in e["stages"] and metric in e["stages"][name]["metrics"]]
    return decline_check(runs, [*earlier_values, measured["metrics"][metric]], hib)


def baseline_breakdown(breakdown: Mapping[str, Mapping[str, GroupMetrics]], base_samples: Sequence[CaseResult],
                       groups: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, dict[str, GroupMetrics]]:
    """The breakdown with each group's baseline value beside this run's: the mean of the baseline's per-case values over
    the group's cases (context_recall@k, a micro average over passages, is left out: its group value is not a mean)."""
    out: dict[str, dict[str, GroupMetrics]] = {}
    for dimension, rows in breakdown.items():
        out[dimension] = {}
        for group, row in rows.items():
            ids = set(groups.get(dimension, {}).get(group, ()))
            base: dict[str, float] = {}
            for metric in row["metrics"]:
                if metric.startswith("context_recall"):
                    continue
                values = [s["metrics"][metric] for s in base_samples if s["id"] in ids and metric in s["metrics"]]
                if values:
                    base[metric] = math.fsum(values) / len(values)
            out[dimension][group] = {**row, "baseline": base} if base else dict(row)  # type: ignore[assignment]
    return out


def by_group(overall: GateDecision, gate: Mapping[str, Any], samples: Sequence[CaseResult], refs: CompareWith) -> GateDecision:
    """A per-group gate: min, max and max_drop on each group's scored cases (the mean of their per-case values,
    against the baseline's same cases), besides the whole set; a group under ``min_group_size`` is reported, not
    gated. The gate fails when the whole set or any gated group fails, and its reason names the group."""
    by, size = str(gate["by"]), int(gate.get("min_group_size", DEFAULT_GROUP_SIZE))
    metric, hib = overall.metric, overall.higher_is_better
    plain = {k: gate[k] for k in ("min", "max", "max_drop") if k in gate}
    base_cases = case_scores(refs.baseline.get("samples", []), metric) if refs.baseline else {}
    current = case_scores(samples, metric)
    records: list[GroupGate] = []
    checks = list(overall.checks)
    for group, ids in sorted((refs.groups or {}).get(by, {}).items()):
        values = [current[i] for i in ids if i in current]
        if len(values) < size:
            records.append({"by": by, "group": group, "n": len(values), "value": None, "baseline": None, "delta": None,
                            "status": "skipped", "detail": f"{len(values)} scored case(s), under min_group_size {size}: not gated"})
            continue
        value = math.fsum(values) / len(values)
        before = [base_cases[i] for i in ids if i in current and i in base_cases]
        base = math.fsum(before) / len(before) if before else None
        d = decide(Gated(overall.stage, metric, hib), plain, value, base, mismatch=refs.mismatch_policy)
        label = f"{by} {group} ({len(values)} cases)"
        records.append({"by": by, "group": group, "n": len(values), "value": value, "baseline": base, "delta": d.delta,
                        "status": d.status, "detail": d.reason})
        checks += [Check(c.kind, c.limit, c.status, f"{label}: {c.detail}", c.method) for c in d.checks if c.status in ("fail", "error")]
    statuses = {overall.status, *(r["status"] for r in records)}
    status: Status = next((s for s in ("error", "fail", "pass") if s in statuses), "skipped")
    return replace(overall, status=status, checks=checks, groups=records)


def _noted(ref: Comparison | None, pairing: Pairing | None) -> Comparison | None:
    """A stored-scores reference, with the reason it is one when a pairing said so (the reference kept no answers)."""
    if ref is None or pairing is None or "note" not in pairing:
        return ref
    return replace(ref, note=pairing["note"])


def gate_stage(name: str, measured: StageMeasurement, gates: Mapping[str, Mapping[str, Any]], refs: CompareWith,
               questions: Mapping[str, str]) -> StageResult:
    """The stage as report.json holds it: what it measured, its gates, its status, and the cases that got worse."""
    decisions = decide_gates(name, measured, gates, refs)
    result = cast(StageResult, {"status": stage_status(decisions), "gates": [d.to_dict() for d in decisions],
                                **{k: v for k, v in measured.items() if k not in ("skipped", "status", "gates", "texts")}})
    result["warnings"] = list(measured["warnings"])
    if measured.get("skipped") is not None:
        result["status"] = "skipped"
        result["reason"] = str(measured["skipped"])
        return result
    check = measured.get("self_check")
    if check and check["unstable"]:
        worst = ", ".join(f"{m} by up to {check['metrics'][m]['max_diff']:.3f}" for m in check["unstable"])
        result["warnings"].append(f"judge unstable: re-judging {check['cases']} cases moved {worst} (limit {check['limit']:g})")
        if check["on_unstable"] == "fail" and result["status"] == "pass":
            result["status"] = "fail"
    # the per-case reference: the baseline's cases, else (judge stages) the history window's per-case means
    reference = refs.baseline.get("samples", []) if refs.baseline else None
    if reference is None and refs.history and name in PER_CASE_STAGES:
        window = max([int(g["trend"].get("window", DEFAULT_WINDOW)) for g in gates.values() if "trend" in g] or [DEFAULT_WINDOW])
        reference = mean_cases(name, [e for e in refs.history if name in e["stages"]][-window:])
    result["baseline_metrics"] = {m: v for m, v in (refs.baseline or {"metrics": {}})["metrics"].items() if m in measured["metrics"]}
    if refs.baseline and refs.baseline.get("samples") and "breakdown" in result:
        result["breakdown"] = baseline_breakdown(result["breakdown"], refs.baseline.get("samples", []), refs.groups or {})
    for metric, w in (measured.get("windows") or {}).get("previous", {"metrics": {}})["metrics"].items():
        if w["corrected"] is not None:  # a traces window: the previous window as today's judge scores it
            result["baseline_metrics"][metric] = w["corrected"]
    pairing = measured.get("pairing", {})
    same_run = next((p for key, p in sorted(pairing.items()) if p["method"] == "same run" and key == "baseline"),
                    next((p for _, p in sorted(pairing.items()) if p["method"] == "same run"), None))
    if same_run is not None:  # judged again in this run: what got worse, and the baseline as judged today
        worse = paired_worse_cases(same_run, questions)
        for metric, value in measured["metrics"].items():
            ref = same_run_comparison(pairing.get("baseline"), metric, value)
            if ref is not None and ref.value is not None:
                result["baseline_metrics"][metric] = ref.value
    else:
        worse = worse_cases(measured["samples"], reference or [], questions, measured.get("reference_k"))
    result["worse_cases"] = attribute(worse, refs.retrieval) if name in PER_CASE_STAGES else worse
    return result


def trap_warning(stages: Mapping[str, StageResult], baseline: StoredRun | None, history: Sequence[HistoryEntry]) -> str | None:
    """The faithfulness-recall trap against the baseline, else against the last history entry."""
    if "generation" not in stages or stages["generation"]["status"] == "skipped":
        return None
    ref_stages = baseline["stages"] if baseline else history[-1]["stages"] if history else None
    if not ref_stages:
        return None
    return recall_trap(stages, {n: s["metrics"] for n, s in ref_stages.items()})


def run_errors(stages: Mapping[str, StageResult], calls: int, failed: Iterable[str], max_error_rate: float) -> list[str]:
    """Why the run could not be completed, if it could not: the target's or a judge stage's error rate above
    ``max_error_rate``, a gated metric that could not be computed, the judge budget reached. ``failed`` holds the
    error of every target call that failed."""
    errors: list[str] = []
    reasons = Counter(failed)
    failures = sum(reasons.values())
    rate = failures / calls if calls else 0.0
    if rate > max_error_rate + 1e-12:
        top, count = reasons.most_common(1)[0]
        errors.append(
            f"{failures} of {calls} target calls failed (error rate {rate:.1%}, above max_error_rate {max_error_rate:.1%}); "
            f"most common: {top} ({count} case{'s' if count != 1 else ''})"
        )
    for name, stage in stages.items():
        if stage["status"] == "error":
            errors.append(f"stage {name}: a gated metric could not be computed")
        scores = stage.get("scores")
        if scores and scores["error_rate"] > max_error_rate + 1e-12:
            judge, usage = stage.get("judge"), stage.get("usage")
            judged = bool(judge and judge["model"]) or bool(usage and usage.get("calls"))
            what = "judge scores" if judged else "scores (of the metrics that need no model)"
            errors.append(
                f"stage {name}: {scores['errored']} of {scores['attempted']} {what} could not be computed "
                f"(error rate {scores['error_rate']:.1%}, above max_error_rate {max_error_rate:.1%})"
            )
        if stage.get("budget_exceeded"):
            errors.append(f"stage {name}: judge.max_judge_calls was reached; the remaining scores were not computed")
    return errors


def decide_verdict(statuses: Iterable[Status], errors: Sequence[str]) -> Verdict:
    """error when the run could not be completed; else fail when a stage failed; else pass."""
    if errors:
        return "error"
    return "fail" if "fail" in set(statuses) else "pass"
