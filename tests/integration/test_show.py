"""`rag-gate show CASE_ID` and the console's robustness failures, on the quickstart through the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def rag_gate(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart with a robustness gate its refusals fail (2 of 32 answerable questions refused)."""
    dest = tmp_path_factory.mktemp("show") / "qs"
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    spec = dest / "rag-eval.yml"
    text = spec.read_text(encoding="utf-8")
    assert "false_rejection_rate: {max: 0.1}" in text
    spec.write_text(text.replace("false_rejection_rate: {max: 0.1}", "false_rejection_rate: {max: 0.0}"), encoding="utf-8")
    return dest


def test_failed_robustness_gates_list_their_cases_on_the_console(ws: Path) -> None:
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "rejection miss q26 (answerable): refused an answerable question (decided by phrase)" in proc.stdout
    assert "rejection miss q34 (out_of_scope): answered instead of refusing" in proc.stdout
    assert "rag-gate show CASE_ID --report report.json" in proc.stdout


def test_show_one_case_in_full_with_the_baseline_beside_it(ws: Path) -> None:
    if not (ws / "report.json").exists():
        assert rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress").returncode == 1
    proc = rag_gate(ws, "show", "q05", "--report", "report.json")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("case q05 (answerable) · category fees · tags faq\n")
    assert "question:     What is the daily fine for an overdue DVD?" in out
    assert "ground truth: Overdue DVDs are charged $1 per day, up to $15 per item." in out
    assert "    1. fines#chunk_1  relevant" in out and "  relevant fines#chunk_1: rank 1" in out
    assert "hit_rate@5 1.0000 (baseline 1.0000)" in out  # the committed baseline's figure for the case
    assert "  distractor " in out and "  noisy answer: " in out
    refused = rag_gate(ws, "show", "q26", "--report", "report.json")
    assert "rejection: refused, decided by phrase" in refused.stdout and "a miss (refused an answerable question)" in refused.stdout


def test_show_an_unknown_case_exits_2_naming_the_report(ws: Path) -> None:
    if not (ws / "report.json").exists():
        rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress")
    proc = rag_gate(ws, "show", "no-such-case", "--report", "report.json")
    assert proc.returncode == 2 and "report.json: no case 'no-such-case' in this report (40 cases)" in proc.stderr
    assert "Traceback" not in proc.stderr
