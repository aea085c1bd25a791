"""Verdicts that hold when the judge drifts: same-run paired judging end to end.

The real CLI, a Python RAG target, the real deepeval GEval code, and the OpenAI-compatible test judge on 127.0.0.1
(tests/support/judge_server.py), whose GEval score is 10 x the share of the answer's sentences its passages support, plus a
run-wide ``offset``: the judge harsher or more lenient on the day. The baseline is made with one judge; each pull
request meets another.

Before same-run pairing the gate compared today's scores with the baseline's stored ones: reworded answers of the
same quality under a judge 0.07 harsher "dropped" 0.07 and failed max_drop 0.03.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepeval")

from tests.support.judge_server import JudgeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
N = 30

RAG = '''\
import os

def passage(i):
    return (f"Rule {i} covers the reading room. Members may borrow {i + 2} items at once. "
            f"Late items cost {i + 5} cents a day. The desk opens at {8 + i % 3} am.")

def answer(question, k):
    i = int(question.split()[3].rstrip("?"))
    mode = os.environ.get("RAG_MODE", "base")
    base = [f"Members may borrow {i + 2} items at once.", f"Late items cost {i + 5} cents a day.",
            f"The desk opens at {8 + i % 3} am."]
    if mode == "reworded":  # the same facts, other words and order: the same quality
        text = (f"According to the rule, late items cost {i + 5} cents a day. The desk opens at {8 + i % 3} am. "
                f"Members may borrow {i + 2} items at once.")
    elif mode == "worse":  # an invented claim in every answer
        text = " ".join(base) + f" Members also get {i + 3} free parking days on Mars."
    else:
        text = " ".join(base)
    return {"retrieved": [{"id": f"d{i}", "text": passage(i)}], "answer": text}
'''

SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  python: "rag:answer"
judge: {base_url: "${JUDGE_URL}", model: judge-2024-01-01, concurrency: 8}
baseline: {path: baseline.json}
cache: {path: cache.sqlite}
stages:
  generation:
    engine: deepeval
    criteria:
      supported: "Every sentence of the answer is supported by the retrieval context."
    metrics: [supported]
    gates:
      supported: {max_drop: 0.03}
"""


def golden(n: int) -> str:
    return "".join(json.dumps({"id": f"q{i:02d}", "question": f"What does rule {i}?", "ground_truth": f"rule {i}",
                               "relevant_doc_ids": [f"d{i}"]}) + "\n" for i in range(n))


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "rag.py").write_text(RAG, encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(golden(N), encoding="utf-8")
    return tmp_path


def rag_gate(ws: Path, judge: JudgeServer, mode: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(PYTHONPATH=str(ROOT), JUDGE_URL=judge.url, RAG_MODE=mode)
    report = ws / "report.json"
    report.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress",
                           *args], cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    return proc, json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}


def make_baseline(ws: Path) -> float:
    """The baseline, judged on a day the judge had no offset; its value of the metric."""
    with JudgeServer() as judge:
        proc, report = rag_gate(ws, judge, "base")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    subprocess.run([sys.executable, "-m", "gate", "baseline", "update", "--config", "rag-eval.yml", "--report", "report.json"],
                   cwd=ws, env={**os.environ, "PYTHONPATH": str(ROOT), "JUDGE_URL": "http://127.0.0.1:9/v1"}, check=True, capture_output=True)
    stored = json.loads((ws / "baseline.json").read_text(encoding="utf-8"))
    assert len(stored["stages"]["generation"]["samples"]) == N and stored["texts"]  # the answers are kept, by content
    return report["stages"]["generation"]["metrics"]["supported"]


def gate_of(report: dict) -> dict:
    (gate,) = report["stages"]["generation"]["gates"]
    return gate


def test_reworded_answers_under_a_harsher_judge_pass(project: Path) -> None:
    base_value = make_baseline(project)
    with JudgeServer(offset=-0.07) as judge:
        proc, report = rag_gate(project, judge, "reworded", "--markdown", "comment.md")
        scored = sum(1 for r in judge.requests if r.prompt_kind == "deepeval/geval_score")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert scored == 2 * N  # each changed case twice: this run's answer and the reference's, judged again beside it
    value = report["stages"]["generation"]["metrics"]["supported"]
    assert base_value - value == pytest.approx(0.07, abs=0.005)  # what the old rule compared: a 0.07 "drop", above 0.03
    gate = gate_of(report)
    pairing = report["stages"]["generation"]["pairing"]["baseline"]
    assert pairing["method"] == "same run" and pairing["metrics"]["supported"]["changed"] == N
    assert pairing["judgings"] == N  # the reference's side; this run's side is the run's own (fresh) judging
    assert report["stages"]["generation"]["usage"]["cache_misses"] == 2 * N  # both sides count as cache misses
    assert gate["status"] == "pass" and gate["method"] == "same-run pairs", gate["reason"]
    assert abs(gate["delta"]) < 0.01  # the harsher judge cancels: both sides were judged by it
    comment = (project / "comment.md").read_text(encoding="utf-8")
    assert "both sides judged in this run" in comment

    # the same pull request again: every pair cached together, no judge call for it
    with JudgeServer(offset=-0.2) as judge:
        proc, again = rag_gate(project, judge, "reworded")
        assert judge.calls == 0, judge.calls
    assert gate_of(again)["status"] == "pass" and again["stages"]["generation"]["pairing"]["baseline"]["judgings"] == 0


