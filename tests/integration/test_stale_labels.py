"""Stale relevance labels: a re-keyed corpus is said first (exit 3 by default), and text labels survive it.

The real CLI on a results-file target: run 1 retrieves passages under their ids; run 2 is the same system after the
corpus was re-keyed (every id renamed, the same texts), run 3 after it was re-chunked (each relevant passage cut in
two). With id labels, run 2 would be a collapse of every retrieval metric; rag-gate says the labels look stale.
With relevant_texts and match.level text, runs 2 and 3 score as run 1 did.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.core.textmatch import text_matches

ROOT = Path(__file__).resolve().parents[2]
N = 30
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
  k: 5
baseline: {{path: baseline.json}}
stages:
  retrieval:
    metrics: [hit_rate@5, mrr, recall@5, ndcg@5]
{extra}    gates:
      hit_rate@5: {{min: 0.6, max_drop: 0.05}}
      mrr: {{max_drop: 0.05}}
"""


def passage(i: int) -> str:
    return (f"Branch {i} of the library opens at {8 + i % 3} in the morning. Members may borrow {i + 2} items there and "
            f"return them at any branch. The reading room on floor {i % 4 + 1} is quiet.")


def golden(with_texts: bool) -> str:
    rows = []
    for i in range(N):
        row: dict[str, Any] = {"id": f"c{i:02d}", "question": f"When does branch {i} open?", "ground_truth": f"{8 + i % 3} am",
                               "relevant_doc_ids": [f"doc-{i}#0"]}
        if with_texts:
            row["relevant_texts"] = [passage(i)]
        rows.append(json.dumps(row))
    return "\n".join(rows) + "\n"


def results(version: str) -> str:
    """base: ids doc-N#0; rekeyed: every id renamed; rechunked: renamed and the relevant passage cut in two."""
    lines = []
    for i in range(N):
        order = [i, (i + 1) % N, (i + 2) % N, (i + 3) % N] if i % 5 else [(i + 1) % N, (i + 2) % N, i, (i + 3) % N]
        retrieved = [{"id": f"doc-{j}#0", "text": passage(j)} for j in order]
        if version != "base":
            retrieved = [{"id": "c_" + hashlib.sha1(d["id"].encode()).hexdigest()[:10], "text": d["text"]} for d in retrieved]
        if version == "rechunked":
            cut = []
            for d in retrieved:
                first, _, second = d["text"].partition(" Members")
                cut += [{"id": d["id"] + "-a", "text": first}, {"id": d["id"] + "-b", "text": "Members" + second}]
            retrieved = cut
        lines.append(json.dumps({"id": f"c{i:02d}", "retrieved": retrieved, "answer": "8 am"}))
    return "\n".join(lines) + "\n"


def project(ws: Path, *, texts: bool, extra: str = "") -> Path:
    ws.mkdir(exist_ok=True)
    (ws / "rag-eval.yml").write_text(SPEC.format(extra=extra), encoding="utf-8")
    (ws / "golden.jsonl").write_text(golden(texts), encoding="utf-8")
    return ws


def run(ws: Path, version: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], str]:
    (ws / "results.jsonl").write_text(results(version), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json",
                           "--markdown", "comment.md", "--no-progress"], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    return proc, json.loads((ws / "report.json").read_text(encoding="utf-8")), (ws / "comment.md").read_text(encoding="utf-8")


def baseline(ws: Path) -> dict[str, float]:
    proc, report, _ = run(ws, "base")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "gate", "baseline", "update", "--config", "rag-eval.yml", "--report", "report.json"],
                   cwd=ws, env=env, check=True, capture_output=True)
    return report["stages"]["retrieval"]["metrics"]


