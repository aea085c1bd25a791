"""Golden-file tests of the rendered reports (PR comment, JUnit XML, console).

The reports are built by the real pipeline (spec -> results file -> evaluate) from fixed
inputs. To accept new output after a deliberate change, run

    RAG_GATE_UPDATE_GOLD=1 python -m pytest tests/unit/test_render.py

and review the diff of tests/gold/ before committing it.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gate.config.loader import load_spec
from gate.core.records import baseline_from_report
from gate.io.golden import load_golden_set
from gate.render.console import render_console
from gate.render.junit import render_junit
from gate.render.markdown import cell, code, marker, render_comment
from gate.run.context import RunFacts
from gate.run.evaluate import evaluate
from gate.targets.results import ResultsFileTarget

GOLD = Path(__file__).resolve().parents[1] / "gold"

SPEC = """\
version: 1
golden_set: golden.jsonl
target: {results: results.jsonl}
max_error_rate: 0.2
report: {comment_id: docs-bot, max_cases: 3}
stages:
  retrieval:
    metrics: [hit_rate@2, mrr, recall@2, ndcg@3]
    gates:
      hit_rate@2: {min: 0.7, max_drop: 0.05}
      mrr: {max_drop: "10%"}
      p95_latency_ms: {max: 300}
      error_rate: {max: 0.0}
