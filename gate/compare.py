"""This run against its references (baseline, history window). Pure.

Builds the ``Reference`` a relative gate check compares with — with a paired test when
both sides have per-case scores — and reads the comparison for the reader: the
faithfulness-recall trap, and where each worse case went wrong (attribution).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gate.gates import Reference
from gate.metrics import higher_is_better
from gate.stats import paired_bootstrap

PER_CASE_STAGES = ("generation", "robustness")  # judge stages: noisy, compared case by case
FAITHFULNESS_LIKE = ("faithfulness", "deepeval/faithfulness", "ragas/faithfulness", "hallucination", "deepeval/hallucination")


def case_scores(stage: Mapping[str, Any], metric: str) -> dict[str, float]:
    """Per-case values of one metric from a report stage (samples list) or a stored stage (samples dict)."""
    samples = stage.get("samples", [])
    if isinstance(samples, dict):  # baseline / history form: {id: {"metrics": {...}} or {id: {metric: v}}}
        out = {}
        for cid, entry in samples.items():
            metrics = entry.get("metrics", entry) if isinstance(entry, dict) else {}
            if isinstance(metrics.get(metric), (int, float)):
                out[cid] = float(metrics[metric])
        return out
    return {s["id"]: float(s["metrics"][metric]) for s in samples if metric in s.get("metrics", {})}


def _paired(ref: Mapping[str, float], cur: Mapping[str, float], metric: str):  # type: ignore[no-untyped-def]
    common = sorted(set(ref) & set(cur))
    if not common:
        return None
    return paired_bootstrap([ref[c] for c in common], [cur[c] for c in common], higher_is_better=higher_is_better(metric))


def baseline_reference(stage_name: str, stage: Mapping[str, Any], base_stage: Mapping[str, Any] | None, metric: str) -> Reference:
    value = (base_stage or {}).get("metrics", {}).get(metric)
    if value is None or stage_name not in PER_CASE_STAGES:
        return Reference(value)
    return Reference(value, _paired(case_scores(base_stage or {}, metric), case_scores(stage, metric), metric))


def trend_reference(
    stage_name: str, stage: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], metric: str, window: int = 7
) -> Reference | None:
    """Mean of the metric over the last ``window`` history entries that have it; per-case means for the paired test."""
    stages = [e.get("stages", {}).get(stage_name, {}) for e in entries]
    stages = [s for s in stages if isinstance(s.get("metrics", {}).get(metric), (int, float))][-window:]
    values = [s["metrics"][metric] for s in stages]
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    if stage_name not in PER_CASE_STAGES:
        return Reference(mean, runs=len(values))
    per_case: dict[str, list[float]] = {}
    for s in stages:
        for cid, v in case_scores(s, metric).items():
            per_case.setdefault(cid, []).append(v)
    ref = {cid: math.fsum(vs) / len(vs) for cid, vs in per_case.items()}
    return Reference(mean, _paired(ref, case_scores(stage, metric), metric), runs=len(values))


def recall_trap(stages: Mapping[str, Mapping[str, Any]], reference: Mapping[str, Mapping[str, float]]) -> str | None:
    """The seed's trap: faithfulness rises while context recall falls. ``reference``: stage -> metrics."""
    gen = stages.get("generation", {}).get("metrics", {})
    faith = next((m for m in ("faithfulness", "deepeval/faithfulness", "ragas/faithfulness") if m in gen), None)
    if faith is None or faith not in reference.get("generation", {}):
        return None
    recall = None
    for stage_name in ("generation", "retrieval"):
        metrics = stages.get(stage_name, {}).get("metrics", {})
        for m in sorted(metrics):
            if (m == "context_recall" or m.startswith("context_recall@") or m.startswith("recall@")) and m in reference.get(stage_name, {}):
                recall = (stage_name, m)
                break
        if recall:
            break
    if recall is None:
        return None
    f_now, f_ref = gen[faith], reference["generation"][faith]
    r_now, r_ref = stages[recall[0]]["metrics"][recall[1]], reference[recall[0]][recall[1]]
    if f_now > f_ref + 1e-9 and r_now < r_ref - 1e-9:
        return (
            f"{faith} rose {f_ref:.2f} → {f_now:.2f} while {recall[1]} fell {r_ref:.2f} → {r_now:.2f}: with fewer relevant "
            "passages retrieved, answers say less and look more faithful. Read them together; this is not an improvement."
        )
    return None


def attribute(
    gen_worse: Sequence[Mapping[str, Any]], retrieval_stage: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Label each generation case that got worse: retrieval miss, unfaithful generation, both, or answer quality."""
    retrieval_worse = {w["id"]: w for w in (retrieval_stage or {}).get("worse_cases", [])}
    out = []
    for row in gen_worse:
        rw = retrieval_worse.get(row["id"])
        missed = bool(rw and any(x.get("left_top_k") for x in rw.get("lost", [])))  # a relevant id left the top k
        unfaithful = any(m in FAITHFULNESS_LIKE for m in row["drops"])
        label = "both" if missed and unfaithful else "retrieval miss" if missed else "unfaithful generation" if unfaithful else "answer quality"
        out.append({**row, "cause": label, "retrieval": rw.get("lost", []) if rw else []})
    return out


def worse_by_case(stage: Mapping[str, Any], reference: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """Cases whose judge scores fell against per-case reference scores (metric -> id -> value), worst first."""
    rows = []
    for s in stage.get("samples", []):
        drops = {}
        for metric, v in s.get("metrics", {}).items():
            ref = reference.get(metric, {}).get(s["id"])
            if ref is None:
                continue
            worse = (ref - v) if higher_is_better(metric) else (v - ref)
            if worse > 1e-9:
                drops[metric] = [ref, v]
        if drops:
            size = sum(abs(a - b) for a, b in drops.values())
            rows.append((size, {"id": s["id"], "drops": drops}))
    rows.sort(key=lambda r: (-r[0], r[1]["id"]))
    return [r for _, r in rows]
