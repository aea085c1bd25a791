"""This run against its references (baseline, history window). Pure.

Builds the ``Comparison`` a relative gate check compares with — with a paired test when
both sides have per-case scores — and reads the comparison for the reader: the cases that got
worse, where each went wrong (attribution), and the faithfulness-recall trap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gate.core.catalog import FAITHFULNESS_LIKE, higher_is_better, judge_noise
from gate.core.gates import DEFAULT_CONFIDENCE, Comparison
from gate.core.pairs import detectable_drop, evidence
from gate.core.report import CaseResult, HistoryEntry, LostRank, Pairing, StageResult, StoredStage, WorseCase
from gate.core.stats import PairedResult, paired_bootstrap

TOLERANCE = 1e-9  # a per-case change smaller than this is float noise, not a change


def case_scores(samples: Sequence[CaseResult], metric: str) -> dict[str, float]:
    """Per-case values of one metric."""
    return {s["id"]: float(s["metrics"][metric]) for s in samples if metric in s["metrics"]}


def _paired(ref: Mapping[str, float], cur: Mapping[str, float], metric: str) -> PairedResult | None:
    common = sorted(set(ref) & set(cur))
    if not common:
        return None
    return paired_bootstrap([ref[c] for c in common], [cur[c] for c in common], higher_is_better=higher_is_better(metric))


def baseline_comparison(stage_name: str, samples: Sequence[CaseResult], base_stage: StoredStage | None, metric: str) -> Comparison:
    """The baseline's value of a metric, with the paired test for a metric with a judge's noise."""
    value = base_stage["metrics"].get(metric) if base_stage else None
    if value is None or base_stage is None or not judge_noise(stage_name, metric):
        return Comparison(value)
    return Comparison(value, _paired(case_scores(base_stage.get("samples", []), metric), case_scores(samples, metric), metric))


def trend_comparison(
    stage_name: str, samples: Sequence[CaseResult], entries: Sequence[HistoryEntry], metric: str, window: int = 7
) -> Comparison | None:
    """Mean of the metric over the last ``window`` history entries that have it; per-case means for the paired test."""
    stages = [e["stages"][stage_name] for e in entries if stage_name in e["stages"]]
    stages = [s for s in stages if isinstance(s["metrics"].get(metric), (int, float))][-window:]
    values = [s["metrics"][metric] for s in stages]
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    if not judge_noise(stage_name, metric):
        return Comparison(mean, runs=len(values))
    per_case: dict[str, list[float]] = {}
    for s in stages:
        for cid, v in case_scores(s.get("samples", []), metric).items():
            per_case.setdefault(cid, []).append(v)
    ref = {cid: math.fsum(vs) / len(vs) for cid, vs in per_case.items()}
    return Comparison(mean, _paired(ref, case_scores(samples, metric), metric), runs=len(values))


def same_run_comparison(pairing: Pairing | None, metric: str, value: float | None, confidence: float = DEFAULT_CONFIDENCE,
                       runs: int = 1) -> Comparison | None:
    """The reference a relative check compares with when the reference run's changed answers were judged again in this
    run: the paired test over every pair, and the reference's level as judged today (this run's value plus the mean
    drop). None when there are no same-run pairs for the metric (the caller falls back on stored scores)."""
    if pairing is None or pairing["method"] != "same run" or metric not in pairing["metrics"] or value is None:
        return None
    pairs = pairing["metrics"][metric]
    hib = higher_is_better(metric)
    result = evidence(pairs, hib)
    level = value + result.mean_drop if hib else value - result.mean_drop
    return Comparison(level, result, runs=runs, pairs=pairs, label=pairing["label"], detectable=detectable_drop(pairs, hib, confidence))


def paired_worse_cases(pairing: Pairing, questions: Mapping[str, str]) -> list[WorseCase]:
    """The cases that got worse in the same-run pairs (both sides judged in this run), worst first."""
    rows: dict[str, WorseCase] = {}
    for metric, pairs in pairing["metrics"].items():
        sign = 1.0 if higher_is_better(metric) else -1.0
        for c in pairs["cases"]:
            ref, cur = c.get("confirmed") or (c["reference"], c["current"])
            if ref is None or cur is None or sign * (ref - cur) <= TOLERANCE:
                continue
            row = rows.setdefault(c["id"], {"id": c["id"], "question": questions.get(c["id"], ""), "drops": {}})
            row["drops"][metric] = [ref, cur]
    ordered = sorted(rows.values(), key=lambda r: (-sum(abs(a - b) for a, b in r["drops"].values()), r["id"]))
    return ordered


def mean_cases(stage_name: str, entries: Sequence[HistoryEntry]) -> list[CaseResult]:
    """Per-case means of every metric over history entries (the reference for worse cases when there is no baseline)."""
    sums: dict[str, dict[str, list[float]]] = {}
    for e in entries:
        for s in e["stages"].get(stage_name, {"metrics": {}}).get("samples", []):
            for m, v in s["metrics"].items():
                sums.setdefault(s["id"], {}).setdefault(m, []).append(v)
    return [{"id": cid, "metrics": {m: sum(vs) / len(vs) for m, vs in ms.items()}} for cid, ms in sums.items()]


def worse_cases(
    samples: Sequence[CaseResult], reference: Sequence[CaseResult], questions: Mapping[str, str], k_ref: int | None = None
) -> list[WorseCase]:
    """Cases whose per-case figures got worse than the reference's, worst first: for every metric both sides have,
    the drop (a rise for a lower-is-better metric); for retrieval, the relevant ids that lost rank
    (``left_top_k`` when one fell out of the top ``k_ref``)."""
    by_id = {r["id"]: r for r in reference}
    rows: list[tuple[float, WorseCase]] = []
    for s in samples:
        base = by_id.get(s["id"])
        if base is None or (s.get("error") is not None and not s["metrics"]):
            continue
        drops: dict[str, list[float]] = {}
        for metric, v in s["metrics"].items():
            ref = base["metrics"].get(metric)
            if ref is None:
                continue
            worse = (ref - v) if higher_is_better(metric) else (v - ref)
            if worse > TOLERANCE:
                drops[metric] = [ref, v]
        row: WorseCase = {"id": s["id"], "question": questions.get(s["id"], ""), "drops": drops}
        if "relevant_ranks" in s:
            lost: list[LostRank] = []
            before_ranks = base.get("relevant_ranks", {})
            for rid, rank in s["relevant_ranks"].items():
                before = before_ranks.get(rid)
                if before is not None and (rank is None or rank > before):
                    left = k_ref is not None and before <= k_ref and (rank is None or rank > k_ref)
                    lost.append({"id": rid, "from": before, "to": rank, "left_top_k": left})
            row["lost"] = lost
        if drops or any(x["left_top_k"] for x in row.get("lost", [])):
            rows.append((sum(abs(a - b) for a, b in drops.values()), row))
    rows.sort(key=lambda r: (-r[0], r[1]["id"]))
    return [r for _, r in rows]


def attribute(worse: Sequence[WorseCase], retrieval: StageResult | None) -> list[WorseCase]:
    """Label each judge-stage case that got worse: retrieval miss, unfaithful generation, both, or answer quality."""
    retrieval_worse = {w["id"]: w for w in (retrieval.get("worse_cases", []) if retrieval else [])}
    out: list[WorseCase] = []
    for row in worse:
        rw = retrieval_worse.get(row["id"])
        lost = rw.get("lost", []) if rw else []
        missed = any(x["left_top_k"] for x in lost)  # a relevant id left the top k
        unfaithful = any(m in FAITHFULNESS_LIKE for m in row["drops"])
        label = "both" if missed and unfaithful else "retrieval miss" if missed else "unfaithful generation" if unfaithful else "answer quality"
        out.append({**row, "cause": label, "retrieval": lost})
    return out


def recall_trap(stages: Mapping[str, StageResult], reference: Mapping[str, Mapping[str, float]]) -> str | None:
    """The faithfulness-recall trap: faithfulness rises while context recall falls (answers that stay faithful to
    fewer and fewer relevant passages). ``reference``: stage -> metrics."""
    gen = stages["generation"]["metrics"] if "generation" in stages else {}
    faith = next((m for m in ("faithfulness", "deepeval/faithfulness", "ragas/faithfulness") if m in gen), None)
    if faith is None or faith not in reference.get("generation", {}):
        return None
    recall = None
    for stage_name in ("generation", "retrieval"):
        metrics = stages[stage_name]["metrics"] if stage_name in stages else {}
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
