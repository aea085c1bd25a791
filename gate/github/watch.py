"""GitHub issues for watch mode: the one issue a failing scheduled run opens for its spec, found again by a hidden
marker, edited and commented while the spec keeps failing, commented "recovered" and closed when it passes.

Only the token's own issues are touched (the author is the PR comments' ``comment_author``): a human's issue that
quotes the marker is never edited. Two runs that fail at the same moment must not open two issues, and GitHub has no
"create unless it exists": the runs take turns through a claim file on the history branch, written with the
contents API's compare-and-swap (a write names the version it read; a second writer gets 409 or 422 and reads
again). The run that wins the claim opens the issue and writes its number into the claim; the others wait for the
issue to appear and then edit it. A claim whose run died before opening the issue is taken over once it is older
than ``stale_after_s``.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.core.errors import InputError
from gate.core.report import Report
from gate.github.client import Conflict, GitHubClient, GitHubError, NotFound
from gate.render.watch import watch_marker

TITLE_LIMIT = 256  # GitHub's longest issue title
CLAIM_DIR = "rag-gate/watch"  # on the history branch: one claim file per watched spec


@dataclass
class WatchOutcome:
    """What the watch did with the issue: opened, updated, recovered (commented and closed), none (nothing to do)."""

    action: str
    number: int | None = None
    url: str | None = None
    steps: list[str] = field(default_factory=list)


class WatchIssues:
    """The watch issue of one spec (``watch_id``) in the client's repository."""

    def __init__(self, client: GitHubClient, watch_id: str, *, labels: list[str], claim_branch: str, stale_after_s: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.client, self.watch_id, self.labels = client, watch_id, labels
        self.marker = watch_marker(watch_id)
        self.claim_branch, self.claim_path = claim_branch, f"{CLAIM_DIR}/{watch_id}.json"
        self.stale_after_s, self.clock = stale_after_s, clock

    # -- the issue ---------------------------------------------------------------------------
    def find_open(self) -> dict[str, Any] | None:
        """The oldest open issue of ours carrying the marker (others' issues that quote it left alone)."""
        marked = [i for i in self.client.open_issues() if self.marker in (i.get("body") or "")]
        if not marked:
            return None
        author = self.client.comment_author
        ours = [i for i in marked if (i.get("user") or {}).get("login") == author]
        return min(ours, key=lambda i: int(i["number"])) if ours else None

    # -- what a run does ------------------------------------------------------------------------
    def alert(self, title: str, body: str, comment: str, *, run_id: str) -> WatchOutcome:
        """A failing run: edit the open issue and comment on it, or open it (once, whatever other runs do)."""
        if self.marker not in body:
            raise ValueError("the issue body must carry the watch marker, or the next run cannot find the issue")
        give_up = self.clock() + self.stale_after_s + 60
        attempt = 0
        while self.clock() < give_up:
            attempt += 1
            issue = self.find_open()
            if issue is not None:
                return self._update(issue, body, comment)
            claim, sha = self._read_claim()
            if claim.get("state") == "opening" and claim.get("run") != run_id and not self._stale(claim):
                self.client.sleep(min(5.0, 0.2 * attempt))  # another run is opening it: wait for the issue to appear
                continue
            try:
                self._write_claim({"state": "opening", "run": run_id, "at": self.clock()}, sha)
            except Conflict:
                self.client.sleep(random.uniform(0.05, 0.3))  # another run claimed it first
                continue
            issue = self.find_open()  # a run that finished between our look and our claim
            if issue is None:
                issue = self.client.create_issue(title[:TITLE_LIMIT], body, self.labels)
                self._settle(int(issue["number"]))
                return WatchOutcome("opened", int(issue["number"]), issue.get("html_url"), ["opened"])
            self._settle(int(issue["number"]))
            return self._update(issue, body, comment)
        raise GitHubError(None, f"the watch issue for {self.watch_id!r} could not be opened: another run held the claim "
                                f"{self.claim_branch}:{self.claim_path} all along", hint="re-run the job")

    def recover(self, comment: str) -> WatchOutcome:
        """A passing run: comment "recovered" on the open issue and close it; nothing when there is none."""
        issue = self.find_open()
        if issue is None:
            return WatchOutcome("none")
        number = int(issue["number"])
        self.client.add_comment(number, comment)
        self.client.edit_issue(number, state="closed", state_reason="completed")
        try:
            claim, sha = self._read_claim()
            if claim.get("issue") == number:
                self._write_claim({"state": "closed", "issue": number, "at": self.clock()}, sha)
        except GitHubError:
            pass  # the claim only serialises openings: a closed issue is found closed either way
        return WatchOutcome("recovered", number, issue.get("html_url"), ["commented", "closed"])

    def _update(self, issue: dict[str, Any], body: str, comment: str) -> WatchOutcome:
        number = int(issue["number"])
        self.client.edit_issue(number, body=body)
        self.client.add_comment(number, comment)
        return WatchOutcome("updated", number, issue.get("html_url"), ["edited", "commented"])

    # -- the claim -------------------------------------------------------------------------------
    def _read_claim(self) -> tuple[dict[str, Any], str | None]:
        self.client.ensure_branch(self.claim_branch)
        got = self.client.read_file(self.claim_path, self.claim_branch)
        if got is None:
            return {}, None
        try:
            data = json.loads(got[0])
        except ValueError:
            data = {}
        return (data if isinstance(data, dict) else {}), got[1]

    def _write_claim(self, claim: dict[str, Any], sha: str | None) -> None:
        text = json.dumps(claim, sort_keys=True) + "\n"
        self.client.write_file(self.claim_path, self.claim_branch, text, sha, f"rag-gate: watch claim for {self.watch_id} [skip ci]")

    def _settle(self, number: int) -> None:
        """Write the opened issue's number into our claim (retried over other writers: the number is what they wait for)."""
        for _ in range(10):
            _, sha = self._read_claim()
            try:
                self._write_claim({"state": "open", "issue": number, "at": self.clock()}, sha)
                return
            except Conflict:
                self.client.sleep(random.uniform(0.05, 0.3))
            except NotFound:
                return

    def _stale(self, claim: dict[str, Any]) -> bool:
        at = claim.get("at")
        return not isinstance(at, int | float) or self.clock() - at > self.stale_after_s


def claimant(env: Mapping[str, str]) -> str:
    """Who holds a claim: this job's run, attempt and process (two jobs of one run differ by the process)."""
    return f"{env.get('GITHUB_RUN_ID', '')}.{env.get('GITHUB_RUN_ATTEMPT', '')}.{os.getpid()}"


def run_kind(mode: str, event_name: str) -> str:
    """How a run came, recorded in report.run.kind and the history: what the dashboard tells apart."""
    if mode == "merge":
        return "merge"
    if mode == "gate" and event_name in ("pull_request", "pull_request_target"):
        return "pr"
    return {"schedule": "schedule", "workflow_dispatch": "dispatch", "deployment": "deployment", "deployment_status": "deployment",
            "repository_dispatch": "deployment", "merge_group": "merge"}.get(event_name, "push" if mode != "watch" else "schedule")


def watch_issue(env: Mapping[str, str], client: GitHubClient, report: Report, claim_branch: str, labels: list[str]) -> str:
    """Mode watch, after the run is recorded: open, update or close the spec's issue; what happened, in words."""
    from gate.render.watch import failing_comment, issue_title, recovered_comment, render_issue

    watch_id = report["run"]["comment_id"]
    issues = WatchIssues(client, watch_id, labels=labels, claim_branch=claim_branch)
    if report["verdict"] == "pass":
        done = issues.recover(recovered_comment(report))
    else:
        done = issues.alert(issue_title(report), render_issue(report, watch_id), failing_comment(report), run_id=claimant(env))
    where = f" #{done.number}" if done.number else ""
    return {"opened": f"opened the watch issue{where}", "updated": f"updated the watch issue{where} and commented",
            "recovered": f"the watch issue{where} is closed: recovered", "none": "passed: no open watch issue"}[done.action]


def issue_labels(value: str) -> list[str]:
    """The issue-labels input: comma-separated names (default rag-gate)."""
    labels = [x.strip() for x in (value or "rag-gate").split(",") if x.strip()]
    for name in labels:
        if len(name) > 50:
            raise InputError(f"a label is at most 50 characters, got {len(name)}", key="input issue-labels")
    return labels


def after_recording(job: Any, report: Report, mode: str, code: int) -> int:
    """Modes record and watch, once the run is in the history: the watch issue (mode watch), then the dashboard
    (inputs dashboard, dashboard-branch). Returns the job's exit code: the verdict's, or 3 when the issue could not be
    written (the run's figures are recorded; the alert is what a watch run is for)."""
    from gate.github.client import PermissionDenied
    from gate.github.commands import action_input, emit, fail, group

    env, client = job.env, job.client
    if mode == "watch":
        with group("rag-gate: watch issue"):
            try:
                said = watch_issue(env, client, report, job.store.branch, issue_labels(action_input(env, "issue-labels", "rag-gate")))
                print(f"rag-gate: {said}", flush=True)
            except PermissionDenied:
                code = max(code, fail(env, "rag-gate: watch issue not written", "the token cannot write issues: give the job "
                                      "`permissions: issues: write`", code=3))
            except GitHubError as exc:
                code = max(code, fail(env, "rag-gate: watch issue not written", exc.message, hint=exc.hint, code=3))
    if action_input(env, "dashboard", "false").lower() in ("true", "1", "yes") or action_input(env, "dashboard-branch"):
        with group("rag-gate: dashboard"):
            try:
                _dashboard(job, env)
            except GitHubError as exc:
                emit("warning", f"the dashboard was not published: {exc.message}")
    return code


def _dashboard(job: Any, env: Mapping[str, str]) -> None:
    from pathlib import Path

    from gate.github.commands import action_input, set_outputs
    from gate.github.publish import dashboard_page, publish_dashboard
    from gate.io.files import write_text

    page = dashboard_page(job.store.read(), action_input(env, "config", "rag-eval.yml"))
    out = Path(action_input(env, "report-path", "rag-gate-report.json")).with_name("rag-gate-dashboard.html")
    write_text(out, page, what="dashboard")
    set_outputs(env, {"dashboard": str(out)})
    print(f"rag-gate: dashboard written to {out} (upload it with actions/upload-artifact)", flush=True)
    branch = action_input(env, "dashboard-branch")
    if branch:
        publish_dashboard(job.client, branch, page)
        print(f"rag-gate: dashboard committed to {branch}:index.html", flush=True)


def alert_unfinished(job: Any, config: str, exc: Any) -> None:
    """Mode watch, when the run could not complete (exit 3: the service or the judge unreachable): the issue says so,
    opened or updated as for a failing run. Whatever goes wrong here is a warning: the run's own error is the job's."""
    from gate.config.loader import load_spec
    from gate.github.commands import action_input, emit, group
    from gate.github.comment import run_page_url
    from gate.render.watch import unfinished_issue

    env, client = job.env, job.client
    with group("rag-gate: watch issue"):
        try:
            watch_id = str(load_spec(config, unset_ok=True).data["report"]["comment_id"])
            page = run_page_url(env)
            body = unfinished_issue(watch_id, exc.message, exc.hint, page)
            issues = WatchIssues(client, watch_id, labels=issue_labels(action_input(env, "issue-labels", "rag-gate")),
                                 claim_branch=action_input(env, "history-branch", "rag-gate-history"))
            done = issues.alert(f"rag-gate watch: {config[-120:]} could not run", body, body.split("\n", 1)[1], run_id=claimant(env))
            print(f"rag-gate: the run could not complete: {done.action} the watch issue #{done.number}", flush=True)
        except Exception as failure:  # noqa: BLE001 (never hide the run's own error behind this one)
            emit("warning", f"the watch issue could not be written: {type(failure).__name__}: {str(failure)[:300]}")
