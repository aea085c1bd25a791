"""The generation stage end to end: the real CLI, the quickstart RAG, the real ragas and deepeval
metric code, and a real OpenAI-compatible judge server on 127.0.0.1 (tests/support/judge_server.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ragas")
pytest.importorskip("deepeval")

from tests.support.judge_server import JudgeServer, always, status  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
KEY = "sk-test-0123456789abcdef"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A copy of the quickstart, so runs write their cache, history and baseline in tmp."""
    dest = tmp_path / "qs"
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "eval", "__pycache__"))
    return dest


def rag_gate(project: Path, judge_url: str | None, *args: str, key: str | None = KEY) -> tuple[subprocess.CompletedProcess[str], dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "JUDGE_BASE_URL")}
    if judge_url:
        env["JUDGE_BASE_URL"] = judge_url
    if key:
        env["OPENAI_API_KEY"] = key
    report = project / "report.json"
    report.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "gate", *args, "--config", "rag-eval.judge.yml", "--report", "report.json", "--no-progress"]
        if args[0] == "run" else [sys.executable, "-m", "gate", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    return proc, (json.loads(report.read_text()) if report.exists() else {})


def test_judged_run_cache_and_history(project: Path) -> None:
    with JudgeServer() as judge:
        proc, report = rag_gate(project, judge.url, "run")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        gen = report["stages"]["generation"]
        assert set(gen["metrics"]) == {"faithfulness", "answer_relevancy", "context_recall", "deepeval/faithfulness", "token_f1",
                                       "stays_on_handbook"}
        assert all(0.0 <= v <= 1.0 for v in gen["metrics"].values())
        assert gen["sample"]["size"] >= 20
        first_calls = judge.calls
        assert first_calls > 0 and gen["usage"]["calls"] == first_calls  # counted by us == seen by the server
        assert {b.get("temperature") for b in judge.chat_bodies} == {0}
        assert gen["usage"]["cost"] is not None and gen["usage"]["cost"] > 0
        assert gen["self_check"]["cases"] == 5 and gen["self_check"]["unstable"] == []
        assert KEY not in proc.stdout + proc.stderr + json.dumps(report)

        # same outputs again: every score from the cache, no judge call at all
        proc, report = rag_gate(project, judge.url, "run")
        assert proc.returncode == 0, proc.stderr
        assert judge.calls - first_calls == report["stages"]["generation"]["usage"]["calls"]
        # only the self-check re-judges (it bypasses the cache on purpose)
        rechecked = report["stages"]["generation"]["usage"]["calls"]
        assert report["stages"]["generation"]["usage"]["cache_misses"] == 0
        proc2, report2 = rag_gate(project, judge.url, "run", "--no-cache")
        assert report2["stages"]["generation"]["usage"]["cache_hits"] == 0
        assert report2["stages"]["generation"]["usage"]["calls"] > rechecked

        # record three default-branch runs, then a PR with the same outputs passes the trend gates
        for _ in range(3):
            rec = subprocess.run([sys.executable, "-m", "gate", "history", "record", "--config", "rag-eval.judge.yml",
                                  "--report", "report.json", "--branch", "main"], cwd=project, capture_output=True, text=True)
            assert rec.returncode == 0, rec.stderr
        proc, report = rag_gate(project, judge.url, "run")
        assert proc.returncode == 0, proc.stdout
        gates = {g["metric"]: g for g in report["stages"]["generation"]["gates"]}
        assert gates["faithfulness"]["method"] == "same-run pairs"
        assert gates["faithfulness"]["status"] == "pass"


def test_regressed_answers_fail_the_trend_gate_and_are_attributed(project: Path) -> None:
    """A generator that pads answers with an unsupported claim: faithfulness drops on every judged case."""
    (project / "padded.py").write_text(
        "import quickrag\n\n"
        "def answer(question, k):\n"
        "    out = quickrag.answer(question, k)\n"
        "    return {**out, 'answer': out['answer'] + ' Members also receive free parking on Mars every Tuesday.'}\n"
    )
    with JudgeServer() as judge:
        proc, _ = rag_gate(project, judge.url, "run")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for _ in range(2):
            subprocess.run([sys.executable, "-m", "gate", "history", "record", "--config", "rag-eval.judge.yml",
                            "--report", "report.json"], cwd=project, check=True, capture_output=True)
        spec = project / "rag-eval.judge.yml"
        spec.write_text(spec.read_text().replace('python: "quickrag:answer"', 'python: "padded:answer"'))
        proc, report = rag_gate(project, judge.url, "run", "--markdown", "comment.md")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gates = {g["metric"]: g for g in report["stages"]["generation"]["gates"]}
    assert gates["faithfulness"]["status"] == "fail"
    assert gates["faithfulness"]["method"] == "same-run pairs"
    worse = report["stages"]["generation"]["worse_cases"]
    assert worse and all(w["cause"] in ("unfaithful generation", "both") for w in worse if "faithfulness" in w["drops"])
    comment = (project / "comment.md").read_text()
    assert "unfaithful generation" in comment and "paired test" in comment


def test_no_key_skips_the_judge_metrics(project: Path) -> None:
    proc, report = rag_gate(project, "http://127.0.0.1:9/v1", "run", key=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gen = report["stages"]["generation"]
    assert set(gen["metrics"]) == {"token_f1"}  # what needs no model still runs
    assert "OPENAI_API_KEY is not set" in gen["not_evaluated"]["faithfulness"]
    statuses = {g["metric"]: g["status"] for g in gen["gates"]}
    assert statuses["faithfulness"] == "skipped" and statuses["answer_relevancy"] == "skipped"


def test_judge_failing_is_an_error_with_reasons(project: Path) -> None:
    spec = project / "rag-eval.judge.yml"
    spec.write_text(spec.read_text().replace("  temperature: 0\n", "  temperature: 0\n  max_retries: 1\n"))
    with JudgeServer(faults=[always(status(500))]) as judge:
        proc, report = rag_gate(project, judge.url, "run")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert report["verdict"] == "error"
    assert any("judge scores could not be computed" in e for e in report["errors"])
    errored = [s for s in report["stages"]["generation"]["samples"] if s["errors"]]
    assert errored and all("500" in r for s in errored for r in s["errors"].values() if r != "the golden case has no ground_truth")
    assert "token_f1" in report["stages"]["generation"]["metrics"]  # the offline metric still computed
    assert "Traceback" not in proc.stderr


def test_floating_model_is_refused(project: Path) -> None:
    spec = project / "rag-eval.judge.yml"
    spec.write_text(spec.read_text().replace("model: gpt-4o-mini-2024-07-18", "model: gpt-4o-mini"))
    proc = subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.judge.yml"], cwd=project,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "rag-eval.judge.yml:" in proc.stderr and "judge.model" in proc.stderr and "allow_floating_model" in proc.stderr


def test_max_judge_calls_stops_the_run(project: Path) -> None:
    spec = project / "rag-eval.judge.yml"
    spec.write_text(spec.read_text().replace("max_judge_calls: 3000", "max_judge_calls: 12"))
    with JudgeServer() as judge:
        proc, report = rag_gate(project, judge.url, "run")
        seen = judge.calls
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert seen <= 12  # the budget is enforced before a request is sent
    assert any("max_judge_calls" in e for e in report["errors"])
    reasons = [r for s in report["stages"]["generation"]["samples"] for r in s["errors"].values()]
    assert any("max_judge_calls" in r for r in reasons)
