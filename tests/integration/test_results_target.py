"""The results-file target (a JSONL file the user's own step wrote), through gate.run.flow.run and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.core.cases import derive_id
from gate.core.errors import InputError
from gate.io.golden import load_golden_set
from gate.run.flow import run
from gate.targets.results import ResultsFileTarget

GOLDEN = [
    {"id": "c1", "question": "How long is a book loan?", "relevant_doc_ids": ["lend#1"]},
    {"id": "c2", "question": "Can I renew online?", "relevant_doc_ids": ["renew#1", "renew#2"]},
    {"id": "c3", "question": "What does a card cost?", "relevant_doc_ids": ["card#1"]},
    {"id": "c4", "question": "Where is the nearest branch?", "relevant_doc_ids": ["branches#1"]},
]


def line(case_id: str | None, ids: list[str], *, question: str | None = None, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    if case_id is not None:
        row["id"] = case_id
    if question is not None:
        row["question"] = question
    row["retrieved"] = [{"id": d, "text": f"text of {d}", "score": 1.0 - i / 10} for i, d in enumerate(ids)]
    row["answer"] = "an answer"
    row.update(extra)
    return row


def write(tmp_path: Path, rows: list[dict[str, Any] | str], *, golden: list[dict[str, Any]] = GOLDEN,
          max_error_rate: float = 0.0, gates: dict[str, Any] | None = None) -> Path:
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in golden), encoding="utf-8")
    (tmp_path / "results.jsonl").write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    spec = {
        "version": 1,
        "golden_set": "golden.jsonl",
        "target": {"results": "results.jsonl"},
        "max_error_rate": max_error_rate,
        "stages": {"retrieval": {"metrics": ["hit_rate@5", "mrr", "recall@5"], **({"gates": gates} if gates else {})}},
    }
    path = tmp_path / "rag-eval.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def samples(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in report["stages"]["retrieval"]["samples"]}


ALL_LINES = [
    line("c1", ["lend#1", "x"]),                 # rank 1
    line("c2", ["x", "renew#2", "y", "renew#1"]),  # ranks 2 and 4
    line("c3", ["x", "y", "card#1"]),             # rank 3
    line("c4", ["x"]),                            # miss
]


def test_all_lines_present_scores_every_case(tmp_path: Path) -> None:
    report = run(str(write(tmp_path, ALL_LINES)))
    stage = report["stages"]["retrieval"]
    assert report["verdict"] == "pass" and report["target"]["kind"] == "results"
    assert stage["n"] == 4 and stage["errored"] == 0
    assert stage["metrics"]["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 0) / 4)
    assert stage["metrics"]["hit_rate@5"] == pytest.approx(3 / 4)
    assert stage["metrics"]["recall@5"] == pytest.approx((1 + 1 + 1 + 0) / 4)


@pytest.mark.parametrize(("max_error_rate", "verdict"), [(0.0, "error"), (0.3, "pass")])
def test_case_without_a_line_is_errored_not_skipped(tmp_path: Path, max_error_rate: float, verdict: str) -> None:
    report = run(str(write(tmp_path, [ALL_LINES[0], ALL_LINES[1], ALL_LINES[3]], max_error_rate=max_error_rate)))
    s = samples(report)
    assert set(s) == {"c1", "c2", "c3", "c4"}  # c3 is listed, not dropped
    assert s["c3"]["metrics"] == {}
    assert s["c3"]["error"] is not None and "no line" in s["c3"]["error"] and "results.jsonl" in s["c3"]["error"]
    stage = report["stages"]["retrieval"]
    assert stage["n"] == 3 and stage["errored"] == 1
    assert stage["metrics"]["mrr"] == pytest.approx((1 + 1 / 2 + 0) / 3)  # c3 is not counted as a 0
    assert report["target"]["errors"] == 1
    assert report["verdict"] == verdict


def test_missing_line_through_the_cli_exits_3(tmp_path: Path) -> None:
    spec = write(tmp_path, ALL_LINES[:2])
    proc = cli("run", "--config", str(spec), "--report", "report.json", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "error" and "2 of 4" in report["errors"][0]
    assert "most common: no line for this case in results.jsonl (2 cases)" in report["errors"][0]
    errored = {s["id"]: s["error"] for s in report["stages"]["retrieval"]["samples"] if s["error"]}
    assert set(errored) == {"c3", "c4"} and all("no line" in e for e in errored.values())
    assert "Traceback" not in proc.stderr


def test_matching_by_question_when_id_is_absent(tmp_path: Path) -> None:
    golden = [*GOLDEN[:3], {"question": "A case without an id?", "relevant_doc_ids": ["noid#1"]}]
    rows = [
        line(None, ["lend#1"], question="How long is a book loan?"),   # matches c1 by question
        line("c2", ["renew#1"]),
        line(None, ["x", "card#1"], question="What does a card cost?"),  # matches c3
        line(None, ["noid#1"], question="A case without an id?"),      # matches the derived id
    ]
    report = run(str(write(tmp_path, rows, golden=golden)))
    s = samples(report)
    derived = derive_id("A case without an id?")
    assert set(s) == {"c1", "c2", "c3", derived}
    assert all(x["error"] is None for x in s.values())
    assert s["c1"]["metrics"]["mrr"] == 1.0
    assert s["c3"]["metrics"]["mrr"] == 0.5
    assert s[derived]["metrics"]["mrr"] == 1.0
    by_case = {c["id"]: c for c in report["cases"]}
    assert by_case["c3"]["retrieved"] == ["x", "card#1"]
    assert report["verdict"] == "pass"


def test_lines_for_unknown_cases_are_ignored_and_counted(tmp_path: Path) -> None:
    rows = [
        ALL_LINES[0],
        line("not-a-case", ["lend#1"]),                       # line 2: unknown id
        ALL_LINES[1], ALL_LINES[2],
        line(None, ["card#1"], question="An unknown question?"),  # line 5: unknown question
        ALL_LINES[3],
    ]
    spec = write(tmp_path, rows)
    report = run(str(spec))
    assert report["verdict"] == "pass"
    assert set(samples(report)) == {"c1", "c2", "c3", "c4"}
    assert report["stages"]["retrieval"]["n"] == 4
    assert report["target"]["errors"] == 0
    assert report["target"]["notes"] == ["2 lines of the results file match no golden case (first at line 2)"]

    target = ResultsFileTarget.read(tmp_path / "results.jsonl", load_golden_set(tmp_path / "golden.jsonl"))
    assert target.unmatched == [2, 5]
    assert set(target.outputs) == {"c1", "c2", "c3", "c4"}

    proc = cli("validate", "--config", str(spec), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "4 lines match golden cases, 0 cases have no line, 2 lines match no case" in proc.stdout
    assert "only in spaces or case" not in proc.stdout


def test_validate_names_a_line_whose_id_differs_from_a_case_only_in_spaces_or_case(tmp_path: Path) -> None:
    rows = [ALL_LINES[0], {**ALL_LINES[1], "id": " C2"}, ALL_LINES[2], {**ALL_LINES[3], "id": "C4"}]
    spec = write(tmp_path, rows)
    proc = cli("validate", "--config", str(spec), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(str(tmp_path / "results.jsonl")) or "lines match" in ln)
    assert line.endswith("2 lines match golden cases, 2 cases have no line, 2 lines match no case; 2 of those lines have an id "
                         "that differs from a case's only in spaces or case (first: line 2 has ' C2', the case is 'c2'): fix them"), line


def test_line_with_error_is_an_errored_case(tmp_path: Path) -> None:
    rows = [ALL_LINES[0], {"id": "c2", "error": "upstream timed out after 30 s"}, ALL_LINES[2], ALL_LINES[3]]
    report = run(str(write(tmp_path, rows, max_error_rate=0.25)))
    s = samples(report)
    assert s["c2"]["error"] == "results file: upstream timed out after 30 s"
    assert s["c2"]["metrics"] == {}
    stage = report["stages"]["retrieval"]
    assert stage["n"] == 3 and stage["errored"] == 1
    assert stage["metrics"]["mrr"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert report["verdict"] == "pass"  # 1 of 4 = 25 % is allowed here
    report0 = run(str(write(tmp_path, rows, max_error_rate=0.0)))
    assert report0["verdict"] == "error" and report0["exit_code"] == 3


def test_duplicate_lines_are_an_input_error_naming_the_line(tmp_path: Path) -> None:
    rows = [ALL_LINES[0], ALL_LINES[1], line("c1", ["x"]), ALL_LINES[2], ALL_LINES[3]]
    spec = write(tmp_path, rows)
    with pytest.raises(InputError) as info:
        run(str(spec))
    assert info.value.line == 3 and info.value.exit_code == 2
    proc = cli("run", "--config", str(spec), "--report", "report.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert "results.jsonl:3" in proc.stderr
    assert "second line for case 'c1' (first at line 1)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "report.json").exists()  # no report for an invalid input


def test_duplicate_by_question_and_id_is_also_an_input_error(tmp_path: Path) -> None:
    rows = [ALL_LINES[0], line(None, ["lend#1"], question="How long is a book loan?")]
    with pytest.raises(InputError) as info:
        run(str(write(tmp_path, rows)))
    assert info.value.line == 2 and "'c1'" in info.value.message


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ('{"id": "c2", "retrieved": [', "invalid JSON"),
        (json.dumps({"id": "c2", "retrieved": "renew#1"}), "'retrieved' must be a list"),
        (json.dumps({"id": "c2", "retrieved": [], "latency_ms": -1}), "'latency_ms' must be a number of milliseconds from 0 to 1e+09, got -1"),
        (json.dumps({"retrieved": []}), "needs an 'id'"),
    ],
)
def test_invalid_line_exits_2_naming_the_line(tmp_path: Path, bad: str, needle: str) -> None:
    spec = write(tmp_path, [ALL_LINES[0], bad, ALL_LINES[2]])
    proc = cli("run", "--config", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    assert "results.jsonl:2" in proc.stderr and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_results_file_exits_2(tmp_path: Path) -> None:
    spec = write(tmp_path, ALL_LINES)
    (tmp_path / "results.jsonl").unlink()
    proc = cli("run", "--config", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    assert "results.jsonl" in proc.stderr and "not found" in proc.stderr
