"""Gates and readings of a judge stage (generation, robustness) against baseline and history. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.compare import attribute, baseline_reference, case_scores, trend_reference, worse_by_case
from gate.gates import Check, GateDecision, decide, stage_status
from gate.metrics import higher_is_better


def judged_gates(
    name: str,
    stage: dict[str, Any],
    gates: Mapping[str, Any],
    base_stage: Mapping[str, Any] | None,
    history: Sequence[Mapping[str, Any]],
    policy: str | None,
) -> list[GateDecision]:
    """One decision per gate. A metric that could not be evaluated in this run (no judge, no key) is
    skipped with the reason, never passed or failed."""
    decisions = []
    not_evaluated = stage.get("not_evaluated", {})
    for metric, gate in gates.items():
        hib = higher_is_better(metric)
        if stage["status"] == "skipped" or (metric not in stage["metrics"] and str(not_evaluated.get(metric, "")).startswith("not evaluated")):
            reason = not_evaluated.get(metric) or stage.get("reason", "stage skipped")
            checks = [Check(kind, gate[kind] if kind != "trend" else gate[kind]["max_drop"], "skipped", reason)
                      for kind in ("min", "max", "max_drop", "trend") if kind in gate]
            decisions.append(GateDecision(name, metric, "skipped", None, None, None, hib, checks))
            continue
        window = int(gate.get("trend", {}).get("window", 7))
        trend = trend_reference(name, stage, history, metric, window) if "trend" in gate else None
        decisions.append(
            decide(name, metric, gate, stage["metrics"].get(metric), baseline_reference(name, stage, base_stage, metric), hib, policy, trend)
        )
    return decisions


def finish_judged_stage(
    name: str,
    stage: dict[str, Any],
    gates: Mapping[str, Any],
    base_stage: Mapping[str, Any] | None,
    history: Sequence[Mapping[str, Any]],
    policy: str | None,
    retrieval: Mapping[str, Any] | None,
    questions: Mapping[str, str],
) -> dict[str, Any]:
    """Apply the gates, the self-check verdict, and find and label the cases that got worse."""
    decisions = judged_gates(name, stage, gates, base_stage, history, policy)
    stage["gates"] = [d.to_dict() for d in decisions]
    warnings: list[str] = stage.setdefault("warnings", [])
    status = stage_status(decisions) if stage["status"] != "skipped" else "skipped"
    check = stage.get("self_check")
    if check and check["unstable"]:
        worst = ", ".join(f"{m} by up to {check['metrics'][m]['max_diff']:.3f}" for m in check["unstable"])
        warnings.append(f"judge unstable: re-judging {check['cases']} cases moved {worst} (limit {check['limit']:g})")
        if check["on_unstable"] == "fail" and status == "pass":
            status = "fail"
    stage["status"] = status
    if status == "skipped":
        return stage
    # the per-case reference: the baseline's scores, else the history window's per-case means
    ref_stage: Mapping[str, Any] | None = base_stage
    if not ref_stage and history:
        window = max([int(g["trend"].get("window", 7)) for g in gates.values() if "trend" in g] or [7])
        ref_stage = {"samples": _mean_samples(name, [e for e in history if name in e.get("stages", {})][-window:])}
    if ref_stage:
        reference = {m: case_scores(ref_stage, m) for m in stage["metrics"]}
        stage["baseline_metrics"] = {m: v for m, v in (base_stage or {}).get("metrics", {}).items() if m in stage["metrics"]}
        rows = attribute(worse_by_case(stage, reference), retrieval)
        stage["worse_cases"] = [{**r, "question": questions.get(r["id"], "")} for r in rows]
    return stage


def _mean_samples(name: str, entries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    sums: dict[str, dict[str, list[float]]] = {}
    for e in entries:
        for cid, metrics in e.get("stages", {}).get(name, {}).get("samples", {}).items():
            for m, v in metrics.items():
                sums.setdefault(cid, {}).setdefault(m, []).append(v)
    return {cid: {m: sum(vs) / len(vs) for m, vs in ms.items()} for cid, ms in sums.items()}
