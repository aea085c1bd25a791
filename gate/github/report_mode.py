"""Mode report of the action: the fork-safe follow-up in a workflow_run job, which reads a fork's report artifact,
checks it against the workflow run that produced it, and comments on that run's pull request."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gate.core.errors import InputError
from gate.core.report import Report
from gate.github.commands import append_file, set_outputs
from gate.github.comment import COMMENT_ID, REPORT_ARTIFACT_LIMIT, _comment, headline, run_page_url, summary_text
from gate.render import headline_verdict


def report_mode(env: Mapping[str, str], ev: Mapping[str, Any], client: Any, policy: str, report_path: str) -> int:
    """Fork-safe follow-up: check the artifact's report and post the comment for the PR it belongs to."""
    from gate.io.reports import check_document, load_json

    path = Path(report_path)
    if not path.is_file():
        raise InputError("report artifact not found (download it with actions/download-artifact first)", file=report_path)
    if path.stat().st_size > REPORT_ARTIFACT_LIMIT:
        raise InputError(f"report is larger than {REPORT_ARTIFACT_LIMIT // (1024 * 1024)} MiB: refusing it", file=report_path)
    report: Report = check_document(load_json(path, "report artifact"), "report", file=report_path)
    run = report["run"]
    workflow_run = ev.get("workflow_run") or {}
    head = workflow_run.get("head_sha")
    head_repo = (workflow_run.get("head_repository") or {}).get("full_name")
    pr = run.get("pr")
    if not isinstance(head, str) or not head:
        raise InputError("the event has no workflow_run.head_sha: mode report runs in a workflow_run job", key="GITHUB_EVENT_PATH")
    if not isinstance(head_repo, str) or not head_repo:
        raise InputError("the event has no workflow_run.head_repository: mode report runs in a workflow_run job",
                         key="GITHUB_EVENT_PATH")
    if not isinstance(pr, int) or isinstance(pr, bool) or pr <= 0:
        raise InputError("the report names no pull request (it was not made by a pull_request run)", file=report_path, key="run.pr")
    if run.get("head_sha") != head:
        raise InputError(f"the report's head commit {str(run.get('head_sha'))[:12]!r} is not the head commit {head[:12]} of the "
                         "workflow run that produced it: refusing to comment", file=report_path, key="run.head_sha")
    if not COMMENT_ID.fullmatch(str(run.get("comment_id") or "default")):
        raise InputError("run.comment_id must match [A-Za-z0-9_.-]+", file=report_path, key="run.comment_id")
    if client is None:
        raise InputError("mode report needs a github-token that can write pull-request comments", key="input github-token")
    current = client.pull_head(pr)
    if current is None or current[0] != head:
        now = "does not exist" if current is None else f"is now {current[0][:12]}"
        raise InputError(f"pull request #{pr}'s head {now}, not {head[:12]}: refusing to comment on it", file=report_path, key="run.pr")
    if current[1] != head_repo:
        raise InputError(f"pull request #{pr}'s head is in {current[1] or 'a deleted repository'!r}, not in {head_repo!r} where the "
                         "workflow run ran: refusing to comment on it", file=report_path, key="run.pr")
    # the link to the run's artifacts: the run the event names (the fork's pull_request run), never the artifact's own
    report["run"].pop("url", None)
    page = run_page_url(env, str(workflow_run.get("id") or ""))  # no id: no link (this job's own run has no artifact)
    if page:
        report["run"]["url"] = page
    append_file(env, "GITHUB_STEP_SUMMARY", summary_text(report))
    _comment(client, pr, report, policy)
    # the verdict the comment shows: recomputed from the gate decisions, never the artifact's own string
    set_outputs(env, {"verdict": headline_verdict(report), "report": report_path, "metrics": headline(report)})
    return 0  # the pull_request job's check carries the verdict; this job only comments
