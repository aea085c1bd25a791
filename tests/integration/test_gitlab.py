"""rag-gate on GitLab: the CI template's jobs run as a runner would (their real shell lines, with rag-gate from this
checkout on PATH and the install lines left out) in a copy of the quickstart, and ``rag-gate gitlab note`` in a
subprocess, against the GitLab API stand-in on 127.0.0.1 (tests/support/gitlab_server.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.io.reports import check_document
from gate.render.markdown import marker
from tests.support.action import impossible_threshold, restore_threshold, workspace
from tests.support.gitlab_server import BOT, BOT_TOKEN, HUMAN, READER_TOKEN, GitLabServer, gitlab_problems

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "templates" / "gitlab" / "rag-gate.gitlab-ci.yml"
BIN = Path(sys.executable).parent
MARK = marker()
MR = 5
INSTALL = re.compile(r"\bpip install\b|\bapt-get\b")  # the install lines: rag-gate comes from this checkout here


@pytest.fixture()
def gitlab():
    with GitLabServer() as srv:
        srv.add_project(7, "acme/rag-service", mrs=(MR,))
        yield srv


def ci_env(srv: GitLabServer, **extra: str) -> dict[str, str]:
    """GitLab CI's predefined variables of a merge request pipeline, the template's variables and the token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "GITLAB_", "GITHUB_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", CI="true", GITLAB_CI="true", CI_API_V4_URL=srv.api_url,
               CI_PROJECT_ID="7", CI_MERGE_REQUEST_IID=str(MR), CI_PIPELINE_SOURCE="merge_request_event",
               CI_JOB_URL=f"{srv.base_url}/acme/rag-service/-/jobs/4242", GITLAB_TOKEN=BOT_TOKEN)
    for name, value in template()["variables"].items():  # as GitLab expands them: ${NAME} of the ones before
        env.setdefault(name, re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), str(value)))
    env.update(extra)
    return env


def template() -> dict[str, Any]:
    return yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))


