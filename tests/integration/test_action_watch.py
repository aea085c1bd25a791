"""The action in mode watch, as a scheduled job runs it: the entry point in a subprocess with GitHub's environment,
against the GitHub stand-in on 127.0.0.1 (issues, comments, contents), in a copy of the quickstart. A failing run
opens one issue (what changed first, the report, the run's link), a second edits it and comments, a passing run
comments "recovered" and closes it; two failing runs at once leave one issue; a person's issue that quotes the marker
is never touched; the issue body is read in cmark-gfm's HTML."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from tests.support.action import (
    HISTORY_BRANCH,
    REPO,
    history,
    impossible_threshold,
    restore_threshold,
    run_action,
    workspace,
)
from tests.support.github_server import BOT, GitHubServer
from tests.support.markup import render

MARKER = "<!-- rag-gate:watch id=default -->"
SCHEDULE = {"schedule": "17 6 * * 1", "repository": {"full_name": REPO, "default_branch": "main"}}


@pytest.fixture
def gh():
    with GitHubServer(repos=(REPO,)) as srv:
        yield srv


def watch(gh: GitHubServer, ws: Path, run_id: int, **inputs: str):
    return run_action(gh, ws, "schedule", SCHEDULE, sha=gh.branch_sha("main", REPO) or "", ref_name="main",
                      inputs={"issue-labels": "rag-gate,quality", **inputs},
                      extra_env={"GITHUB_RUN_ID": str(run_id), "GITHUB_SERVER_URL": "https://github.com"})


def ours(gh: GitHubServer) -> list[dict]:
    return [i for i in gh.issues(REPO) if i["user"]["login"] == BOT["login"]]


def set_model(ws: Path, model: str) -> None:
    """The quickstart RAG's answers say which model answered (QUICKRAG_MODEL, read in the action's process)."""
    (ws / "quickrag" / "model.txt").write_text(model, encoding="utf-8")


def test_a_failing_watch_run_opens_one_issue_a_second_edits_it_and_a_pass_closes_it(gh, tmp_path):
    ws = workspace(tmp_path)
    human = gh.add_issue("rag-gate is flaky?", f"I saw this in a body: {MARKER}", login="octocat", labels=["rag-gate"])

    first = watch(gh, ws, 101)  # passes: recorded as the last good scheduled run
    assert first.code == 0, str(first)
    assert "rag-gate: passed: no open watch issue" in first.stdout and ours(gh) == []

    impossible_threshold(ws)
    second = watch(gh, ws, 102)
    assert second.code == 1, str(second)
    (issue,) = ours(gh)
    assert "rag-gate: opened the watch issue #" in second.stdout
    assert issue["state"] == "open" and [x["name"] for x in issue["labels"]] == ["rag-gate", "quality"]
    assert issue["title"] == "rag-gate watch: rag-eval.yml is failing"
    body = issue["body"]
    assert body.startswith(MARKER + "\n")
    assert "[the run and its artifacts](https://github.com/owner/repo/actions/runs/102)" in body
    assert "rag-gate failed" in body and "hit_rate@5" in body and len(body) <= 65536
    html = render(body)
    assert "<script" not in html and "<img" not in html

    third = watch(gh, ws, 103)
    assert third.code == 1, str(third)
    (issue,) = ours(gh)
    assert "updated the watch issue" in third.stdout
    assert "actions/runs/103" in issue["body"]  # edited: the newest run's report
    (comment,) = issue["comments_list"]
    assert comment["body"].startswith("Still failing: rag-gate failed") and "actions/runs/103" in comment["body"]

    restore_threshold(ws)
    fourth = watch(gh, ws, 104)
    assert fourth.code == 0, str(fourth)
    (issue,) = ours(gh)
    assert issue["state"] == "closed" and issue["state_reason"] == "completed"
    assert issue["comments_list"][-1]["body"].startswith("Recovered: every gate passes again.")
    assert "hit_rate@5" in issue["comments_list"][-1]["body"]
    assert [(e["kind"], e["verdict"]) for e in history(gh)] == [("schedule", "pass"), ("schedule", "fail"), ("schedule", "fail"),
                                                                 ("schedule", "pass")]
    (still,) = [i for i in gh.issues(REPO) if i["number"] == human["number"]]
    assert still["body"] == human["body"] and still["state"] == "open" and still["comments_list"] == []

    impossible_threshold(ws)  # failing again after the recovery: a new issue, the closed one left closed
    fifth = watch(gh, ws, 105)
    assert fifth.code == 1 and [i["state"] for i in ours(gh)] == ["closed", "open"]


def test_two_failing_watch_runs_at_once_leave_one_issue(gh, tmp_path):
    wss = [workspace(tmp_path, f"ws{i}") for i in range(3)]
    for w in wss:
        impossible_threshold(w)
    gh.hold_reads(3, 60, path=r"/issues$", rounds=2)  # the runs list the issues twice each (before and after their claim) at once
    results: list = [None] * 3

    def go(i: int) -> None:
        results[i] = watch(gh, wss[i], 200 + i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=200)
    assert all(r is not None and r.code == 1 for r in results), [str(r) for r in results]
    (issue,) = ours(gh)
    said = sorted(re.search(r"rag-gate: (opened|updated) the watch issue", r.stdout)[1] for r in results)
    assert said == ["opened", "updated", "updated"]
    assert len(issue["comments_list"]) == 2
    claim = json.loads(gh.file("rag-gate/watch/default.json", HISTORY_BRANCH, REPO) or "{}")
    assert claim["state"] == "open" and claim["issue"] == issue["number"]


def test_changes_come_first_in_the_issue_and_hostile_system_text_stays_text(gh, tmp_path):
    ws = workspace(tmp_path)
    rag = ws / "quickrag" / "rag.py"
    text = rag.read_text(encoding="utf-8")
    rag.write_text(text.replace('model = os.environ.get("QUICKRAG_MODEL") or f"quickrag-extractive-{mode}"',
                                'model = (Path(__file__).with_name("model.txt").read_text().strip()\n'
                                '             if Path(__file__).with_name("model.txt").exists() else f"quickrag-extractive-{mode}")'),
                   encoding="utf-8")
    set_model(ws, "answerer-2025-06")
    assert watch(gh, ws, 301).code == 0
    impossible_threshold(ws)
    set_model(ws, "<img src=x onerror=alert(1)> @octocat #1 https://evil.example")
    r = watch(gh, ws, 302)
    assert r.code == 1, str(r)
    (issue,) = ours(gh)
    body = issue["body"]
    lines = body.splitlines()
    assert lines[1].startswith("**What changed** since the last passing scheduled run")
    assert lines[3].startswith("- `system.model`: answerer-2025-06 → ")
    html = render(body)
    assert "<img" not in html and 'href="https://evil' not in html and "@octocat" not in html and "#1 " not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_token_that_cannot_write_issues_fails_the_watch_job_saying_which_permission(gh, tmp_path):
    ws = workspace(tmp_path)
    impossible_threshold(ws)
    gh.inject(__import__("tests.support.github_server", fromlist=["status"]).status(403, {"message": "Resource not accessible by integration"}),
              times=5, method="POST", path=r"/issues$")
    r = watch(gh, ws, 401)
    assert r.code == 3, str(r)
    assert any("issues: write" in line for line in r.lines("error"))
    assert [e["verdict"] for e in history(gh)] == ["fail"]  # the figures are recorded all the same


def test_the_dashboard_is_written_beside_the_report_and_committed_to_the_pages_branch(gh, tmp_path):
    ws = workspace(tmp_path)
    for run_id in (501, 502):
        r = watch(gh, ws, run_id, **{"dashboard": "true", "dashboard-branch": "gh-pages"})
        assert r.code == 0, str(r)
    page = (ws / "rag-gate-dashboard.html").read_text(encoding="utf-8")
    assert r.outputs["dashboard"] == "rag-gate-dashboard.html"
    assert gh.file("index.html", "gh-pages", REPO) == page  # the newest page, with both runs
    data = json.loads(re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, re.S)[1])
    assert len(data["runs"]) == 2 and {run["kind"] for run in data["runs"]} == {"schedule"}
    assert "Content-Security-Policy" in page


def test_a_watch_run_that_cannot_reach_the_service_opens_the_issue_saying_so(gh, tmp_path):
    ws = workspace(tmp_path)
    spec = (ws / "rag-eval.yml").read_text(encoding="utf-8")
    start, end = spec.index("target:\n"), spec.index("  k: 10\n")
    (ws / "rag-eval.yml").write_text(spec[:start] + "target:\n  http:\n    url: http://127.0.0.1:9/query\n" + spec[end:], encoding="utf-8")
    r = watch(gh, ws, 601)
    assert r.code == 3, str(r)
    (issue,) = ours(gh)
    body = issue["body"].splitlines()
    assert body[0] == MARKER and body[1] == "## ❌ rag-gate could not complete the watch run"
    assert "connection refused" in issue["body"].lower() and "actions/runs/601" in issue["body"]
    assert history(gh) == []  # a run that did not complete is not recorded
    (ws / "rag-eval.yml").write_text(spec, encoding="utf-8")  # the service is back: the next run passes and closes it
    assert watch(gh, ws, 602).code == 0
    assert [i["state"] for i in ours(gh)] == ["closed"]
