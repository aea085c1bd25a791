"""The GitHub Action end to end, run the way GitHub runs the container's entry point: ``python entrypoint.py`` in a
real subprocess, with GitHub's INPUT_* / GITHUB_* environment, an event file, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY
files, the quickstart RAG (an in-process python target, offline) as the workspace, and the fake GitHub REST API
(tests/support/github_server.py) on 127.0.0.1 as GITHUB_API_URL."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.action import (
    HEAD,
    HISTORY,
    HISTORY_BRANCH,
    MARK,
    PR,
    REPO,
    assert_token_hidden,
    comment_texts,
    fork_report,
    history,
    impossible_threshold,
    pr_event,
    push_event,
    report_workspace,
    restore_threshold,
    run_action,
    workflow_run_event,
    workspace,
)
from tests.support.github_server import READ_TOKEN, WRITE_TOKEN, GitHubServer, status

RETRIEVAL_ROW = re.compile(r"^\| `hit_rate@5` \| 0\.9062 \| 0\.9062 \|", re.M)
NEUTRAL = f"{MARK}\n## ✅ rag-gate passed\n\nEvery gate passes now; the earlier failure report was replaced.\n"


@pytest.fixture
def gh():
    with GitHubServer(repos=(REPO,)) as srv:
        yield srv


@pytest.fixture
def ws(tmp_path) -> Path:
    return workspace(tmp_path)


def test_gate_on_a_pull_request_comments_once_and_sets_outputs_summary_and_masks(gh, ws):
    r = run_action(gh, ws, "pull_request", pr_event(base=gh.branch_sha("main", REPO)))
    assert r.code == 0, str(r)
    comments = gh.comments(PR, REPO)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith(MARK + "\n## ✅ rag-gate passed")
    assert "### ✅ Retrieval: pass" in body and RETRIEVAL_ROW.search(body)
    assert "| Metric | Baseline | This run | Δ | Gate | Status |" in body
    assert "baseline `eval/baseline.json`" in body  # no history yet: the committed baseline file
    assert r.summary == body  # the job summary is the same report
    assert "rag-gate: comment created" in r.stdout
    # outputs
    assert r.outputs["verdict"] == "pass"
    assert r.outputs["report"] == "rag-gate-report.json"
    metrics = json.loads(r.outputs["metrics"])
    assert metrics["retrieval"]["hit_rate@5"] == pytest.approx(0.90625)
    assert set(metrics) == {"retrieval", "generation", "robustness"}
    # the reports the step leaves in the workspace, for an upload-artifact step
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    assert (report["verdict"], report["run"]["pr"], report["run"]["head_sha"]) == ("pass", PR, HEAD)
    assert (ws / "rag-gate-report.md").read_text(encoding="utf-8") == body
    assert (ws / "rag-gate-report.xml").is_file()
    # log: a group around the run, no annotations on a pass, the token masked and nowhere else
    assert "::group::rag-gate: run" in r.stdout and "::group::rag-gate: PR comment" in r.stdout
    assert r.stdout.count("::endgroup::") == 2
    assert r.lines("error") == []
    assert_token_hidden(r, ws / "rag-gate-report.json", ws / "rag-gate-report.md", ws / "rag-gate-report.xml")
    assert WRITE_TOKEN not in body
    # what GitHub received: a Bearer token on every request, one comment created
    assert gh.requests and all(q.auth_scheme == "Bearer" for q in gh.requests)
    assert gh.count(method="POST", path=rf"/issues/{PR}/comments$", status=201) == 1
    assert gh.count(method="GET", path=r"/commits$") == 0  # no history: no reason to list the base's ancestors


def test_run_two_on_the_same_pull_request_edits_the_same_comment(gh, ws):
    run_action(gh, ws, "pull_request", pr_event())
    first = gh.comments(PR, REPO)
    assert len(first) == 1
    r = run_action(gh, ws, "pull_request", pr_event(head="ab" * 20))  # a new push to the PR
    assert r.code == 0, str(r)
    second = gh.comments(PR, REPO)
    assert [c["id"] for c in second] == [first[0]["id"]]
    patched = gh.count(method="PATCH", path=rf"/issues/comments/{first[0]['id']}$", status=200)
    assert (patched == 1 and "rag-gate: comment updated" in r.stdout) or (patched == 0 and "rag-gate: comment unchanged" in r.stdout)
    assert gh.count(method="POST", path=r"/comments$") == 1


def test_a_failing_gate_fails_the_step_and_on_failure_neutralises_the_comment_once_fixed(gh, ws, tmp_path):
    run_action(gh, ws, "pull_request", pr_event())
    (cid,) = [c["id"] for c in gh.comments(PR, REPO)]

    impossible_threshold(ws)
    r = run_action(gh, ws, "pull_request", pr_event())
    assert r.code == 1, str(r)
    assert r.outputs["verdict"] == "fail"
    errors = r.lines("error")
    assert 1 <= len(errors) <= 10
    assert any("hit_rate@5" in e and "title=rag-gate%3A hit_rate@5 gate failed" in e for e in errors), errors
    (c,) = gh.comments(PR, REPO)
    assert c["id"] == cid and c["body"].startswith(MARK + "\n## ❌ rag-gate failed: 1 of 13 gates failed")
    assert "❌ `hit_rate@5`" in c["body"] and "### ❌ Retrieval: fail" in c["body"]
    assert r.summary == c["body"]

    restore_threshold(ws)
    r = run_action(gh, ws, "pull_request", pr_event(), comment="on-failure")
    assert r.code == 0, str(r)
    assert [(c["id"], c["body"]) for c in gh.comments(PR, REPO)] == [(cid, NEUTRAL)]
    assert "the earlier failure comment was neutralised" in r.stdout
    assert RETRIEVAL_ROW.search(r.summary)  # the job summary still has the full report

    other = PR + 1  # on-failure and nothing to neutralise: no comment at all
    r = run_action(gh, ws, "pull_request", pr_event(number=other), comment="on-failure")
    assert r.code == 0 and "passed: no comment needed" in r.stdout
    assert gh.comments(other, REPO) == []
    assert gh.count(method="POST", path=rf"/issues/{other}/comments$") == 0

    impossible_threshold(ws)  # on-failure and a failure: the comment is posted
    r = run_action(gh, ws, "pull_request", pr_event(number=other), comment="on-failure")
    assert r.code == 1 and len(gh.comments(other, REPO)) == 1

    r = run_action(gh, ws, "pull_request", pr_event(number=other + 1), comment="never")
    assert r.code == 1 and gh.comments(other + 1, REPO) == [] and "comment: never" in r.stdout


def test_more_than_ten_failed_gates_give_ten_error_annotations(gh, ws):
    spec = ws / "rag-eval.yml"
    text = spec.read_text(encoding="utf-8")
    impossible = "".join(f"      {m}: {{min: 0.999}}\n" for m in ("hit_rate@5", "recall@5", "precision@5", "map", "context_recall@5", "ndcg@10"))
    for line in ("hit_rate@5: {min: 0.80, max_drop: 0.02}", 'context_recall@5: {max_drop: "3%"}', "ndcg@10: {max_drop: 0.03}"):
        assert f"      {line}\n" in text
        text = text.replace(f"      {line}\n", "")
    text = text.replace("    gates:\n", "    gates:\n" + impossible, 1)
    text = text.replace("mrr: {min: 0.60,", "mrr: {min: 0.999,").replace("p95_latency_ms: {max: 800}", "p95_latency_ms: {max: 0.000001}")
    text = text.replace("noise_robustness: {min: 0.7}", "noise_robustness: {min: 0.999}")
    text = text.replace("rejection_rate: {min: 0.6}", "rejection_rate: {min: 0.999}")
    text = text.replace("false_rejection_rate: {max: 0.1}", "false_rejection_rate: {max: 0.000001}")
    text = text.replace("token_f1: {max_drop: 0.05}", "token_f1: {min: 0.999}").replace("rouge_l: {max_drop: 0.05}", "rouge_l: {min: 0.999}")
    spec.write_text(text, encoding="utf-8")
    r = run_action(gh, ws, "pull_request", pr_event(), comment="never")
    assert r.code == 1, str(r)
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    failed = [g for s in report["stages"].values() for g in s["gates"] if g["status"] == "fail"]
    assert len(failed) > 10
    errors = r.lines("error")
    assert len(errors) == 10  # GitHub shows at most 10 error annotations a step: the tenth says how many more
    assert errors[-1].endswith(f"::{len(failed) - 9} more failures in the job summary")
    assert [e.split("::")[1] for e in errors[:9]] == [f"error title=rag-gate%3A {g['metric']} gate failed" for g in failed[:9]]


def test_a_forks_read_only_token_still_gates_and_skips_the_comment_with_a_notice(gh, ws):
    impossible_threshold(ws)
    r = run_action(gh, ws, "pull_request", pr_event(), token=READ_TOKEN)
    assert r.code == 1, str(r)  # the status is still the verdict
    assert r.outputs["verdict"] == "fail"
    notices = r.lines("notice")
    assert len(notices) == 1 and "the comment was skipped" in notices[0] and "workflow_run" in notices[0]
    assert r.lines("warning") == []
    assert gh.comments(PR, REPO) == []
    assert gh.count(method="POST", status=403) == 1  # it tried, GitHub refused, nothing more
    assert "❌ rag-gate failed" in r.summary
    assert_token_hidden(r, ws / "rag-gate-report.json")


def test_a_forks_pr_without_the_judge_key_skips_the_judge_gates_never_passes_or_fails_them(gh, ws):
    """A fork's pull_request has no secrets: the judge spec still gates retrieval and the offline metrics; every gate on
    a judged metric is skipped (not passed, not failed) and the comment says why."""
    r = run_action(gh, ws, "pull_request", pr_event(), token=READ_TOKEN, inputs={"config": "rag-eval.judge.yml"})
    assert r.code == 0 and r.outputs["verdict"] == "pass", str(r)
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    gates = {g["metric"]: g for g in report["stages"]["generation"]["gates"]}
    judged = {m: g["status"] for m, g in gates.items() if m != "token_f1"}
    assert judged == {"faithfulness": "skipped", "answer_relevancy": "skipped"}, gates
    assert gates["faithfulness"]["reason"] == ("not evaluated: the judge's key OPENAI_API_KEY is not set in this run "
                                               "(a fork's pull request has no secrets)")
    assert gates["token_f1"]["value"] == pytest.approx(0.3425, abs=1e-4)  # the offline metric is still measured
    assert report["stages"]["retrieval"]["status"] == "pass"
    assert "key OPENAI_API_KEY is not set in this run" in r.summary  # an underscore inside a word needs no escape
    assert "no LLM judge ran" in r.summary and "Judged" not in r.summary
    assert any("the comment was skipped" in n for n in r.lines("notice"))
    assert not r.lines("error")


def test_history_that_cannot_be_read_does_not_stop_the_gate(gh, ws):
    gh.inject(status(403, {"message": "Resource not accessible by integration"}), times=99, method="GET", path=r"/contents/")
    r = run_action(gh, ws, "pull_request", pr_event())
    assert r.code == 0, str(r)
    (body,) = comment_texts(gh)
    assert "could not be read" in body and "baseline `eval/baseline.json`" in body


# --------------------------------------------------------------------------- mode record, and the baseline it gives PRs


def test_record_on_the_default_branch_and_a_pr_takes_its_base_commits_entry(gh, tmp_path):
    ws = workspace(tmp_path)
    c1 = gh.add_commit("main", "one", repo=REPO)
    r = run_action(gh, ws, "push", push_event(c1), sha=c1, ref_name="main")  # mode chosen from the event
    assert r.code == 0, str(r)
    assert f"::group::rag-gate: history\nrag-gate: recorded in the history ({HISTORY_BRANCH}:{HISTORY})" in r.stdout
    assert [(e["commit"], e["branch"], e["verdict"]) for e in history(gh)] == [(c1, "main", "pass")]
    assert gh.comments(PR, REPO) == [] and gh.count(path=r"/comments") == 0  # no PR: no comment
    assert r.outputs["verdict"] == "pass" and "PR comment" not in r.stdout

    c2 = gh.add_commit("main", "two", repo=REPO)
    r = run_action(gh, ws, "push", push_event(c2), mode="record", sha=c2, ref_name="main")
    assert r.code == 0, str(r)
    entries = history(gh)
    assert [e["commit"] for e in entries] == [c1, c2]
    assert entries[1]["stages"]["retrieval"]["metrics"]["hit_rate@5"] == pytest.approx(0.90625)
    assert gh.file(HISTORY, "main", REPO) is None  # the default branch is untouched
    puts = [q for q in gh.requests if q.method == "PUT"]
    assert len(puts) == 2 and all(q.body["branch"] == HISTORY_BRANCH and "[skip ci]" in q.body["message"] for q in puts)

    # a PR based on c1: its baseline is c1's entry, and the comment says which and how old
    gh.reset()
    r = run_action(gh, ws, "pull_request", pr_event(base=c1))
    assert r.code == 0, str(r)
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    assert report["baseline"]["source"] == f"entry of base commit {c1[:7]}"
    assert report["baseline"]["commit"] == c1 and report["baseline"]["created_at"] == entries[0]["created_at"]
    (body,) = comment_texts(gh)
    assert re.search(rf"· entry of base commit {c1[:7]} from \d{{4}}-\d\d-\d\d, \d+ days? old", body), body
    assert "eval/baseline.json" not in body
    assert gh.count(method="GET", path=r"/commits$") == 0  # the base commit had an entry: no ancestor listing
    assert len(history(gh)) == 2  # a gate run never records

    # a PR based on a later commit with no entry: the newest ancestor that has one (c2), found with one API call
    c3 = gh.add_commit("main", "three", repo=REPO)
    gh.reset()
    r = run_action(gh, ws, "pull_request", pr_event(number=PR + 1, base=c3))
    assert r.code == 0, str(r)
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    assert report["baseline"]["source"] == f"newest ancestor entry ({c2[:7]})"
    assert f"newest ancestor entry ({c2[:7]})" in comment_texts(gh, PR + 1)[0]
    assert [q.query.get("sha") for q in gh.requests if q.path.endswith("/commits")] == [c3]

    # a base commit GitHub does not know: no ancestors, a warning, the committed baseline file
    r = run_action(gh, ws, "pull_request", pr_event(number=PR + 2, base="de" * 20))
    assert r.code == 0, str(r)
    assert any("ancestors could not be listed" in w for w in r.lines("warning"))
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    assert report["baseline"]["source"] == "no history entry for the base commit; the committed baseline file"
    assert "baseline `eval/baseline.json`" in comment_texts(gh, PR + 2)[0]


def test_record_with_a_read_only_token_fails_the_step_and_says_what_permission(gh, ws):
    sha = gh.add_commit("main", "one", repo=REPO)
    r = run_action(gh, ws, "push", push_event(sha), token=READ_TOKEN, sha=sha, ref_name="main")
    assert r.code == 3, str(r)
    (err,) = r.lines("error")
    assert "contents: write" in err and HISTORY_BRANCH in err
    assert r.outputs["verdict"] == "pass"  # the run itself passed; the history was not written
    assert gh.branch_sha(HISTORY_BRANCH, REPO) is None


# --------------------------------------------------------------------------- mode report (workflow_run, fork-safe)


def test_report_mode_posts_the_forks_comment_when_the_artifact_matches_the_pr_head(gh, tmp_path):
    artifact = fork_report(gh, tmp_path)
    gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
    ws = report_workspace(tmp_path, artifact)
    r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD))  # mode chosen from the event
    assert r.code == 0, str(r)  # the pull_request job's check carries the verdict
    (c,) = gh.comments(PR, REPO)
    assert c["body"].startswith(MARK + "\n## ❌ rag-gate failed: 1 of 13 gates failed") and RETRIEVAL_ROW.search(c["body"])
    assert "❌ `hit_rate@5`" in c["body"] and "min 0.99, max_drop 0.02" in c["body"]
    assert (ws.parent / "fork" / "rag-gate-report.md").read_text(encoding="utf-8") == c["body"]  # the fork job's own render
    assert r.summary == c["body"]
    assert r.outputs["verdict"] == "fail" and json.loads(r.outputs["metrics"])["retrieval"]["hit_rate@5"] == pytest.approx(0.90625)
    assert gh.count(method="GET", path=rf"/pulls/{PR}$", status=200) == 1
    # a re-run of the follow-up edits the same comment
    r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD), mode="report")
    assert r.code == 0 and [x["id"] for x in gh.comments(PR, REPO)] == [c["id"]]


SERVER = "https://github.example"  # a GitHub Enterprise server's address: the link follows GITHUB_SERVER_URL


def test_gate_writes_the_html_report_and_the_comment_links_to_the_runs_artifacts(gh, ws):
    from tests.support.markup import inert_problems

    r = run_action(gh, ws, "pull_request", pr_event(base=gh.branch_sha("main", REPO)),
                   extra_env={"GITHUB_SERVER_URL": SERVER, "GITHUB_RUN_ID": "4242"})
    assert r.code == 0, str(r)
    page = f"{SERVER}/{REPO}/actions/runs/4242"
    report = json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))
    assert report["run"]["url"] == page
    html = (ws / "rag-gate-report.html").read_text(encoding="utf-8")  # next to report.json, for the upload step
    assert html.startswith("<!doctype html>") and all(f'"id":"{c["id"]}"' in html for c in report["cases"])
    (c,) = gh.comments(PR, REPO)
    assert f"the HTML report in [this run's artifacts]({page})." in c["body"]
    assert inert_problems(c["body"], link=page) == []  # that link, once, and nothing else
    assert inert_problems(c["body"]) == ["tag <a>", f"attribute href={page!r} on <a>"]  # the checker sees it
    assert_token_hidden(r, ws / "rag-gate-report.html")


def test_no_link_outside_github_or_with_a_run_id_of_another_form(gh, ws):
    r = run_action(gh, ws, "pull_request", pr_event(base=gh.branch_sha("main", REPO)),
                   extra_env={"GITHUB_SERVER_URL": SERVER, "GITHUB_RUN_ID": "42) [x](https://evil.example"})
    assert r.code == 0, str(r)
    assert "url" not in json.loads((ws / "rag-gate-report.json").read_text(encoding="utf-8"))["run"]
    assert "artifacts](" not in gh.comments(PR, REPO)[0]["body"]


def test_report_mode_links_to_the_run_the_event_names_never_the_artifacts_url(gh, tmp_path):
    from tests.support.markup import inert_problems

    artifact = fork_report(gh, tmp_path)
    doc = json.loads(artifact.read_text(encoding="utf-8"))
    doc["run"]["url"] = f"https://evil.example/{REPO}/actions/runs/1"  # of the right form: the schema lets it in
    gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
    ws = report_workspace(tmp_path, text=json.dumps(doc))
    event = workflow_run_event(HEAD)
    event["workflow_run"]["id"] = 777
    r = run_action(gh, ws, "workflow_run", event, mode="report", extra_env={"GITHUB_SERVER_URL": SERVER, "GITHUB_RUN_ID": "778"})
    assert r.code == 0, str(r)
    (c,) = gh.comments(PR, REPO)
    page = f"{SERVER}/{REPO}/actions/runs/777"  # the fork's pull_request run, where its artifact is
    assert f"[this run's artifacts]({page})" in c["body"] and "evil.example" not in c["body"]
    assert inert_problems(c["body"], link=page) == []
    del event["workflow_run"]["id"]  # an event without the run's id: no link (this job's own run holds no artifact)
    r = run_action(gh, ws, "workflow_run", event, mode="report", extra_env={"GITHUB_SERVER_URL": SERVER, "GITHUB_RUN_ID": "779"})
    assert r.code == 0 and "artifacts](" not in gh.comments(PR, REPO)[0]["body"] and "evil.example" not in gh.comments(PR, REPO)[0]["body"]


def test_report_mode_refuses_an_artifact_that_does_not_match(gh, tmp_path):
    artifact = fork_report(gh, tmp_path, fail=False)
    gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
    gh.reset()  # forget the fork job's refused POST
    ws = report_workspace(tmp_path, artifact)
    # the workflow run is of another commit than the one the report says
    r = run_action(gh, ws, "workflow_run", workflow_run_event("77" * 20), mode="report")
    assert r.code == 2, str(r)
    (err,) = r.lines("error")
    assert "run.head_sha" in err and "refusing to comment" in err
    # the PR moved on since (a new push): the report is of an old head
    gh.add_pull(PR, "55" * 20, gh.branch_sha("main", REPO), fork=True)
    r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD), mode="report")
    assert r.code == 2, str(r)
    (err,) = r.lines("error")
    assert f"pull request #{PR}" in err and "is now 555555555555" in err and "run.pr" in err
    # a report that names another pull request than the one whose head it claims
    report = json.loads(artifact.read_text(encoding="utf-8"))
    report["run"]["pr"] = 999
    r = run_action(gh, report_workspace(tmp_path, text=json.dumps(report)), "workflow_run", workflow_run_event(HEAD), mode="report")
    assert r.code == 2 and "#999's head does not exist" in r.lines("error")[0]
    assert gh.comments(PR, REPO) == [] and gh.comments(999, REPO) == []
    assert gh.count(method="POST") == 0 and gh.count(method="PATCH") == 0


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"hello": "world"}', "not a rag-gate report"),
        ("<html>not json</html>", "not JSON"),
        (None, "report artifact not found"),
        ("[1, 2]", "not a rag-gate report"),
    ],
)
def test_report_mode_refuses_a_file_that_is_not_a_report(gh, tmp_path, text, said):
    gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
    ws = report_workspace(tmp_path, text=text)
    r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD), mode="report")
    assert r.code == 2, str(r)
    (err,) = r.lines("error")
    assert said in err and "rag-gate-report.json" in err
    assert gh.comments(PR, REPO) == [] and gh.count(method="POST") == 0


def test_report_mode_refuses_a_forged_report(gh, tmp_path):
    """A fork controls its artifact: a marker that breaks out of the HTML comment, or stages of the wrong shape."""
    base = json.loads(fork_report(gh, tmp_path).read_text(encoding="utf-8"))  # a real report of the fork's run
    gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
    forged = [
        ({**base, "run": {**base["run"], "comment_id": "x --> @org/team"}}, "run.comment_id"),
        ({**base, "stages": {"retrieval": "not a stage"}}, "not a rag-gate report"),
    ]
    for report, said in forged:
        r = run_action(gh, report_workspace(tmp_path, text=json.dumps(report)), "workflow_run", workflow_run_event(HEAD),
                       mode="report")
        assert r.code == 2, str(r)
        assert said in r.lines("error")[0]
    assert gh.comments(PR, REPO) == []


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("inputs", "said"),
    [
        ({"mode": "bogus"}, "input mode: must be one of gate, record, report, merge, watch, got 'bogus'"),
        ({"comment": "sometimes"}, "input comment: must be one of always, on-failure, never, got 'sometimes'"),
        ({"config": "missing.yml"}, "missing.yml"),
    ],
)
def test_bad_input_is_an_error_annotation_and_exit_2(gh, ws, inputs, said):
    r = run_action(gh, ws, "pull_request", pr_event(), inputs=inputs)
    assert r.code == 2, str(r)
    (err,) = r.lines("error")
    assert said in err, err
    assert gh.comments(PR, REPO) == [] and r.outputs == {}


# --------------------------------------------------------------------------- hostile text, through the whole action

HOSTILE_SPEC = """version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
  k: 5
