"""The HTML report (``--html report.html``): one self-contained file a reviewer opens from disk or from the run's
artifacts. Pure.

How it stays safe with untrusted text (a golden set, a target's answers, a fork's report): the page is a fixed
template, the same bytes for every report, plus the run's data as JSON in a ``<script type="application/json">``
block in which ``<``, ``>`` and ``&`` are JSON escapes (so no data can close the block or open a tag). The page's
script builds every element from that data with ``textContent`` and never parses data as HTML. A Content Security
Policy allows the page's own inline script and style (by hash) and nothing else: no request leaves the page, and a
script that got in some other way would not run.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.core.catalog import higher_is_better
from gate.core.model import GoldenCase
from gate.core.report import CaseResult, Report, StageResult, StoredRun
from gate.render import (
    fmt_delta,
    fmt_value,
    headline,
    headline_verdict,
    metric_rows,
    ordered_stages,
    reference_answers,
    rejection_miss,
    rejection_misses,
)
from gate.render.page import Assets, page_from_json

MAX_DIFF_TOKENS = 4000  # words and spaces per answer; longer answers are shown side by side without a word diff


@dataclass(frozen=True)
class ViewInputs:
    """What the report does not hold and the page shows: the golden cases (question, ground truth, labels), the
    reference run the report compared with (its answers and ranks), and the retrieved passages' texts."""

    golden: Sequence[GoldenCase] = ()
    baseline: StoredRun | None = None
    passages: Mapping[str, str] = field(default_factory=dict)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def render_html(report: Report, inputs: ViewInputs, assets: Assets, clean: Callable[[Any], Any] = lambda d: d,
                dumps: Callable[[Any], str] = _dumps) -> str:
    """The page: the fixed template and ``clean(page_data(...))`` (the caller's redaction) as its data, written as
    JSON by ``dumps`` (the caller may bring a faster encoder)."""
    return page_from_json(dumps(clean(page_data(report, inputs))), assets, title="rag-gate report",
                          noscript="This report is drawn by its own script, which the browser did not run. The same figures "
                                   "are in report.json next to it.")


# ---------------------------------------------------------------------------------------------- the page's data


def page_data(report: Report, inputs: ViewInputs) -> dict[str, Any]:
    """Everything the page shows, as plain JSON (figures the comment formats are formatted the same way here)."""
    verdict = headline_verdict(report)
    golden = {c.id: c for c in inputs.golden}
    columns = _columns(report)
    index = _Index(report, inputs.baseline)
    return {
        "verdict": verdict,
        "headline": headline(report),
        "facts": _facts(report),
        "errors": list(report.get("errors", [])),
        "warnings": _warnings(report),
        "stages": [_stage(name, stage) for name, stage in ordered_stages(report)],
        "columns": [{"stage": s, "metric": m, "label": m, "ms": m.endswith("_ms")} for s, m in columns],
        "cases": [_case(report, out, golden.get(out["id"]), inputs, index) for out in report["cases"]],
        "passages": dict(inputs.passages),
        "trends": _trends(report),
        "lower_is_better": sorted({m for _, m in columns if not higher_is_better(m)} | {"latency_ms"}),
    }


def _facts(report: Report) -> list[list[str]]:
    g, t, b, run = report["golden_set"], report["target"], report["baseline"], report["run"]
    by_type = ", ".join(f"{n} {k}" for k, n in sorted(g.get("by_type", {}).items()))
    facts = [["Golden set", f"{g['n']} cases ({by_type})"],
             ["Target", f"{t['kind']}, k={t['k']}: {t['errors']} of {t['calls']} calls failed"]]
    if b.get("found"):
        when = (b.get("created_at") or "")[:10]
        facts.append(["Baseline", " ".join(x for x in [b.get("source") or b["path"], when, (b.get("commit") or "")[:7]] if x)])
    else:
        facts.append(["Baseline", "none yet (max_drop gates skipped)"])
    facts.append(["Run", " ".join(x for x in [run["created_at"], (run.get("commit") or "")[:12],
                                              f"{run['duration_s']:.1f} s" if run.get("duration_s") is not None else ""] if x)])
    facts.append(["Tool", f"{report['tool']['name']} {report['tool']['version']}"])
    return facts