def test_a_rekeyed_corpus_is_said_first_and_is_an_error_by_default(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", texts=False)
    before = baseline(ws)
    assert before["hit_rate@5"] == 1.0
    proc, report, comment = run(ws, "rekeyed")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    said = f"relevance labels look stale: 0 of the {N} distinct ids retrieved within the top 5 for {N} answerable cases are relevant to any golden case"
    assert report["verdict"] == "error" and report["errors"][0].startswith(said)
    assert f"error: {said}" in proc.stdout
    assert comment.index(said) < comment.index("### ")  # before any stage's table
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@5"] == 0.0  # measured and shown, but not what decides


def test_on_stale_labels_warn_lets_the_gates_decide(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", texts=False, extra="    on_stale_labels: warn\n")
    baseline(ws)
    proc, report, comment = run(ws, "rekeyed")
    assert proc.returncode == 1 and report["verdict"] == "fail", proc.stdout
    assert report["warnings"][0].startswith("relevance labels look stale") and not report["errors"]
    assert "relevance labels look stale" in comment


@pytest.mark.parametrize("version", ["rekeyed", "rechunked"])
def test_text_labels_score_a_rekeyed_or_rechunked_corpus_as_before(tmp_path: Path, version: str) -> None:
    ids = project(tmp_path / "ids", texts=True)
    before = baseline(ids)
    ws = project(tmp_path / "texts", texts=True, extra="    match: {level: text, min_overlap: 0.8}\n")
    proc, report, _ = run(ws, version)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = report["stages"]["retrieval"]["metrics"]
    if version == "rekeyed":
        assert {m: after[m] for m in before if "latency" not in m} == {m: v for m, v in before.items() if "latency" not in m}
    else:  # each passage is two chunks now: the relevant one is found as early, at twice the rank
        assert after["hit_rate@5"] == before["hit_rate@5"] == 1.0 and after["recall@5"] == before["recall@5"]
    assert not report["errors"] and not any("stale" in w for w in report["warnings"])


def test_a_healthy_run_says_nothing_about_labels(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", texts=False)
    _, report, comment = run(ws, "base")
    assert "stale" not in json.dumps(report) and "stale" not in comment


@pytest.mark.parametrize(("relevant", "retrieved", "matches"), [
    ("Members may borrow 5 items.", "Branch 3 opens at 9. Members may borrow 5 items. Quiet room.", True),  # contained
    ("Branch 3 opens at 9. Members may borrow 5 items there.", "Members may borrow 5 items there.", True),  # a chunk of it
    ("Branch 3 opens at 9 in the morning.", "branch 3 OPENS at 9, in the morning!", True),  # normalised
    ("Members may borrow 5 items at any branch.", "Members may borrow 5 items at the main branch.", True),  # 7 of 8 words
    ("Members may borrow 5 items at any branch.", "Members may borrow 6 items at any branch.", False),  # another number
    ("Members may borrow 5 items at once.", "Members may renew 6 books online.", False),
    ("Branch 3 opens at 9. Members may borrow 5 items there.", "items", False),  # a stray word is not a chunk
    ("北京大学图书馆周日开放", "北京大学图书馆周日开放，周一闭馆", True),
])
def test_text_matching(relevant: str, retrieved: str, matches: bool) -> None:
    assert text_matches(relevant, retrieved, 0.8) is matches


def test_passages_below_the_cut_off_do_not_make_labels_look_stale(tmp_path: Path) -> None:
    """10 cases, each with its relevant passage at rank 1 and 150 more passages below it, k = 5: every metric is 1.0,
    and the 1,500 ids no metric looks at are no sign of stale labels."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "golden.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "question": f"When does branch {i} open?",
                                                         "relevant_doc_ids": [f"doc-{i}"]}) + "\n" for i in range(10)), encoding="utf-8")
    (ws / "results.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "retrieved": [f"doc-{i}", *(f"other-{i}-{j}" for j in range(150))]})
                                              + "\n" for i in range(10)), encoding="utf-8")
    (ws / "rag-eval.yml").write_text("version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl, k: 5}\n"
                                     "stages:\n  retrieval: {metrics: [hit_rate@5, mrr]}\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress"],
                          cwd=ws, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((ws / "report.json").read_text())
    assert report["errors"] == [] and not any("stale" in w for w in report["warnings"])
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@5"] == report["stages"]["retrieval"]["metrics"]["mrr"] == 1.0
