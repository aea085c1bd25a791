"""The edges of the framework targets: calls that never return (max_duration_s ends them, in a run and in a ping),
generators that never end, a million documents, objects whose attributes or messages raise, ids of the wrong type,
a chain's output with two rankings, an HTTP body that is a stream, and ids that differ from the golden set's only in
case or spaces. Each ends in a sentence naming what was received, never a traceback or a silent 0."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from gate.core.model import GoldenCase, TargetOutput
from gate.deadline import REACHED, Deadline
from gate.run.notes import near_ids_note
from gate.targets.python import PythonTarget
from gate.targets.shapes import MAX_DOCUMENTS, read_output

ROOT = Path(__file__).resolve().parents[2]
CASE = GoldenCase(id="g1", question="How much is a ticket?", line=1, relevant={"fares#1": 1})
DOC = Document(page_content="A ticket costs $3.50.", metadata={"id": "fares#1"})

RAG = '''
import asyncio, itertools, time

async def never(question, k):
    await asyncio.Event().wait()

def hangs(question, k):
    time.sleep(3600)

def forever(question, k):
    while True:
        yield {"id": "fares#1", "text": "A ticket costs $3.50."}

def answer(question, documents):
    return "A ticket costs $3.50."
'''


def project(tmp: Path, target: str, max_duration: int = 3, extra: str = "") -> Path:
    (tmp / "rag.py").write_text(RAG, encoding="utf-8")
    golden = [{"id": f"g{i}", "question": f"question {i}?", "relevant_doc_ids": ["fares#1"]} for i in range(4)]
    (tmp / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    (tmp / "rag-eval.yml").write_text(f"version: 1\ngolden_set: golden.jsonl\nmax_duration_s: {max_duration}\ntarget:\n  {target}\n"
                                      f"stages:\n  retrieval:\n    metrics: [mrr]\n{extra}", encoding="utf-8")
    return tmp


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))},
                               "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("function", ["never", "hangs"])
def test_a_call_that_never_returns_ends_at_max_duration(tmp_path: Path, function: str) -> None:
    work = project(tmp_path, f'python: {{function: "rag:{function}"}}')
    started = time.monotonic()
    proc = rag_gate(work, "run", "--no-progress", "--report", "report.json")
    assert time.monotonic() - started < 60, "the run waited for a call that never returns"
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    report = json.loads((work / "report.json").read_text(encoding="utf-8"))
    errors = [s.get("error") or "" for s in report["stages"]["retrieval"]["samples"]]
    assert errors and all(REACHED in e for e in errors), errors
    assert "reached max_duration_s" in proc.stdout + proc.stderr


def test_ping_ends_a_call_that_never_returns_at_max_duration(tmp_path: Path) -> None:
    work = project(tmp_path, 'python: {function: "rag:never"}', max_duration=2)
    proc = rag_gate(work, "validate", "--ping")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("target"))
    assert "failed for case g0" in line and REACHED in line and "left running" in line, line
    assert "Overrun" not in line


def test_a_retriever_that_never_stops_yielding_stops_the_run_after_one_case(tmp_path: Path) -> None:
    work = project(tmp_path, 'python: {retriever: "rag:forever", answerer: "rag:answer"}', max_duration=600)
    proc = rag_gate(work, "run", "--no-progress")
    assert proc.returncode == 3, proc.stderr
    assert f"yielded more than {MAX_DOCUMENTS} documents" in proc.stderr and "no other case was asked" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_async_generator_retriever_is_read_as_its_list() -> None:
    async def retriever(question: str, k: int) -> Any:
        yield DOC

    seen: list[Any] = []

    def answerer(question: str, documents: Any) -> str:
        seen.append(documents)
        return "A ticket costs $3.50."

    out = PythonTarget(None, retriever=retriever, answerer=answerer).ask(CASE, 5)
    assert out.error is None and [d.id for d in out.retrieved] == ["fares#1"]
    assert seen == [[DOC]]  # the answerer gets the list


@pytest.mark.parametrize("pair", [False, True])
def test_a_million_documents_is_the_wrong_shape(pair: bool) -> None:
    docs = [{"id": f"d{i}", "text": "x"} for i in range(MAX_DOCUMENTS + 1)]
    target = PythonTarget(None, retriever=lambda q, k: docs) if pair else PythonTarget(lambda q, k: {"retrieved": docs, "answer": "a"})
    out = target.ask(CASE, 5)
    assert out.error is not None and f"holds {MAX_DOCUMENTS + 1} documents" in out.error
    assert target.wrong_shape is not None and "top k" in (target.shape_hint or "")


class RaisingAttributes:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} here")


class RaisingMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def raise_unworded(question: str, k: int) -> Any:
    raise RaisingMessage()


@pytest.mark.parametrize(("target", "said"), [
    (PythonTarget(lambda q, k: RaisingAttributes()), "reading what function(question, k) returned (a RaisingAttributes) raised RuntimeError: no"),
    (PythonTarget(lambda q, k: {"retrieved": [RaisingAttributes()], "answer": "a"}), "raised RuntimeError: no page_content here"),
    (PythonTarget(None, retriever=lambda q, k: [RaisingAttributes()]), "reading the retriever's documents raised RuntimeError"),
    (PythonTarget(raise_unworded), "RaisingMessage (its message could not be read: its __str__ raised RuntimeError)"),
])
def test_objects_that_raise_are_a_per_case_error_saying_so(target: PythonTarget, said: str) -> None:
    out = target.ask(CASE, 5)
    assert out.error is not None and said in out.error, out.error
    assert out.retrieved == []


@pytest.mark.parametrize(("value", "said"), [
    (None, "its metadata's 'id' is null"), (math.nan, "is a float (nan)"), (1.0, "is a float (1.0)"), (True, "is a bool (True)"),
])
def test_a_document_id_of_the_wrong_type_is_named(value: Any, said: str) -> None:
    doc = Document(page_content="x", metadata={"id": value})
    target = PythonTarget(lambda q, k: [doc])
    out = target.ask(CASE, 5)
    assert out.error is not None and said in out.error and "not a non-empty string or an integer" in out.error, out.error
    assert target.wrong_shape is not None


def test_an_integer_id_is_read_as_its_string() -> None:
    out = PythonTarget(lambda q, k: [Document(page_content="x", metadata={"id": 7})]).ask(CASE, 5)
    assert out.error is None and [d.id for d in out.retrieved] == ["7"]


@pytest.mark.parametrize("value", [math.nan, True, None, ""])
def test_an_id_of_the_wrong_type_in_the_usual_shape_is_named(value: Any) -> None:
    out = PythonTarget(lambda q, k: {"retrieved": [{"id": value, "text": "x"}], "answer": "a"}).ask(CASE, 5)
    assert out.error is not None and "retrieved[0].id must be a non-empty string (or an integer)" in out.error, out.error


def test_context_and_source_documents_that_differ_are_refused() -> None:
    other = Document(page_content="y", metadata={"id": "other"})
    target = PythonTarget(lambda q, k: {"context": [DOC], "source_documents": [other], "answer": "a"})
    out = target.ask(CASE, 5)
    assert out.error is not None and "both 'context' (1 documents) and 'source_documents' (1)" in out.error
    assert "(answer, documents)" in (target.shape_hint or "")
    same = read_output("g1", {"context": [DOC], "source_documents": [DOC], "answer": "a"})
    assert [d.id for d in same.retrieved] == ["fares#1"] and same.answer == "a"


class Stream(BaseHTTPRequestHandler):
    """/sse: server-sent events; /ndjson: JSON lines; /rag/invoke: 404 (a LangServe chain mounted at /rag)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/invoke"):
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"detail": "Not Found"}')
            return
        sse = self.path == "/sse"
        body = b'event: data\ndata: {"answer": "A"}\n\nevent: end\n\n' if sse else b'{"answer": "A"}\n{"answer": "B"}\n'
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if sse else "application/x-ndjson")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stream_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("path", "said"), [("/sse", "a stream of server-sent events (text/event-stream)"),
                                            ("/ndjson", "a stream of JSON lines (application/x-ndjson)")])
