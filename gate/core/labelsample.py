"""Which judged cases people label, and what the sheet shows them. Pure.

The sample is stratified over the judge's score: the candidate cases sorted by their score (the mean of the
labelled metrics), cut into N strata of equal size, one case drawn from each (seeded), so the sheet holds low,
middling and high scores alike, and the disagreements near a gate's threshold are seen, not only the bulk.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from gate.core.report import Report

DEFINITIONS = {
    "faithfulness": "Every claim of the answer is supported by the passages shown (nothing is added from elsewhere).",
    "answer_relevancy": "The answer addresses the question that was asked, directly and without padding.",
    "context_precision": "The passages ranked first are the ones that help answer the question.",
    "context_recall": "The passages hold everything the reference answer says.",
    "answer_correctness": "The answer says what the reference answer says, and nothing that contradicts it.",
}
SCALES = {"pass-fail": [{"label": "fail", "score": 0.0}, {"label": "pass", "score": 1.0}],
          "1-5": [{"label": str(i + 1), "score": i / 4} for i in range(5)]}


def definition(metric: str) -> str:
    base = metric.split("/")[-1]
    return DEFINITIONS.get(base, f"Does the answer deserve a high {base}? Judge as the metric's name says.")


def candidates(report: Report, metrics: Sequence[str]) -> list[Mapping[str, Any]]:
    """The judged cases with a score for every metric and the answer they were judged on."""
    gen = report["stages"].get("generation")
    samples = gen["samples"] if gen else []
    return [s for s in samples if all(m in s["metrics"] for m in metrics) and "output" in s and s["output"]["answer"]]


def stratified(cases: Sequence[Mapping[str, Any]], metrics: Sequence[str], n: int, seed: int) -> list[Mapping[str, Any]]:
    """``n`` cases, one from each of ``n`` equal strata of the judge's score (all of them when there are fewer)."""
    def score(s: Mapping[str, Any]) -> float:
        return sum(float(s["metrics"][m]) for m in metrics) / len(metrics)

    ranked = sorted(cases, key=lambda s: (score(s), s["id"]))
    if len(ranked) <= n:
        return ranked
    rng = random.Random(seed)
    edges = [round(i * len(ranked) / n) for i in range(n + 1)]
    return [ranked[rng.randrange(edges[i], edges[i + 1])] for i in range(n)]


def sheet_data(report: Report, picked: Sequence[Mapping[str, Any]], metrics: Sequence[str], golden: Mapping[str, Any],
               scale: str) -> dict[str, Any]:
    """What the sheet shows: per case the question, the passages, the answer, the ground truth and the judge's scores
    (hidden by the page until the person has answered); per metric its definition and the control's values."""
    texts = report.get("texts", {})
    rows = []
    for s in picked:
        out = s.get("output") or {}
        case = golden.get(s["id"])
        rows.append({"case_id": s["id"], "answer_id": out.get("answer"), "question": getattr(case, "question", ""),
                     "ground_truth": getattr(case, "ground_truth", None) or "", "answer": texts.get(out.get("answer") or "", ""),
                     "passages": [texts.get(t, "") for t in out.get("contexts", [])][:10],
                     "judge": {m: float(s["metrics"][m]) for m in metrics}})
    key = f"rag-gate-labels:{report['run']['created_at']}:{','.join(metrics)}"
    return {"title": "rag-gate label sheet", "storage_key": key, "scale": SCALES[scale],
            "metrics": [{"name": m, "definition": definition(m)} for m in metrics], "cases": rows,
            "report": {"created_at": report["run"]["created_at"], "commit": report["run"]["commit"]}}


_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet would read as a formula at the start of a cell


def cell_text(value: str) -> str:
    """A cell a spreadsheet shows as text: one that would start a formula gets a leading apostrophe."""
    return "'" + value if value.startswith(_FORMULA) else value


def csv_rows(data: Mapping[str, Any]) -> list[list[str]]:
    """The sheet as rows to fill in a spreadsheet: one row per case and metric, the score column empty (a score from 0
    to 1; the filled file is read back by `rag-gate calibrate --labels FILE.csv`). Text that would start a formula is
    kept as text."""
    rows = [["case_id", "metric", "score", "labeler", "labelled_at", "answer_id", "question", "answer", "ground_truth", "definition"]]
    defs = {m["name"]: m["definition"] for m in data["metrics"]}
    for c in data["cases"]:
        for m in defs:
            rows.append([cell_text(str(x)) for x in (c["case_id"], m, "", "", "", c["answer_id"], c["question"], c["answer"],
                                                     c["ground_truth"], defs[m])])
    return rows
