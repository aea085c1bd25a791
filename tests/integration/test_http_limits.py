"""The HTTP target's limits against services that misbehave on the wire (real sockets on 127.0.0.1, no mocks).

* ``max_duration_s`` ends a call whose response is still arriving (a body sent one byte a second), and the
  connection is closed when the target stops reading;
* ``target.http.max_response_bytes`` caps the body after decompression (a never-ending chunked body, a gzip bomb);
* redirects are not followed unless ``target.http.follow_redirects`` is true, and then at most 5, never turning the
  POST into a GET, and never sending a configured header (or the URL's credentials) to another host.

The byte-level behaviours come from ``RawServer`` (one raw socket a connection, the response written by hand); the
redirects from ``Hops`` (an http.server answering GET and POST by path). The whole runs go through the real CLI in a
subprocess whose peak memory is read from /proc (VmHWM).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.config.loader import load_spec
from gate.core.model import GoldenCase, TargetOutput
from gate.deadline import REACHED, Deadline
from gate.targets.factory import make_target
from gate.targets.http import HttpTarget
from tests.support.rag_server import response
from tests.support.settings import http

Q = "What is the loan period?"
OK = response(["d1", "d2"], answer="21 days.")
DEFAULT_CAP = 52428800
TOKEN = "tok-QXZJ-5ecr3t-9f8e7d6c5b4a"


def case(question: str = Q, cid: str = "c1") -> GoldenCase:
    return GoldenCase(id=cid, question=question, line=1, relevant={"d1": 1})


def ask_within(target: HttpTarget, seconds: float) -> tuple[TargetOutput | None, float]:
    """``target.ask`` in a thread: its output and how long it took, or None if it still runs after ``seconds`` (the
    test fails instead of hanging; the server's stop then ends the call)."""
    got: list[TargetOutput] = []
    start = time.monotonic()
    t = threading.Thread(target=lambda: got.append(target.ask(case(), k=5)), daemon=True)
    t.start()
    t.join(seconds)
    return (got[0] if got else None), time.monotonic() - start


# --------------------------------------------------------------------------- a raw HTTP server


@dataclass
class Conn:
    """One connection as the raw server saw it."""

    request: bytes = b""
    sent: int = 0  # body bytes sent
    closed_at: float | None = None  # monotonic time the client closed it (or a send failed)


class RawServer:
    """HTTP/1.1 on 127.0.0.1 written by hand: for each connection, the request is read (head and Content-Length body),
    then ``respond(sock, conn, stopping)`` writes whatever bytes it likes."""

    def __init__(self, respond: Callable[[socket.socket, Conn, threading.Event], None]) -> None:
        self.respond = respond
        self.conns: list[Conn] = []
        self.stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/"

    def __enter__(self) -> RawServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (closing alone does not)
        self._listener.close()
        for t in self._threads:
            t.join(timeout=5)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            conn = Conn()
            self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(sock, conn), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, sock: socket.socket, conn: Conn) -> None:
        with sock:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
            while len(rest) < length:
                rest += sock.recv(65536)
            conn.request = head + b"\r\n\r\n" + rest
            try:
                self.respond(sock, conn, self.stopping)
            except OSError:  # the client went away
                conn.closed_at = conn.closed_at or time.monotonic()


