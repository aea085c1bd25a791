"""rag-gate on GitLab, the edges a first pipeline meets: a run that wrote no report (the note must not keep an older
result), a merge request from a fork (the note goes to the merge request's project, not the pipeline's), a token
without the api scope, a token in a protected variable, a GitLab that keeps failing, and a branch pipeline; the
template's jobs run as a runner would, against the GitLab API stand-in (tests/support/gitlab_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_gitlab import MR, ci_env, note_cli, run_job, template
from tests.support.action import edit_spec, impossible_threshold, workspace
from tests.support.gitlab_server import BOT, BOT_TOKEN, READ_API_TOKEN, GitLabServer, gitlab_problems
from tests.support.markup import inert_problems

HOSTILE = ("!45 @root #123 ~bug %v1 $5 $x$ &7 <img src=x onerror=alert(1)> [x](javascript:alert(1)) [[_TOC_]] {+ add +} "
           "*iteration:1 [vulnerability:1] | pipe `tick` </details> <!-- rag-gate:comment id=default -->")


@pytest.fixture()
def gitlab():
    with GitLabServer() as srv:
        srv.add_project(7, "acme/rag-service", mrs=(MR,))
        yield srv


def _break_spec(ws: Path) -> None:
    edit_spec(ws, "max_error_rate: 0\n", "max_error_rate: zero\n")


def test_a_run_that_wrote_no_report_replaces_the_earlier_result_in_the_note(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    env = ci_env(gitlab)
    assert run_job("rag-gate", ws, env).returncode == 0
    assert run_job("rag-gate-note", ws, env).returncode == 0
    (passed,) = gitlab.notes(MR)
    assert "rag-gate passed" in passed["body"]

    _break_spec(ws)  # the next push makes the spec invalid: the gate job exits 2 and writes no report
    for name in ("rag-gate-report.json", "rag-gate-report.md", "rag-gate-junit.xml", "rag-gate-report.html"):
        (ws / name).unlink()  # a new pipeline: the earlier pipeline's artifacts are not there
    gate = run_job("rag-gate", ws, env)
    assert gate.returncode == 2 and "max_error_rate" in gate.stderr and not (ws / "rag-gate-report.json").exists()
    note = run_job("rag-gate-note", ws, env)
    assert note.returncode == 0, note.stderr
    assert "no report at rag-gate-report.json" in note.stdout and f"note updated on merge request !{MR}" in note.stdout
    (now,) = gitlab.notes(MR)
    assert now["id"] == passed["id"] and "rag-gate wrote no report" in now["body"] and "passed" not in now["body"]
    assert "out of date" in now["body"]


def test_no_report_with_no_earlier_note_posts_one_and_never_posts_nothing(gitlab: GitLabServer, tmp_path: Path):
    done = note_cli(tmp_path, ci_env(gitlab), "--missing-report", "note", "--when", "on-failure")
    assert done.returncode == 0, done.stderr
    (note,) = gitlab.notes(MR)
    assert "note created" in done.stdout and "rag-gate wrote no report" in note["body"] and note["author"]["id"] == BOT["id"]
    never = note_cli(tmp_path, ci_env(gitlab), "--missing-report", "note", "--when", "never")
    assert never.returncode == 0 and "note: never" in never.stdout and gitlab.count("POST") == 1
    plain = note_cli(tmp_path, ci_env(gitlab))  # without the option a missing report is an input error
    assert plain.returncode == 2 and "rag-gate-report.json: report not found" in plain.stderr


def test_a_merge_request_from_a_fork_gets_the_note_on_the_merge_requests_project(tmp_path: Path):
    with GitLabServer() as srv:
        srv.add_project(7, "acme/rag-service", mrs=(MR,))
        srv.add_project(8, "contributor/rag-service", mrs=(MR,))  # the fork has a merge request with the same number
        ws = workspace(tmp_path)
        env = ci_env(srv, CI_PROJECT_ID="8", CI_MERGE_REQUEST_PROJECT_ID="7")  # the pipeline runs in the fork
        assert run_job("rag-gate", ws, env).returncode == 0
        done = run_job("rag-gate-note", ws, env)
        assert done.returncode == 0, done.stderr
        assert len(srv.notes(MR, pid=7)) == 1 and srv.notes(MR, pid=8) == []


def test_a_token_without_the_api_scope_is_said_with_gitlabs_reason(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    env = ci_env(gitlab, GITLAB_TOKEN=READ_API_TOKEN)
    assert run_job("rag-gate", ws, env).returncode == 0
    done = run_job("rag-gate-note", ws, env)
    assert done.returncode == 3 and template()["rag-gate-note"]["allow_failure"] is True  # a warning, not a red pipeline
    assert "answered 403 insufficient_scope: The request requires higher privileges than provided by the access token. " \
           "(scope needed: api)" in done.stderr
    assert READ_API_TOKEN not in done.stdout + done.stderr and "Traceback" not in done.stderr and gitlab.notes(MR) == []


def test_a_missing_token_names_the_protected_variable_trap(gitlab: GitLabServer, tmp_path: Path):
    env = ci_env(gitlab, GITLAB_TOKEN="", CI_JOB_TOKEN="job-token-of-this-pipeline")  # a protected variable: not set here
    done = note_cli(tmp_path, env, "--missing-report", "note")
    assert done.returncode == 2 and "GITLAB_TOKEN: is not set or empty" in done.stderr
    assert "'Protect variable'" in done.stderr and "fork" in done.stderr and gitlab.received == []
    assert "job-token-of-this-pipeline" not in done.stdout + done.stderr


def test_a_gitlab_that_keeps_failing_says_its_status_and_the_gate_keeps_its_exit_code(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    env = ci_env(gitlab)
    impossible_threshold(ws)
    assert run_job("rag-gate", ws, env).returncode == 1  # the gate's verdict is the gate job's exit code
    gitlab.fail(500, times=10)
    done = run_job("rag-gate-note", ws, env)
    assert done.returncode == 3 and template()["rag-gate-note"]["allow_failure"] is True
    assert "answered 500 Internal Server Error" in done.stderr and "Bad Gateway" not in done.stderr
    assert BOT_TOKEN not in done.stdout + done.stderr and gitlab.notes(MR) == []


def test_a_branch_pipeline_runs_neither_job_and_the_note_command_posts_nothing(gitlab: GitLabServer, tmp_path: Path):
    t = template()
    for name in ("rag-gate", "rag-gate-note"):  # a push pipeline: every rule of both jobs is false
        assert [rule["if"] for rule in t[name]["rules"]] == ['$CI_PIPELINE_SOURCE == "merge_request_event"']
    env = ci_env(gitlab, CI_PIPELINE_SOURCE="push", CI_COMMIT_BRANCH="feature")
    del env["CI_MERGE_REQUEST_IID"]
    done = note_cli(tmp_path, env, "--missing-report", "note")
    assert done.returncode == 0 and "not a merge request pipeline" in done.stdout and gitlab.received == []


def test_the_job_token_is_refused_before_any_request(gitlab: GitLabServer, tmp_path: Path):
    env = ci_env(gitlab, CI_JOB_TOKEN="job-token-of-this-pipeline")
    done = note_cli(tmp_path, env, "--token-env", "CI_JOB_TOKEN", "--report", "nowhere.json")
    assert done.returncode == 2 and "--token-env: names the job token" in done.stderr and "project access token" in done.stderr
    assert gitlab.received == [] and "job-token-of-this-pipeline" not in done.stdout + done.stderr


def test_hostile_golden_cases_and_answers_reach_the_note_inert(gitlab: GitLabServer, tmp_path: Path):
    ws = workspace(tmp_path)
    with (ws / "corpus.jsonl").open("a", encoding="utf-8") as f:  # the answer the RAG gives is the hostile passage
        f.write(json.dumps({"id": "evil#chunk_1", "title": "t", "text": f"Gribbleworth tokens cost {HOSTILE} ok. /merge now."}) + "\n")
    with (ws / "golden_set.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "evil1", "question": "/merge\n/approve zorblax? " + HOSTILE, "ground_truth": "/close " + HOSTILE,
                            "relevant_doc_ids": ["missing#chunk_9"], "type": "answerable", "tags": ["badcase", "@root", "#123"],
                            "category": "evil !45 @root"}) + "\n")
        f.write(json.dumps({"id": "evil2", "question": "How much do gribbleworth tokens cost?", "type": "out_of_scope"}) + "\n")
    env = ci_env(gitlab)
    assert run_job("rag-gate", ws, env).returncode == 1  # the hostile cases fail gates: their text is in the note
    done = run_job("rag-gate-note", ws, env)
    assert done.returncode == 0, done.stderr
    (note,) = gitlab.notes(MR)
    assert "evil1" in note["body"] and "Gribbleworth tokens cost" in note["body"] and "onerror=alert(1)" in note["body"]
    assert gitlab_problems((ws / "rag-gate-report.md").read_text(encoding="utf-8"))  # the GitHub body lets some through
    assert gitlab_problems(note["body"]) == []
    assert all("/artifacts/browse" in p or p == "tag <a>" for p in inert_problems(note["body"]))  # only the job's link


def test_a_gitlab_that_cannot_be_reached_is_said_in_short_lines_each_ours(caplog: pytest.LogCaptureFixture):
    """Connection refused: each retry line starts "rag-gate:" and says the reason in words, not urllib3's repr of its
    pool and connection objects; the error at the end says it the same way."""
    import logging
    import socket

    from gate.core.errors import ApiError
    from gate.gitlab.client import GitLabClient
    from gate.io.rest import Retrying

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = GitLabClient(f"http://127.0.0.1:{port}/api/v4", BOT_TOKEN, "7",
                          retrying=Retrying(timeout=5, max_retries=2, sleep=lambda s: None))
    with caplog.at_level(logging.WARNING), pytest.raises(ApiError) as caught:
        client.find_note(5, "<!-- marker -->")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(line.startswith("rag-gate: GET /api/v4/projects/7/merge_requests/5/notes: no answer "
                                                   "from GitLab (ConnectionError: ") for line in lines), lines
    for text in [*lines, str(caught.value)]:
        assert "Connection refused" in text and "object at 0x" not in text and "HTTPConnectionPool" not in text, text
        assert BOT_TOKEN not in text
