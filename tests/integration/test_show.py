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


def test_the_consoles_hint_names_the_report_it_wrote_or_says_to_write_one(ws: Path) -> None:
    other = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "other dir.json", "--no-progress")
    assert "rag-gate show CASE_ID --report 'other dir.json'" in other.stdout
    none = rag_gate(ws, "run", "--config", "rag-eval.yml", "--no-progress")
    assert "--report report.json" not in none.stdout and "run with --report PATH, then rag-gate show CASE_ID --report PATH" in none.stdout


def test_show_reads_the_spec_the_report_was_made_from_and_says_when_it_cannot(ws: Path, tmp_path: Path) -> None:
    made = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "made.json", "--no-progress")
    assert made.returncode == 1
    (tmp_path / "rag-eval.yml").write_text("version: 1\ngolden_set: other.jsonl\ntarget: {results: r.jsonl}\nstages: {}\n", encoding="utf-8")
    (tmp_path / "other.jsonl").write_text('{"id": "x1", "question": "Something else?"}\n', encoding="utf-8")
    here = rag_gate(ws, "show", "q26", "--report", "made.json")  # no --config: the report's own spec, not ./rag-eval.yml's
    assert here.returncode == 0 and "question:" in here.stdout and here.stderr == ""
    elsewhere = rag_gate(tmp_path, "show", "q26", "--report", str(ws / "made.json"))  # ./rag-eval.yml here is another spec
    assert elsewhere.returncode == 0 and "question:" not in elsewhere.stdout
    assert "could not be read" in elsewhere.stderr and "pass --config with the spec the report was made from" in elsewhere.stderr
    (tmp_path / "other.jsonl").write_text('{"id": "q26", "question": "A question of another set?", "type": "out_of_scope"}\n',
                                          encoding="utf-8")
    stale = rag_gate(tmp_path, "show", "q26", "--report", str(ws / "made.json"))
    assert "A question of another set?" in stale.stdout and "is not the golden set this report was made from" in stale.stderr
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    gone = rag_gate(nowhere, "show", "q26", "--report", str(ws / "made.json"))
    assert gone.returncode == 0 and "note: the spec rag-eval.yml is not here" in gone.stderr
    (tmp_path / "other.jsonl").write_text('{"id": "x1", "question": "Something else?", "type": "out_of_scope"}\n', encoding="utf-8")
    wrong = rag_gate(tmp_path, "show", "q26", "--report", str(ws / "made.json"), "--config", "rag-eval.yml")
    assert "note: q26 is not in" in wrong.stderr and "pass --config with the spec the report was made from" in wrong.stderr
