"""Retrieval metrics of 0 whose cause is in the target's answers, said as a warning: ids a framework made up (a real
LlamaIndex index gives its nodes UUIDs; the user's ids sit in the metadata), and answers that hold no passage at all.
A real retriever that finds nothing relevant is not warned about."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

GOLDEN = [
    {"id": "g1", "question": "How long is a loan?", "ground_truth": "21 days", "relevant_doc_ids": ["loans"]},
    {"id": "g2", "question": "What does a late book cost?", "ground_truth": "10 cents", "relevant_doc_ids": ["fees"]},
    {"id": "g3", "question": "What is the weather?", "type": "out_of_scope"},
]
CORPUS = {"loans": "Books are lent for 21 days; a loan is renewed twice.", "fees": "A late book costs 10 cents a day in fees."}
RAG = '''
from llama_index.core.schema import TextNode
from llama_index.retrievers.bm25 import BM25Retriever

CORPUS = {corpus!r}
nodes = [TextNode(text=t, metadata={{"doc": d}}) for d, t in CORPUS.items()]  # no id_: LlamaIndex makes one up
bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=2)

def retrieve(question, k):
    return bm25.retrieve(question)[:k]
'''
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
{target}
stages:
  retrieval:
    metrics: [hit_rate@2, mrr]
"""


def project(tmp_path: Path, target: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOLDEN), encoding="utf-8")
    (tmp_path / "rag.py").write_text(RAG.format(corpus=CORPUS), encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text(SPEC.format(target=target), encoding="utf-8")
    return tmp_path


def run(folder: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "r.json", "--no-progress"],
                          cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc, json.loads((folder / "r.json").read_text(encoding="utf-8"))


def test_ids_llamaindex_made_up_are_said_and_id_key_reads_the_real_ones(tmp_path: Path) -> None:
    proc, report = run(project(tmp_path / "a", '  python: {retriever: "rag:retrieve"}'))
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@2"] == 0.0
    (warning,) = [w for w in report["warnings"] if "look made up" in w]
    assert "no relevant id was retrieved for any of the 2 cases, and 4 of the 4 ids retrieved look made up" in warning
    assert "set id_key" in warning and "look made up" in proc.stdout
    _, fixed = run(project(tmp_path / "b", '  python: {retriever: "rag:retrieve", id_key: doc}'))
    assert fixed["stages"]["retrieval"]["metrics"]["hit_rate@2"] == 1.0
    assert not [w for w in fixed["warnings"] if "made up" in w or "retrieved passage" in w]


def test_a_retriever_that_finds_nothing_relevant_is_not_warned_about(tmp_path: Path) -> None:
    folder = project(tmp_path, "  results: results.jsonl")
    lines = [{"id": c["id"], "retrieved": [{"id": f"other-{i}"} for i in range(3)], "answer": "a"} for c in GOLDEN]
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    _, report = run(folder)
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@2"] == 0.0
    assert not [w for w in report["warnings"] if "made up" in w or "retrieved passage" in w]
    made_up = [{"id": c["id"], "retrieved": [{"id": str(uuid.uuid4())} for _ in range(3)], "answer": "a"} for c in GOLDEN]
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in made_up), encoding="utf-8")
    _, report = run(folder)
    assert [w for w in report["warnings"] if "look made up" in w]


def test_answers_with_no_passage_at_all_are_said_with_the_key_to_set(tmp_path: Path) -> None:
    folder = project(tmp_path, "  results: results.jsonl")
    lines = [{"id": c["id"], "retrieved": [], "answer": "21 days"} for c in GOLDEN]
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    proc, report = run(folder)
    (warning,) = [w for w in report["warnings"] if "retrieved passage" in w]
    assert warning == ("none of the 2 answers holds a retrieved passage, so every retrieval metric is 0: set 'retrieved' on "
                       "each line of the results file to where the passages are")