def peer_closed(sock: socket.socket) -> bool:
    """Whether the client has closed (or shut down) its end: readable with nothing to read."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def head(*lines: str) -> bytes:
    return ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


def drip(chunked: bool) -> Callable[[socket.socket, Conn, threading.Event], None]:
    """200 with a body of 100000 bytes (Content-Length, or one chunk of that size), then one byte a second."""

    def respond(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
        sock.sendall(head("Transfer-Encoding: chunked") + b"186a0\r\n" if chunked else head("Content-Length: 100000"))
        while not stopping.is_set() and conn.sent < 100000:
            sock.sendall(b" ")
            conn.sent += 1
            for _ in range(10):
                if peer_closed(sock):
                    conn.closed_at = time.monotonic()
                    return
                if stopping.wait(0.1):
                    return

    return respond


def endless_chunked(limit: int) -> Callable[[socket.socket, Conn, threading.Event], None]:
    """A chunked body that never ends (up to ``limit`` bytes, a safety stop: then it ends as valid JSON)."""

    def respond(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
        sock.sendall(head("Transfer-Encoding: chunked"))
        opening = b'{"retrieved": [{"id": "d1", "text": "'
        sock.sendall(b"%x\r\n%s\r\n" % (len(opening), opening))
        block = b"a" * 65536
        frame = b"%x\r\n%s\r\n" % (len(block), block)
        while conn.sent < limit and not stopping.is_set():
            sock.sendall(frame)
            conn.sent += len(block)
        closing = b'"}], "answer": "x"}'
        sock.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(closing), closing))

    return respond


def fixed(body: bytes, *headers: str) -> Callable[[socket.socket, Conn, threading.Event], None]:
    def respond(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
        sock.sendall(head(f"Content-Length: {len(body)}", *headers) + body)
        conn.sent = len(body)
        stopping.wait(5)  # keep the connection open, as a keep-alive service would

    return respond


def gzip_bomb(inflated: int) -> bytes:
    """A gzip body of valid JSON inflating to ``inflated`` bytes (about 1/1000 of it on the wire)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    opening = b'{"retrieved": [{"id": "d1", "text": "'
    parts = [z.compress(opening)]
    block = b"a" * (1 << 20)
    for _ in range(inflated // len(block)):
        parts.append(z.compress(block))
    parts.append(z.compress(b'"}], "answer": "x"}'))
    parts.append(z.flush())
    return b"".join(parts)


# --------------------------------------------------------------------------- the CLI, its time and peak memory


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float  # the child's own peak resident memory (VmHWM)
    killed: bool = False


def _high_water_kb(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM: of its own program, since exec), 0 once it has exited."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def cli(cwd: Path, *args: str, timeout: float) -> Ran:
    """``python -m gate ARGS`` in a subprocess: exit code, output, wall time and its own peak RSS (VmHWM, read every
    10 ms: ru_maxrss would count the memory of the pytest process it was forked from); killed after ``timeout``."""
    out, err = cwd / "cli.out", cwd / "cli.err"
    env = {k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}
    start = time.monotonic()
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "gate", *args], cwd=cwd, stdout=o, stderr=e, env=env)
    done, peak = threading.Event(), [0]

    def watch() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], _high_water_kb(proc.pid))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        proc.wait(timeout)
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        killed = True
    finally:
        done.set()
        watcher.join()
    return Ran(proc.returncode, out.read_text(encoding="utf-8", errors="replace"), err.read_text(encoding="utf-8", errors="replace"),
               time.monotonic() - start, peak[0] / 1024, killed)


