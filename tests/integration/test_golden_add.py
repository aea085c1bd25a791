"""`rag-gate golden add`: golden-case candidates from a traces run's report, through the real CLI.

The report is a real one (a results-file run of 30 cases through gate.run.flow.run) given the traces section and the
judged scores a traces run writes for a crafted window of 30 traces, checked against report.schema.json: 20 clearly
worst-scored (four of them near-duplicates: three of the quickstart's golden cases, one of a worse-scored trace), ten
scored well, five rated negatively (one among the worst, one unscored, one a near-duplicate of a golden case).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gate.io.golden import load_golden_set
from gate.run.flow import run

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "examples" / "quickstart" / "golden_set.jsonl"
SCHEMA = ROOT / "gate" / "report.schema.json"
CREATED = "2025-03-08T06:00:00+00:00"
INJECTED = "\n::error::injected"

QUESTIONS = {
    1: "Do you offer free tax preparation help in the spring?",
    2: "Can teenagers join the summer reading challenge?",
    3: "How long can I borrow a printed book for?",           # near q01
    4: "Is there a maker space with a laser cutter?",
    5: "Where can I find old maps of the town harbour?",
    6: "Can I borrow a telescope from the library?",
    7: "Does the library run English conversation classes?",
    8: "So what is the loan period for e-books?",              # near q02
    9: "Can I scan documents to my email for free?",
    10: "Are dogs allowed inside the building?",
    11: "Can I return books at any branch?",                   # near t12, which scored lower
    12: "Can I return books to any branch?",
    13: "Is there a quiet floor for studying?",
    14: "Do you lend museum passes to members?",
    15: "How many times can I renew a book online?",           # near q06
    16: "Can I volunteer to shelve books on weekends?",
    17: "Does the library have a seed library for gardeners?",
    18: "How do I record a podcast in the media lab?",
    19: "Can I get a library card without a photo ID?",
    20: "Do you have audiobooks in Spanish?",
    21: "Is there a book club for retirees?",
    22: "Can I reserve a laptop to use inside the library?",
    23: "Are there lockers for my bag?",
    24: "Does the library host job search workshops?",
    25: "Can I print from my phone?",
    26: "Is the parking garage free for library visitors?",
    27: "Do you have large print books?",
    28: "Can I donate old magazines?",
    29: "When is the Central Library open on Sundays?" + INJECTED,  # near q09; its text tries to start a workflow command
    30: "Does the library have a piano I can practise on?",
}
NEGATIVE = {5, 24, 27, 28, 29}
UNSCORED = {28}
DUPLICATES = {"t03": "q01", "t08": "q02", "t15": "q06", "t11": "trace-t12"}
WORST = [f"t{i:02d}" for i in range(1, 21)]


def tid(i: int) -> str:
    return f"t{i:02d}"


def scores(i: int) -> dict[str, float]:
    """The judged metrics clearly low for t01-t20 (t12 the lowest of all), high for the rest; the exact metrics the
    other way round, so that a score that counted them would pick other traces."""
    if i in UNSCORED:
        return {}
    if i <= 20:
        faith = 0.01 if i == 12 else 0.05 + i / 100
        return {"faithfulness": faith, "answer_relevancy": 0.2, "token_f1": 1.0, "check_pass_rate": 1.0}
    return {"faithfulness": 0.95, "answer_relevancy": 0.01 if i == 25 else 0.85 + i / 1000, "token_f1": 0.0,
            "check_pass_rate": 0.0}


def real_report(ws: Path) -> dict[str, Any]:
    """A report of a real run: a results-file target answering the 30 questions, retrieval and generation scored."""
    cases = [{"id": tid(i), "question": q, "ground_truth": f"answer {i}", "relevant_doc_ids": [f"doc{i}#1"]}
             for i, q in QUESTIONS.items()]
    (ws / "run-golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    lines = [{"id": tid(i), "retrieved": [{"id": f"doc{i}#2", "text": "a passage"}, {"id": f"doc{i}#1", "text": "another"}],
              "answer": f"the production answer {i}"} for i in QUESTIONS]
    (ws / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    spec = {"version": 1, "golden_set": "run-golden.jsonl", "target": {"results": "results.jsonl"},
            "stages": {"retrieval": {"metrics": ["hit_rate@5", "mrr"]},
                       "generation": {"metrics": ["token_f1"], "sample": {"size": "all"}}}}
    (ws / "run.yml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    report = run(str(ws / "run.yml"))
    assert report["verdict"] == "pass" and len(report["cases"]) == 30
    return json.loads(json.dumps(report))


def traces_section(day: str = "2025-03-07") -> dict[str, Any]:
    cases = [{"id": tid(i), "question": q, "line": i, "timestamp": f"{day}T{i % 24:02d}:15:00Z",
              "feedback": -1.0 if i in NEGATIVE else (1.0 if i % 3 == 0 else None),
              "negative": True if i in NEGATIVE else (False if i % 3 == 0 else None)} for i, q in QUESTIONS.items()]
    return {"path": "traces.jsonl", "format": "rag-gate", "lines": 400, "read": 400, "unreadable": 0, "problems": [],
            "since": f"{day}T00:00:00Z", "until": f"{day}T23:59:59Z", "in_window": 400, "undated": 0,
            "first": cases[0]["timestamp"], "last": cases[-1]["timestamp"], "sampled": 30, "by_day": {day: 30},
            "rate": 0.075, "max": 300, "seed": 7, "negative_below": 0.0, "cases": cases}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("golden-add")
    report = real_report(ws)
    (ws / "plain.json").write_text(json.dumps(report, indent=2), encoding="utf-8")  # a run that is no traces run
    report["traces"] = traces_section()
    report["run"]["created_at"] = CREATED
    for sample in report["stages"]["generation"]["samples"]:
        sample["metrics"] = scores(int(sample["id"][1:]))
        if not sample["metrics"]:
            sample["error"] = "the judge failed: timed out"
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(report)
    (ws / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    shutil.copy(GOLDEN, ws / "golden.jsonl")
    (ws / "rag-eval.yml").write_text("version: 1\ngolden_set: golden.jsonl\ntarget:\n  results: results.jsonl\n"
                                     "stages:\n  retrieval:\n    metrics: [hit_rate@5]\n", encoding="utf-8")
    return ws


def rag_gate(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


def add(ws: Path, out: str, *args: str) -> subprocess.CompletedProcess[str]:
    return rag_gate(ws, "golden", "add", "--from-report", "report.json", "--out", out, *args)


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_20_worst_become_pending_candidates_but_the_near_duplicates(ws: Path) -> None:
    proc = add(ws, "worst.jsonl", "--worst", "20", "--golden", "golden.jsonl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    made = rows(ws / "worst.jsonl")
    kept = [t for t in WORST if t not in DUPLICATES]
    assert len(made) == 16 and sorted(r["metadata"]["trace_id"] for r in made) == kept
    assert [r["id"] for r in made][:2] == ["trace-t12", "trace-t01"]  # worst first
    scores_in_order = [sum(r["metadata"]["scores"].values()) / 2 for r in made]
    assert scores_in_order == sorted(scores_in_order)
    by_trace = {r["metadata"]["trace_id"]: r for r in made}
    t07 = by_trace["t07"]
    assert t07 == {
        "id": "trace-t07", "question": QUESTIONS[7], "type": "answerable",
        "metadata": {"review": "pending", "source": "traces", "trace_id": "t07", "timestamp": "2025-03-07T07:15:00Z",
                     "scores": {"answer_relevancy": 0.2, "faithfulness": 0.05 + 7 / 100}, "feedback": None,
                     "answer": "the production answer 7", "suggested_relevant_ids": ["doc7#2", "doc7#1"], "report": CREATED},
    }
    assert by_trace["t05"]["metadata"]["feedback"] == -1.0
    assert "wrote 16 candidate(s) to worst.jsonl from 30 sampled trace(s) of report.json" in proc.stdout
    assert "picked the 20 worst-scored (score: mean of answer_relevancy, faithfulness); 4 dropped as near-duplicates" in proc.stdout
    for trace, like in DUPLICATES.items():
        of = f"candidate {like}, scored lower" if like.startswith("trace-") else f"the golden set's case {like}"
        assert any(ln.startswith(f"dropped: trace {trace} ") and f"near-duplicate of {of}" in ln for ln in proc.stdout.splitlines()), trace
    assert "compared with the 40 case(s) of golden.jsonl" in proc.stdout


def test_negative_feedback_adds_the_negatively_rated_once_each(ws: Path) -> None:
    proc = add(ws, "both.jsonl", "--worst", "20", "--feedback", "negative", "--config", "rag-eval.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    made = {r["metadata"]["trace_id"]: r for r in rows(ws / "both.jsonl")}
    assert sorted(made) == sorted([t for t in WORST if t not in DUPLICATES] + ["t24", "t27", "t28"])  # t29: near q09
    assert made["t28"]["metadata"]["scores"] == {} and made["t24"]["metadata"]["feedback"] == -1.0
    assert "picked the 20 worst-scored (score: mean of answer_relevancy, faithfulness) and 4 more negatively rated; " \
           "5 dropped as near-duplicates" in proc.stdout
    assert "(the golden set of rag-eval.yml)" in proc.stdout
    (t29,) = [ln for ln in proc.stdout.splitlines() if "trace t29" in ln]
    assert "near-duplicate of the golden set's case q09" in t29
    assert not any(ln.lstrip().startswith("::") for ln in proc.stdout.splitlines())  # the trace's text starts no command
    alone = add(ws, "negative.jsonl", "--feedback", "negative", "--golden", "golden.jsonl")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert sorted(r["metadata"]["trace_id"] for r in rows(ws / "negative.jsonl")) == ["t05", "t24", "t27", "t28"]
    assert "picked 5 negatively rated; 1 dropped as near-duplicates" in alone.stdout


def test_one_metric_alone_and_no_golden_set(ws: Path) -> None:
    proc = add(ws, "relevancy.jsonl", "--worst", "1", "--metric", "answer_relevancy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (only,) = rows(ws / "relevancy.jsonl")
    assert only["metadata"]["trace_id"] == "t25" and only["metadata"]["scores"] == {"answer_relevancy": 0.01}
    assert "near-duplicates of existing cases were not looked for" in proc.stdout
    every = add(ws, "all.jsonl", "--worst", "100")
    assert every.returncode == 0 and len(rows(ws / "all.jsonl")) == 28  # 29 scored, t11 a near-duplicate of t12
    assert "fewer than 100 worst: 29 of the 30 sampled traces have a judged score" in every.stdout


def test_golden_check_lists_the_candidates_as_pending(ws: Path) -> None:
    assert add(ws, "both.jsonl", "--worst", "20", "--feedback", "negative", "--golden", "golden.jsonl").returncode == 0
    made = rows(ws / "both.jsonl")
    check_dir = ws / "check"
    check_dir.mkdir(exist_ok=True)
    (check_dir / "golden.jsonl").write_text(GOLDEN.read_text(encoding="utf-8") + (ws / "both.jsonl").read_text(encoding="utf-8"),
                                            encoding="utf-8")
    shutil.copy(ws / "rag-eval.yml", check_dir / "rag-eval.yml")
    proc = rag_gate(check_dir, "golden", "check", "--config", "rag-eval.yml", "--json", "findings.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    findings = json.loads((check_dir / "findings.json").read_text(encoding="utf-8"))
    (pending,) = [f for f in findings["findings"] if f["code"] == "pending_review"]
    assert pending["cases"] == [r["id"] for r in made] and findings["counts"]["pending_review"] == 19
    assert "19 generated cases (19 from production traces) await review" in pending["message"]
    assert "19 without relevant_doc_ids" in pending["message"]
    assert not [f for f in findings["findings"] if f["code"] in ("duplicate_question", "near_duplicate")]
    assert "golden.jsonl: 59 cases" in proc.stdout and "pending_review" in proc.stdout
    assert len(load_golden_set(check_dir / "golden.jsonl")) == 59
    again = add(ws, "again.jsonl", "--worst", "20", "--feedback", "negative", "--golden", "check/golden.jsonl")
    assert again.returncode == 0 and rows(ws / "again.jsonl") == []  # every one is a case of the set now
    assert "0 candidate(s)" in again.stdout and "24 dropped as near-duplicates" in again.stdout


def test_a_second_run_writes_the_same_bytes(ws: Path) -> None:
    first = add(ws, "one.jsonl", "--worst", "20", "--feedback", "negative", "--golden", "golden.jsonl")
    second = add(ws, "two.jsonl", "--worst", "20", "--feedback", "negative", "--golden", "golden.jsonl")
    assert first.returncode == second.returncode == 0
    assert (ws / "one.jsonl").read_bytes() == (ws / "two.jsonl").read_bytes() and (ws / "one.jsonl").stat().st_size > 0
    assert first.stdout.replace("one.jsonl", "X") == second.stdout.replace("two.jsonl", "X")


def test_candidates_on_stdout_leave_the_summary_on_stderr(ws: Path) -> None:
    proc = add(ws, "-", "--worst", "2", "--golden", "golden.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(ln)["id"] for ln in proc.stdout.splitlines()] == ["trace-t12", "trace-t01"]
    assert "wrote 2 candidate(s) to -" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--from-report", "plain.json", "--worst", "5"],
     "rag-gate: plain.json has no traces section: golden add reads a traces run's report"),
    (["--from-report", "golden.jsonl", "--worst", "5"], "rag-gate: golden.jsonl:2: not JSON"),
    (["--from-report", "rag-eval.yml", "--worst", "5"], "rag-gate: rag-eval.yml:1: not JSON"),
    (["--from-report", "run-golden.jsonl", "--worst", "1"], "rag-gate: run-golden.jsonl:2: not JSON"),
    (["--from-report", "one.json", "--worst", "5"], "rag-gate: one.json: (top level): not a rag-gate report"),
    (["--from-report", "missing.json", "--worst", "5"], "rag-gate: missing.json: report not found"),
    (["--from-report", "report.json", "--worst", "0"], "rag-gate: --worst: must be at least 1, got 0"),
    (["--from-report", "report.json", "--worst", "-3"], "rag-gate: --worst: must be at least 1, got -3"),
    (["--from-report", "report.json"], "rag-gate: golden add: say which traces to add: --worst N"),
    (["--from-report", "report.json", "--worst", "5", "--metric", "faithfulnes"],
     "rag-gate: --metric: no trace of report.json has a score for 'faithfulnes' (its generation metrics: answer_relevancy, "
     "check_pass_rate, faithfulness, token_f1)"),
    (["--from-report", "report.json", "--worst", "5", "--golden", "nothere.jsonl"], "rag-gate: nothere.jsonl: file not found"),
    (["--from-report", "report.json", "--worst", "5", "--golden", "bad.jsonl"], "rag-gate: bad.jsonl:2: 'question' is required"),
    (["--from-report", "report.json", "--worst", "5", "--config", "nospec.yml"], "rag-gate: nospec.yml: spec file not found"),
], ids=["no traces section", "golden set", "yaml", "jsonl", "an object", "missing", "zero", "negative", "neither", "unknown metric",
        "missing golden", "bad golden", "missing spec"])
def test_bad_input_exits_2_naming_what_is_wrong_and_writes_nothing(ws: Path, args: list[str], message: str) -> None:
    (ws / "bad.jsonl").write_text('{"id": "a", "question": "Fine?", "relevant_doc_ids": ["d"]}\n{"id": "b"}\n', encoding="utf-8")
    (ws / "one.json").write_text('{"id": "q01", "question": "How long?"}', encoding="utf-8")
    (ws / "kept.jsonl").write_text("what was there\n", encoding="utf-8")
    proc = rag_gate(ws, "golden", "add", *args, "--out", "kept.jsonl")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert (ws / "kept.jsonl").read_text(encoding="utf-8") == "what was there\n"  # never half-written, never touched


def test_a_report_that_breaks_the_schema_is_refused(ws: Path) -> None:
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    report["traces"]["cases"][0]["negative"] = "yes"
    (ws / "broken.json").write_text(json.dumps(report), encoding="utf-8")
    proc = rag_gate(ws, "golden", "add", "--from-report", "broken.json", "--feedback", "negative", "--out", "x.jsonl")
    assert proc.returncode == 2 and "broken.json: traces.cases[0].negative: not a rag-gate report" in proc.stderr, proc.stderr
    assert not (ws / "x.jsonl").exists()


def test_config_and_golden_together_are_refused_by_the_parser(ws: Path) -> None:
    proc = add(ws, "x.jsonl", "--worst", "3", "--golden", "golden.jsonl", "--config", "rag-eval.yml")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
