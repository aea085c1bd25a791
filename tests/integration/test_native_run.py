"""A whole `rag-gate run` of a retrieval spec gives the same report with gate.core._native (the C loops) and without
it (the Python code alone): every figure, sample, note and warning, on a results file that reaches what the C code
takes over (near-miss ids, unsorted scores, repeated ids, errors, unanswerable cases, graded relevance)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gate.core._native", reason="gate.core._native is not built (no C compiler)")

RUN = "import sys; {block}from gate.cli.main import main; sys.exit(main(sys.argv[1:]))"
BLOCK = "sys.modules['gate.core._native'] = None; "  # every `from gate.core._native import ...` then fails: the Python code runs


def _write_data(ws: Path, rng: random.Random) -> None:
    golden, results = [], []
    for i in range(400):
        kind = rng.random()
        relevant = {f"doc{j}": rng.randint(1, 3) for j in rng.sample(range(60), rng.randint(1, 4))}
        case = {"id": f"q{i}", "question": f"question number {i}?", "relevant_doc_ids": relevant,
                "category": rng.choice(["a", "b", "c"]), "tags": rng.sample(["x", "y"], rng.randint(0, 2))}
        if kind > 0.93:
            case = {"id": f"q{i}", "question": f"question number {i}?", "type": rng.choice(["out_of_scope", "adversarial"])}
        golden.append(case)
        ids = [f"doc{rng.randrange(60)}" for _ in range(rng.randint(0, 15))]
        ids = [d.upper() if rng.random() < 0.05 else d + " " if rng.random() < 0.03 else d for d in ids]  # near misses
        scores = sorted((rng.random() for _ in ids), reverse=rng.random() < 0.9)
        line = {"id": f"q{i}", "retrieved": [{"id": d, "text": f"passage {d}", "score": s} for d, s in zip(ids, scores, strict=True)],
                "answer": "an answer", "latency_ms": rng.randint(5, 900)}
        if 0.9 < kind <= 0.93:
            line = {"id": f"q{i}", "error": "timeout"}
        results.append(line)
    (ws / "golden_set.jsonl").write_text("".join(json.dumps(c) + "\n" for c in golden), encoding="utf-8")
    (ws / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    (ws / "rag-eval.yml").write_text(
        "version: 1\ngolden_set: golden_set.jsonl\ntarget:\n  results: results.jsonl\nmax_error_rate: 0.2\nstages:\n  retrieval:\n"
        "    metrics: [hit_rate@5, mrr, recall@10, precision@3, ndcg@10, map, context_recall@5]\n"
        "    gates:\n      mrr: {min: 0.05}\n", encoding="utf-8")


def _report(ws: Path, name: str, block: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN.format(block=block), "run", "--config", "rag-eval.yml", "--report", name,
                           "--no-progress", "-q"], cwd=ws, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    report = json.loads((ws / name).read_text(encoding="utf-8"))
    del report["run"]["created_at"], report["run"]["duration_s"]
    return report


def test_the_report_is_the_same_with_and_without_the_c_module(tmp_path: Path) -> None:
    _write_data(tmp_path, random.Random(3))
    with_c, without = _report(tmp_path, "c.json", ""), _report(tmp_path, "python.json", BLOCK)
    assert with_c == without
    notes = json.dumps(with_c)
    assert "differ from a relevant id only in case or spaces" in notes and "not in descending order" in notes
    assert with_c["stages"]["retrieval"]["n"] > 300 and with_c["stages"]["retrieval"]["errored"] > 0
