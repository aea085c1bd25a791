"""`rag-gate validate --ping`: one question to the target, one tiny call to the judge (the test judge on 127.0.0.1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

from tests.support.judge_server import JudgeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
KEY = "sk-test-PingKey0123456789abcdef"


def ping(ws: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    env.update(PYTHONPATH=str(ROOT), JUDGE_BASE_URL=url, OPENAI_API_KEY=KEY)
    return subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.judge.yml", "--ping"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    dest = tmp_path / "qs"
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    text = (dest / "rag-eval.judge.yml").read_text(encoding="utf-8")
    (dest / "rag-eval.judge.yml").write_text(text.replace("  concurrency: 16\n", "  concurrency: 16\n  max_retries: 0\n  timeout_s: 5\n"),
                                             encoding="utf-8")
    return dest


def test_both_answer(ws: Path) -> None:
    with JudgeServer() as judge:
        proc = ping(ws, judge.url)
        asked = judge.calls
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "target (python): answered case q01 in " in proc.stdout and "(10 passages, an answer)" in proc.stdout
    assert "judge: gpt-4o-mini-2024-07-18 answered a refusal check in " in proc.stdout and "read the answer right" in proc.stdout
    assert asked == 1 and KEY not in proc.stdout + proc.stderr


def test_an_unreachable_judge_is_said_and_exits_3(ws: Path) -> None:
    proc = ping(ws, "http://127.0.0.1:9/v1")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "target (python): answered case q01" in proc.stdout
    assert "judge: NOT reachable or not usable: cannot reach the judge at *** (1 attempts)" in proc.stdout  # a ${NAME} value is masked
    assert KEY not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
