"""What a watch run writes for people: the issue body of a failing scheduled run (what changed first, then the PR
comment's report under the same escaping and size limit), the comment for each new failing run, and the
"recovered" comment. Pure.
"""

from __future__ import annotations

from gate.core.report import Report
from gate.render import fmt_value, headline, run_page
from gate.render.changes import changes_lines
from gate.render.escape import cell, code
from gate.render.markdown import COMMENT_LIMIT, render_comment

WATCH_MARKER_PREFIX = "<!-- rag-gate:watch"


def watch_marker(watch_id: str) -> str:
    """The hidden marker a later watch run finds its issue by."""
    return f"{WATCH_MARKER_PREFIX} id={watch_id} -->"


def issue_title(report: Report) -> str:
    spec = report["run"]["config"]
    return f"rag-gate watch: {spec[-120:]} is failing"


def _run_line(report: Report) -> list[str]:
    page = run_page(report)
    when = report["run"]["created_at"]
    commit = (report["run"].get("commit") or "")[:12]
    facts = f"Run of {cell(when)}" + (f" at {code(commit)}" if commit else "")
    return [f"{facts}: [the run and its artifacts]({page})." if page else f"{facts}.", ""]


def render_issue(report: Report, watch_id: str, limit: int = COMMENT_LIMIT) -> str:
    """The watch issue's body: the marker, what changed since the last good run, the run's link, then the report."""
    head = [watch_marker(watch_id), *changes_lines(report), *_run_line(report)]
    prefix = "\n".join(head) + "\n"
    rest = render_comment({**report, "changes": []}, limit - len(prefix))  # the list is above already
    return prefix + rest


def unfinished_issue(watch_id: str, message: str, hint: str | None, page: str | None) -> str:
    """The issue body of a watch run that could not complete (the service unreachable, the judge down): no report."""
    lines = [watch_marker(watch_id), "## ❌ rag-gate could not complete the watch run", "", f"> [!CAUTION]\n> {cell(message, 2000)}", ""]
    if hint:
        lines += [f"Hint: {cell(hint, 500)}", ""]
    lines.append(f"[The run and its log]({page})." if page else "The run's log says more.")
    return ("\n".join(lines) + "\n")[:COMMENT_LIMIT]


def failing_comment(report: Report) -> str:
    """The comment a watch run adds to the open issue when it fails again."""
    lines = [f"Still failing: {cell(headline(report), 300)}", "", *changes_lines(report), *_run_line(report)]
    body = "\n".join(lines) + "\n"
    return body[:COMMENT_LIMIT]


def recovered_comment(report: Report) -> str:
    """The comment of the run that passes again, with its figures, before the issue is closed."""
    lines = ["Recovered: every gate passes again.", ""]
    for name, stage in report["stages"].items():
        if stage["status"] == "skipped" or not stage["metrics"]:
            continue
        shown = ", ".join(f"{code(metric, 60)} {fmt_value(metric, value)}" for metric, value in list(stage["metrics"].items())[:12])
        lines.append(f"- {cell(name)}: {shown}")
    lines += ["", *_run_line(report)]
    return ("\n".join(lines) + "\n")[:COMMENT_LIMIT]