def test_truly_worse_answers_fail_even_under_a_more_lenient_judge(project: Path) -> None:
    make_baseline(project)
    with JudgeServer(offset=0.05) as judge:
        proc, report = rag_gate(project, judge, "worse")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = gate_of(report)
    assert gate["status"] == "fail" and gate["method"] == "same-run pairs", gate["reason"]
    assert "significant" in gate["reason"] and f"{N} changed" in gate["reason"]
    worse = report["stages"]["generation"]["worse_cases"]
    assert len(worse) == N and all(w["drops"]["supported"][0] > w["drops"]["supported"][1] for w in worse)


def test_a_golden_case_added_in_the_pr_still_fails_and_is_listed(project: Path) -> None:
    make_baseline(project)
    (project / "golden.jsonl").write_text(golden(N + 1), encoding="utf-8")  # one case added in the pull request
    with JudgeServer(offset=0.05) as judge:
        proc, report = rag_gate(project, judge, "worse", "--markdown", "comment.md")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"1 case(s) new since the reference (q{N:02d}), 0 removed" in (project / "comment.md").read_text(encoding="utf-8")
    pairing = report["stages"]["generation"]["pairing"]["baseline"]
    assert pairing["added"] == [f"q{N:02d}"] and pairing["removed"] == []
    assert pairing["metrics"]["supported"]["pairs"] == N  # paired on the ids both runs share; before: the gate was skipped
    assert gate_of(report)["status"] == "fail"


def test_the_action_pairs_a_pr_with_its_base_commits_history_entry(project: Path) -> None:
    """Through the action (entrypoint.py, the fake GitHub API): the default branch's run is recorded on the history branch
    with its answers; a pull request based on that commit re-judges them beside its own, for max_drop (the base commit's
    entry) and for trend (the oldest entry of the window)."""
    from tests.support.action import HISTORY, HISTORY_BRANCH, PR, REPO, pr_event, push_event, run_action
    from tests.support.github_server import GitHubServer

    spec = project / "rag-eval.yml"
    spec.write_text(SPEC.replace("supported: {max_drop: 0.03}", "supported: {max_drop: 0.03, trend: {window: 7, max_drop: 0.03}}"),
                    encoding="utf-8")
    with GitHubServer(repos=(REPO,)) as gh:
        c1 = gh.add_commit("main", "one", repo=REPO)
        with JudgeServer() as judge:
            r = run_action(gh, project, "push", push_event(c1), sha=c1, ref_name="main",
                           extra_env={"JUDGE_URL": judge.url, "RAG_MODE": "base"})
        assert r.code == 0, str(r)
        (entry,) = [json.loads(ln) for ln in (gh.file(HISTORY, HISTORY_BRANCH, REPO) or "").splitlines()]
        refs = [s["output"] for s in entry["stages"]["generation"]["samples"]]
        assert len(refs) == N and all(ref["answer"] in entry["texts"] for ref in refs)  # the answers travel with the entry

        with JudgeServer(offset=-0.07) as judge:  # reworded, same quality, a harsher judge: passes
            r = run_action(gh, project, "pull_request", pr_event(base=c1), extra_env={"JUDGE_URL": judge.url, "RAG_MODE": "reworded"})
            base_side = sum(1 for q in judge.requests if q.prompt_kind == "deepeval/geval_score"
                            and "Actual Output:\nMembers may borrow 2 items at once." in str(q.body["messages"][-1]["content"]))
        assert r.code == 0, str(r)
        report = json.loads((project / "rag-gate-report.json").read_text(encoding="utf-8"))
        pairing = report["stages"]["generation"]["pairing"]
        assert set(pairing) == {"baseline", "trend:7"} and c1[:7] in pairing["baseline"]["label"] and c1[:7] in pairing["trend:7"]["label"]
        assert all(p["method"] == "same run" and p["metrics"]["supported"]["changed"] == N for p in pairing.values())
        assert base_side == 1  # q00's recorded answer judged again in this run, once for both references (the same text)
        (gate,) = report["stages"]["generation"]["gates"]
        assert gate["status"] == "pass" and [c["status"] for c in gate["checks"]] == ["pass", "pass"], gate["reason"]

        with JudgeServer(offset=0.05) as judge:  # worse answers, a more lenient judge: fails, and the comment says why
            r = run_action(gh, project, "pull_request", pr_event(number=PR + 1, base=c1),
                           extra_env={"JUDGE_URL": judge.url, "RAG_MODE": "worse"})
        assert r.code == 1, str(r)
        (body,) = [c["body"] for c in gh.comments(PR + 1, REPO)]
        assert "both sides judged in this run" in body and "❌" in body
