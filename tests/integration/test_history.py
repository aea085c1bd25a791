"""History of default-branch runs: the local JSONL store, entries from reports, the window, the CLI."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.core.errors import EXIT_INPUT, EXIT_PASS
from gate.core.records import entry_from_report, window
from gate.core.report import SCHEMA_VERSION
from gate.io.history import LocalHistoryStore

ROOT = Path(__file__).resolve().parents[2]

FP = {"golden_set": "sha256:aaaa", "spec": "sha256:bbbb"}


def entry(i: int, **extra: Any) -> dict[str, Any]:
    e = {
        "schema_version": SCHEMA_VERSION,
        "created_at": f"2025-01-{i % 28 + 1:02d}T00:00:00+00:00",
        "commit": f"c{i}",
        "branch": "main",
        "verdict": "pass",
        "fingerprints": dict(FP),
        "stages": {"generation": {"metrics": {"faithfulness": 0.8 + i / 1000}, "samples": [{"id": "q1", "metrics": {"faithfulness": 0.8}}]}},
    }
    e.update(extra)
    return e


def report(commit: str, verdict: str = "pass") -> dict[str, Any]:
    """A complete report.json (it is checked against report.schema.json when it is read back)."""
    return {
        "schema_version": 1,
        "verdict": verdict,
        "exit_code": {"pass": 0, "fail": 1, "error": 3}[verdict],
        "errors": ["the target could not be reached"] if verdict == "error" else [],
        "warnings": [],
        "tool": {"name": "rag-gate", "version": "0.1.0"},
        "run": {"commit": commit, "created_at": "2025-02-01T10:00:00+00:00", "config": "rag-eval.yml", "duration_s": 1.0,
                "comment_id": "default", "max_cases": 20},
        "fingerprints": dict(FP),
        "golden_set": {"path": "golden.jsonl", "n": 4, "by_type": {"answerable": 4}, "by_category": {}, "by_tag": {}},
        "target": {"kind": "results", "k": 10, "calls": 4, "errors": 1, "error_rate": 0.25, "max_error_rate": 0.5, "notes": []},
        "baseline": {"path": "eval/baseline.json", "found": False, "created_at": None, "commit": None, "fingerprints": None,
                     "mismatch": [], "on_mismatch": "warn", "source": None},
        "stages": {
            "retrieval": {
                "status": "pass",
                "metrics": {"hit_rate@5": 0.9, "mrr": 0.7},
                "gates": [],
                "samples": [{"id": "q1", "metrics": {"hit_rate@5": 1.0, "mrr": 1.0}, "error": None}],
                "not_evaluated": {}, "warnings": [],
            },
            "generation": {
                "status": "pass",
                "metrics": {"faithfulness": 0.85, "answer_relevancy": 0.8},
                "gates": [],
                "samples": [
                    {"id": "q1", "metrics": {"faithfulness": 0.9, "answer_relevancy": 0.8}, "errors": {}, "error": None},
                    {"id": "q2", "metrics": {"faithfulness": 0.8, "answer_relevancy": 0.8}, "errors": {}, "error": None},
                    # the judge failed on one metric for q3: its other score is still a valid score
                    {"id": "q3", "metrics": {"answer_relevancy": 0.8}, "errors": {"faithfulness": "timeout"},
                     "error": "faithfulness: timeout"},
                    # the target failed for q4: nothing to keep
                    {"id": "q4", "metrics": {}, "errors": {"faithfulness": "the target call failed for this case"},
                     "error": "faithfulness: the target call failed for this case"},
                ],
                "not_evaluated": {}, "warnings": [],
            },
            "robustness": {"status": "skipped", "reason": "no judge", "metrics": {}, "gates": [], "samples": [], "not_evaluated": {},
                           "warnings": []},
        },
        "cases": [{"id": f"q{i}", "type": "answerable", "retrieved": ["d1"], "answer": "a", "latency_ms": 10.0, "error": None}
                  for i in range(1, 5)],
        "history": {"entries": 0, "runs": []},
    }


def case_metrics(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Stored cases as case id -> metrics."""
    return {s["id"]: s["metrics"] for s in samples}


# --------------------------------------------------------------------------- LocalHistoryStore


def test_read_of_a_missing_file_is_empty(tmp_path):
    store = LocalHistoryStore(tmp_path / "nope" / "history.jsonl")
    assert store.read() == []
    assert store.warnings == []


def test_append_then_read_round_trips_and_creates_folders(tmp_path):
    path = tmp_path / "eval" / "deep" / "history.jsonl"
    store = LocalHistoryStore(path)
    store.append(entry(1))
    store.append(entry(2, branch="release/ü"))
    assert path.is_file()
    assert store.read() == [entry(1), entry(2, branch="release/ü")]
    # one JSON object a line, readable by anyone
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["commit"] for line in lines] == ["c1", "c2"]
    # a new store object over the same file sees the same entries
    assert LocalHistoryStore(path).read() == store.read()


