"""Bad input and faults that crashed rag-gate, wrote a wrong figure, lost paid work or waited without end: each
reproduced against real files, real servers on 127.0.0.1 and real processes (kill -9 included)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.judge_server import JudgeServer
from tests.support.rag_server import RagServer, reply, status

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def rag_gate(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    full.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)


def project(tmp_path: Path, spec: str, golden: list[dict] | None = None, results: list[dict] | None = None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "rag-eval.yml").write_text(spec, encoding="utf-8")
    golden = golden or [{"id": f"q{i}", "question": f"question {i}", "ground_truth": "21 days", "relevant_doc_ids": ["d1"]}
                        for i in range(4)]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    if results is not None:
        (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    return tmp_path


RESULTS_SPEC = "version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\nstages:\n  retrieval:\n    metrics: [mrr]\n"


def ok_line(i: int, **extra: object) -> dict:
    return {"id": f"q{i}", "retrieved": [{"id": "d1", "text": "21 days", "score": 0.9}], "answer": "21 days", "latency_ms": 10, **extra}


# --------------------------------------------------------------------------- input that crashed or hung


BOMB = "version: 1\n" + "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 11))


PEAK_MEMORY = """\
import sys
from gate.cli.main import main
try:
    code = main(sys.argv[2:])
finally:  # VmHWM: this process's own peak resident memory (ru_maxrss would include the parent's, copied at fork)
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as out:
        out.write(peak)