def _warnings(report: Report) -> list[str]:
    out = list(report.get("warnings", []))
    for stage in report["stages"].values():
        out += [w for w in stage.get("warnings", []) if w not in out]
    return out


def _stage(name: str, stage: StageResult) -> dict[str, Any]:
    rows = [{"metric": r["metric"], "baseline": fmt_value(r["metric"], r["baseline"]), "value": fmt_value(r["metric"], r["value"]),
             "delta": fmt_delta(r["metric"], r["delta"]), "rule": r["rule"], "status": r["status"]} for r in metric_rows(stage)]
    note = ""
    if stage.get("n") is not None:
        note = f"{stage['n']} cases scored" + (f", {stage['errored']} errored" if stage.get("errored") else "")
    elif stage.get("sample"):
        note = f"{stage['sample']['size']} of {stage['sample']['of']} cases judged"
    failed = [{"metric": g["metric"], "status": g["status"], "reason": g["reason"]}
              for g in stage.get("gates", []) if g["status"] in ("fail", "error")]
    not_evaluated = dict(stage.get("not_evaluated", {}))
    skipped = {g["metric"]: f"gate skipped: {g['reason']}" for g in stage.get("gates", [])
               if g["status"] == "skipped" and g["metric"] not in not_evaluated and g.get("reason")}
    return {"name": name, "status": stage["status"], "reason": stage.get("reason", ""), "note": note, "rows": rows,
            "failed": failed, "not_evaluated": {**not_evaluated, **skipped}}


def _columns(report: Report) -> list[tuple[str, str]]:
    """(stage, metric) for every per-case figure, stage by stage in the stage's own metric order."""
    out: list[tuple[str, str]] = []
    for name, stage in ordered_stages(report):
        seen = {m for s in stage.get("samples", []) for m in s.get("metrics", {})}
        order = [m for m in stage.get("metrics", {}) if m in seen] + sorted(seen - set(stage.get("metrics", {})))
        out += [(name, m) for m in order]
    return out


def _rows(samples: Sequence[CaseResult]) -> dict[str, CaseResult]:
    return {s["id"]: s for s in samples}


class _Index:
    """Each stage's rows by case id (this run's, the reference's, the rejection rows, the worse cases): read once."""

    def __init__(self, report: Report, baseline: StoredRun | None) -> None:
        base_stages: Mapping[str, Any] = baseline.get("stages", {}) if baseline else {}
        self.stages = ordered_stages(report)
        self.rows = {name: _rows(stage.get("samples", [])) for name, stage in self.stages}
        self.base = {name: _rows(base_stages.get(name, {}).get("samples", [])) for name, _ in self.stages}
        self.rejection = {name: {r["id"]: r for r in stage.get("rejection", {}).get("cases", [])} for name, stage in self.stages}
        self.misses = {name: {r["id"] for r in rejection_misses(stage)} for name, stage in self.stages}
        self.worse = {name: {w["id"]: w for w in stage.get("worse_cases", [])} for name, stage in self.stages}
        self.answers = reference_answers(baseline)  # case id -> the reference run's answer
        self.diagnosis = {c["id"]: c for c in report.get("diagnosis", {}).get("cases", [])}
        self.checks = {r["id"]: r for _, stage in self.stages for r in stage.get("checks", {}).get("cases", [])}
        robustness = report["stages"].get("robustness")
        paraphrase = robustness.get("paraphrase") if robustness else None
        stability = robustness.get("stability") if robustness else None
        self.paraphrase = {c["id"]: c for c in (paraphrase["cases"] if paraphrase else [])}
        self.stability = {c["id"]: c for c in (stability["cases"] if stability else [])}


