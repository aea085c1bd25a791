"""Watch mode from the command line (`rag-gate watch`), as a team without GitHub would schedule it: the quickstart RAG
served over HTTP on 127.0.0.1, a first scheduled run that passes, then the service's model swapped and a fifth of its
documents dropped (no pull request anywhere): the second run fails, its alert and its console name both changes
first, and the history keeps both runs as scheduled ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.markup import render
from tests.support.quickrag import serve_quickrag
from tests.support.rag_server import free_port

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def quickrag(project: Path, port: int, env: dict[str, str]) -> Any:
    """The quickstart RAG as an HTTP service on ``port`` with ``env`` (its model name, its corpus)."""
    return contextmanager(serve_quickrag)(env=env, port=port, cwd=project)


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_SHA", "OPENAI_API_KEY") and not k.startswith("QUICKRAG_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def project_with_http_target(tmp: Path, port: int) -> Path:
    project = tmp / "qs"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".rag-gate", "eval", "__pycache__"))
    spec = (project / "rag-eval.yml").read_text(encoding="utf-8")
    start, end = spec.index("target:\n"), spec.index("  k: 10\n")
    spec = spec[:start] + f"target:\n  http:\n    url: http://127.0.0.1:{port}/answer\n" + spec[end:]
    spec = spec.replace("      hit_rate@5: {min: 0.80, max_drop: 0.02}", "      hit_rate@5: {min: 0.80, max_drop: 0.02}\n"
                        "      recall@5: {max_drop: 0.05}")
    (project / "rag-eval.yml").write_text(spec, encoding="utf-8")
    return project


def test_a_model_swap_and_a_shrunk_index_without_a_pull_request_fail_the_watch_run_and_are_named_first(tmp_path: Path) -> None:
    port = free_port()
    project = project_with_http_target(tmp_path, port)
    corpus = [json.loads(line) for line in (project / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    kept = [row for i, row in enumerate(corpus) if i % 5 != 0]  # a fifth of the documents gone: an index not rebuilt
    (project / "shrunk.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    with quickrag(project, port, {"QUICKRAG_MODEL": "answerer-2025-06"}):
        first = rag_gate(project, "run", "--config", "rag-eval.yml", "--report", "first.json", "--no-progress", "-q")
        assert first.returncode == 0, first.stdout + first.stderr
        assert rag_gate(project, "baseline", "update", "--config", "rag-eval.yml", "--report", "first.json").returncode == 0
        good = rag_gate(project, "watch", "--config", "rag-eval.yml", "--alert", "alert.md", "--report", "good.json", "--no-progress")
    assert good.returncode == 0, good.stdout + good.stderr
    assert not (project / "alert.md").exists()
    assert "recorded in" in good.stdout and "as a schedule run" in good.stdout

    with quickrag(project, port, {"QUICKRAG_MODEL": "answerer-2025-11", "QUICKRAG_CORPUS": "shrunk.jsonl"}):
        bad = rag_gate(project, "watch", "--config", "rag-eval.yml", "--alert", "alert.md", "--report", "bad.json", "--no-progress")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    report = json.loads((project / "bad.json").read_text(encoding="utf-8"))
    changed = {c["key"]: (c["before"], c["after"]) for c in report["changes"]}
    assert changed["system.model"] == ("answerer-2025-06", "answerer-2025-11")
    assert changed["system.documents"] == (len(corpus), len(kept))
    assert report["changes_from"]["source"].startswith("the last passing scheduled run")
    assert "golden_set" not in changed and "spec" not in changed  # nothing else moved

    alert = (project / "alert.md").read_text(encoding="utf-8")
    assert alert.startswith("<!-- rag-gate:watch id=default -->\n**What changed** since the last passing scheduled run")
    html = render(alert)
    text = " ".join(html.split())
    first_items = text.split("<li>")[1:3]
    assert "system.model</code>: answerer-2025-06 → answerer-2025-11" in first_items[0]
    assert f"system.documents</code>: {len(corpus):,} → {len(kept):,}" in first_items[1]
    assert "rag-gate failed" in text
    console = bad.stdout
    assert f"system.documents: {len(corpus):,} → {len(kept):,}" in console and "system.model: answerer-2025-06 → answerer-2025-11" in console

    history = [json.loads(line) for line in (project / "eval" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [h["kind"] for h in history] == ["schedule", "schedule"] and [h["verdict"] for h in history] == ["pass", "fail"]
    assert history[1]["system"]["values"] == {"model": "answerer-2025-11", "documents": len(kept)}
    assert history[1]["changes"] == report["changes"]


def test_a_passing_watch_run_removes_the_alert_an_earlier_failure_left(tmp_path: Path) -> None:
    port = free_port()
    project = project_with_http_target(tmp_path, port)
    (project / "alert.md").write_text("stale alert\n", encoding="utf-8")
    with quickrag(project, port, {}):
        proc = rag_gate(project, "watch", "--config", "rag-eval.yml", "--alert", "alert.md", "--no-record", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (project / "alert.md").exists() and "was removed" in proc.stdout
    assert not (project / "eval" / "history.jsonl").exists()  # --no-record


def test_a_watch_run_that_cannot_reach_the_service_writes_the_alert_saying_so(tmp_path: Path) -> None:
    project = project_with_http_target(tmp_path, free_port())  # nothing listens there
    proc = rag_gate(project, "watch", "--config", "rag-eval.yml", "--alert", "alert.md", "--no-progress")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    alert = (project / "alert.md").read_text(encoding="utf-8").splitlines()
    assert alert[:2] == ["<!-- rag-gate:watch id=default -->", "## ❌ rag-gate could not complete the watch run"]
    assert "connection refused" in " ".join(alert).lower()


def test_consecutive_decline_fires_on_three_falls_through_the_history_and_waits_for_enough_runs(tmp_path: Path) -> None:
    from gate.core.records import entry_from_report

    project = tmp_path / "qs"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".rag-gate", "eval", "__pycache__"))
    spec = (project / "rag-eval.yml").read_text(encoding="utf-8").replace(
        "      hit_rate@5: {min: 0.80, max_drop: 0.02}", "      hit_rate@5: {min: 0.80, consecutive_decline: 3}")
    (project / "rag-eval.yml").write_text(spec, encoding="utf-8")
    first = rag_gate(project, "run", "--config", "rag-eval.yml", "--report", "first.json", "--no-progress", "-q")
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads((project / "first.json").read_text(encoding="utf-8"))
    now = report["stages"]["retrieval"]["metrics"]["hit_rate@5"]

    def history(*values: float) -> None:
        lines = []
        for i, v in enumerate(values):
            entry = entry_from_report(report, branch="main", commit=f"{i:040d}")
            entry["created_at"] = f"2026-11-{i + 1:02d}T06:17:00+00:00"
            entry["stages"]["retrieval"]["metrics"]["hit_rate@5"] = v
            lines.append(json.dumps(entry))
        (project / "eval").mkdir(exist_ok=True)
        (project / "eval" / "history.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def gate() -> dict:
        proc = rag_gate(project, "run", "--config", "rag-eval.yml", "--report", "r.json", "--no-progress", "-q")
        (g,) = [g for g in json.loads((project / "r.json").read_text(encoding="utf-8"))["stages"]["retrieval"]["gates"]
                if g["metric"] == "hit_rate@5"]
        (check,) = [c for c in g["checks"] if c["kind"] == "consecutive_decline"]
        return {"code": proc.returncode, **check}

    history(now + 0.03, now + 0.02, now + 0.01)  # three falls, this run the third
    got = gate()
    assert got["code"] == 1 and got["status"] == "fail" and got["detail"].startswith("worse in each of the last 3 runs")
    history(now + 0.01, now + 0.02, now + 0.01)  # two
    assert gate()["status"] == "pass"
    history(now + 0.02, now + 0.01)  # too few runs yet
    got = gate()
    assert got["status"] == "skipped" and got["detail"] == "needs 3 earlier runs in the history, has 2" and got["code"] == 0