sys.exit(code)
"""


@pytest.mark.parametrize(("name", "text", "line"), [
    ("billion laughs, 10 levels", BOMB, 3),
    ("an alias inside its own anchor", "version: 1\nx: &x [1, *x]\n", 2),
    ("a merge key", "version: 1\nbase: &b {golden_set: g.jsonl}\nother:\n  <<: *b\n", 4),
])
def test_yaml_aliases_are_refused_at_once_with_flat_memory(tmp_path, name, text, line):
    (tmp_path / "rag-eval.yml").write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = str(ROOT)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK_MEMORY, str(tmp_path / "peak"), "validate", "--config", "rag-eval.yml"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    took = time.perf_counter() - start
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"rag-eval.yml:{line}: YAML aliases (*" in proc.stderr and "not allowed" in proc.stderr
    assert took < 5  # the whole process, Python's start included (before: over 120 s and 8.8 GB)
    assert int((tmp_path / "peak").read_text()) < 150_000  # kB, Python's start included: no blow-up


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("where", "bad", "said"), [
    ("golden", {"id": "q1", "question": "q", "relevant_doc_ids": ["d1"], "metadata": "DEEP"}, "nested"),
    ("golden", {"id": "q1", "question": "q", "relevant_doc_ids": {"d1": "BIG5000"}}, "too many digits"),
    ("golden", {"id": "q1", "question": "q", "relevant_doc_ids": {"d1": "BIG400"}}, "grade from 1 to 1000"),
    ("results", ok_line(1, latency_ms="DEEP"), "nested"),
    ("results", ok_line(1, latency_ms="BIG400"), "'latency_ms' must be a number of milliseconds"),
    ("results", ok_line(1, latency_ms="NaN"), "NaN is not a JSON number"),
    ("results", ok_line(1, latency_ms="Infinity"), "Infinity is not a JSON number"),
    ("results", {"id": "q1", "retrieved": [{"id": "d1", "score": "-Infinity"}], "answer": "a"}, "-Infinity is not a JSON number"),
])
def test_hostile_json_is_an_input_error_naming_file_and_line(tmp_path, where, bad, said):
    golden = [{"id": f"q{i}", "question": f"question {i}", "relevant_doc_ids": ["d1"]} for i in range(3)]
    results = [ok_line(i) for i in range(3)]
    rows = golden if where == "golden" else results
    rows[1] = bad
    project(tmp_path, RESULTS_SPEC, golden, results)
    path = tmp_path / f"{where}.jsonl"
    # values that JSON writes bare: put them in as they would appear in a hostile file
    text = path.read_text(encoding="utf-8").replace('"DEEP"', DEEP).replace('"NaN"', "NaN").replace('"-Infinity"', "-Infinity")
    text = text.replace('"BIG5000"', "9" * 5000).replace('"BIG400"', "9" * 400)
    path.write_text(text.replace('"Infinity"', "Infinity"), encoding="utf-8")
    proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "report.json")
    assert proc.returncode == 2, proc.stderr
    assert f"{where}.jsonl:2" in proc.stderr and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "report.json").exists()


def test_a_json_error_names_its_real_column(tmp_path):
    line = '{"id": "q1", "question": "' + "x" * 230 + '", "relevant_doc_ids": ["d1"], "type": tru}'
    (tmp_path / "golden.jsonl").write_text(line + "\n", encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text(RESULTS_SPEC, encoding="utf-8")
    proc = rag_gate(tmp_path, "validate", "--config", "rag-eval.yml")
    column = line.index("tru}") + 1
    assert proc.returncode == 2 and f"golden.jsonl:1: invalid JSON: Expecting value at column {column}, near" in proc.stderr, proc.stderr
    assert """near '"], "type": tru}'""" in proc.stderr  # the characters around it, so the reader finds the spot


@pytest.mark.parametrize("mode", ["cli", "action"])
def test_a_deep_or_infinite_report_artifact_is_refused_with_exit_2(tmp_path, mode, capsys):
    for text, said in ((DEEP, "nested"), ('{"schema_version": 1, "verdict": NaN}', "NaN is not a JSON number"),
                       ('{"schema_version": ' + "1" * 5000 + "}", "too many digits")):
        (tmp_path / "rag-gate-report.json").write_text(text, encoding="utf-8")
        if mode == "cli":
            project(tmp_path, RESULTS_SPEC, results=[ok_line(i) for i in range(4)])
            proc = rag_gate(tmp_path, "history", "record", "--config", "rag-eval.yml", "--report", "rag-gate-report.json")
            assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        else:
            from gate.github.action import main

            event = tmp_path / "event.json"
            event.write_text(json.dumps({"workflow_run": {"head_sha": "ab" * 20, "head_repository": {"full_name": "o/r"}}}))
            code = main(env={"GITHUB_WORKSPACE": str(tmp_path), "INPUT_MODE": "report", "GITHUB_EVENT_PATH": str(event)})
            out = capsys.readouterr().out
            assert code == 2 and said in out and "Traceback" not in out, out


BAD_ENTRIES = [
    {"fingerprints": None},
    {"stages": "generation"},
    {"stages": {"generation": {"metrics": {"faithfulness": 0.8}, "samples": ["not a case"]}}},
    {"stages": {"retrieval": {"metrics": {"mrr": "high"}}}},
]


def test_bad_history_entries_are_skipped_with_a_warning_and_the_run_goes_on(tmp_path):
    project(tmp_path, RESULTS_SPEC + "history: {path: history.jsonl}\n", results=[ok_line(i) for i in range(4)])
    good = {"schema_version": 1, "created_at": "2026-11-01T00:00:00+00:00", "commit": "c1", "branch": "main", "verdict": "pass",
            "fingerprints": {"golden_set": "sha256:x"}, "stages": {"retrieval": {"metrics": {"mrr": 0.5}}}}
    (tmp_path / "history.jsonl").write_text("".join(json.dumps({**good, **bad}) + "\n" for bad in BAD_ENTRIES), encoding="utf-8")
    proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "report.json")
    assert proc.returncode == 0, proc.stderr  # before: exit 3 with AttributeError
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [w.split(":")[1] for w in report["warnings"]] == ["1", "2", "3", "4"]
    assert all("not a rag-gate history entry" in w and w.endswith("skipped") for w in report["warnings"])


def test_the_action_with_bad_history_entries_comments_and_exits_by_its_gates(tmp_path):
    from tests.support.action import HISTORY, HISTORY_BRANCH, PR, REPO, pr_event, run_action, workspace
    from tests.support.github_server import GitHubServer

    ws = workspace(tmp_path)
    good = {"schema_version": 1, "created_at": "2026-11-01T00:00:00+00:00", "commit": "c1", "branch": "main", "verdict": "pass",
            "fingerprints": {"golden_set": "sha256:x"}, "stages": {"retrieval": {"metrics": {"mrr": 0.5}}}}
    with GitHubServer(repos=(REPO,)) as gh:
        gh.put_file(HISTORY, HISTORY_BRANCH, "".join(json.dumps({**good, **bad}) + "\n" for bad in BAD_ENTRIES), REPO)
        r = run_action(gh, ws, "pull_request", pr_event())
        assert r.code == 0, str(r)  # before: a traceback and exit 1, read as a failed gate, and no comment
        (comment,) = gh.comments(PR, REPO)
    assert "not a rag-gate history entry" in comment["body"]


# --------------------------------------------------------------------------- faults that lost work or never ended


JUDGE_SPEC = """\
version: 1
golden_set: golden.jsonl
target: {results: results.jsonl}
judge: {base_url: "${JUDGE_URL}", model: judge-2024-01-01, concurrency: 4, timeout_s: 30, max_retries: 0}
cache: {path: cache.sqlite}
stages:
  generation:
    engine: deepeval
    metrics: [faithfulness]
