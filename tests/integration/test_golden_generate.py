"""`rag-gate golden generate`: candidate cases from the quickstart's corpus, written by the OpenAI-compatible test judge
on 127.0.0.1 (tests/support/judge_server.py) through the real CLI, the judge client and the judge cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.cli.generate import allocate
from gate.io.golden import load_golden_set
from tests.support.judge_server import JudgeServer

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
SPEC = """\
version: 1
golden_set: golden_set.jsonl
target:
  python: "quickrag:answer"
judge: {{base_url: "${{JUDGE_URL}}", model: judge-2024-01-01, concurrency: 4{budget}}}
cache: {{path: cache.sqlite}}
stages:
  retrieval:
    metrics: [hit_rate@5]
    match: {{level: document}}
"""


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    shutil.copy(QUICKSTART / "golden_set.jsonl", tmp_path / "golden_set.jsonl")
    shutil.copy(QUICKSTART / "corpus.jsonl", tmp_path / "corpus.jsonl")
    (tmp_path / "rag-eval.yml").write_text(SPEC.format(budget=""), encoding="utf-8")
    return tmp_path


def rag_gate(ws: Path, judge: JudgeServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT), "JUDGE_URL": judge.url},
                          capture_output=True, text=True, timeout=300)


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_candidates_in_the_mix_valid_pending_and_cached(ws: Path) -> None:
    corpus_ids = {json.loads(line)["id"] for line in (ws / "corpus.jsonl").read_text(encoding="utf-8").splitlines()}
    with JudgeServer() as judge:
        proc = rag_gate(ws, judge, "golden", "generate", "--config", "rag-eval.yml", "--corpus", "corpus.jsonl", "--n", "20",
                        "--out", "candidates.jsonl")
        calls = judge.calls
        assert judge.unknown_prompts == []
    assert proc.returncode == 0, proc.stdout + proc.stderr
    made = rows(ws / "candidates.jsonl")
    wanted = allocate(20, {"simple": 0.4, "multi_context": 0.25, "ambiguous": 0.15, "out_of_scope": 0.1, "adversarial": 0.1})
    assert wanted == {"simple": 8, "multi_context": 5, "ambiguous": 3, "out_of_scope": 2, "adversarial": 2}
    got = {k: sum(1 for r in made if r["question_type"] == k) for k in wanted}
    assert all(abs(got[k] - wanted[k]) <= 1 for k in wanted), got
    assert len(made) >= 18 and calls >= len(made)  # one call a candidate (dropped ones cost theirs too)
    assert f"judge: {calls} call(s)" in proc.stdout and "a new candidate" in proc.stdout
    # valid golden cases, marked for review, made from passages the corpus holds
    shutil.copy(ws / "candidates.jsonl", ws / "check.jsonl")
    cases = load_golden_set(ws / "check.jsonl")
    assert len(cases) == len(made) and all(c.pending_review for c in cases)
    for r in made:
        meta = r["metadata"]
        assert meta["generated"] is True and meta["review"] == "pending" and set(meta["source_ids"]) <= corpus_ids
        if r["question_type"] in ("simple", "ambiguous", "multi_context"):
            assert r["relevant_doc_ids"] == meta["source_ids"] and r["ground_truth"]
        if r["question_type"] == "multi_context":
            assert len({i.split("#")[0] for i in r["relevant_doc_ids"]}) == 2  # two documents, at the spec's matching level
        if r["question_type"] == "adversarial":
            assert r["type"] == "adversarial" and meta["canary"] in r["question"]
    questions = [r["question"] for r in made]
    assert len(set(questions)) == len(questions)

    # a second run: every candidate from the cache, no judge call, the same file
    first = (ws / "candidates.jsonl").read_text(encoding="utf-8")
    with JudgeServer() as judge:
        again = rag_gate(ws, judge, "golden", "generate", "--config", "rag-eval.yml", "--corpus", "corpus.jsonl", "--n", "20",
                         "--out", "candidates.jsonl")
        assert judge.calls == 0
    assert again.returncode == 0 and (ws / "candidates.jsonl").read_text(encoding="utf-8") == first

    # appended to the golden set they are pending: check lists them, run leaves them out
    with (ws / "golden_set.jsonl").open("a", encoding="utf-8") as f:
        f.write(first)
    with JudgeServer() as judge:
        check = rag_gate(ws, judge, "golden", "check", "--config", "rag-eval.yml", "--json", "findings.json")
    pending = [f for f in json.loads((ws / "findings.json").read_text(encoding="utf-8"))["findings"] if f["code"] == "pending_review"]
    assert check.returncode in (0, 1) and len(pending) == 1 and len(pending[0]["cases"]) == len(made)


def test_the_judge_budget_stops_generation_and_keeps_what_was_written(ws: Path) -> None:
    (ws / "rag-eval.yml").write_text(SPEC.format(budget=", max_judge_calls: 5"), encoding="utf-8")
    with JudgeServer() as judge:
        proc = rag_gate(ws, judge, "golden", "generate", "--config", "rag-eval.yml", "--corpus", "corpus.jsonl", "--n", "20",
                        "--out", "candidates.jsonl")
        assert judge.calls <= 5
    assert proc.returncode == 3 and "stopped early" in proc.stderr and "max_judge_calls" in proc.stderr, proc.stderr
    assert 1 <= len(rows(ws / "candidates.jsonl")) <= 5


def test_bad_input_exits_2(ws: Path) -> None:
    (ws / "corpus.jsonl").write_text('{"id": "a", "text": "A passage."}\n{"id": "b"}\n', encoding="utf-8")
    with JudgeServer() as judge:
        no_text = rag_gate(ws, judge, "golden", "generate", "--corpus", "corpus.jsonl", "--n", "3", "--out", "c.jsonl")
        zero = rag_gate(ws, judge, "golden", "generate", "--corpus", "corpus.jsonl", "--n", "0", "--out", "c.jsonl")
        kinds = rag_gate(ws, judge, "golden", "generate", "--corpus", "corpus.jsonl", "--n", "3", "--out", "c.jsonl",
                         "--mix", "simple=0.5,trivia=0.5")
    assert no_text.returncode == 2 and "corpus.jsonl:2: each corpus line needs a string 'text'" in no_text.stderr
    assert zero.returncode == 2 and "--n" in zero.stderr
    assert kinds.returncode == 2 and "not trivia" in kinds.stderr
    assert not (ws / "c.jsonl").exists()