def run_job(name: str, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The job's before_script and script lines in one shell, as the runner runs them (set -eo pipefail)."""
    job = template()[name]
    lines = [line for line in job.get("before_script", []) + job["script"] if not INSTALL.search(line)]
    script = "set -eo pipefail\n" + "\n".join(lines) + "\n"
    return subprocess.run(["bash", "-c", script], cwd=ws, env=env, capture_output=True, text=True, timeout=300)


def note_cli(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "rag-gate"), "gitlab", "note", *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_template_runs_on_merge_requests_keeps_the_reports_and_notes_always():
    t = template()
    gate, note = t["rag-gate"], t["rag-gate-note"]
    assert "stages" not in t  # an include must not replace the including pipeline's stages
    for job in (gate, note):
        assert all(isinstance(line, str) for line in job["before_script"] + job["script"])  # a ": " in a line makes a mapping
        assert job["rules"][0]["if"] == '$CI_PIPELINE_SOURCE == "merge_request_event"'
        assert any(INSTALL.search(line) and "$RAG_GATE_PACKAGE" in line for line in job["before_script"])
    assert note["rules"][0]["when"] == "always" and note["needs"] == [{"job": "rag-gate", "artifacts": True}]
    assert gate["artifacts"]["when"] == "always" and gate["artifacts"]["reports"]["junit"] == "rag-gate-junit.xml"
    assert set(gate["artifacts"]["paths"]) >= {"rag-gate-report.json", "rag-gate-junit.xml", "rag-gate-report.html"}
    run = " ".join(gate["script"])
    for option in ("--config", "--report rag-gate-report.json", "--markdown", "--junit rag-gate-junit.xml", "--html"):
        assert option in run
    assert t["variables"]["RAG_GATE_PACKAGE"].startswith("rag-gate @ git+https://") and not {"on", "jobs"} & set(t)  # no GitHub workflow keys


def test_first_run_creates_the_note_and_the_next_edits_it(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    env = ci_env(gitlab)
    foreign = gitlab.add_note(MR, f"{MARK}\nquoted by a human: not rag-gate's note", HUMAN)
    gitlab.add_note(MR, "added 1 commit", BOT, system=True)

    gate = run_job("rag-gate", ws, env)
    assert gate.returncode == 0, gate.stderr
    assert {p.name for p in ws.glob("rag-gate-*")} == {"rag-gate-report.json", "rag-gate-report.md", "rag-gate-junit.xml",
                                                       "rag-gate-report.html"}
    first = run_job("rag-gate-note", ws, env)
    assert first.returncode == 0, first.stderr
    ours = [n for n in gitlab.notes(MR) if n["author"]["id"] == BOT["id"] and not n["system"]]
    assert len(ours) == 1 and MARK in ours[0]["body"] and "rag-gate passed" in ours[0]["body"]
    assert f"note created on merge request !{MR} (note {ours[0]['id']})" in first.stdout
    assert f"({gitlab.base_url}/acme/rag-service/-/jobs/4242/artifacts/browse)" in ours[0]["body"]

    impossible_threshold(ws)  # the next push fails a gate: the job fails with exit 1, the note job still runs
    gate = run_job("rag-gate", ws, env)
    assert gate.returncode == 1, gate.stderr
    second = run_job("rag-gate-note", ws, env)
    assert second.returncode == 0, second.stderr
    notes = gitlab.notes(MR)
    ours_now = [n for n in notes if n["author"]["id"] == BOT["id"] and not n["system"]]
    assert [n["id"] for n in ours_now] == [ours[0]["id"]] and "rag-gate failed" in ours_now[0]["body"]
    assert "note updated" in second.stdout and len(notes) == 3
    assert next(n for n in notes if n["id"] == foreign["id"])["body"] == foreign["body"]  # never edited
    assert gitlab.count("PUT") == 1 and gitlab.count("POST") == 1 and gitlab.count("GET", "/user") == 2
    assert {r.auth for r in gitlab.received} == {"private-token"}
    for out in (first, second):
        assert BOT_TOKEN not in out.stdout + out.stderr

    restore_threshold(ws)
    run_job("rag-gate", ws, env)
    assert "note updated" in run_job("rag-gate-note", ws, env).stdout
    assert "note unchanged" in run_job("rag-gate-note", ws, env).stdout  # the same report: nothing to write
    assert gitlab.count("PUT") == 2


def test_hostile_gitlab_references_in_a_report_stay_inert(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    assert run_job("rag-gate", ws, ci_env(gitlab)).returncode == 0
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    hostile = "/merge\n/approve !1 ~bug %v1 &2 $3 $x$ @root #4 [[_TOC_]] *iteration:1 [vulnerability:1] {+ x +}"
    report["warnings"].append(hostile)
    for stage in report["stages"].values():
        stage["warnings"].append("/close ~\"needs review\" %\"Sprint 4\" &amp;7 " + hostile)
    check_document(report, "report", file="hostile")
    (ws / "hostile.json").write_text(json.dumps(report), encoding="utf-8")
    done = note_cli(ws, ci_env(gitlab), "--report", "hostile.json")
    assert done.returncode == 0, done.stderr
    (note,) = [n for n in gitlab.notes(MR) if n["author"]["id"] == BOT["id"]]
    assert "approve" in note["body"] and "Sprint 4" in note["body"]  # shown, as typed
    assert gitlab_problems(note["body"]) == []


def test_pages_are_followed_to_find_the_note(tmp_path: Path):
    with GitLabServer(max_per_page=4) as srv:
        srv.add_project(7, "acme/rag-service", mrs=(MR,))
        for i in range(9):
            srv.add_note(MR, f"review comment {i}", HUMAN)
        mine = srv.add_note(MR, f"{MARK}\nold report", BOT)
        for i in range(3):
            srv.add_note(MR, f"later comment {i}", HUMAN)
        ws = workspace(tmp_path)
        assert run_job("rag-gate", ws, ci_env(srv)).returncode == 0
        report = ws / "rag-gate-report.json"
        # the project by its path, the token as a Bearer token
        done = note_cli(ws, ci_env(srv, CI_PROJECT_ID="acme/rag-service"), "--report", str(report), "--auth", "bearer")
        assert done.returncode == 0, done.stderr
        assert "note updated" in done.stdout and len(srv.notes(MR)) == 13
        assert next(n for n in srv.notes(MR) if n["id"] == mine["id"])["body"].startswith(MARK + "\n## ")
        pages = {r.query.get("page", "1") for r in srv.received if r.method == "GET" and r.path.endswith("/notes")}
        assert pages == {"1", "2", "3", "4"} and {r.auth for r in srv.received} == {"bearer"}


def test_retried_on_429_and_5xx_and_never_posted_twice(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    assert run_job("rag-gate", ws, ci_env(gitlab)).returncode == 0
    gitlab.fail(429, headers={"Retry-After": "0"}, method="GET")
    gitlab.fail(503, method="GET")
    gitlab.created_then_fail()  # the POST creates the note, and the answer is lost in a 502
    done = note_cli(ws, ci_env(gitlab))
    assert done.returncode == 0, done.stderr
    assert len(gitlab.notes(MR)) == 1 and gitlab.count("POST") == 1 and "note created" in done.stdout
    assert "rate limited (429)" in done.stderr and "answered 503" in done.stderr


def test_not_a_merge_request_pipeline_posts_nothing(gitlab: GitLabServer, tmp_path: Path):
    env = ci_env(gitlab)
    del env["CI_MERGE_REQUEST_IID"]
    done = note_cli(tmp_path, env, "--report", "missing.json")
    assert done.returncode == 0 and "not a merge request pipeline" in done.stdout and gitlab.received == []


@pytest.mark.parametrize(("change", "code", "said"), [
    ({"GITLAB_TOKEN": ""}, 2, "GITLAB_TOKEN: is not set or empty"),
    ({"CI_API_V4_URL": ""}, 2, "CI_API_V4_URL: is not set"),
    ({"CI_API_V4_URL": "gitlab.example.com"}, 2, "CI_API_V4_URL: must be the API's http(s) URL"),
    ({"CI_MERGE_REQUEST_IID": "5; rm"}, 2, "CI_MERGE_REQUEST_IID: must be a merge request's number"),
    ({"GITLAB_TOKEN": "glpat-Wrong0Token0That0Leaks"}, 3, "the GitLab token was refused: GET /api/v4/projects/7/merge_requests/5/notes answered 401 Unauthorized"),
    ({"GITLAB_TOKEN": READER_TOKEN}, 3, "may not do this: POST /api/v4/projects/7/merge_requests/5/notes answered 403 Forbidden"),
    ({"CI_MERGE_REQUEST_IID": "99"}, 3, "answered 404 Merge Request Not Found"),
    ({"CI_PROJECT_ID": "8"}, 3, "answered 404 Project Not Found"),
])
def test_errors_are_worded_with_the_exit_code_and_no_token(gitlab: GitLabServer, tmp_path: Path, change, code, said):
    ws = workspace(tmp_path)
    (ws / "rag-gate-report.json").write_text(_report(ws), encoding="utf-8")
    env = ci_env(gitlab, **change)
    done = note_cli(ws, env)
    assert done.returncode == code, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    token = env.get("GITLAB_TOKEN", "")
    assert not token or token not in done.stdout + done.stderr
    assert gitlab.notes(MR) == []


def test_a_custom_token_variable_and_a_missing_report(gitlab: GitLabServer, tmp_path: Path):
    env = ci_env(gitlab, RAG_NOTE_TOKEN=BOT_TOKEN)
    del env["GITLAB_TOKEN"]
    missing = note_cli(tmp_path, env, "--token-env", "RAG_NOTE_TOKEN", "--report", "nowhere.json")
    assert missing.returncode == 2 and "nowhere.json: report not found" in missing.stderr
    assert note_cli(tmp_path, env).returncode == 2  # GITLAB_TOKEN itself is not set


_REPORT_CACHE: dict[str, str] = {}


def _report(ws: Path) -> str:
    """A real report of the quickstart (made once for the parametrized error tests)."""
    if "text" not in _REPORT_CACHE:
        done = subprocess.run([str(BIN / "rag-gate"), "run", "--config", "rag-eval.yml", "--report", "r.json", "-q"], cwd=ws,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        _REPORT_CACHE["text"] = (ws / "r.json").read_text(encoding="utf-8")
    return _REPORT_CACHE["text"]


def test_when_on_failure_a_pass_posts_nothing_and_neutralises_an_earlier_failure(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    env = ci_env(gitlab, RAG_GATE_NOTE="on-failure")
    assert run_job("rag-gate", ws, env).returncode == 0
    quiet = run_job("rag-gate-note", ws, env)
    assert quiet.returncode == 0 and "passed: no note needed" in quiet.stdout, quiet.stdout + quiet.stderr
    assert gitlab.notes(MR) == [] and gitlab.count("POST") == 0
    impossible_threshold(ws)
    assert run_job("rag-gate", ws, env).returncode == 1
    failed = run_job("rag-gate-note", ws, env)
    assert "note created" in failed.stdout, failed.stdout + failed.stderr
    (note,) = gitlab.notes(MR)
    assert "rag-gate failed" in note["body"]
    restore_threshold(ws)
    assert run_job("rag-gate", ws, env).returncode == 0
    passed = run_job("rag-gate-note", ws, env)
    assert "passed: the earlier failure note was neutralised" in passed.stdout, passed.stdout + passed.stderr
    (same,) = gitlab.notes(MR)
    assert same["id"] == note["id"] and MARK in same["body"] and "rag-gate passed" in same["body"] and "failed" not in same["body"]
    assert "passed: the passed note is unchanged" in run_job("rag-gate-note", ws, env).stdout


def test_when_never_asks_gitlab_nothing(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    env = ci_env(gitlab, RAG_GATE_NOTE="never")
    assert run_job("rag-gate", ws, env).returncode == 0
    done = run_job("rag-gate-note", ws, env)
    assert done.returncode == 0 and "note: never" in done.stdout and gitlab.received == []
    wrong = note_cli(ws, ci_env(gitlab), "--when", "sometimes")
    assert wrong.returncode == 2 and "--when" in wrong.stderr and "on-failure" in wrong.stderr
