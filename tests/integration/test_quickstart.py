"""The quickstart end to end: the real demo RAG as a Python target and as an HTTP service."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quickrag import serve_quickrag

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def rag_gate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def quickrag_url() -> Iterator[str]:
    yield from serve_quickrag()


def _spec(tmp: Path, target: str, baseline: str = "baseline.json", gates: str = "") -> Path:
    spec = tmp / "rag-eval.yml"
    spec.write_text(
        f"""version: 1
golden_set: {QUICKSTART / 'golden_set.jsonl'}
target: {target}
baseline: {{path: {baseline}}}
stages:
  retrieval:
    metrics: [hit_rate@5, mrr, recall@5, ndcg@10, map, context_recall@5]
    gates:
      hit_rate@5: {{min: 0.5, max_drop: 0.02}}
      mrr: {{max_drop: 0.03}}
{gates}"""
    )
    return spec


def _samples(report: dict) -> dict[str, dict[str, float]]:
    return {s["id"]: s["metrics"] for s in report["stages"]["retrieval"]["samples"]}


def test_quickstart_spec_passes(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = rag_gate("run", "--config", str(QUICKSTART / "rag-eval.yml"), "--report", str(out), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["verdict"] == "pass"
    metrics = report["stages"]["retrieval"]["metrics"]
    assert 0.5 < metrics["hit_rate@5"] < 1.0  # a real retriever: good, not perfect
    assert report["golden_set"]["by_type"]["out_of_scope"] >= 5
    assert report["baseline"]["found"] and not report["baseline"]["mismatch"]
    assert "rag-gate passed" in proc.stdout


def test_http_service_scores_like_the_python_function(tmp_path: Path, quickrag_url: str) -> None:
    py_dir, http_dir = tmp_path / "py", tmp_path / "http"
    py_dir.mkdir()
    http_dir.mkdir()
    _spec(py_dir, json.dumps({"python": {"function": "quickrag:answer", "path": [str(QUICKSTART)]}}))
    _spec(http_dir, json.dumps({"http": {"url": quickrag_url, "concurrency": 4}}))
    reports = {}
    for d in (py_dir, http_dir):
        proc = rag_gate("run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress", cwd=d)
        assert proc.returncode == 0, proc.stderr
        reports[d.name] = json.loads((d / "report.json").read_text())
    assert reports["http"]["target"]["kind"] == "http"
    assert reports["http"]["target"]["errors"] == 0
    assert _samples(reports["http"]) == _samples(reports["py"])
    assert reports["http"]["stages"]["retrieval"]["metrics"]["mrr"] == reports["py"]["stages"]["retrieval"]["metrics"]["mrr"]


def test_regression_against_baseline_fails_and_names_cases(tmp_path: Path) -> None:
    """baseline update from a good run, then a worse retriever (top hit pushed to rank 6) fails."""
    (tmp_path / "worse.py").write_text(
        "import quickrag\n\n"
        "def answer(question, k):\n"
        "    out = quickrag.answer(question, k)\n"
        "    docs = out['retrieved']\n"
        "    if 'fine' in question.lower() or 'fee' in question.lower():\n"
        "        docs = docs[1:6] + docs[:1] + docs[6:]\n"
        "    return {**out, 'retrieved': docs}\n"
    )
    good = json.dumps({"python": {"function": "quickrag:answer", "path": [str(QUICKSTART)]}})
    _spec(tmp_path, good)
    assert rag_gate("run", "--config", "rag-eval.yml", "--report", "base.json", "--no-progress", cwd=tmp_path).returncode == 0
    proc = rag_gate("baseline", "update", "--config", "rag-eval.yml", "--report", "base.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    baseline = json.loads((tmp_path / "baseline.json").read_text())
    assert set(baseline["fingerprints"]) == {"golden_set", "spec", "k"}

    worse = json.dumps({"python": {"function": "worse:answer", "path": [".", str(QUICKSTART)]}})
    _spec(tmp_path, worse)
    proc = rag_gate("run", "--config", "rag-eval.yml", "--report", "head.json", "--markdown", "comment.md",
                    "--junit", "junit.xml", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    head = json.loads((tmp_path / "head.json").read_text())
    assert head["verdict"] == "fail"
    assert not head["baseline"]["mismatch"]  # the target changed, not the measurement
    failed = {g["metric"] for g in head["stages"]["retrieval"]["gates"] if g["status"] == "fail"}
    assert "hit_rate@5" in failed
    worse_ids = {w["id"] for w in head["stages"]["retrieval"]["worse_cases"]}
    assert worse_ids
    comment = (tmp_path / "comment.md").read_text()
    assert "got worse than the baseline" in comment and "(left top 5)" in comment
    assert '<failure message="' in (tmp_path / "junit.xml").read_text()


def test_unreachable_http_target_is_exit_3(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _spec(tmp_path, json.dumps({"http": {"url": f"http://127.0.0.1:{port}/", "retries": 0}}))
    proc = rag_gate("run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    # the first case finds nobody listening: the run stops there, naming the URL and the cause (no report is written)
    assert f"the target cannot be reached: http://127.0.0.1:{port}/: connection failed" in proc.stderr
    assert not (tmp_path / "report.json").exists()
    assert "Traceback" not in proc.stderr
