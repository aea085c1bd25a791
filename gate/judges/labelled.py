"""The calibration file from people's labels and a report's judge scores (``rag-gate calibrate``). Pure.

A label counts for a case only when it was given to the answer the judge scored (``answer_id``, the answer's content
id): a label of an older answer never attaches to a new one. Several labellers of one case: the judge is compared
with their mean (the consensus), and the labellers with each other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from gate.core.agreement import labeller_kappa
from gate.core.report import Report
from gate.judges.agreement import agreement

WORST = 5  # the disagreements listed per metric
DEFAULT_THRESHOLD = 0.5


def gate_threshold(report: Report, metric: str) -> float:
    """Where pass turns into fail for the metric: its gate's min (or share_below value) in the report, else 0.5."""
    for stage in report["stages"].values():
        for g in stage["gates"]:
            if g["metric"] != metric:
                continue
            for check in g["checks"]:
                if check["kind"] in ("min", "share_below") and isinstance(check["limit"], int | float):
                    return float(check["limit"])
    return DEFAULT_THRESHOLD


def _judged(report: Report) -> dict[str, Mapping[str, Any]]:
    gen = report["stages"].get("generation")
    return {s["id"]: s for s in gen["samples"]} if gen else {}


def matched(report: Report, labels: Sequence[Mapping[str, Any]]) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, int]]:
    """metric -> case -> labeller -> score, for the labels of answers the report's judge scored; and the count of the
    labels left out by reason."""
    samples = _judged(report)
    found: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    left: dict[str, int] = defaultdict(int)
    for label in labels:
        sample = samples.get(label["case_id"])
        if sample is None:
            left["the case was not judged in the report"] += 1
        elif label["metric"] not in (sample.get("metrics") or {}):
            left["the report has no judge score of this metric for the case"] += 1
        elif (sample.get("output") or {}).get("answer") != label["answer_id"]:
            left["the label was given to another answer than the one judged"] += 1
        else:
            found[label["metric"]][label["case_id"]][label["labeler"]] = float(label["score"])
    return {m: dict(c) for m, c in found.items()}, dict(left)


def _metric(report: Report, metric: str, cases: Mapping[str, Mapping[str, float]], seed: int) -> dict[str, Any]:
    samples = _judged(report)
    ids = sorted(cases)
    judge = [float(samples[c]["metrics"][metric]) for c in ids]
    human = [sum(cases[c].values()) / len(cases[c]) for c in ids]
    threshold = gate_threshold(report, metric)
    out = agreement(judge, human, threshold, seed=seed)
    by_labeller: dict[str, dict[str, float]] = defaultdict(dict)
    for c in ids:
        for who, score in cases[c].items():
            by_labeller[who][c] = score
    out["labellers"] = {"count": len(by_labeller), "kappa": labeller_kappa(dict(by_labeller), threshold)}
    rows: list[dict[str, Any]] = [{"case_id": c, "answer_id": (samples[c].get("output") or {}).get("answer"), "judge": j, "human": h}
                                  for c, j, h in zip(ids, judge, human, strict=True)]
    out["worst"] = sorted(rows, key=lambda r: (-abs(float(r["judge"]) - float(r["human"])), str(r["case_id"])))[:WORST]
    out["cases"] = rows
    return out


def build_calibration(report: Report, labels: Sequence[Mapping[str, Any]], *, created_at: str, seed: int = 0) -> dict[str, Any]:
    """The calibration document: per metric the agreement figures, the worst disagreements and the labelled cases;
    the judge they were compared with (its fingerprint: a new model or prompt makes them stale); when."""
    found, left = matched(report, labels)
    gen = report["stages"].get("generation")
    judge: Mapping[str, Any] = (gen.get("judge") if gen else None) or {}
    return {
        "created_at": created_at,
        "judge": {"model": judge.get("model"), "temperature": judge.get("temperature"), "engines": judge.get("engines") or {},
                  "prompts": judge.get("prompts") or {}},
        "report": {"created_at": report["run"]["created_at"], "commit": report["run"]["commit"]},
        "labels": len(labels),
        "left_out": left,
        "metrics": {m: _metric(report, m, cases, seed) for m, cases in sorted(found.items())},
    }
