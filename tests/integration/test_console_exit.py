"""The console script's run and merge end the process at once once their reports are written (gate.cli.main.end_now):
every output complete, the exit status the verdict's, the standard streams delivered whole through a pipe, the atexit
handlers run, a thread still at work waited for; ``main([...])`` called in a process returns its code as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gate.cli.main import main

N = 3000  # above report.json's compact threshold: msgspec writes it


def workspace(tmp_path: Path, *, gate_min: float = 0.1, target: str = "{results: results.jsonl}") -> Path:
    golden, results = [], []
    for i in range(N):
        golden.append(json.dumps({"id": f"q{i}", "question": f"Question {i}?", "relevant_doc_ids": [f"d{i}"], "category": "c"}))
        ranked = [{"id": f"d{i + j}", "text": f"passage {i + j}", "score": 1.0 - j / 10} for j in range(i % 4, i % 4 + 5)]
        results.append(json.dumps({"id": f"q{i}", "retrieved": ranked, "answer": f"answer {i}", "latency_ms": 10 + i % 7}))
    (tmp_path / "golden.jsonl").write_text("\n".join(golden) + "\n", encoding="utf-8")
    (tmp_path / "results.jsonl").write_text("\n".join(results) + "\n", encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text(
        f"version: 1\ngolden_set: golden.jsonl\ntarget: {target}\nstages:\n  retrieval:\n"
        f"    metrics: [mrr, hit_rate@1]\n    gates: {{hit_rate@1: {{min: {gate_min}}}}}\n", encoding="utf-8")
    return tmp_path


def console(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("gate_min", "code"), [(0.1, 0), (0.5, 1)], ids=["pass", "fail"])
def test_the_outputs_are_complete_and_the_status_is_the_verdicts(tmp_path, gate_min, code):
    ws = workspace(tmp_path, gate_min=gate_min)
    proc = console(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--markdown", "comment.md",
                   "--junit", "junit.xml", "--no-progress")
    assert proc.returncode == code, proc.stderr
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == code and len(report["cases"]) == N
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@1"] == pytest.approx(0.25)
    assert (ws / "junit.xml").read_text(encoding="utf-8").rstrip().endswith("</testsuites>")
    assert "hit_rate@1" in (ws / "comment.md").read_text(encoding="utf-8")
    assert proc.stdout.rstrip().splitlines()[-1].startswith(f"rag-gate {'passed' if code == 0 else 'failed'}")
    assert not list(ws.glob(".*.tmp"))


def test_report_json_on_stdout_arrives_whole_through_the_pipe(tmp_path):
    ws = workspace(tmp_path)
    proc = console(ws, "run", "--config", "rag-eval.yml", "--report", "-", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # several MB: the whole of it, flushed before the process ended
    assert len(report["cases"]) == N and report["verdict"] == "pass"
    assert "rag-gate passed" in proc.stderr  # the console report goes to stderr when report.json is on stdout


def test_merge_ends_the_same_way(tmp_path):
    ws = workspace(tmp_path)
    for i in (1, 2):
        shard = console(ws, "run", "--config", "rag-eval.yml", "--shard", f"{i}/2", "--report", f"part{i}.json", "--no-progress")
        assert shard.returncode == 0, shard.stderr
    proc = console(ws, "merge", "--config", "rag-eval.yml", "part1.json", "part2.json", "--report", "merged.json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads((ws / "merged.json").read_text(encoding="utf-8"))["cases"]) == N


TARGET = '''\
import atexit, json, sys, threading, time
from pathlib import Path

HERE = Path(__file__).parent
atexit.register(lambda: (HERE / "atexit.txt").write_text("ran", encoding="utf-8"))
RESULTS = {}
for line in (HERE / "results.jsonl").read_text(encoding="utf-8").splitlines():
    row = json.loads(line)
    RESULTS[f"Question {row['id'][1:]}?"] = {"retrieved": row["retrieved"], "answer": row["answer"]}
STARTED = []


def slow_write():
    time.sleep(0.5)
    (HERE / "thread.txt").write_text("done", encoding="utf-8")


def answer(question, k):
    if not STARTED and "{thread}" == "yes":
        STARTED.append(threading.Thread(target=slow_write))  # not a daemon: the process must wait for it
        STARTED[0].start()
    return RESULTS[question]
'''


@pytest.mark.parametrize("thread", ["no", "yes"])
def test_atexit_handlers_run_and_a_live_thread_is_waited_for(tmp_path, thread):
    ws = workspace(tmp_path, target='{python: "usertarget:answer"}')
    (ws / "usertarget.py").write_text(TARGET.replace("{thread}", thread), encoding="utf-8")
    proc = console(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert (ws / "atexit.txt").read_text(encoding="utf-8") == "ran"
    assert (ws / "thread.txt").exists() == (thread == "yes")
    assert len(json.loads((ws / "report.json").read_text(encoding="utf-8"))["cases"]) == N


def test_main_called_in_a_process_returns_its_code(tmp_path, monkeypatch):
    ws = workspace(tmp_path, gate_min=0.5)
    monkeypatch.chdir(ws)
    assert main(["run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress", "-q"]) == 1
    assert main(["run", "--config", "missing.yml", "-q"]) == 2  # and again: the process lives on
    assert json.loads((ws / "report.json").read_text(encoding="utf-8"))["exit_code"] == 1


def test_the_last_line_counts_gates_and_says_the_cases_that_errored(tmp_path):
    """The verdict line's counts are of gates; cases the target failed on, which max_error_rate let through, are
    said beside them (not hidden behind "0 errored")."""
    ws = tmp_path
    golden = [json.dumps({"id": f"q{i}", "question": f"Question {i}?", "relevant_doc_ids": [f"d{i}"]}) for i in range(4)]
    lines = [json.dumps({"id": f"q{i}", "retrieved": [{"id": f"d{i}"}], "answer": "a"}) for i in range(3)]
    lines.append(json.dumps({"id": "q3", "error": "HTTP 503 from the service"}))
    (ws / "golden.jsonl").write_text("\n".join(golden) + "\n", encoding="utf-8")
    (ws / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (ws / "rag-eval.yml").write_text("version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\n"
                                     "max_error_rate: 0.5\nstages:\n  retrieval:\n    metrics: [mrr]\n"
                                     "    gates: {mrr: {min: 0.5}}\n", encoding="utf-8")
    proc = console(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last == "rag-gate passed: 1 gate: 1 passed, 0 failed, 0 errored, 0 skipped; 1 of 4 cases errored at the target (exit 0)"
    assert "errored q3: results file: HTTP 503 from the service" in proc.stdout


@pytest.mark.parametrize("command", [["golden", "import", "--format", "ragas", "--in", "samples.jsonl", "--out", "-"],
                                     ["run", "--config", "rag-eval.yml", "--report", "-", "--no-progress"]],
                         ids=["golden-import", "run"])
def test_a_reader_that_left_ends_the_command_quietly_with_141(tmp_path, command):
    """stdout piped to a reader that has gone (`| head` once it has its lines): exit 141, as a shell reports SIGPIPE,
    and no 'internal error' nor traceback on stderr."""
    ws = workspace(tmp_path)
    (ws / "samples.jsonl").write_text("".join(json.dumps({"user_input": f"Question {i}?", "reference": "yes", "reference_contexts": ["It is."]}) + "\n"
                                              for i in range(2000)), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "gate", *command], cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert "internal error" not in err and "Traceback" not in err and "Exception ignored" not in err, err
