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
so a test of field remapping fails if the body is not what the server expects; a method other than POST gets 405.

Every request is recorded (``srv.requests``: body, raw bytes, headers, question, attempt
number) under a lock; ``srv.max_in_flight`` is the largest number of requests handled at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.standin import StandIn, StandInHandler, free_port

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


class RagServer(StandIn):
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
        self._requests: list[Received] = []
        self._attempts: dict[str, int] = {}
        super().__init__()

    @property
    def url(self) -> str:
        return f"{self.base_url}{self.path}"

    # -- what was received ------------------------------------------------------------------
    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._requests)

    def attempts(self, question: str) -> int:
        with self._lock:
            return self._attempts.get(question, 0)

    def reset(self) -> None:
        """Forget what was received (and restart every script from attempt 1)."""
        with self._lock:
            self._requests.clear()
            self._attempts.clear()
            self.max_in_flight = 0

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

    def handle(self, h: StandInHandler) -> None:
        if h.command != "POST":
            h.reply(405, b'{"error": "use POST"}')
            return
        raw = h.body()
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
        with self.busy():
            action = self._choose(req)
            req.action = action.kind
            if self.latency:
                self.pause(self.latency)
            self._act(h, req, action)

    def _act(self, h: StandInHandler, req: Received, action: Action) -> None:
        if action.kind == "drop":
            h.drop()
            return
        if action.kind == "truncated":
            payload = json.dumps(self.responses.get(req.question or "", {"retrieved": []})).encode("utf-8")
            h.reply(200, payload[: len(payload) // 2], {"X-Truncated": "yes"}, length=len(payload))
            h.drop()
            return
        if action.kind == "malformed":
            h.reply(200, str(action.body).encode("utf-8"))
            return
        if action.kind == "status":
            headers = dict(action.headers)
            if action.retry_after is not None:
                headers["Retry-After"] = action.retry_after
            payload = json.dumps(action.body if action.body is not None else {"error": f"status {action.code}"}).encode()
            h.reply(action.code, payload, headers)
            return
        if action.kind == "reply":
            h.reply(action.code, json.dumps(action.body).encode())
            return
        if action.kind == "slow":
            self.pause(action.seconds)
        # ok / slow: the normal answer
        if req.path.split("?")[0] != self.path:
            h.reply(404, json.dumps({"error": f"no route {req.path}"}).encode())
        elif req.body is None:
            h.reply(400, b'{"error": "the body is not JSON"}')
        elif req.question is None:
            h.reply(400, json.dumps({"error": f"no {self.question_field!r} string in the body"}).encode())
        elif req.question not in self.responses:
            h.reply(404, json.dumps({"error": "unknown question"}).encode())
        else:
            h.reply(200, json.dumps(self.responses[req.question], ensure_ascii=False).encode("utf-8"))