"""
GOLDEN = [
    {"id": "q1", "question": "How long can I borrow a book?", "relevant_doc_ids": ["lend#1"], "category": "lending"},
    {"id": "q2", "question": "What does a lost card cost?", "relevant_doc_ids": {"fees#2": 2, "fees#3": 1}, "category": "fees", "tags": ["badcase"]},
    {"id": "q3", "question": "<img src=x onerror=alert(1)> ping @org/team about #12 | broken |", "relevant_doc_ids": ["evil#1"], "category": "fees"},
    {"id": "q4", "question": "Can I renew online?", "relevant_doc_ids": ["lend#2"], "category": "lending"},
    {"id": "q5", "question": "Are e-books free?", "relevant_doc_ids": ["ebook#1"], "tags": ["badcase"]},
    {"id": "q6", "question": "What is the weather tomorrow?", "type": "out_of_scope"},
]
BASE_RESULTS = {
    "q1": ["lend#1", "x#1", "x#2"], "q2": ["fees#2", "fees#3", "x#1"], "q3": ["evil#1", "x#1"],
    "q4": ["lend#2", "x#3"], "q5": ["ebook#1"], "q6": ["x#9"],
}
HEAD_RESULTS = {
    "q1": ["x#1", "x#2", "lend#1"], "q2": ["fees#2", "x#1", "fees#3"], "q3": ["x#1", "x#2", "x#3"],
    "q4": ["lend#2", "x#3"], "q5": None, "q6": ["x#9"],
}


def _write_run(tmp: Path, results: dict[str, list[str] | None]) -> None:
    (tmp / "rag-eval.yml").write_text(SPEC)
    (tmp / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOLDEN))
    lines = []
    for i, (cid, ids) in enumerate(results.items()):
        if ids is None:
            lines.append({"id": cid, "error": "upstream timeout"})
        else:
            lines.append({"id": cid, "retrieved": [{"id": d, "score": 1 - r / 10} for r, d in enumerate(ids)],
                          "answer": f"answer {cid}", "latency_ms": 100 + 40 * i})
    (tmp / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _report(tmp: Path, results: dict[str, list[str] | None], baseline: dict | None) -> dict:
    _write_run(tmp, results)
    spec = load_spec(Path("rag-eval.yml"))
    cases = load_golden_set(spec.golden_set_path)
    target = ResultsFileTarget.read(spec.resolve("results.jsonl"), cases)
    outputs = {c.id: target.ask(c, spec.target_k) for c in cases}
    # a fixed clock, so the baseline's age renders the same
    context = RunFacts(created_at="2026-11-29T10:00:00+00:00", duration_s=0.5, baseline=baseline, target_kind="results")
    report = evaluate(spec, cases, outputs, context)
    return report


@pytest.fixture()
def reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    base_report = _report(tmp_path, BASE_RESULTS, None)
    baseline = baseline_from_report(base_report, created_at="2026-11-30T00:00:00+00:00", tool_version="0.1.0")
    baseline["created_at"], baseline["commit"] = "2026-11-01T10:00:00+00:00", "0123456789abcdef"
    head = _report(tmp_path, HEAD_RESULTS, baseline)
    stale = json.loads(json.dumps(baseline))
    stale["fingerprints"]["golden_set"] = "sha256:0000"
    mismatch = _report(tmp_path, BASE_RESULTS, stale)
    return {"first": base_report, "regressed": head, "mismatch": mismatch}


def _check_gold(name: str, text: str) -> None:
    path = GOLD / name
    if os.environ.get("RAG_GATE_UPDATE_GOLD"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run with RAG_GATE_UPDATE_GOLD=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.mark.parametrize("which", ["first", "regressed", "mismatch"])
def test_comment_matches_gold(reports: dict[str, dict], which: str) -> None:
    _check_gold(f"comment_{which}.md", render_comment(reports[which]))


@pytest.mark.parametrize("which", ["first", "regressed"])
def test_console_matches_gold(reports: dict[str, dict], which: str) -> None:
    _check_gold(f"console_{which}.txt", render_console(reports[which]))


def test_junit_matches_gold(reports: dict[str, dict]) -> None:
    _check_gold("junit_regressed.xml", render_junit(reports["regressed"]))


def test_regressed_report_names_the_cases_and_ranks(reports: dict[str, dict]) -> None:
    head = reports["regressed"]
    assert head["verdict"] == "fail" and head["exit_code"] == 1
    stage = head["stages"]["retrieval"]
    worse = {w["id"]: w for w in stage["worse_cases"]}
    assert set(worse) == {"q1", "q2", "q3"}
    assert worse["q1"]["lost"] == [{"id": "lend#1", "from": 1, "to": 3, "left_top_k": True}]
    assert worse["q3"]["lost"] == [{"id": "evil#1", "from": 1, "to": None, "left_top_k": True}]
    # q5 errored: listed with its reason, left out of the averages
    errored = [s for s in stage["samples"] if s["error"]]
    assert [(s["id"], s["error"]) for s in errored] == [("q5", "results file: upstream timeout")]
    assert stage["n"] == 4
    statuses = {g["metric"]: g["status"] for g in stage["gates"]}
    assert statuses == {"hit_rate@2": "fail", "mrr": "fail", "p95_latency_ms": "pass", "error_rate": "fail"}


def test_first_run_skips_baseline_checks(reports: dict[str, dict]) -> None:
    first = reports["first"]
    gates = {g["metric"]: g for g in first["stages"]["retrieval"]["gates"]}
    assert gates["mrr"]["status"] == "skipped"
    assert gates["hit_rate@2"]["status"] == "pass"  # the min check passed, max_drop skipped
    assert first["verdict"] == "pass"


def test_mismatch_is_flagged(reports: dict[str, dict]) -> None:
    m = reports["mismatch"]
    assert m["baseline"]["mismatch"] == ["golden_set"]
    assert "different golden_set" in render_comment(m)


def test_comment_is_safe_for_untrusted_text(reports: dict[str, dict]) -> None:
    body = render_comment(reports["regressed"])
    assert body.startswith(marker("docs-bot"))
    assert "<img" not in body and "@org" not in body and "#12" not in body
    # every table row keeps its column count despite the '|' in the question
    for line in body.splitlines():
        if line.startswith("| `q3`"):
            assert line.replace("\\|", "").count("|") == 5


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a|b", "a\\|b"),
        ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
        ("hi @octocat", "hi @\u200boctocat"),
        ("see #42", "see #\u200b42"),  # an entity would be decoded before GitHub links references: not enough
        ("line1\nline2", "line1 line2"),
        ("x" * 200, "\u200b".join(["x" * 30] * 3 + ["x" * 29 + "…"])),  # cut, then wrappable every 30 characters
    ],
)
def test_cell_escaping(raw: str, expected: str) -> None:
    assert cell(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), [("a|b", "`a\\|b`"), ("a`b", "`a'b`"), ("doc#1", "`doc#1`")])
def test_code_span_escaping(raw: str, expected: str) -> None:
    assert code(raw) == expected


def test_junit_is_well_formed_with_one_case_per_gate(reports: dict[str, dict]) -> None:
    root = ET.fromstring(render_junit(reports["regressed"]))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == ["hit_rate@2", "mrr", "p95_latency_ms", "error_rate"]
    assert root.get("failures") == "3"