def _case(report: Report, out: Any, golden: GoldenCase | None, inputs: ViewInputs, index: _Index) -> dict[str, Any]:
    case_id = out["id"]
    case: dict[str, Any] = {"id": case_id, "type": out["type"], "answer": out["answer"], "error": out["error"],
                            "latency_ms": out["latency_ms"], "retrieved": out["retrieved"][: report["target"]["k"]]}
    if golden is not None:
        case.update(question=golden.question, ground_truth=golden.ground_truth, category=golden.category, tags=list(golden.tags),
                    question_type=golden.question_type, relevant=dict(golden.relevant))
    worse: list[str] = []
    failed: list[str] = []
    errored: list[str] = [f"target: {out['error']}"] if out["error"] else []
    metrics: dict[str, dict[str, float]] = {}
    base_metrics: dict[str, dict[str, float]] = {}
    not_scored: list[list[str]] = []
    stages: list[str] = []
    for name, stage in index.stages:
        row = index.rows[name].get(case_id)
        base_row = index.base[name].get(case_id)
        rejection = index.rejection[name].get(case_id)
        if row is None and rejection is None:
            continue
        stages.append(name)
        if row is not None:
            metrics[name] = dict(row.get("metrics", {}))
            if base_row is not None:
                base_metrics[name] = dict(base_row.get("metrics", {}))
            for metric, why in (row.get("errors") or {}).items():
                not_scored.append([name, metric, why])
                errored.append(f"{name} {metric}: {why}")
            if row.get("error") and not row.get("errors"):
                errored.append(f"{name}: {row['error']}")
        if name == "retrieval" and row is not None:
            _retrieval_part(case, row, base_row, stage, failed)
        if name == "robustness" and row is not None and "noisy_answer" in row:
            case["noise"] = {"position": row.get("position"), "distractors": row.get("distractors", []),
                             "clean_answer": row.get("clean_answer"), "noisy_answer": row.get("noisy_answer"),
                             "clean_correct": row.get("clean_correct"), "noisy_correct": row.get("noisy_correct"),
                             "flipped": bool(row.get("flipped"))}
            if row.get("flipped"):
                failed.append("robustness: the distractors turned a right answer wrong")
        if rejection is not None:
            case["rejection"] = _rejection(rejection, case_id in index.misses[name])
            if rejection.get("error"):
                errored.append(f"rejection: {rejection['error']}")
            elif case["rejection"]["miss"]:
                failed.append(f"rejection: {case['rejection']['miss']}")
        worse += _worse_lines(name, index.worse[name].get(case_id))
    _asked_again(case, index, failed)
    _findings(case, index, failed)
    case.update(stages=stages, metrics=metrics, baseline_metrics=base_metrics, not_scored=not_scored,
                flags={"worse": worse, "failed": failed, "errored": errored})
    case["baseline_answer"] = index.answers.get(case_id)
    if case["baseline_answer"] is not None and out["answer"] is not None and case["baseline_answer"] != out["answer"]:
        case["diff"] = word_diff(case["baseline_answer"], out["answer"])
    return case


def _asked_again(case: dict[str, Any], index: _Index, failed: list[str]) -> None:
    """The case's rewrites (the paraphrase test) and repeated answers (the stability test), when it was sampled."""
    p, s = index.paraphrase.get(case["id"]), index.stability.get(case["id"])
    if p is not None:
        case["paraphrase"] = {"found": p["found"], "lost": p["lost"], "rewrites": p["rewrites"]}
        if p["lost"]:
            failed.append("robustness: found on the original question, lost on a rewrite")
    if s is not None:
        case["stability"] = {k: s[k] for k in ("answers", "correct", "jaccard", "agreement", "flipped")}
        if s["flipped"]:
            failed.append("robustness: right on one ask, wrong on another")


