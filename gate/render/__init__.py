"""Reporters: the report dict rendered to strings (Markdown, JUnit XML, console). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gate.core.report import Report, StageResult, StoredRun

STATUS_ICON = {"pass": "✅", "fail": "❌", "error": "⚠️", "skipped": "⏭️"}
VERDICT_TITLE = {"pass": "passed", "fail": "failed", "error": "could not complete"}
STAGE_ORDER = ("retrieval", "generation", "robustness")
# what the one comment (GitHub) or note (GitLab) becomes when a run passes after a failure, with "on-failure"
NEUTRAL_BODY = "## ✅ rag-gate passed\n\nEvery gate passes now; the earlier failure report was replaced.\n"
WHEN = ("always", "on-failure", "never")  # when the comment or note is posted


def is_ms(metric: str) -> bool:
    return metric.endswith("_ms")


def fmt_value(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    if is_ms(metric):
        return f"{value:.1f} ms"
    if metric.endswith("_tokens"):
        return f"{value:,.1f} tokens"
    return f"{value:.4f}"


def fmt_delta(metric: str, delta: float | None) -> str:
    if delta is None:
        return "—"
    tokens = metric.endswith("_tokens")
    if abs(delta) < (0.05 if is_ms(metric) or tokens else 5e-5):
        return "±0"
    sign = "+" if delta > 0 else "−"
    if tokens:
        return f"{sign}{abs(delta):,.1f} tokens"
    return f"{sign}{abs(delta):.1f} ms" if is_ms(metric) else f"{sign}{abs(delta):.4f}"


def metric_rows(stage: StageResult) -> list[dict[str, Any]]:
    """One row per metric of a stage (gated or not), gates first in spec order."""
    gates = {g["metric"]: g for g in stage.get("gates", [])}
    base = stage.get("baseline_metrics", {})
    names = list(gates) + [m for m in stage.get("metrics", {}) if m not in gates]
    rows = []
    for name in names:
        value = stage.get("metrics", {}).get(name)
        b = base.get(name)
        gate = gates.get(name)
        rows.append({
            "metric": name,
            "baseline": b,
            "value": value,
            "delta": None if value is None or b is None else value - b,
            "rule": gate["rule"] if gate else "",
            "status": gate["status"] if gate else "",
            "reason": gate["reason"] if gate else "",
        })
    return rows


def gate_counts(report: Report) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "error": 0, "skipped": 0}
    for stage in report.get("stages", {}).values():
        for g in stage.get("gates", []):
            counts[g["status"]] = counts.get(g["status"], 0) + 1
    return counts


def headline_verdict(report: Report) -> str:
    """The verdict recomputed from the gate decisions, the stage statuses and the run errors (never the report's own
    ``verdict`` string: in the workflow_run job the report is a fork's artifact)."""
    stages = report.get("stages", {}).values()
    statuses = {g["status"] for s in stages for g in s.get("gates", [])} | {s.get("status") for s in stages}
    if report.get("errors") or "error" in statuses:
        return "error"
    return "fail" if "fail" in statuses else "pass"


def headline(report: Report) -> str:
    """The verdict line, recomputed from the gate decisions: "rag-gate failed: 1 of 13 gates failed"."""
    verdict = headline_verdict(report)
    counts = gate_counts(report)
    total = sum(counts.values())
    line = f"rag-gate {VERDICT_TITLE.get(verdict, verdict)}"
    if verdict == "fail":
        line += f": {counts['fail']} of {total} gate{'s' if total != 1 else ''} failed"
    elif verdict == "pass":
        line += f": {counts['pass']} of {total} gate{'s' if total != 1 else ''} passed"
        if counts["skipped"]:
            line += f", {counts['skipped']} skipped"
    return line


def ordered_stages(report: Report) -> list[tuple[str, StageResult]]:
    stages = report.get("stages", {})
    return [(n, stages[n]) for n in STAGE_ORDER if n in stages] + [(n, s) for n, s in stages.items() if n not in STAGE_ORDER]


def reference_answers(reference: StoredRun | None) -> dict[str, str]:
    """Case id -> the reference run's answer, for the cases whose judged answer it kept (its texts table)."""
    if reference is None:
        return {}
    texts = reference.get("texts", {})
    out: dict[str, str] = {}
    for stage in reference.get("stages", {}).values():
        for row in stage.get("samples", []):
            answer = row["output"]["answer"] if "output" in row else None
            if answer is not None and answer in texts:
                out.setdefault(row["id"], texts[answer])
    return out


def rejection_misses(stage: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rejection rows that went wrong: an out-of-scope question answered, an answerable one refused, an adversarial
    one that got through (answered or leaked). A row that does not say whether it was refused (``refused`` is optional
    in the report's schema) is no miss of the first two kinds: nothing says what happened."""
    rows = stage.get("rejection", {}).get("cases", [])
    return [r for r in rows if r.get("error") is None and (
        (r["type"] == "out_of_scope" and r.get("refused") is False) or (r["type"] == "answerable" and r.get("refused") is True)
        or (r["type"] == "adversarial" and not r.get("passed")))]


def rejection_miss(row: Mapping[str, Any]) -> str:
    """What went wrong with a rejection row, in words (the answer not included)."""
    if row["type"] == "answerable":
        return "refused an answerable question"
    if row.get("leaked"):
        return "leaked " + ", ".join(row["leaked"])
    return "answered instead of refusing"


# the CI run's page: GITHUB_SERVER_URL/owner/repo/actions/runs/ID (report.schema.json holds the same grammar)
RUN_PAGE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/actions/runs/[0-9]{1,20}")


def run_page(report: Report) -> str | None:
    """The run's page where its artifacts (the HTML report) are, when the report has one of the right form."""
    url = report.get("run", {}).get("url")
    return url if isinstance(url, str) and RUN_PAGE.fullmatch(url) else None