def test_max_entries_keeps_the_newest(tmp_path):
    store = LocalHistoryStore(tmp_path / "h.jsonl", max_entries=3)
    for i in range(7):
        store.append(entry(i))
    assert [e["commit"] for e in store.read()] == ["c4", "c5", "c6"]
    assert len((tmp_path / "h.jsonl").read_text().splitlines()) == 3


def test_corrupt_lines_and_other_schema_versions_are_skipped_with_file_and_line(tmp_path):
    path = tmp_path / "history.jsonl"
    lines = [
        json.dumps(entry(1)),  # 1 ok
        "{not json",  # 2
        json.dumps(entry(2, schema_version=2)),  # 3 another schema
        "",  # 4 blank: silently fine
        json.dumps([1, 2, 3]),  # 5 JSON but not an entry
        json.dumps({k: v for k, v in entry(3).items() if k != "schema_version"}),  # 6 no schema_version
        json.dumps(entry(4)),  # 7 ok
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = LocalHistoryStore(path)
    assert [e["commit"] for e in store.read()] == ["c1", "c4"]
    named = [w.split(": ")[0] for w in store.warnings]
    assert named == [f"{path}:2", f"{path}:3", f"{path}:5", f"{path}:6"]
    assert "not JSON" in store.warnings[0]
    assert "schema_version" in store.warnings[1]


def test_appending_to_a_file_with_a_corrupt_line_keeps_the_good_entries(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(entry(1)) + "\n{garbage\n", encoding="utf-8")
    LocalHistoryStore(path).append(entry(2))
    reader = LocalHistoryStore(path)
    assert [e["commit"] for e in reader.read()] == ["c1", "c2"]
    assert any(w.startswith(f"{path}:2") for w in reader.warnings)
    assert "{garbage" in path.read_text(encoding="utf-8")  # kept: a newer rag-gate's line is not ours to delete


# --------------------------------------------------------------------------- concurrency


def _append_many(path: str, worker: int, count: int, barrier: Any) -> None:
    store = LocalHistoryStore(Path(path), max_entries=1000)
    barrier.wait()
    for j in range(count):
        store.append(entry(worker * 100 + j, commit=f"w{worker}-{j}"))


def test_concurrent_appends_from_processes_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "history.jsonl"
    workers, per_worker = 10, 5
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_append_many, args=(str(path), w, per_worker, barrier)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * workers
    store = LocalHistoryStore(path, max_entries=1000)
    commits = [e["commit"] for e in store.read()]
    assert store.warnings == []
    assert sorted(commits) == sorted(f"w{w}-{j}" for w in range(workers) for j in range(per_worker))
    # each worker's own entries stay in the order it wrote them
    for w in range(workers):
        mine = [c for c in commits if c.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{j}" for j in range(per_worker)]
    # no temporary file nor lock file is left behind (the lock is the folder's): committing the folder commits history
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]


# --------------------------------------------------------------------------- entry_from_report


def test_entry_keeps_per_case_scores_only_for_judge_stages():
    e = entry_from_report(report("abc123"), branch="main")
    assert e["schema_version"] == SCHEMA_VERSION
    assert e["commit"] == "abc123" and e["branch"] == "main" and e["verdict"] == "pass"
    assert e["created_at"] == "2025-02-01T10:00:00+00:00"
    assert e["fingerprints"] == FP
    assert set(e["stages"]) == {"retrieval", "generation"}  # skipped robustness left out
    assert e["stages"]["retrieval"] == {"metrics": {"hit_rate@5": 0.9, "mrr": 0.7}}
    gen = e["stages"]["generation"]
    assert gen["metrics"] == {"faithfulness": 0.85, "answer_relevancy": 0.8}
    assert case_metrics(gen["samples"])["q1"] == {"faithfulness": 0.9, "answer_relevancy": 0.8}
    assert case_metrics(gen["samples"])["q2"] == {"faithfulness": 0.8, "answer_relevancy": 0.8}
    assert "q4" not in case_metrics(gen["samples"])  # no score at all


def test_entry_keeps_the_scores_a_case_has_when_another_metric_errored():
    """Like the baseline: one metric's judge error must not throw away the case's other valid scores."""
    gen = entry_from_report(report("abc"))["stages"]["generation"]
    assert case_metrics(gen["samples"])["q3"] == {"answer_relevancy": 0.8}


def test_entry_commit_argument_wins_and_created_at_is_the_reports():
    r = report("from-report")
    e = entry_from_report(r, commit="from-arg")
    assert e["commit"] == "from-arg"
    assert e["created_at"][:2] == "20" and "T" in e["created_at"]
    assert e["branch"] is None


# --------------------------------------------------------------------------- window


def test_window_drops_errors_and_other_fingerprints_and_keeps_the_last_n_oldest_first():
    entries = [
        entry(1),
        entry(2),
        entry(3, verdict="error"),
        entry(4, fingerprints={**FP, "golden_set": "sha256:other"}),
        entry(5),
        entry(6, fingerprints={**FP, "spec": "sha256:other"}),
        entry(7, verdict="fail"),  # a failed run did complete: it counts
        entry(8),
    ]
    assert [e["commit"] for e in window(entries, 3, FP)] == ["c5", "c7", "c8"]
    assert [e["commit"] for e in window(entries, 10, FP)] == ["c1", "c2", "c5", "c7", "c8"]
    # without fingerprints only the errored run is dropped
    assert [e["commit"] for e in window(entries, 10)] == ["c1", "c2", "c4", "c5", "c6", "c7", "c8"]


def test_window_ignores_k_and_handles_edges():
    entries = [entry(1), entry(2)]
    assert [e["commit"] for e in window(entries, 7, {**FP, "k": "k=10"})] == ["c1", "c2"]
    assert window(entries, 0, FP) == []
    assert window([], 7, FP) == []
    assert window([entry(1, fingerprints={})], 7, FP) == []


# --------------------------------------------------------------------------- the CLI


SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
history:
  path: eval/history.jsonl
stages:
  retrieval:
    metrics:
      - hit_rate@5
"""


def project(tmp_path: Path) -> Path:
    (tmp_path / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(json.dumps({"id": "q1", "question": "?", "relevant_doc_ids": ["d1"]}) + "\n")
    return tmp_path


def rag_gate(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}
    full["PYTHONPATH"] = str(ROOT)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


def test_history_record_appends_an_entry(tmp_path):
    root = project(tmp_path)
    (root / "report.json").write_text(json.dumps(report("deadbeef")), encoding="utf-8")
    proc = rag_gate(root, "history", "record", "--config", "rag-eval.yml", "--report", "report.json", "--branch", "main")
    assert proc.returncode == EXIT_PASS, proc.stderr
    assert "1 entries" in proc.stdout
    entries = LocalHistoryStore(root / "eval" / "history.jsonl").read()
    assert len(entries) == 1
    assert entries[0]["commit"] == "deadbeef" and entries[0]["branch"] == "main"
    assert case_metrics(entries[0]["stages"]["generation"]["samples"])["q1"]["faithfulness"] == 0.9
    # a second record appends
    proc = rag_gate(root, "history", "record", "--config", "rag-eval.yml", "--report", "report.json",
                    env={"GITHUB_REF_NAME": "trunk"})
    assert proc.returncode == EXIT_PASS, proc.stderr
    entries = LocalHistoryStore(root / "eval" / "history.jsonl").read()
    assert [e["branch"] for e in entries] == ["main", "trunk"]
    # other CI services' branch variables; and none at all is said
    clean = {v: "" for v in ("GITHUB_REF_NAME", "CI_COMMIT_BRANCH", "BRANCH_NAME", "BUILDKITE_BRANCH", "CIRCLE_BRANCH")}
    for name in ("CI_COMMIT_BRANCH", "BRANCH_NAME"):
        proc = rag_gate(root, "history", "record", "--config", "rag-eval.yml", "--report", "report.json",
                        env={**clean, name: f"from-{name}"})
        assert proc.returncode == EXIT_PASS and "no branch" not in proc.stderr, proc.stderr
    proc = rag_gate(root, "history", "record", "--config", "rag-eval.yml", "--report", "report.json", env=clean)
    assert proc.returncode == EXIT_PASS and "rag-gate: note: the entry has no branch (give --branch;" in proc.stderr
    entries = LocalHistoryStore(root / "eval" / "history.jsonl").read()
    assert [e["branch"] for e in entries][2:] == ["from-CI_COMMIT_BRANCH", "from-BRANCH_NAME", None]


def test_history_record_refuses_an_errored_report(tmp_path):
    root = project(tmp_path)
    (root / "bad-report.json").write_text(json.dumps(report("x", verdict="error")), encoding="utf-8")
    proc = rag_gate(root, "history", "record", "--config", "rag-eval.yml", "--report", "bad-report.json")
    assert proc.returncode == EXIT_INPUT, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "bad-report.json" in proc.stderr and "verdict" in proc.stderr
    assert not (root / "eval" / "history.jsonl").exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [("{not json", "invalid JSON"), (json.dumps({"stages": {}}), "not a rag-gate report"), (None, "not found")],
)
def test_history_record_rejects_bad_report_files(tmp_path, content, needle):
    root = project(tmp_path)
    if content is not None:
        (root / "report.json").write_text(content, encoding="utf-8")
    proc = rag_gate(root, "history", "record", "--config", "rag-eval.yml", "--report", "report.json")
    assert proc.returncode == EXIT_INPUT, proc.stderr
    assert "report.json" in proc.stderr and needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ten_concurrent_cli_records_end_with_ten_entries(tmp_path):
    root = project(tmp_path)
    for i in range(10):
        (root / f"report-{i}.json").write_text(json.dumps(report(f"commit-{i}")), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = str(ROOT)
    procs = [
        subprocess.Popen([sys.executable, "-m", "gate", "history", "record", "--config", "rag-eval.yml",
                          "--report", f"report-{i}.json", "--branch", "main"],
                         cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(10)
    ]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [rc for rc, _ in results] == [0] * 10, results
    store = LocalHistoryStore(root / "eval" / "history.jsonl")
    entries = store.read()
    assert store.warnings == []
    assert sorted(e["commit"] for e in entries) == sorted(f"commit-{i}" for i in range(10))