def test_a_streaming_body_is_said_to_be_a_stream_and_stops_the_run(tmp_path: Path, stream_server: str, path: str,
                                                                   said: str) -> None:
    work = project(tmp_path, f'http: {{url: "{stream_server}{path}", retries: 0}}', max_duration=60)
    proc = rag_gate(work, "run", "--no-progress")
    assert proc.returncode == 3, proc.stderr
    assert f"the target returned the wrong shape for case g0: {stream_server}{path}" in proc.stderr
    assert said in proc.stderr and "not one JSON body" in proc.stderr and "malformed JSON" not in proc.stderr
    assert "no other case was asked" in proc.stderr and "StreamingResponse" in proc.stderr
    assert proc.stderr.splitlines()[0].count("wrong shape") == 1, proc.stderr  # said once, not again by the case's error
    ping = rag_gate(work, "validate", "--ping")
    assert ping.returncode == 3 and f"returned the wrong shape for case g0: {stream_server}{path}" in ping.stdout, ping.stdout
    assert next(ln for ln in ping.stdout.splitlines() if ln.startswith("target")).count("wrong shape") == 1, ping.stdout


def test_a_langserve_url_at_the_stream_endpoint_says_to_give_the_base(tmp_path: Path, stream_server: str) -> None:
    work = project(tmp_path, f'http: {{url: "{stream_server}/rag/stream", preset: langserve, retries: 0}}', max_duration=60)
    proc = rag_gate(work, "validate", "--ping")
    assert proc.returncode == 3
    assert "/rag/stream/invoke: HTTP 404" in proc.stdout
    assert "set target.http.url to the chain's base URL, without /stream" in proc.stdout, proc.stdout


