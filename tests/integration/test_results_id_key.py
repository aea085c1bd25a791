"""target.results: {path, id_key}: a results file of real LangChain documents whose ids are in metadata["source"]
scores exactly as the same ranking written in the usual shape; without id_key the line is an input error whose hint
names the setting; the object form is checked by the schema like any other key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from gate.core.model import GoldenCase
from gate.targets.results import read_results

GOLDEN = [
    {"id": "g1", "question": "How long is a loan?", "ground_truth": "21 days", "relevant_doc_ids": ["loans.md"]},
    {"id": "g2", "question": "What does a late book cost?", "ground_truth": "10 cents", "relevant_doc_ids": ["fees.md", "rules.md"]},
    {"id": "g3", "question": "When is Central open?", "ground_truth": "Sundays", "relevant_doc_ids": ["hours.md"]},
]
RANKED = {"g1": ["fees.md", "loans.md", "hours.md"], "g2": ["rules.md", "loans.md", "fees.md"], "g3": ["loans.md", "fees.md"]}
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: {results}
stages:
  retrieval:
    metrics: [hit_rate@1, mrr, recall@2, ndcg@3, map]
"""


def langchain_line(case: str, ids: list[str]) -> dict[str, Any]:
    """A chain's output as a user's step writes it: the real Documents' model_dump, the ids only in the metadata."""
    docs = [Document(page_content=f"About {d}.", metadata={"source": d, "page": i}).model_dump() for i, d in enumerate(ids)]
    return {"id": case, "context": docs, "answer": f"answer to {case}"}


def plain_line(case: str, ids: list[str]) -> dict[str, Any]:
    return {"id": case, "retrieved": [{"id": d, "text": f"About {d}."} for d in ids], "answer": f"answer to {case}"}


def write(folder: Path, lines: list[dict[str, Any]], results: str) -> None:
    folder.mkdir()
    (folder / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOLDEN), encoding="utf-8")
    (folder / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (folder / "rag-eval.yml").write_text(SPEC.format(results=results), encoding="utf-8")


def run(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "r.json", "--no-progress"],
                          cwd=folder, capture_output=True, text=True, timeout=120)


def per_case(folder: Path) -> dict[str, Any]:
    report = json.loads((folder / "r.json").read_text(encoding="utf-8"))
    return {s["id"]: s["metrics"] for s in report["stages"]["retrieval"]["samples"]}


def test_langchain_documents_with_their_ids_in_the_metadata_score_as_the_usual_shape(tmp_path: Path) -> None:
    write(tmp_path / "lc", [langchain_line(c, ids) for c, ids in RANKED.items()], "{path: results.jsonl, id_key: source}")
    write(tmp_path / "plain", [plain_line(c, ids) for c, ids in RANKED.items()], "results.jsonl")
    lc, plain = run(tmp_path / "lc"), run(tmp_path / "plain")
    assert (lc.returncode, plain.returncode) == (0, 0), lc.stderr + lc.stdout
    assert per_case(tmp_path / "lc") == per_case(tmp_path / "plain")
    assert per_case(tmp_path / "lc")["g1"]["mrr"] == 0.5  # loans.md, the relevant id, at rank 2: read from metadata.source
    validate = subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.yml"], cwd=tmp_path / "lc",
                              capture_output=True, text=True, timeout=120)
    assert validate.returncode == 0 and "3 lines match golden cases, 0 cases have no line" in validate.stdout


def test_with_id_key_a_document_id_comes_from_the_metadata_only(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    doc = Document(page_content="About loans.", id="own-1", metadata={"source": "loans.md"}).model_dump()
    line = {"id": "g1", "retrieved": [doc, {"id": "fees.md", "text": "About fees."}], "answer": "a"}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    cases = [GoldenCase(id="g1", question="How long is a loan?", line=1, relevant={"loans.md": 1})]
    # the LangChain document's own id gives way to metadata.source; an item of the usual shape keeps its id
    assert [p.id for p in read_results(path, cases, id_key="source").outputs["g1"].retrieved] == ["loans.md", "fees.md"]
    assert [p.id for p in read_results(path, cases).outputs["g1"].retrieved] == ["own-1", "fees.md"]


def test_without_id_key_the_error_names_the_line_and_the_setting(tmp_path: Path) -> None:
    write(tmp_path / "lc", [langchain_line(c, ids) for c, ids in RANKED.items()], "results.jsonl")
    proc = run(tmp_path / "lc")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "results.jsonl:1" in err and "it has no id and its metadata no 'id'" in err and "'source', 'page'" in err
    assert "target.results: {path: ..., id_key: KEY}" in err
    assert "Traceback" not in err


def test_the_object_form_is_checked_by_the_schema(tmp_path: Path) -> None:
    write(tmp_path / "bad", [plain_line(c, ids) for c, ids in RANKED.items()], "{path: results.jsonl, id_keys: source}")
    proc = run(tmp_path / "bad")
    assert proc.returncode == 2 and "id_keys" in proc.stderr and "rag-eval.yml:4" in proc.stderr, proc.stderr
    assert not (tmp_path / "bad" / "r.json").exists()
