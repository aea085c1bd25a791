"""A real HTTP RAG service on 127.0.0.1 for tests and benchmarks (stdlib only, no mocks).

It speaks rag-gate's default HTTP protocol (see the README)::

    POST /  {"question": str, "k": int}  ->  {"retrieved": [{"id", "text", "score"}], "answer": str}

from a dict ``question -> response object`` and can be scripted to misbehave per request.

    with RagServer({"q1": response(["d1", "d2"], answer="a")}) as srv:
        ...  # srv.url, srv.requests, srv.attempts("q1"), srv.max_in_flight

Behaviours (``Action``) are built with the helpers below and chosen per request by, in order:

1. ``script[question]``: a list of actions, one per attempt of that question (attempt 1 uses
   the first); once the list is used up the question is answered normally. A single action
   (not a list) applies to every attempt. ``fail_first(n, action)`` builds such a list.
2. ``behaviour(request) -> Action | None``: a callable for anything else (None: normal).
3. ``default``: the action for every other request (normal answer if not given).

Actions: ``ok()`` (the normal answer), ``status(code, retry_after=None)`` (an error status,
optionally with a ``Retry-After`` header), ``drop()`` (close the socket without any response,
with a TCP reset), ``truncated()`` (HTTP 200 headers promising the whole body, half of it, then
the TCP reset), ``malformed()`` (HTTP 200 with a body that is not JSON), ``slow(seconds)``
(sleep, then answer normally: longer than the client's timeout makes the client give up),
``reply(obj, code=200)`` (any JSON body, e.g. a wrong shape). ``latency`` (seconds) is added
before every request's action.

A question the service does not know gets 404; a body without the question field gets 400,
so a test of field remapping fails if the body is not what the server expects.

Every request is recorded (``srv.requests``: body, raw bytes, headers, question, attempt
number) under a lock; ``srv.max_in_flight`` is the largest number of requests handled at once.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Action", "Received", "RagServer", "drop", "fail_first", "free_port", "malformed", "ok", "reply",
    "response", "slow", "status", "truncated",
]


@dataclass(frozen=True)
class Action:
    """What the server does with one request."""

    kind: str  # ok | status | drop | truncated | malformed | slow | reply
    code: int = 200
    retry_after: str | None = None
    seconds: float = 0.0
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()


def ok() -> Action:
    return Action("ok")


def status(code: int, retry_after: float | str | None = None, body: Any = None,
           headers: Mapping[str, str] | None = None) -> Action:
    ra = None if retry_after is None else (retry_after if isinstance(retry_after, str) else f"{retry_after:g}")
    return Action("status", code=code, retry_after=ra, body=body, headers=tuple((headers or {}).items()))


def drop() -> Action:
    return Action("drop")


def truncated() -> Action:
    return Action("truncated")


def malformed(text: str = '{"retrieved": [{"id": "d1", "text": "trunc') -> Action:
    """HTTP 200, Content-Type application/json, and a body that does not parse as JSON."""
    return Action("malformed", body=text)


def slow(seconds: float) -> Action:
    return Action("slow", seconds=seconds)


def reply(obj: Any, code: int = 200) -> Action:
    return Action("reply", code=code, body=obj)


def fail_first(n: int, action: Action | None = None) -> list[Action]:
    """A script: the first ``n`` attempts of a question get ``action`` (default 503), then normal answers."""
    return [action or status(503)] * n


def response(ids: Iterable[str], answer: str | None = "an answer", *, text: Callable[[str], str] | None = None) -> dict[str, Any]:
    """A default-protocol response body with ``ids`` in rank order (scores decreasing)."""
    ids = list(ids)
    docs = [
        {"id": d, "text": text(d) if text else f"text of {d}", "score": round(1.0 - i / (len(ids) + 1), 6)}
        for i, d in enumerate(ids)
    ]
    out: dict[str, Any] = {"retrieved": docs}
    if answer is not None:
        out["answer"] = answer
    return out


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening on it (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Received:
    """One request as the server got it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # parsed JSON, or None if the body was not JSON
    question: str | None
    attempt: int  # 1 for the first request carrying this question
    action: str = ""  # kind of the action the server took


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # listen backlog: many clients connecting at once must not see dropped SYNs
    owner: RagServer

    def handle_error(self, request: Any, client_address: Any) -> None:  # no tracebacks for dropped clients
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real service would
    server: _Server
    timeout = 30  # an idle keep-alive connection is closed after this
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between them

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._send(405, b'{"error": "use POST"}')

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.owner._handle(self, raw)

    def _send(self, code: int, payload: bytes, headers: Mapping[str, str] | None = None,
              content_type: str = "application/json", length: int | None = None) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload) if length is None else length))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:  # the client gave up (e.g. its timeout): nothing to answer
            self.close_connection = True

    def _drop(self) -> None:
        """Close the TCP connection without a byte of response (RST, not a graceful FIN)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass


class RagServer:
    """A RAG service on 127.0.0.1:<free port> in a background thread. Use as a context manager."""

    def __init__(
        self,
        responses: Mapping[str, Any] | None = None,
        *,
        latency: float = 0.0,
        script: Mapping[str, Action | list[Action]] | None = None,
        behaviour: Callable[[Received], Action | None] | None = None,
        default: Action | None = None,
        question_field: str = "question",
        path: str = "/",
    ) -> None:
        self.responses: dict[str, Any] = dict(responses or {})
        self.latency = latency
        self.script: dict[str, Action | list[Action]] = dict(script or {})
        self.behaviour = behaviour
        self.default = default
        self.question_field = question_field
        self.path = path
        self._lock = threading.Lock()
        self._requests: list[Received] = []
        self._attempts: dict[str, int] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> RagServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="rag-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes every sleeping slow/latency handler
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> RagServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    # -- what was received ------------------------------------------------------------------
    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._requests)

    def attempts(self, question: str) -> int:
        with self._lock:
            return self._attempts.get(question, 0)

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    def reset(self) -> None:
        """Forget what was received (and restart every script from attempt 1)."""
        with self._lock:
            self._requests.clear()
            self._attempts.clear()
            self._max_in_flight = 0

    # -- the service ------------------------------------------------------------------------
    def _choose(self, req: Received) -> Action:
        if req.question is not None and req.question in self.script:
            plan = self.script[req.question]
            if isinstance(plan, Action):
                return plan
            if req.attempt <= len(plan):
                return plan[req.attempt - 1]
            return ok()
        if self.behaviour is not None:
            chosen = self.behaviour(req)
            if chosen is not None:
                return chosen
        return self.default or ok()

    def _handle(self, h: _Handler, raw: bytes) -> None:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        question = _get(body, self.question_field)
        if not isinstance(question, str):
            question = None
        with self._lock:
            attempt = 0
            if question is not None:
                attempt = self._attempts[question] = self._attempts.get(question, 0) + 1
            req = Received(h.command, h.path, {k: v for k, v in h.headers.items()}, raw, body, question, attempt)
            self._requests.append(req)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            action = self._choose(req)
            req.action = action.kind
            if self.latency:
                self._stopping.wait(self.latency)
            self._act(h, req, action)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _act(self, h: _Handler, req: Received, action: Action) -> None:
        if action.kind == "drop":
            h._drop()
            return
        if action.kind == "truncated":
            payload = json.dumps(self.responses.get(req.question or "", {"retrieved": []})).encode("utf-8")
            h._send(200, payload[: len(payload) // 2], {"X-Truncated": "yes"}, length=len(payload))
            h._drop()
            return
        if action.kind == "malformed":
            h._send(200, str(action.body).encode("utf-8"))
            return
        if action.kind == "status":
            headers = dict(action.headers)
            if action.retry_after is not None:
                headers["Retry-After"] = action.retry_after
            payload = json.dumps(action.body if action.body is not None else {"error": f"status {action.code}"}).encode()
            h._send(action.code, payload, headers)
            return
        if action.kind == "reply":
            h._send(action.code, json.dumps(action.body).encode())
            return
        if action.kind == "slow":
            self._stopping.wait(action.seconds)
        # ok / slow: the normal answer
        if req.path.split("?")[0] != self.path:
            h._send(404, json.dumps({"error": f"no route {req.path}"}).encode())
        elif req.body is None:
            h._send(400, b'{"error": "the body is not JSON"}')
        elif req.question is None:
            h._send(400, json.dumps({"error": f"no {self.question_field!r} string in the body"}).encode())
        elif req.question not in self.responses:
            h._send(404, json.dumps({"error": "unknown question"}).encode())
        else:
            h._send(200, json.dumps(self.responses[req.question], ensure_ascii=False).encode("utf-8"))