def test_a_results_line_whose_id_differs_only_in_spaces_or_case_names_it(tmp_path: Path) -> None:
    work = project(tmp_path, "results: results.jsonl", max_duration=60, extra="max_error_rate: 0.5\n")
    lines = [{"id": "g0 ", "retrieved": [{"id": "fares#1"}]}, {"id": "G1", "retrieved": [{"id": "fares#1"}]},
             {"id": "g2", "retrieved": [{"id": "fares#1"}]}, {"id": "g3", "retrieved": [{"id": "fares#1"}]}]
    (work / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    proc = rag_gate(work, "run", "--no-progress", "--report", "report.json")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    errors = {s["id"]: s.get("error") for s in json.loads((work / "report.json").read_text(encoding="utf-8"))["stages"]["retrieval"]["samples"]}
    assert errors["g0"] == "no line for this case in results.jsonl (line 1 has the id 'g0 ', which differs from 'g0' only in spaces or case: fix it)"
    assert "line 2 has the id 'G1'" in (errors["g1"] or "")
    assert errors["g2"] is None


def test_retrieved_ids_that_differ_only_in_case_or_spaces_get_a_note() -> None:
    cases = [CASE, GoldenCase(id="g2", question="q", line=2, relevant={"doc1": 1}), GoldenCase(id="g3", question="q", line=3, relevant={"d": 1})]
    outputs = {"g1": read_output("g1", {"retrieved": [{"id": "Fares#1"}]}), "g2": read_output("g2", {"retrieved": [{"id": "doc1 "}]}),
               "g3": read_output("g3", {"retrieved": [{"id": "d"}, {"id": "D"}]})}
    note = near_ids_note(cases, outputs)
    assert len(note) == 1 and note[0].startswith("2 retrieved id(s) in 2 case(s) differ from a relevant id only in case or spaces")
    assert "case g1 retrieved 'Fares#1', its relevant_doc_ids name 'fares#1'" in note[0]
    assert near_ids_note(cases[2:], outputs) == []  # 'D' beside a retrieved 'd': the relevant id was retrieved
    assert near_ids_note(cases[:1], {"g1": TargetOutput.failed("g1", "x")}) == []


def test_a_deadline_already_reached_ends_the_call_without_waiting() -> None:
    """The call is left running; once it returns, the thread that made it ends (it gets no other call: left waiting
    for one, it kept a process that ran the target in-process from exiting, as pytest itself did)."""
    release = threading.Event()
    target = PythonTarget(lambda q, k: release.wait(30))
    target.deadline = Deadline(0.2)
    started = time.monotonic()
    out = target.ask(CASE, 5)
    assert time.monotonic() - started < 5
    assert out.error is not None and out.error.startswith(REACHED), out.error
    (left,) = [t for t in threading.enumerate() if t.name == "rag-gate-python-call" and t.is_alive() and getattr(t, "rag_gate_abandoned", False)]
    release.set()
    left.join(10)
    assert not left.is_alive(), "the thread left to the overrunning call waited for another call after it returned"
    target.close()


LIBRARY_USE = '''
import sys, threading, time
sys.path.insert(0, {root!r})
from gate.core.model import GoldenCase
from gate.deadline import Deadline
from gate.targets.python import PythonTarget

release = threading.Event()
target = PythonTarget(lambda q, k: {{"retrieved": [{{"id": "a"}}], "answer": "x"}} if q == "fast" else release.wait(60) and None)
target.deadline = Deadline(30)
print(target.ask(GoldenCase(id="g1", question="fast", line=1, relevant={{"a": 1}}), 5).error)
{overrun}
print("end of script")
'''


@pytest.mark.parametrize("overrun", [False, True])
def test_a_process_that_never_closes_its_target_still_exits(tmp_path: Path, overrun: bool) -> None:
    """A library use: a PythonTarget made with a deadline, asked, never closed (and one call left past the deadline,
    then returning): the interpreter exits at the end of the script instead of waiting on an idle caller thread."""
    left = ("target.deadline = Deadline(0.3)\nprint(target.ask(GoldenCase(id='g2', question='slow', line=2, relevant={'a': 1}), 5).error)\n"
            "release.set()" if overrun else "")
    script = tmp_path / "use.py"
    script.write_text(LIBRARY_USE.format(root=str(ROOT), overrun=left), encoding="utf-8")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 25, "the process waited for a caller thread at its exit"
    lines = proc.stdout.splitlines()
    assert lines[0] == "None" and lines[-1] == "end of script", proc.stdout
    assert (REACHED in lines[1]) == overrun, proc.stdout


SQLITE_RAG = '''
import sqlite3, threading

_conn = None
threads = []

def search(question, k):
    """A RAG that opens its SQLite index on the first question and keeps it (sqlite3 refuses another thread's)."""
    global _conn
    if _conn is None:
        _conn = sqlite3.connect(":memory:")
        _conn.execute("create table doc (id text, body text)")
        _conn.execute("insert into doc values ('fares#1', 'A ticket costs $3.50.')")
    threads.append(threading.get_ident())
    rows = _conn.execute("select id, body from doc limit ?", (k,)).fetchall()
    return {"retrieved": [{"id": i, "text": t} for i, t in rows], "answer": "A ticket costs $3.50."}
'''


def test_each_call_is_made_on_the_same_thread_while_none_overran(tmp_path: Path) -> None:
    """With a deadline, the calls are made on a thread of their own, and the same one every time: what the user's
    code keeps per thread (an SQLite connection opened on the first question) stays usable; 4 cases, 0 errors."""
    ws = project(tmp_path, "python: {function: 'sqliterag:search', concurrency: 1}", max_duration=60)
    (ws / "sqliterag.py").write_text(SQLITE_RAG, encoding="utf-8")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json")
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    assert proc.returncode == 0 and report["target"]["errors"] == 0, proc.stdout + proc.stderr
    assert report["stages"]["retrieval"]["metrics"]["mrr"] == 1.0


def test_a_target_closed_then_another_made_answers_on_a_new_caller_thread() -> None:
    """Two runs in one process (main([...]) twice): the first target's close ends its caller threads, and the
    second target's calls from the same thread are made on a new one, not queued to a thread that has ended."""
    for _ in range(2):
        target = PythonTarget(lambda q, k: {"retrieved": [{"id": "fares#1"}], "answer": "A ticket costs $3.50."})
        target.deadline = Deadline(20)
        started = time.monotonic()
        out = target.ask(CASE, 5)
        target.close()
        assert out.error is None and [d.id for d in out.retrieved] == ["fares#1"], out.error
        assert time.monotonic() - started < 10