def _worse_lines(name: str, w: Any) -> list[str]:
    """Why a case is worse in a stage: the figures that fell, the relevant ids that lost rank, the likely cause."""
    if w is None:
        return []
    lines = [f"{name} {m}: {fmt_value(m, a)} → {fmt_value(m, b)}" for m, (a, b) in w["drops"].items()]
    lines += [f"{name}: {x['id']} from rank {x['from']} to {x['to'] if x['to'] is not None else 'not retrieved'}"
              for x in w.get("lost", [])]
    return lines + ([f"{name}: likely cause: {w['cause']}"] if w.get("cause") else [])


def _findings(case: dict[str, Any], index: _Index, failed: list[str]) -> None:
    """Where the case broke (report.diagnosis) and what its answer checks found."""
    found = index.diagnosis.get(case["id"])
    if found is not None:
        case["diagnosis"] = {"code": found["code"], "layer": found["layer"], "evidence": found["evidence"], "moved": found.get("moved", True)}
    checked = index.checks.get(case["id"])
    if checked is not None:
        failed += [f"answer check {f['check']}: {f['evidence']}" for f in checked.get("failed", [])]
        if checked.get("missing"):
            case["missing_keywords"] = list(checked["missing"])


def _retrieval_part(case: dict[str, Any], row: CaseResult, base_row: CaseResult | None, stage: StageResult, failed: list[str]) -> None:
    ranks = row.get("relevant_ranks") or {}
    base_ranks = (base_row.get("relevant_ranks") if base_row is not None else None) or {}
    # [id, rank, the reference's rank] (the third left out when the reference did not rank it); None: not retrieved
    case["ranks"] = [[rid, rank, base_ranks[rid]] if rid in base_ranks else [rid, rank] for rid, rank in ranks.items()]
    k = stage.get("reference_k")
    found = [r for r in ranks.values() if r is not None]
    if ranks and k and not any(r <= k for r in found):
        failed.append(f"retrieval: no relevant passage in the top {k}")


def _rejection(row: Any, missed: bool) -> dict[str, Any]:
    return {"type": row["type"], "error": row.get("error"), "refused": row.get("refused"), "method": row.get("method"),
            "phrase": row.get("phrase"), "answer": row.get("answer"), "leaked": row.get("leaked", []),
            "miss": rejection_miss(row) if missed else None}


_TOKEN = re.compile(r"\s+|\S+\s*")  # a word with the spaces after it (and the spaces an answer starts with)


def word_diff(before: str, after: str) -> list[list[str]] | None:
    """``after`` against ``before`` word by word: ``[op, text]`` runs, op ``=`` (both), ``-`` (only before), ``+`` (only
    after). None when an answer is too long to diff (the page then shows both answers whole)."""
    a, b = _TOKEN.findall(before), _TOKEN.findall(after)
    if len(a) > MAX_DIFF_TOKENS or len(b) > MAX_DIFF_TOKENS:
        return None
    out: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(["=", "".join(a[i1:i2])])
            continue
        if i2 > i1:
            out.append(["-", "".join(a[i1:i2])])
        if j2 > j1:
            out.append(["+", "".join(b[j1:j2])])
    return out


def _trends(report: Report) -> list[dict[str, Any]]:
    """One series per judge metric with history: the stored runs, oldest first, then this run."""
    runs = report.get("history", {}).get("runs", [])
    if not runs:
        return []
    labels = [(r.get("commit") or "")[:7] or f"run {i + 1}" for i, r in enumerate(runs)] + ["this run"]
    out = []
    for name in ("generation", "robustness"):
        stage = report["stages"].get(name)
        for metric, now in (stage["metrics"] if stage else {}).items():
            past = [r.get("metrics", {}).get(name, {}).get(metric) for r in runs]
            if metric.endswith("_ms") or not any(isinstance(v, (int, float)) for v in past):
                continue
            values = [float(v) if isinstance(v, (int, float)) else None for v in past] + [float(now)]
            out.append({"stage": name, "metric": metric, "points": [[x, v] for x, v in zip(labels, values, strict=True)]})
    return out
