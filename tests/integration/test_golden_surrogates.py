"""A lone surrogate (JSON's "\\ud800", which Python's json module reads) in a golden row or a results line is refused
at the door: exit 2 naming the file, the line and the key, no traceback, no report written. A surrogate pair and an
escaped backslash before "ud800" are ordinary text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gate.io.golden import lone_surrogate

SPEC = "version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\nstages:\n  retrieval:\n    metrics: [mrr]\n"
GOOD_ROW = '{"id": "a", "question": "How long is a loan?", "relevant_doc_ids": ["d1"]}'
GOOD_LINE = '{"id": "a", "retrieved": [{"id": "d1", "text": "21 days", "score": 0.9}], "answer": "21 days"}'


def run(tmp_path: Path, golden: list[str], results: list[str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text("\n".join(golden) + "\n", encoding="utf-8")
    (tmp_path / "results.jsonl").write_text("\n".join(results) + "\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json",
                           "--markdown", "comment.md", "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def refused(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert not (tmp_path / "report.json").exists() and not (tmp_path / "comment.md").exists()
    assert not list(tmp_path.glob(".*.tmp"))
    first = proc.stderr.splitlines()[0]
    assert "not Unicode" in first and "lone surrogate" in first
    return first


@pytest.mark.parametrize(("row", "key"), [
    ('{"id": "b", "question": "Bad \\ud800 here", "relevant_doc_ids": ["d1"]}', "question"),
    ('{"id": "b", "question": "Low half alone", "relevant_doc_ids": ["d1", "d\\uDC00"]}', "relevant_doc_ids[1]"),
    ('{"id": "b", "question": "Ends with a high half", "ground_truth": "x\\ud83d", "relevant_doc_ids": ["d1"]}', "ground_truth"),
    ('{"id": "b", "question": "In a key", "relevant_doc_ids": {"d\\ud800": 2}}', "relevant_doc_ids.d\\ud800"),
    ('{"id": "b\\udfff", "question": "In the id", "relevant_doc_ids": ["d1"]}', "id"),
    ('{"id": "b", "question": "Deep", "relevant_doc_ids": ["d1"], "meta": [[[{"x": "\\ud800"}]]]}', "meta[0][0][0].x"),
])
def test_a_golden_row_with_a_lone_surrogate_is_refused_naming_file_line_and_key(tmp_path, row, key):
    first = refused(run(tmp_path, [GOOD_ROW, row], [GOOD_LINE]), tmp_path)
    assert first.startswith(f"rag-gate: golden.jsonl:2: {key}: ")


@pytest.mark.parametrize(("line", "key"), [
    ('{"id": "a", "retrieved": [{"id": "d\\ud800", "text": "x", "score": 0.5}], "answer": "21 days"}', "retrieved[0].id"),
    ('{"id": "a", "retrieved": [{"id": "d1", "text": "x", "score": 0.5}], "answer": "a \\udc00"}', "answer"),
    ('{"id": "a", "retrieved": [{"id": "d1", "text": "half \\ud800", "score": 0.5}], "answer": "21 days"}', "retrieved[0].text"),
])
def test_a_results_line_with_a_lone_surrogate_is_refused_naming_file_line_and_key(tmp_path, line, key):
    first = refused(run(tmp_path, [GOOD_ROW], [line]), tmp_path)
    assert first.startswith(f"rag-gate: results.jsonl:1: {key}: ")


def test_a_surrogate_pair_and_an_escaped_backslash_are_ordinary_text(tmp_path):
    rows = [GOOD_ROW, '{"id": "b", "question": "Smile \\ud83d\\ude00 and \\\\ud800?", "relevant_doc_ids": ["d\\ud83d\\ude00"]}']
    lines = [GOOD_LINE, '{"id": "b", "retrieved": [{"id": "d\\ud83d\\ude00", "text": "\\\\udc00", "score": 0.5}], '
                        '"answer": "\\ud83d\\ude00"}']
    proc = run(tmp_path, rows, lines)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["stages"]["retrieval"]["metrics"]["mrr"] == 1.0
    assert [c["answer"] for c in report["cases"]] == ["21 days", "\U0001f600"]
    assert report["cases"][1]["retrieved"] == ["d\U0001f600"]


def test_the_walk_finds_the_first_lone_surrogate_at_any_depth_without_recursion():
    deep: object = "\ud800"
    for _ in range(5000):
        deep = [deep]
    assert lone_surrogate(deep) == (0,) * 5000
    assert lone_surrogate({"a": ["ok", {"b\udc00": 1}]}) == ("a", 1, "b\\udc00")
    assert lone_surrogate({"a": "\U0001f600", "b": [1, 2.5, None, True]}) is None