def write_spec(d: Path, http_cfg: dict[str, Any], n: int = 3, **top: Any) -> Path:
    cases = [{"id": f"c{i}", "question": f"question {i}?", "relevant_doc_ids": ["d1"]} for i in range(n)]
    (d / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    spec = {"version": 1, "golden_set": "golden.jsonl", "target": {"http": http_cfg}, "max_error_rate": 0, **top,
            "stages": {"retrieval": {"metrics": ["hit_rate@5"]}}}
    path = d / "rag-eval.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def run_cli(d: Path, timeout: float = 60) -> tuple[Ran, dict[str, Any] | None]:
    ran = cli(d, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress", timeout=timeout)
    report = d / "report.json"
    assert "Traceback" not in ran.stdout + ran.stderr, ran.stderr
    return ran, json.loads(report.read_text(encoding="utf-8")) if report.exists() else None


# --------------------------------------------------------------------------- 1. max_duration_s ends a body still arriving


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_dripping_past_max_duration_s_ends_at_the_deadline(tmp_path: Path, chunked: bool) -> None:
    """200 with Content-Length 100000 (or a chunk of that size), then a byte a second: with max_duration_s 4 the run
    ends at about 4 s (not at the 30 s timeout_s, which covers only the gap between two reads), exit 3, with its
    report, every case errored "deadline reached"."""
    with RawServer(drip(chunked)) as srv:
        write_spec(tmp_path, {"url": srv.url, "retries": 1}, max_duration_s=4)
        ran, report = run_cli(tmp_path, timeout=40)
    assert not ran.killed, f"still running after {ran.seconds:.0f} s"
    assert ran.code == 3, ran.stderr
    assert ran.seconds < 4 + 6, ran.seconds  # the deadline, plus the interpreter's start and the report
    assert report is not None and report["verdict"] == "error" and report["exit_code"] == 3
    errors = [s["error"] for s in report["stages"]["retrieval"]["samples"]]
    assert errors and all(e and REACHED in e for e in errors), errors
    assert any("max_duration_s" in e for e in report["errors"]), report["errors"]


def test_the_connection_is_closed_when_the_deadline_stops_the_read() -> None:
    """In process: the call returns at the deadline, and the service sees its connection closed at once (not when the
    target is closed or the process ends)."""
    with RawServer(drip(False)) as srv:
        t = HttpTarget(http(srv.url, retries=0), deadline=Deadline(2))
        start = time.monotonic()
        out, took = ask_within(t, 10)
        time.sleep(1.5)
        (conn,) = srv.conns
        closed_at = conn.closed_at
        t.close()
    assert out is not None, f"the call still ran after {took:.0f} s"
    assert out.error is not None and REACHED in out.error, out.error
    assert took < 3, took
    assert closed_at is not None and closed_at - start < 3.5, (closed_at, start)


def stall(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    """200 promising 1000 bytes, 10 of them, then silence."""
    sock.sendall(head("Content-Length: 1000") + b'{"retriev"')
    stopping.wait(30)


def test_a_body_that_stalls_past_timeout_s_is_a_timeout_not_an_unreachable_service() -> None:
    """Reading the body as a stream keeps timeout_s between two reads, and a stall there is "timed out" (retried),
    not a connection failure that would stop the run as "the target cannot be reached"."""
    with RawServer(stall) as srv:
        t = HttpTarget(http(srv.url, retries=1, backoff_s=0, timeout_s=0.5))
        out, took = ask_within(t, 10)
        assert len(srv.conns) == 2
    assert out is not None and out.error is not None and out.error.endswith("timed out (timeout 0.5 s) after 2 attempts"), out
    assert t.unreachable is None


# --------------------------------------------------------------------------- 2. max_response_bytes


def test_a_never_ending_chunked_body_stops_at_max_response_bytes() -> None:
    """The default cap (50 MB): the call ends with an error naming the key and the limit, is not retried, and stops
    reading soon after the cap (the service could send 2 GB)."""
    with RawServer(endless_chunked(2 << 30)) as srv:
        out, took = ask_within(HttpTarget(http(srv.url, retries=2, backoff_s=0)), 30)
        conns = list(srv.conns)
    assert out is not None, f"the call still ran after {took:.0f} s, {conns[0].sent >> 20} MB read"
    assert out.error is not None and out.error.endswith(
        f"the response is larger than target.http.max_response_bytes ({DEFAULT_CAP} bytes)"), out.error
    assert len(conns) == 1  # not retried
    assert conns[0].sent < DEFAULT_CAP + (32 << 20), conns[0].sent  # what the socket buffers hold beyond the cap
    assert took < 20, took


def test_a_never_ending_body_through_the_cli_keeps_memory_bounded(tmp_path: Path) -> None:
    """The whole run against a chunked body that goes on for 1 GB: peak memory stays near the cap, not the body."""
    with RawServer(endless_chunked(1 << 30)) as srv:
        write_spec(tmp_path, {"url": srv.url, "retries": 0}, n=1)
        ran, report = run_cli(tmp_path, timeout=60)
    assert ran.code == 3, ran.stderr
    assert report is not None and report["verdict"] == "error"
    (sample,) = report["stages"]["retrieval"]["samples"]
    assert "larger than target.http.max_response_bytes (52428800 bytes)" in sample["error"]
    assert ran.peak_mb < 200, ran.peak_mb  # the interpreter (about 40 MB) and the cap (50 MB)


def test_a_gzip_bomb_is_capped_after_decompression(tmp_path: Path) -> None:
    """A 400 KB gzip body inflating to 400 MB: refused by the cap on the inflated size, with bounded memory."""
    body = gzip_bomb(400 << 20)
    assert len(body) < 500_000
    with RawServer(fixed(body, "Content-Encoding: gzip")) as srv:
        write_spec(tmp_path, {"url": srv.url, "retries": 0}, n=1)
        ran, report = run_cli(tmp_path, timeout=60)
    assert ran.code == 3, ran.stderr
    assert report is not None
    (sample,) = report["stages"]["retrieval"]["samples"]
    assert sample["error"] and "larger than target.http.max_response_bytes (52428800 bytes)" in sample["error"], sample["error"]
    assert ran.peak_mb < 200, ran.peak_mb  # the interpreter (about 40 MB) and the cap (50 MB)


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_max_response_bytes_is_the_inflated_size_exactly(encoding: str) -> None:
    """A body of exactly max_response_bytes is accepted; one byte less is refused (the cap is on what JSON is read from)."""
    plain = json.dumps(OK).encode()
    wire, headers = (gzip.compress(plain), ("Content-Encoding: gzip",)) if encoding == "gzip" else (plain, ())
    with RawServer(fixed(wire, *headers)) as srv:
        fits = HttpTarget(http(srv.url, max_response_bytes=len(plain))).ask(case(), k=5)
        over = HttpTarget(http(srv.url, max_response_bytes=len(plain) - 1, retries=2)).ask(case(), k=5)
        assert len(srv.conns) == 2  # the refused one was not retried
    assert fits.error is None and [d.id for d in fits.retrieved] == ["d1", "d2"]
    assert over.error is not None and over.error.endswith(
        f"the response is larger than target.http.max_response_bytes ({len(plain) - 1} bytes)"), over.error


def test_the_new_keys_are_in_the_schema_with_their_defaults(tmp_path: Path) -> None:
    cfg = http("http://127.0.0.1:1/")
    assert cfg["max_response_bytes"] == DEFAULT_CAP and cfg["follow_redirects"] is False
    for bad in ({"max_response_bytes": 0}, {"max_response_bytes": 1.5}, {"follow_redirects": "yes"}):
        write_spec(tmp_path, {"url": "http://127.0.0.1:1/", **bad})
        ran = cli(tmp_path, "validate", "--config", "rag-eval.yml", timeout=60)
        assert ran.code == 2, (bad, ran.stderr)
        assert f"target.http.{next(iter(bad))}" in ran.stderr, ran.stderr
        assert "Traceback" not in ran.stderr


# --------------------------------------------------------------------------- 3. redirects


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Hops:
    """An HTTP service on 127.0.0.1 answering GET and POST by path: ``routes[path] = (code, headers, JSON body)``;
    every request recorded."""

    routes: dict[str, tuple[int, dict[str, str], Any]] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)

    def __enter__(self) -> Hops:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                owner.hits.append(Hit(self.command, self.path, dict(self.headers.items()), self.rfile.read(n) if n else b""))
                code, headers, body = owner.routes.get(self.path.split("?")[0], (404, {}, {"error": "no route"}))
                payload = json.dumps(body).encode()
                self.send_response(code)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(payload)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _any  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"


SECRET_HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": TOKEN, "X-Team": "search"}


def spec_target(tmp_path: Path, url: str, **cfg: Any) -> HttpTarget:
    """The HTTP target of a spec whose headers come from ${RAG_TOKEN}, as a run builds it."""
    path = tmp_path / "rag-eval.yml"
    headers = {"Authorization": "Bearer ${RAG_TOKEN}", "X-Api-Key": "${RAG_TOKEN}", "X-Team": "search"}
    write_spec(tmp_path, {"url": url, "headers": headers, "retries": 2, "backoff_s": 0, **cfg})
    spec = load_spec(path, env={"RAG_TOKEN": TOKEN})
    target = make_target(spec, [case()])
    assert isinstance(target, HttpTarget)
    return target


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_by_default(tmp_path: Path, code: int) -> None:
    """A 3xx is a per-case error naming where it pointed (the token in the Location redacted) and how to allow it;
    nothing reaches the other host; not retried."""
    with Hops() as a, Hops() as b:
        b.routes["/"] = (200, {}, OK)
        a.routes["/"] = (code, {"Location": f"{b.base}/?key={TOKEN}"}, {})
        out = spec_target(tmp_path, a.base + "/").ask(case(), k=5)
        assert len(a.hits) == 1 and b.hits == []
    assert out.error is not None and out.retrieved == []
    assert f"HTTP {code} redirect to {b.base}/?key=***" in out.error, out.error
    assert "target.http.follow_redirects" in out.error
    assert TOKEN not in out.error and "QXZJ" not in out.error


@pytest.mark.parametrize("code", [307, 308])
def test_a_followed_redirect_to_another_host_drops_every_configured_header(tmp_path: Path, code: int) -> None:
    with Hops() as a, Hops() as b:
        b.routes["/there"] = (200, {}, OK)
        a.routes["/"] = (code, {"Location": f"{b.base}/there"}, {})
        out = spec_target(tmp_path, a.base + "/", follow_redirects=True).ask(case(), k=5)
        (first,), (second,) = a.hits, b.hits
    assert out.error is None, out.error
    assert [d.id for d in out.retrieved] == ["d1", "d2"]
    assert first.headers["X-Api-Key"] == TOKEN and first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert second.method == "POST" and second.body == first.body  # the method and the body kept
    assert not {"authorization", "x-api-key", "x-team"} & {h.lower() for h in second.headers}, second.headers
    assert second.headers["Content-Type"] == "application/json"
    assert TOKEN not in json.dumps(second.headers)


def test_a_followed_redirect_on_the_same_host_keeps_the_headers(tmp_path: Path) -> None:
    with Hops() as a:
        a.routes["/old"] = (308, {"Location": "/new"}, {})
        a.routes["/new"] = (200, {}, OK)
        out = spec_target(tmp_path, a.base + "/old", follow_redirects=True).ask(case(), k=5)
        first, second = a.hits
    assert out.error is None, out.error
    assert (second.method, second.path, second.body) == ("POST", "/new", first.body)
    assert second.headers["X-Api-Key"] == TOKEN and second.headers["X-Team"] == "search"


def test_url_credentials_are_not_sent_to_another_host() -> None:
    with Hops() as a, Hops() as b:
        b.routes["/"] = (200, {}, OK)
        a.routes["/"] = (307, {"Location": f"{b.base}/"}, {})
        url = a.base.replace("http://", f"http://user:{TOKEN}@") + "/"
        out = HttpTarget(http(url, follow_redirects=True), secrets=[url]).ask(case(), k=5)
        (first,), (second,) = a.hits, b.hits
    assert out.error is None, out.error
    assert first.headers["Authorization"].startswith("Basic ")
    assert "Authorization" not in second.headers, second.headers


@pytest.mark.parametrize("code", [301, 302, 303])
def test_a_redirect_turning_the_post_into_a_get_is_refused(tmp_path: Path, code: int) -> None:
    """Even with follow_redirects: 301/302/303 would make the POST a GET (whose answer, a 302's, was scored before)."""
    with Hops() as a, Hops() as b:
        b.routes["/"] = (200, {}, OK)  # a GET here would "answer"
        a.routes["/"] = (code, {"Location": f"{b.base}/"}, {})
        out = spec_target(tmp_path, a.base + "/", follow_redirects=True).ask(case(), k=5)
        assert b.hits == [] and len(a.hits) == 1
    assert out.error is not None and out.retrieved == []
    assert f"HTTP {code} redirect to {b.base}/" in out.error and "GET" in out.error, out.error


def test_more_than_five_redirects_is_an_error(tmp_path: Path) -> None:
    with Hops() as a:
        for i in range(10):
            a.routes[f"/{i}"] = (307, {"Location": f"/{i + 1}"}, {})
        out = spec_target(tmp_path, a.base + "/0", follow_redirects=True).ask(case(), k=5)
        assert [h.path for h in a.hits] == [f"/{i}" for i in range(6)]  # the first request and 5 redirects
    assert out.error is not None and "more than 5 redirects" in out.error and "/6" in out.error, out.error


@pytest.mark.parametrize(("location", "needle"), [
    ("ftp://user:pw-QXZJQXZJ@127.0.0.1/x", "redirect to ftp://***@127.0.0.1/x: not followed: not an http or https URL"),
    ("http://[::1/x", "HTTP 307 redirect to 'http://[::1/x', which is no URL"),
])
def test_a_redirect_to_no_http_url_is_an_error(tmp_path: Path, location: str, needle: str) -> None:
    with Hops() as a:
        a.routes["/"] = (307, {"Location": location}, {})
        out = spec_target(tmp_path, a.base + "/", follow_redirects=True).ask(case(), k=5)
        assert len(a.hits) == 1
    assert out.error is not None and needle in out.error and "QXZJ" not in out.error, out.error


def test_the_body_of_a_redirect_is_not_read() -> None:
    """A 307 whose body never ends: the redirect is refused at once, its body not read (requests itself would read it
    all, even with allow_redirects=False)."""

    def respond(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
        sock.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /next\r\nTransfer-Encoding: chunked\r\n\r\n")
        frame = b"%x\r\n%s\r\n" % (65536, b"a" * 65536)
        while conn.sent < 2 << 30 and not stopping.is_set():
            sock.sendall(frame)
            conn.sent += 65536

    with RawServer(respond) as srv:
        out, took = ask_within(HttpTarget(http(srv.url)), 20)
        sent = srv.conns[0].sent
    assert out is not None, f"still reading after {took:.0f} s, {sent >> 20} MB"
    assert out.error is not None and "HTTP 307 redirect to" in out.error and "/next" in out.error, out.error
    assert sent < 32 << 20, sent
