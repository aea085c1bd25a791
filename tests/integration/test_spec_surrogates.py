"""A lone surrogate in the spec (YAML's double-quoted "\\ud800") is refused when the spec loads: exit 2 naming the
file, the line and the key, no traceback, nothing written. YAML does not join the two halves of a surrogate pair
("\\ud83d\\ude00" is two lone halves); the character itself or "\\U0001F600" is ordinary text. An environment
variable whose bytes are not UTF-8 is refused the same way, without showing its value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAD = "version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\n"
STAGES = "stages:\n  retrieval:\n    metrics: [mrr]\n"


def run(tmp_path: Path, spec: str, env: dict[bytes, bytes] | None = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rag-eval.yml").write_text(spec, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text('{"id": "a", "question": "How long?", "relevant_doc_ids": ["d1"]}\n', encoding="utf-8")
    (tmp_path / "results.jsonl").write_text('{"id": "a", "retrieved": [{"id": "d1"}], "answer": "21 days"}\n', encoding="utf-8")
    environment = {**os.environb, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json",
                           "--markdown", "comment.md", "--no-progress"], cwd=tmp_path, capture_output=True, env=environment, timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def refused(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert not (tmp_path / "report.json").exists() and not (tmp_path / "comment.md").exists()
    assert not list(tmp_path.glob(".*.tmp"))
    return proc.stderr.splitlines()[0]


@pytest.mark.parametrize(("spec", "where"), [
    (HEAD + 'report:\n  comment_id: "x\\ud800"\n' + STAGES, "rag-eval.yml:5: report.comment_id: "),
    (HEAD + 'report:\n  comment_id: "pair \\ud83d\\ude00"\n' + STAGES, "rag-eval.yml:5: report.comment_id: "),
    (HEAD + STAGES + '    gates:\n      mrr: {min: 0.1, note: "\\udc00"}\n', "rag-eval.yml:8: stages.retrieval.gates.mrr.note: "),
    (HEAD + '"k\\ud800": 1\n' + STAGES, "rag-eval.yml:4: k\\ud800: "),
    (HEAD + STAGES.replace("[mrr]", '[mrr, "hit_rate@\\udfff"]'), "rag-eval.yml:6: stages.retrieval.metrics[1]: "),
])
def test_a_lone_surrogate_in_the_spec_is_refused_naming_file_line_and_key(tmp_path: Path, spec: str, where: str) -> None:
    first = refused(run(tmp_path, spec), tmp_path)
    assert first.startswith(f"rag-gate: {where}holds text that is not Unicode: a lone surrogate")


@pytest.mark.parametrize(("written", "name"), [('"gold \\U0001F600.jsonl"', "gold \U0001f600.jsonl"),
                                              ("gold \U0001f600.jsonl", "gold \U0001f600.jsonl"),
                                              ('"gold \\u00e9.jsonl"', "gold \u00e9.jsonl")])
def test_the_character_itself_or_its_long_escape_is_ordinary_text(tmp_path: Path, written: str, name: str) -> None:
    (tmp_path / name).write_text('{"id": "a", "question": "How long?", "relevant_doc_ids": ["d1"]}\n', encoding="utf-8")
    proc = run(tmp_path, HEAD.replace("golden.jsonl", written) + STAGES)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "pass" and report["stages"]["retrieval"]["n"] == 1


def test_an_environment_variable_that_is_not_utf8_is_refused_without_its_value(tmp_path: Path) -> None:
    spec = HEAD + 'report:\n  comment_id: "id ${RG_TEST_ID}"\n' + STAGES
    first = refused(run(tmp_path, spec, {b"RG_TEST_ID": b"sec\xffret"}), tmp_path)
    assert first.startswith("rag-gate: rag-eval.yml:5: report.comment_id: environment variable RG_TEST_ID is not UTF-8 text")
    proc = run(tmp_path, spec, {b"RG_TEST_ID": b"sec\xffret"})
    assert "sec" not in proc.stderr and "ret" not in proc.stderr.replace("rag-gate", "")