"""


def judge_project(tmp_path: Path, n: int) -> Path:
    golden = [{"id": f"q{i}", "question": f"How long is loan {i}?", "ground_truth": f"{i} days", "relevant_doc_ids": ["d1"]}
              for i in range(n)]
    results = [{"id": f"q{i}", "retrieved": [{"id": "d1", "text": f"A loan {i} lasts {i} days."}], "answer": f"Loan {i} lasts {i} days."}
               for i in range(n)]
    return project(tmp_path, JUDGE_SPEC, golden, results)


def test_scores_paid_for_before_a_kill_are_reused(tmp_path):
    """kill -9 in the middle of judging: every score that arrived is in the cache; the rerun asks only for the rest."""
    ws = judge_project(tmp_path, 40)
    with JudgeServer(latency=0.05) as judge:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
        env.update(PYTHONPATH=str(ROOT), JUDGE_URL=judge.url)
        proc = subprocess.Popen([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--no-progress"], cwd=ws, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while judge.calls < 50 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = judge.calls
        with sqlite3.connect(ws / "cache.sqlite") as db:
            cached = db.execute("SELECT count(*) FROM scores").fetchone()[0]
        assert 0 < killed_at < 120 and cached > 0  # deepeval faithfulness: 3 calls a case
        rerun = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", env={"JUDGE_URL": judge.url})
        assert rerun.returncode == 0, rerun.stderr
        report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
        usage = report["stages"]["generation"]["usage"]
        assert usage["cache_hits"] == cached and usage["cache_misses"] == 40 - cached  # before: 0 hits after a kill
        assert report["stages"]["generation"]["scores"]["errored"] == 0


def test_max_duration_bounds_a_run_that_would_wait_out_retry_after(tmp_path):
    """16 cases, concurrency 8, every answer 503 with Retry-After 30: before, 181 s; now the run stops at its limit,
    keeps what it has, and says how far it got."""
    spec = ("version: 1\ngolden_set: golden.jsonl\nmax_duration_s: 2\nmax_error_rate: 1.0\n"
            "target:\n  http: {url: \"${RAG_URL}\", concurrency: 8, retries: 5, max_retry_after_s: 60}\n"
            "stages:\n  retrieval:\n    metrics: [mrr]\n")
    golden = [{"id": f"q{i}", "question": f"question {i}", "relevant_doc_ids": ["d1"]} for i in range(16)]
    project(tmp_path, spec, golden)
    with RagServer({}, default=status(503, retry_after=30)) as rag:
        start = time.perf_counter()
        proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "report.json", env={"RAG_URL": rag.url})
        took = time.perf_counter() - start
    assert proc.returncode == 3, proc.stderr
    assert took < 15, took
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "error"
    (note,) = [e for e in report["errors"] if "max_duration_s" in e]
    assert note.startswith("the run reached max_duration_s (2 s) after ") and "0 of 16 cases answered" in note
    assert all("deadline reached" in c["error"] for c in report["cases"])


def test_max_duration_stops_slow_judging_and_keeps_the_scores_done(tmp_path):
    ws = judge_project(tmp_path, 12)
    spec = (ws / "rag-eval.yml").read_text(encoding="utf-8").replace("cache:", "max_duration_s: 3\ncache:")
    (ws / "rag-eval.yml").write_text(spec, encoding="utf-8")
    with JudgeServer(latency=0.6) as judge:
        start = time.perf_counter()
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", env={"JUDGE_URL": judge.url})
        took = time.perf_counter() - start
    assert proc.returncode == 3 and took < 20, (took, proc.stderr)
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    errors = [s["errors"].get("faithfulness", "") for s in report["stages"]["generation"]["samples"]]
    assert any("deadline reached" in e for e in errors)
    with sqlite3.connect(ws / "cache.sqlite") as db:
        kept = db.execute("SELECT count(*) FROM scores").fetchone()[0]
    assert kept == sum(1 for e in errors if not e)  # every score computed before the deadline is kept
    assert any("left unscored" in e for e in report["errors"])


def test_a_service_that_is_down_stops_the_run_at_once(tmp_path):
    """46 cases against a port nothing listens on, 3 retries each: before, 21 s and 40 error lines, the cause last."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://user:pw-secret-1234@127.0.0.1:{s.getsockname()[1]}/query"
    spec = f"version: 1\ngolden_set: golden.jsonl\ntarget:\n  http: {{url: \"{url}\", retries: 3, backoff_s: 0.2}}\n" \
           "stages:\n  retrieval:\n    metrics: [mrr]\n"
    project(tmp_path, spec, [{"id": f"q{i}", "question": f"q{i}", "relevant_doc_ids": ["d1"]} for i in range(46)])
    start = time.perf_counter()
    proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml")
    took = time.perf_counter() - start
    assert proc.returncode == 3 and took < 5, (took, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert lines[-2].startswith("rag-gate: the target cannot be reached: http://***@127.0.0.1:")
    assert "connection failed" in lines[-2] and "pw-secret-1234" not in proc.stderr + proc.stdout
    assert len(lines) <= 4  # the cause first, not after forty lines of errors


def test_stale_temporaries_of_a_killed_writer_are_removed(tmp_path):
    from gate.io.files import write_text

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".report.json.{dead.pid}.abc123.tmp"
    stale.write_text("half", encoding="utf-8")
    mine_alive = tmp_path / f".report.json.{os.getpid()}.zzz.tmp"  # a write of this very process: left alone
    mine_alive.write_text("in progress", encoding="utf-8")
    write_text(tmp_path / "report.json", "{}\n", what="report")
    assert not stale.exists() and mine_alive.exists()
    assert (tmp_path / "report.json").read_text() == "{}\n"


def test_a_temporary_is_a_new_private_file_of_its_own_name_and_a_planted_link_is_not_followed(tmp_path, monkeypatch):
    from gate.io import files

    prefix = f".report.json.{os.getpid()}."
    made = [files._new_temporary(tmp_path, prefix) for _ in range(50)]
    for fd, _ in made:
        os.close(fd)
    paths = [Path(p) for _, p in made]
    assert len(set(paths)) == 50 and all(p.parent == tmp_path and p.name.startswith(prefix) and p.suffix == ".tmp" for p in paths)
    assert all(p.stat().st_mode & 0o777 == 0o600 and p.stat().st_size == 0 for p in paths)
    # the name a writer would take is already a link to a file elsewhere: that name is passed over, the file untouched
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("keep", encoding="utf-8")
    planted = tmp_path / f"{prefix}{'ab' * 6}.tmp"
    planted.symlink_to(outside)
    draws = iter([bytes.fromhex("ab" * 6), bytes.fromhex("cd" * 6)])
    monkeypatch.setattr(files.os, "urandom", lambda n: next(draws))
    fd, path = files._new_temporary(tmp_path, prefix)
    os.write(fd, b"new")
    os.close(fd)
    assert Path(path).name == f"{prefix}{'cd' * 6}.tmp" and outside.read_text(encoding="utf-8") == "keep"
    assert planted.is_symlink() and Path(path).read_bytes() == b"new"


def test_a_kill_during_the_write_never_leaves_a_half_written_report(tmp_path):
    """kill -9 while report.json is being written: the file is the old one or the new one, never cut."""
    project(tmp_path, RESULTS_SPEC, results=[ok_line(i) for i in range(4)])
    (tmp_path / "report.json").write_text('{"old": true}\n', encoding="utf-8")
    code = ("import sys, time\nfrom gate.io import files\nreal = files.os.replace\n"
            "def slow(a, b):\n    time.sleep(5)\n    real(a, b)\nfiles.os.replace = slow\n"
            "files.write_text(sys.argv[1], '{\"new\": true}\\n' * 1000)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "report.json")], env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(1.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "report.json").read_text() == '{"old": true}\n'
    leftover = list(tmp_path.glob(".report.json.*.tmp"))
    assert len(leftover) == 1  # the killed writer's temporary: the next write removes it
    from gate.io.files import write_text

    write_text(tmp_path / "report.json", "{}\n")
    assert list(tmp_path.glob(".report.json.*.tmp")) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (a full disk) and a read-only one, if this machine lets the tests mount."""
    full, ro = tmp_path / "full", tmp_path / "ro"
    full.mkdir()
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the full-disk case is not checked")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(ro)], check=True)
    yield full, ro
    subprocess.run(["umount", str(full)], check=False)
    subprocess.run(["umount", str(ro)], check=False)


def test_a_full_disk_or_read_only_folder_is_exit_3_naming_the_path(tmp_path, small_disk):
    full, ro = small_disk
    lines = [ok_line(i) for i in range(4)]
    lines[0]["answer"] = "x" * 200_000  # report.json is larger than the disk
    project(tmp_path, RESULTS_SPEC, results=lines)
    for where, said in ((full / "report.json", "the disk is full"), (ro / "report.json", "the file system is read-only")):
        comment = tmp_path / "comment.md"  # rendered while report.json is written: written only once it is
        proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", str(where), "--markdown", str(comment))
        assert proc.returncode == 3, proc.stderr
        assert f"{where}: cannot write the report: {said}" in proc.stderr and "Traceback" not in proc.stderr
        assert list(where.parent.glob(".*.tmp")) == [] and not comment.exists()


def test_a_judge_cache_in_a_read_only_folder_says_so(tmp_path, small_disk):
    _, ro = small_disk
    ws = judge_project(tmp_path / "ws", 2)
    spec = (ws / "rag-eval.yml").read_text(encoding="utf-8").replace("cache.sqlite", str(ro / "cache.sqlite"))
    (ws / "rag-eval.yml").write_text(spec, encoding="utf-8")
    with JudgeServer() as judge:
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", env={"JUDGE_URL": judge.url})
    assert proc.returncode == 3, proc.stderr
    assert "cannot write the judge cache" in proc.stderr and "does not exist yet" in proc.stderr and f"{ro} is not writable" in proc.stderr
    assert "--no-cache" in proc.stderr and "delete the file" not in proc.stderr


# --------------------------------------------------------------------------- messages that misled


BLOCKER = """\
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("ragas", "deepeval", "instructor"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
from gate.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_judge_without_the_judge_engines_is_refused_before_any_question(tmp_path, command):
    """Before: every question went to the service, then 'internal error: ModuleNotFoundError'; validate said valid."""
    spec = ("version: 1\ngolden_set: golden.jsonl\ntarget:\n  http: {url: \"${RAG_URL}\"}\n"
            "judge: {base_url: \"http://127.0.0.1:9/v1\", model: judge-2024-01-01}\n"
            "stages:\n  generation:\n    engine: deepeval\n    metrics: [faithfulness]\n")
    project(tmp_path, spec)
    with RagServer({}, default=reply({"retrieved": [{"id": "d1", "text": "t"}], "answer": "a"})) as rag:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_URL": rag.url}
        proc = subprocess.run([sys.executable, "-c", BLOCKER, command, "--config", "rag-eval.yml"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        asked = len(rag.requests)
    assert proc.returncode == 2, proc.stderr
    assert "rag-eval.yml:9: stages.generation.metrics: the judge metrics need the judge engines" in proc.stderr
    assert "pip install -e '.[judges]'" in proc.stderr and asked == 0


def test_answers_without_passage_text_are_reported_once_with_the_key_to_set(tmp_path):
    spec = ("version: 1\ngolden_set: golden.jsonl\ntarget:\n  http: {url: \"${RAG_URL}\", response: {text: body}}\n"
            "stages:\n  retrieval:\n    metrics: [mrr]\n  robustness:\n    noise: {distractors: 1}\n")
    project(tmp_path, spec)
    with RagServer({}, default=reply({"retrieved": [{"id": "d1", "content": "21 days"}, {"id": "d2", "content": "x"}],
                                      "answer": "21 days"})) as rag:
        proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "report.json", env={"RAG_URL": rag.url})
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    (warning,) = [w for w in report["warnings"] if "passage text" in w]
    assert warning.startswith("4 of 4 answers carry no passage text, which the robustness noise test need")
    assert "target.http.response.text (now 'body')" in warning
    assert proc.stdout.count("carry no passage text") == 1


def test_the_timing_line_counts_the_target_alone(tmp_path):
    ws = judge_project(tmp_path, 6)
    with JudgeServer(latency=0.3) as judge:
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", env={"JUDGE_URL": judge.url})
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("rag-gate: the target took "))
    assert line.endswith(" s for 6 cases: 6 answered, 0 errored"), line
    seconds = float(line.split(" took ")[1].split(" s")[0])
    assert seconds < 0.5, line  # a results file answers at once; the judging (3 s at least here) is not counted


def test_a_judge_reply_cut_at_the_token_limit_says_raise_max_tokens():
    import asyncio

    from gate.judges import JudgeInput, JudgeSettings
    from gate.judges.client import JudgeClient
    from gate.judges.deepeval_engine import DeepEvalEngine
    from tests.support.judge_server import always, cut

    async def main(url: str) -> str:
        settings = JudgeSettings(base_url=url, model="judge-2024-01-01", max_retries=0, max_tokens=16)
        client = JudgeClient(settings)
        engine = DeepEvalEngine(client, settings, {}, max_tokens=16)
        try:
            await engine.score("faithfulness", JudgeInput("How long?", "21 days.", ("A loan lasts 21 days.",), "21 days"))
        except Exception as exc:  # JudgeError
            return str(exc)
        finally:
            await engine.aclose()
            await client.aclose()
        raise AssertionError("a cut reply was to fail")

    with JudgeServer(faults=[always(cut(12))]) as judge:
        said = asyncio.run(main(judge.url))
    assert "cut off by its token limit" in said and "raise judge.max_tokens" in said, said


def test_unsorted_scores_are_noted_as_a_difference_from_trec_eval(tmp_path):
    lines = [ok_line(i) for i in range(4)]
    lines[2]["retrieved"] = [{"id": "x", "score": 0.1}, {"id": "d1", "score": 0.9}]
    project(tmp_path, RESULTS_SPEC, results=lines)
    proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "report.json")
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    (note,) = report["target"]["notes"]
    assert note.startswith("1 case(s) list passages whose scores are not in descending order (first: q2)") and "trec_eval" in note
    assert report["stages"]["retrieval"]["metrics"]["mrr"] == pytest.approx((1 + 1 + 0.5 + 1) / 4)  # list order decides
    assert "note: 1 case(s)" in proc.stdout
