"""The paraphrase test through the real CLI, against two real retrievers over the quickstart corpus
(tests/support/retrievers.py): a keyword-only BM25 and a "semantic" stand-in that knows everyday synonyms of the
handbook's words. Colloquial rewrites written by hand (the golden set's ``paraphrases``) use words the corpus does not:
the keyword retriever loses cases on them, the semantic one keeps them. With the judge stand-in
(tests/support/judge_server.py) the rewrites are generated, cached, and written out for review with
``--write-paraphrases``; merged back into the golden set they give the same figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gate.core.paraphrase import normalise

try:
    from tests.support.judge_server import JudgeServer, always, malformed
except ImportError:  # tests/ itself on sys.path
    from judge_server import JudgeServer, always, malformed  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
SUPPORT = ROOT / "tests" / "support"

# the question as a user types it: words the handbook does not use (retrievers.SYNONYMS knows them)
PARAPHRASES = {
    "q01": ["how many days do i get to keep a paperback", "how long can i hang on to a novel"],
    "q03": ["whats a card gonna set me back if im not a local"],
    "q05": ["late charge per day on a movie disc"],
    "q06": ["how many times can i prolong a novel"],
    "q08": ["how much for a color printout per sheet"],
    "q09": ["what time does the downtown branch open at the weekend"],
    "q11": ["misplaced my card, what does a new one cost for a grownup"],
    "q13": ["am i allowed to eat my lunch in the group workspace"],
    "q14": ["what do they charge to get a book shipped in from elsewhere"],
    "q16": ["when is the singalong for infants"],
    "q17": ["does my amazon gadget work with your online books"],
    "q20": ["my nan is stuck indoors, could someone drop novels round"],
    "q22": ["max time on a pc per day"],
    "q23": ["how long can i hang onto a portable wifi router"],
    "q24": ["can i giveaway my old schoolbooks to you"],
    "q27": ["are kiddos penalised for bringing stuff back late"],
    "q29": ["when do u shut on dec 24"],
    "q31": ["can i freeze my reservations while on vacation"],
    "q32": ["how pricey is the plastic printer"],
}

SPEC = """\
version: 1
golden_set: golden_set.jsonl
target:
  python: {{function: "retrievers:{retriever}", path: ["{support}"]}}
  k: 10
max_error_rate: 0
cache: {{path: .rag-gate/cache.sqlite}}
{judge}stages:
  retrieval:
    metrics: [hit_rate@5, mrr]
  robustness:
    paraphrase:
      generate: 2
      sample: {{size: {size}, seed: 7}}
      metrics: [hit_rate@5, mrr]
    gates:
      paraphrase_robustness: {{min: 0.8}}