baseline:
  path: baseline.json
stages:
  retrieval:
    metrics: [hit_rate@5, mrr]
    gates:
      hit_rate@5: {min: 0.8, max_drop: 0.02}
  generation:
    metrics: [token_f1]
  robustness:
    rejection: {}
    gates:
      rejection_rate: {min: 0.9}
"""


def test_a_hostile_golden_set_and_200_kb_answers_give_a_safe_comment(gh, tmp_path):
    """Questions, ids, passage ids and 200 KB answers made of HTML, mentions, issue references and table pipes, through
    a real run (baseline, worse cases, rejection misses): the posted comment is under the limit and pings nobody."""
    from tests.unit.test_render_limits import EVIL, assert_safe_comment

    ws = tmp_path / "hostile"
    ws.mkdir()
    (ws / "rag-eval.yml").write_text(HOSTILE_SPEC, encoding="utf-8")
    answer = (EVIL * (200 * 1024 // len(EVIL) + 1))[: 200 * 1024]
    golden = [{"id": f"{EVIL}q{i}", "question": f"{EVIL * 3}{i}", "ground_truth": EVIL,
               "relevant_doc_ids": [f"doc|{i}|<img src=x onerror=alert(1)>"]} for i in range(30)]
    golden += [{"id": f"oos{i} @org/team", "question": f"{EVIL}oos {i}", "type": "out_of_scope"} for i in range(10)]
    (ws / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in golden), encoding="utf-8")

    def results(good: bool) -> None:
        rows = []
        for c in golden:
            relevant = (c.get("relevant_doc_ids") or ["none"])[0]
            ids = [relevant, f"other|{EVIL}"] if good else [f"other|{EVIL}", f"noise|{EVIL}"]
            refused = good and c.get("type") == "out_of_scope"
            rows.append({"id": c["id"], "retrieved": [{"id": d, "text": EVIL} for d in ids],
                         "answer": "I don't know." if refused else answer})
        (ws / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    results(good=True)
    for cmd in (["run", "--report", "good.json", "-q"], ["baseline", "update", "--report", "good.json"]):
        proc = subprocess.run([sys.executable, "-m", "gate", *cmd, "--config", "rag-eval.yml"], cwd=ws, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    results(good=False)
    r = run_action(gh, ws, "pull_request", pr_event())
    assert r.code == 1 and r.outputs["verdict"] == "fail", str(r)
    (body,) = comment_texts(gh)
    assert_safe_comment(body, cut=False)  # each cell is shortened, so the whole fits
    assert len(body) < 30_000
    # the hostile text is there, made harmless: the worse cases, the lost ids and the unrefused answers are listed
    assert "30 cases got worse than the baseline (showing 20)" in body and "1→not retrieved (left top 5)" in body
    shown_ids = [row.split(" | ")[0] for row in body.splitlines() if row.startswith("| `<img")]
    assert len(shown_ids) == 20 and len(set(shown_ids)) == 20  # long ids are cut in the middle: they stay distinct
    assert "answered instead of refusing" in body
    # the job summary (up to 1 MiB) is the same report with every one of the 30 cases, as safe
    assert "30 cases got worse than the baseline</summary>" in r.summary
    assert len([row for row in r.summary.splitlines() if row.startswith("| `<img")]) == 30
    assert_safe_comment(r.summary, cut=False, limit=256 * 1024)
    assert json.dumps(answer, ensure_ascii=False) in (ws / "rag-gate-report.json").read_text(encoding="utf-8"), \
        "the report keeps the whole answer: only the comment shortens it"


def test_every_secret_the_spec_reads_is_masked_before_anything_else(tmp_path, capsys):
    from gate.github.commands import mask_secrets

    spec = tmp_path / "rag-eval.yml"
    spec.write_text("version: 1\ngolden_set: g.jsonl\ntarget:\n  http:\n    url: \"${RAG_URL:-http://rag:8000}\"\n"
                    "    headers: {Authorization: \"Bearer ${RAG_TOKEN}\", X-Team: \"${TEAM}\"}\n"
                    "judge: {base_url: \"https://judge.example/v1\", model: m-2024-01-01, api_key_env: JUDGE_KEY}\n", encoding="utf-8")
    env = {"RAG_URL": "https://user:pw@rag.internal/q", "RAG_TOKEN": "rt_0123456789", "TEAM": "ab",
           "JUDGE_KEY": "sk-judge-0123\nsecond-line", "UNRELATED": "not-read-by-the-spec"}
    mask_secrets(env, "ghs_tok_0123456789", str(spec))
    assert capsys.readouterr().out.splitlines() == [
        "::add-mask::ghs_tok_0123456789", "::add-mask::https://user:pw@rag.internal/q", "::add-mask::rt_0123456789",
        "::add-mask::sk-judge-0123", "::add-mask::second-line"]  # TEAM is too short to be a secret (as gate.core.redact)
    mask_secrets(env, "ghs_tok_0123456789", str(tmp_path / "missing.yml"))  # an unreadable spec: the token still
    assert capsys.readouterr().out == "::add-mask::ghs_tok_0123456789\n"


def test_the_repository_history_keeps_the_specs_max_entries(gh, ws):
    spec = ws / "rag-eval.yml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("  path: eval/history.jsonl\n", "  path: eval/history.jsonl\n  max_entries: 2\n"),
                    encoding="utf-8")
    commits = [gh.add_commit("main", f"c{i}", repo=REPO) for i in range(3)]
    for sha in commits:
        r = run_action(gh, ws, "push", push_event(sha), sha=sha, ref_name="main")
        assert r.code == 0, str(r)
    assert [e["commit"] for e in history(gh)] == commits[1:]  # the oldest dropped


# --------------------------------------------------------------------------- shards and mode merge


def test_shards_post_nothing_and_the_merge_job_comments_once_as_one_job_would(gh, ws):
    """Three shard steps (input shard) write their parts and post nothing; mode merge posts the one comment, sets the
    outputs, and on the default branch records the merged run in the history: the same figures as an unsharded run."""
    one = run_action(gh, ws, "pull_request", pr_event(number=PR + 40), inputs={"report-path": "one.json"})
    assert one.code == 0, str(one)
    for i in (1, 2, 3):
        r = run_action(gh, ws, "pull_request", pr_event(), inputs={"shard": f"{i}/3", "report-path": f"parts/part-{i}.json"})
        assert r.code == 0, str(r)
        assert r.outputs["report"] == f"parts/part-{i}.json" and r.outputs["verdict"] == ""
        assert f"shard {i} of 3" in r.summary and comment_texts(gh) == []
    cache = ws / ".rag-gate" / "judge-cache.sqlite"
    (ws / "caches" / "1").mkdir(parents=True)
    shutil.move(cache, ws / "caches" / "1" / "judge-cache.sqlite")  # as download-artifact leaves a shard's cache
    with contextlib.closing(sqlite3.connect(ws / "caches" / "1" / "judge-cache.sqlite")) as db:
        keys = {k for (k,) in db.execute("SELECT key FROM scores")}
    merged = run_action(gh, ws, "pull_request", pr_event(), mode="merge", inputs={"parts": "parts", "caches": "caches"})
    assert merged.code == 0 and merged.outputs["verdict"] == "pass", str(merged)
    with contextlib.closing(sqlite3.connect(cache)) as db:
        assert keys and {k for (k,) in db.execute("SELECT key FROM scores")} == keys  # folded in, for the next run
    (body,) = comment_texts(gh)
    assert "Sharded: 3 jobs each ran part of the golden set" in body
    single, report = json.loads((ws / "one.json").read_text()), json.loads((ws / "rag-gate-report.json").read_text())
    assert report["run"]["pr"] == PR and report["run"]["shards"] == 3
    live = {"mean_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms"}  # the python target's own timing
    for name in ("retrieval", "generation"):
        assert {m: v for m, v in report["stages"][name]["metrics"].items() if m not in live} == \
            {m: v for m, v in single["stages"][name]["metrics"].items() if m not in live}
    assert json.loads(merged.outputs["metrics"])["retrieval"] == report["stages"]["retrieval"]["metrics"]

    # the default branch: the merge job records the merged run, once
    sha = gh.add_commit("main", "one", repo=REPO)
    record = run_action(gh, ws, "push", push_event(sha), mode="merge", sha=sha, ref_name="main", inputs={"parts": "parts"})
    assert record.code == 0, str(record)
    (entry,) = history(gh)
    assert entry["commit"] == sha and entry["stages"]["retrieval"]["metrics"] == report["stages"]["retrieval"]["metrics"]


@pytest.mark.parametrize(("inputs", "said"), [
    ({"mode": "report", "shard": "1/3"}, "input shard: a shard runs in mode gate or record; mode report takes no shard"),
    ({"shard": "3/2"}, "shard: must be I/N with 1 <= I <= N (for example 2/3), got '3/2'"),
    ({"mode": "merge", "parts": "nowhere"}, "nowhere: part not found"),
])
def test_bad_shard_and_merge_inputs_exit_2_naming_the_input(gh, ws, inputs, said):
    mode = inputs.pop("mode", None)
    r = run_action(gh, ws, "pull_request", pr_event(), mode=mode, inputs=inputs)
    assert r.code == 2, str(r)
    assert said in r.stdout, str(r)
    assert comment_texts(gh) == []


def test_the_action_logs_progress_lines_on_stderr(gh, ws):
    r = run_action(gh, ws, "pull_request", pr_event())
    assert r.code == 0, str(r)
    assert "rag-gate: asking the python target for 40 cases" in r.stderr
    assert re.search(r"^rag-gate: the target took \d+\.\d s for 40 cases: 40 answered, 0 errored; and 40 answers from given "
                     r"passages for the noise test \(\d+\.\d s of it\)$", r.stderr, re.MULTILINE), r.stderr
