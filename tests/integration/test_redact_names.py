"""A secret that spells the report's own words: its pieces are redacted in text, never in the report's names.

The pieces rule (any 8 characters of a token) once applied to every string of report.json, keys included: with the
target's token ``acme-retrieval-robustness-key-2024`` the ``retrieval`` stage became ``***l``, every metric of the
robustness stage lost its name, and the report its own schema (the baseline and the action's report mode refuse it at
the door). Keys, and values that are one of the document's keys (a stage, a metric), now lose only a secret's whole
forms; the answers and passages still lose every piece.
"""

from __future__ import annotations

import json
import re

from gate.cli.main import main as cli
from gate.core.redact import Redactor
from tests.support.rag_server import RagServer, response

TOKEN = "acme-retrieval-robustness-key-2024"
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  http: {url: "${RAG_URL}", headers: {Authorization: "Bearer ${RAG_TOKEN}"}, retries: 0}
stages:
  retrieval:
    metrics: [hit_rate@1, mrr]
    gates: {hit_rate@1: {min: 0.5}}
  robustness:
    rejection: {judge: false}
    gates: {rejection_rate: {min: 0.0}}
"""
GOLDEN = [
    {"id": "q1", "question": "How long is a loan?", "ground_truth": "21 days", "relevant_doc_ids": ["loans"]},
    {"id": "q2", "question": "What does a late book cost?", "ground_truth": "10 cents", "relevant_doc_ids": ["fees"]},
    {"id": "q3", "question": "What is the weather in Paris?", "type": "out_of_scope"},
]
ANSWERS = {
    "How long is a loan?": response(["loans", "fees"], answer="21 days (asked with acme-retrieval-robu)"),
    "What does a late book cost?": response(["fees"], answer="10 cents"),
    "What is the weather in Paris?": response(["fees"], answer="I cannot answer that."),
}


def test_a_token_that_spells_report_words_leaves_the_report_whole(tmp_path, monkeypatch):
    (tmp_path / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOLDEN), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with RagServer(ANSWERS) as rag:
        monkeypatch.setenv("RAG_URL", rag.url)
        monkeypatch.setenv("RAG_TOKEN", TOKEN)
        code = cli(["run", "--config", "rag-eval.yml", "--report", "r.json", "--markdown", "c.md", "--junit", "j.xml"])
        assert any(TOKEN in str(r.headers) for r in rag.requests)  # the token was sent
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert set(report["stages"]) == {"retrieval", "robustness"}
    assert {"hit_rate@1", "mrr"} <= set(report["stages"]["retrieval"]["metrics"])
    assert "rejection_rate" in report["stages"]["robustness"]["metrics"]
    assert [g["stage"] for s in report["stages"].values() for g in s["gates"]] == ["retrieval", "robustness"]
    # the answer that echoed a cut piece of the token lost it; no output holds 8 characters of the token
    outputs = {name: (tmp_path / name).read_text(encoding="utf-8") for name in ("r.json", "c.md", "j.xml")}
    assert "21 days (asked with ***)" in outputs["r.json"]
    for name, text in outputs.items():  # the words themselves aside: the stage names, in any case
        rest = re.sub("(?i)retrieval|robustness", "", text)
        assert not [TOKEN[i:i + 8] for i in range(len(TOKEN) - 7) if TOKEN[i:i + 8] in rest], name
    # read back through the schema at the door (the baseline): the report is still a rag-gate report
    assert cli(["baseline", "update", "--config", "rag-eval.yml", "--report", "r.json", "--output", "b.json"]) == 0


def test_names_keep_the_pieces_and_text_loses_them():
    r = Redactor([TOKEN])
    doc = {"stages": {"retrieval": {"n": 1}}, "gates": [{"stage": "retrieval", "note": "retrieval is slow"}],
           "ids": {TOKEN: 1}, "echo": f"cut: {TOKEN[:12]}"}
    out = r.document(doc)
    assert out["stages"] == {"retrieval": {"n": 1}} and out["gates"][0]["stage"] == "retrieval"
    assert out["gates"][0]["note"] == "*** is slow"  # prose: the piece goes
    assert out["ids"] == {"***": 1}  # a key that is the whole token: redacted
    assert out["echo"] == "cut: ***"
