"""The action's words to GitHub about a run: the PR comment (posted, edited, neutralised or skipped), the job summary,
the headline output and the link to the run's page. Shared by the modes of gate.github.action and by mode report."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gate.core.report import Report
from gate.github.commands import emit
from gate.render import NEUTRAL_BODY, RUN_PAGE

COMMENT_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # the spec schema's pattern for report.comment_id
SUMMARY_LIMIT = 1024 * 1024  # GitHub's limit for one step's job summary
REPORT_ARTIFACT_LIMIT = 20 * 1024 * 1024


def headline(report: Report) -> str:
    return json.dumps({name: stage["metrics"] for name, stage in report["stages"].items()}, separators=(",", ":"))


def run_page_url(env: Mapping[str, str], run_id: Any = None) -> str | None:
    """The page of a workflow run (this job's, or ``run_id``'s in this repository), where its artifacts are; None when
    the environment does not say (outside GitHub) or says something of another form."""
    run_id = env.get("GITHUB_RUN_ID") if run_id is None else run_id
    url = f"{env.get('GITHUB_SERVER_URL', '').rstrip('/')}/{env.get('GITHUB_REPOSITORY', '')}/actions/runs/{run_id}"
    return url if run_id is not None and RUN_PAGE.fullmatch(url) else None


def summary_text(report: Report) -> str:
    """The job summary: the comment's report with more per-case rows, under GitHub's 1 MiB for a step."""
    from gate.render.markdown import render_summary

    body = render_summary(report)
    if len(body.encode("utf-8")) <= SUMMARY_LIMIT:
        return body
    return body.encode("utf-8")[: SUMMARY_LIMIT - 200].decode("utf-8", "ignore") + "\n\n_Cut to fit the job summary limit._\n"


def post_comment(client: Any, pr: int, report: Report, policy: str) -> str:
    """Create, edit, neutralise or skip the PR comment; returns what happened, in words."""
    from gate.render.markdown import marker, render_comment

    mark = marker(report["run"].get("comment_id") or "default")
    if policy == "never":
        return "comment: never"
    if policy == "on-failure" and report["verdict"] == "pass":
        if client.find_comment(pr, mark) is None:
            return "passed: no comment needed"
        _, what = client.upsert_comment(pr, f"{mark}\n{NEUTRAL_BODY}", mark)
        return "passed: the earlier failure comment was neutralised" if what == "updated" else f"passed: the passed comment is {what}"
    _, what = client.upsert_comment(pr, render_comment(report), mark)
    return f"comment {what}"


def _comment(client: Any, pr: int, report: Report, policy: str) -> None:
    from gate.github.client import GitHubError, PermissionDenied

    try:
        print(f"rag-gate: {post_comment(client, pr, report, policy)}", flush=True)
    except PermissionDenied:
        emit("notice", "the token cannot comment (a fork's pull request has a read-only token): the comment was skipped. "
                       "Use the workflow_run pattern of docs/action.md (fork pull requests) to comment on fork PRs.")
    except GitHubError as exc:
        emit("warning", f"the PR comment failed: {exc}")