"""

JUDGE = "judge:\n  base_url: {url}\n  model: judge-2024-11-20\n  api_key_env: JUDGE_KEY\n  max_retries: 0\n"
ENV = {"JUDGE_KEY": "k-123456"}


def golden_rows(paraphrases: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (QUICKSTART / "golden_set.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        if paraphrases and row["id"] in paraphrases:
            row["paraphrases"] = paraphrases[row["id"]]
    return rows


def project(folder: Path, retriever: str, rows: list[dict[str, Any]], *, judge: str = "", size: str = "all") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "golden_set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "rag-eval.yml").write_text(SPEC.format(retriever=retriever, support=SUPPORT.as_posix(), judge=judge, size=size),
                                         encoding="utf-8")
    return folder


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}, **ENV}
    return subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--no-progress", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def run(cwd: Path, *args: str, report: str = "report.json") -> tuple[int, dict[str, Any]]:
    proc = rag_gate(cwd, "--report", report, *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads((cwd / report).read_text(encoding="utf-8"))["stages"]["robustness"]


def test_the_keyword_retriever_loses_colloquial_rewrites_the_semantic_one_keeps(tmp_path: Path) -> None:
    rows = golden_rows(PARAPHRASES)
    code_kw, kw = run(project(tmp_path / "bm25", "bm25", rows))
    code_sem, sem = run(project(tmp_path / "semantic", "semantic", rows))

    assert kw["metrics"]["paraphrase_robustness"] < 0.6 < 0.9 < sem["metrics"]["paraphrase_robustness"]
    assert kw["metrics"]["paraphrase_gap@5"] > 0.4 > 0.1 > sem["metrics"]["paraphrase_gap@5"]
    assert (code_kw, code_sem) == (1, 0)  # paraphrase_robustness: {min: 0.8}
    assert {g["metric"]: g["status"] for g in kw["gates"]}["paraphrase_robustness"] == "fail"
    assert {g["metric"]: g["status"] for g in sem["gates"]}["paraphrase_robustness"] == "pass"

    for stage in (kw, sem):
        info = stage["paraphrase"]
        assert (info["given"], info["generated"], info["target_calls"], info["k"]) == (20, 0, 20, 5)
        assert info["sample"]["size"] == 32 and set(info["metrics"]) == {"hit_rate@5", "mrr"}
        # the same originals and rewrites for both: their hit rates differ on the rewrites only
        assert info["metrics"]["hit_rate@5"]["original"] == 1.0
    lost = [c for c in kw["paraphrase"]["cases"] if c["lost"]]
    assert len(lost) >= 8
    for case in lost:
        assert case["found"] is True
        missed = [r for r in case["rewrites"] if r["found"] is False]
        assert missed and all(r["text"] in PARAPHRASES[case["id"]] and r["source"] == "golden" for r in missed)
    assert {"q16", "q23", "q29"} <= {c["id"] for c in lost}  # no word of theirs in the handbook
    assert not [c for c in sem["paraphrase"]["cases"] if c["lost"]]


def test_generated_rewrites_are_cached_and_written_for_review(tmp_path: Path) -> None:
    with JudgeServer() as server:
        folder = project(tmp_path / "gen", "bm25", golden_rows(), judge=JUDGE.format(url=server.url), size="12")
        _, first = run(folder, "--write-paraphrases", "paraphrases.jsonl")
        asked = server.calls
        bodies = [json.dumps(b) for b in server.chat_bodies]
        _, second = run(folder, report="again.json")
        again = server.calls - asked
    info = first["paraphrase"]
    assert asked == 12 and again == 0  # one judge call per sampled case, then none: the rewrites are cached
    assert (info["given"], info["generated"], info["cached"]) == (0, 24, 0)
    assert (second["paraphrase"]["generated"], second["paraphrase"]["cached"]) == (24, 24)
    assert second["metrics"] == first["metrics"] and second["paraphrase"]["cases"] == info["cases"]
    for case in info["cases"]:
        texts = [r["text"] for r in case["rewrites"]]
        assert len(texts) == 2 and len({normalise(t) for t in texts}) == 2  # the judge's repeat was dropped
        assert normalise(case["question"]) not in {normalise(t) for t in texts}  # and so was the question itself
        assert all(r["source"] == "generated" and r["found"] is not None for r in case["rewrites"])
    # the relevant passage the run retrieved is shown to the judge, its words to be avoided
    lending = json.loads((QUICKSTART / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[3])["text"]
    assert any("avoid_words_of" in b and lending[:60] in b for b in bodies)

    lines = [json.loads(line) for line in (folder / "paraphrases.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == info["sample"]["ids"]
    merged = golden_rows({line["id"]: line["paraphrases"] for line in lines})
    _, reviewed = run(project(tmp_path / "reviewed", "bm25", merged, size="12"))  # no judge at all now
    r = reviewed["paraphrase"]
    assert (r["given"], r["generated"]) == (24, 0)
    assert reviewed["metrics"] == first["metrics"] and r["metrics"] == info["metrics"]
    assert [c["lost"] for c in r["cases"]] == [c["lost"] for c in info["cases"]]


def test_a_judge_that_writes_nothing_usable_and_no_judge_are_said(tmp_path: Path) -> None:
    with JudgeServer(faults=[always(malformed(), "chat")]) as server:
        _, stage = run(project(tmp_path / "bad", "bm25", golden_rows(), judge=JUDGE.format(url=server.url), size="3"))
    assert "paraphrase" not in stage and "paraphrase_robustness" not in stage["metrics"]
    assert stage["not_evaluated"]["paraphrase_robustness"].startswith("not evaluated: the judge wrote no usable rewrite")
    assert "usage" in stage  # the calls the judge made are counted

    _, stage = run(project(tmp_path / "none", "bm25", golden_rows(), size="3"))
    assert "needs the judge and no judge configured" in stage["not_evaluated"]["paraphrase_gap@5"]


def test_write_paraphrases_needs_the_test_and_a_whole_run(tmp_path: Path) -> None:
    folder = project(tmp_path / "p", "bm25", golden_rows(), size="3")
    proc = rag_gate(folder, "--report", "report.json", "--write-paraphrases", "out.jsonl")
    assert proc.returncode == 0 and "--write-paraphrases" in proc.stderr and not (folder / "out.jsonl").exists()
    proc = rag_gate(folder, "--report", "part.json", "--shard", "1/2", "--write-paraphrases", "out.jsonl")
    assert proc.returncode == 2 and "--write-paraphrases" in proc.stderr

