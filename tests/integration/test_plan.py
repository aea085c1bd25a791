"""`rag-gate plan` predicts a run's judge calls: the quickstart's judge spec, the real engines (ragas, deepeval) and
the OpenAI-compatible test judge on 127.0.0.1, through the real CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ragas")
pytest.importorskip("deepeval")

from tests.support.judge_server import JudgeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def rag_gate(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args, "--config", "rag-eval.judge.yml"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=600)


def predicted(text: str) -> int:
    found = re.search(r"^judge: about (\d+) calls", text, re.MULTILINE)
    assert found, text
    return int(found.group(1))


def test_plan_predicts_the_judge_calls_of_the_next_run_and_none_for_a_cached_one(tmp_path: Path) -> None:
    ws = tmp_path / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    with JudgeServer() as judge:
        env = {**base, "PYTHONPATH": str(ROOT), "JUDGE_BASE_URL": judge.url, "OPENAI_API_KEY": "sk-test-0123456789abcdef"}
        first = rag_gate(ws, env, "plan")
        assert first.returncode == 0, first.stderr
        assert judge.calls == 0 and not (ws / ".rag-gate" / "judge-cache.sqlite").exists()  # a plan spends nothing, writes nothing
        run = rag_gate(ws, env, "run", "--report", "report.json", "--no-progress", "-q")
        assert run.returncode == 0, run.stdout + run.stderr
        made = judge.calls
        usage = json.loads((ws / "report.json").read_text(encoding="utf-8"))["stages"]["generation"]["usage"]
        assert usage["calls"] == made > 100
        assert abs(predicted(first.stdout) - made) <= 0.1 * made, (predicted(first.stdout), made, first.stdout)

        second = rag_gate(ws, env, "plan")
        before = judge.calls
        again = rag_gate(ws, env, "run", "--report", "report.json", "--no-progress", "-q")
        assert again.returncode == 0
        rejudged = judge.calls - before
    # every score is cached now: nothing to judge, only the self-check's second judgings (never cached)
    rows = [ln for ln in second.stdout.splitlines() if re.match(r"^  \S+\s+(ragas|deepeval)\s", ln)]
    assert len(rows) == 5 and all(ln.split()[-2:] == ["0", "0"] for ln in rows), second.stdout
    assert "token_f1                     offline   scored in process, no judge call" in second.stdout
    assert "self-check (judged again, never from the cache)" in second.stdout
    assert predicted(second.stdout) == rejudged > 0


def test_plan_without_the_judges_key_says_the_metrics_will_be_skipped(tmp_path: Path) -> None:
    ws = tmp_path / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}, "PYTHONPATH": str(ROOT)}
    proc = rag_gate(ws, env, "plan", "--no-target")
    assert proc.returncode == 0, proc.stderr
    assert "faithfulness                 ragas     not evaluated: the judge's key OPENAI_API_KEY is not set" in proc.stdout
    assert "token_f1                     offline   scored in process, no judge call" in proc.stdout  # never "cached"
    assert predicted(proc.stdout) == 0


def test_plan_without_a_judge_asks_for_no_prices_and_calls_no_offline_metric_cached(tmp_path: Path) -> None:
    ws = tmp_path / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "gate", "plan", "--config", "rag-eval.yml"], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "judge: none configured, so no judge call" in proc.stdout and "judge.prices" not in proc.stdout
    assert "token_f1                     offline   scored in process, no judge call" in proc.stdout and "cached" not in proc.stdout.split("\n", 5)[-1]
