"""The offline text metrics (token_f1, rouge_l, exact_match) are exact figures of the answers: their gates compare
exact numbers with the baseline's, like a retrieval metric's, never through the judge gates' paired statistics
(min_pairs, p-values), and a run with no LLM judge says nothing of judge evidence or judgings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

GOOD = "The loan period for printed books is 21 days and renewals are allowed twice online."
BAD = "Books can be borrowed."


def project(tmp: Path, gate: str) -> Path:
    golden = [{"id": f"q{i}", "question": f"What is the loan period of item {i}?", "ground_truth": GOOD, "relevant_doc_ids": [f"d{i}"]}
              for i in range(30)]
    (tmp / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in golden), encoding="utf-8")
    (tmp / "rag-eval.yml").write_text(
        "version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\nbaseline: {path: baseline.json}\n"
        "stages:\n  retrieval: {metrics: [mrr]}\n"
        f"  generation:\n    metrics: [token_f1, rouge_l, faithfulness]\n    gates:\n      token_f1: {gate}\n", encoding="utf-8")
    return tmp / "rag-eval.yml"


def results(tmp: Path, bad: int) -> None:
    lines = [{"id": f"q{i}", "retrieved": [{"id": f"d{i}", "text": GOOD}], "answer": BAD if i < bad else GOOD} for i in range(30)]
    (tmp / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")


def rag_gate(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=tmp, capture_output=True, text=True, timeout=120)


def test_a_drop_of_an_offline_metric_above_max_drop_fails_on_the_exact_figure_with_few_changed_answers(tmp_path: Path) -> None:
    spec = project(tmp_path, "{max_drop: 0.05}")
    results(tmp_path, bad=0)
    assert rag_gate(tmp_path, "run", "--config", str(spec), "--report", "base.json", "--no-progress").returncode == 0
    assert rag_gate(tmp_path, "baseline", "update", "--config", str(spec), "--report", "base.json").returncode == 0
    results(tmp_path, bad=3)  # 3 of 30 answers worse: token_f1 falls by about 0.08, with 3 changed pairs (under min_pairs 10)
    proc = rag_gate(tmp_path, "run", "--config", str(spec), "--report", "report.json", "--markdown", "comment.md", "--no-progress")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    gen = report["stages"]["generation"]
    (gate,) = [g for g in gen["gates"] if g["metric"] == "token_f1"]
    assert gate["status"] == "fail" and gate["method"] == "difference of means"
    (check,) = [c for c in gate["checks"] if c["kind"] == "max_drop"]
    base, now = gen["baseline_metrics"]["token_f1"], gen["metrics"]["token_f1"]
    assert base - now > 0.05 and check["status"] == "fail"
    assert "insufficient evidence" not in gate["reason"] and "p =" not in gate["reason"]
    assert "pairing" not in gen  # no LLM judge ran: nothing paired, nothing judged again
    comment = (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert "no LLM judge ran" in comment
    assert "Evidence of the judge gates" not in comment and "judgings of the reference" not in comment
    assert "FAIL token_f1: drop" in proc.stdout  # the console says why, not only report.json


def test_min_pairs_or_case_drop_on_an_offline_metric_is_refused_with_why(tmp_path: Path) -> None:
    for gate in ("{max_drop: 0.05, min_pairs: 3}", "{max_drop: 0.05, case_drop: 0.5}"):
        spec = project(tmp_path, gate)
        proc = rag_gate(tmp_path, "validate", "--config", str(spec))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "stages.generation.gates.token_f1." in proc.stderr and "gated as an exact number" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_skipped_gates_reason_is_on_the_console_and_in_the_html_report(tmp_path: Path) -> None:
    spec = project(tmp_path, "{max_drop: 0.05}")
    results(tmp_path, bad=0)
    html = tmp_path / "report.html"
    proc = rag_gate(tmp_path, "run", "--config", str(spec), "--no-progress", "--html", str(html))  # no baseline yet: max_drop has nothing to compare
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SKIP token_f1: no baseline value to compare with" in proc.stdout
    assert "gate skipped: no baseline value to compare with" in html.read_text(encoding="utf-8")  # the HTML report says why too
