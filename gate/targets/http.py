"""Target: a RAG service over HTTP (the default protocol in the README, fields remappable).

Each case is one POST. Connection errors, timeouts, 429 and 5xx are retried with
exponential backoff (a Retry-After header is honoured, up to ``max_retry_after_s``).
A case whose call still fails, or whose body is not the expected JSON, comes back with
``error`` set; nothing is raised, nothing is scored as 0.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.core.redact import Redactor
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.io.http import retry_after_s
from gate.targets import DEFAULT_FIELDS, Target, answer_field, parse_output

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def set_path(obj: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    obj[last] = value


class PostError(RuntimeError):
    """A call that failed; ``unreachable`` when no attempt even connected (the service is down or the URL is wrong)."""

    def __init__(self, reason: str, *, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.unreachable = unreachable


def shown_url(url: str, redactor: Redactor) -> str:
    """The URL as messages show it: credentials (user:password@) and every secret value replaced by ***."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        url = urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))
    return redactor(url)


class HttpTarget(Target):
    kind = "http"
    fail_fast = True  # the first case is asked alone: a service that is down stops the run at once

    def __init__(self, cfg: dict[str, Any], secrets: list[str] | None = None, sleep: Any = time.sleep,
                 deadline: Deadline = NO_DEADLINE) -> None:
        self.url: str = cfg["url"]
        self.headers = {"Content-Type": "application/json", "User-Agent": "rag-gate", **cfg.get("headers", {})}
        self.body: dict[str, Any] = cfg.get("body", {})
        self.timeout = float(cfg["timeout_s"])
        self.retries = int(cfg["retries"])
        self.backoff = float(cfg["backoff_s"])
        self.max_retry_after = float(cfg["max_retry_after_s"])
        self.concurrency = int(cfg["concurrency"])
        self.request_fields = dict(cfg["request"])
        self.response_fields = {**DEFAULT_FIELDS, **cfg["response"]}
        self.redactor = Redactor(secrets or [])
        self.shown_url = shown_url(self.url, self.redactor)
        self.deadline = deadline
        self.unreachable: str | None = None  # the error of the last call that could not connect at all
        self._sleep = sleep
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()

    def _session(self) -> requests.Session:
        s = getattr(self._local, "session", None)
        if s is None:
            s = requests.Session()
            s.headers.update(self.headers)
            self._local.session = s
            with self._lock:
                self._sessions.append(s)
        return s

    def build_body(self, question: str, *, k: int | None = None, contexts: list[str] | None = None) -> dict[str, Any]:
        body = copy.deepcopy(self.body)
        set_path(body, self.request_fields["question"], question)
        if k is not None:
            set_path(body, self.request_fields["k"], k)
        if contexts is not None:
            set_path(body, self.request_fields["contexts"], contexts)
        return body

    def post(self, body: dict[str, Any]) -> tuple[Any, float]:
        """POST with retries. Returns (parsed JSON, latency ms of the whole call); raises RuntimeError with the reason."""
        session = self._session()
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        start = time.perf_counter()
        attempts = self.retries + 1
        reason = ""
        connected = False
        for attempt in range(attempts):
            wait = self.backoff * (2**attempt)
            if self.deadline.reached():
                raise PostError(f"{REACHED}{f' after: {reason}' if reason else ''}")
            try:
                resp = session.post(self.url, data=data, timeout=self.deadline.cap(self.timeout))
            except requests.Timeout:
                reason, connected = f"timed out (timeout {self.timeout:g} s)", True
            except requests.exceptions.ChunkedEncodingError as exc:  # the connection broke while the body was being read
                reason, connected = f"connection failed: {self._innermost(exc)}", True
            except requests.ConnectionError as exc:
                reason = f"connection failed: {self._innermost(exc)}"
            except requests.RequestException as exc:  # anything else requests raises: an error, not retried
                raise RuntimeError(f"request failed: {type(exc).__name__}: {self._innermost(exc)}") from None
            else:
                connected = True
                if resp.status_code in RETRY_STATUS:
                    reason = f"HTTP {resp.status_code}"
                    after = retry_after_s(resp.headers.get("Retry-After"))
                    if after is not None:
                        if after > self.max_retry_after:
                            raise RuntimeError(
                                f"HTTP {resp.status_code} with Retry-After {after:.0f} s, above max_retry_after_s {self.max_retry_after:g}"
                            )
                        wait = after
                elif resp.status_code >= 400:
                    raise RuntimeError(f"HTTP {resp.status_code}: {self.redactor.shorten(resp.text, 200)}")
                else:
                    try:
                        return resp.json(), (time.perf_counter() - start) * 1000
                    except ValueError:
                        start_of_body = self.redactor.shorten(repr(resp.text), 80)
                        raise RuntimeError(f"malformed JSON in the response (HTTP {resp.status_code}): {start_of_body}") from None
            if attempt + 1 < attempts:
                self._sleep(self.deadline.cap(wait))
        raise PostError(f"{reason} after {attempts} attempt{'s' if attempts > 1 else ''}", unreachable=not connected)

    def _failed(self, exc: Exception) -> str:
        """The error of a call, naming the URL it went to (credentials and secrets redacted)."""
        if isinstance(exc, PostError) and exc.unreachable:
            self.unreachable = self.redactor(f"{self.shown_url}: {exc}")
        return self.redactor(f"{self.shown_url}: {exc}")

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        start = time.perf_counter()
        try:
            obj, latency = self.post(self.build_body(case.question, k=k))
            self.unreachable = None
            return parse_output(case.id, obj, self.response_fields, latency_ms=latency)
        except (RuntimeError, ValueError) as exc:
            return TargetOutput.failed(case.id, self._failed(exc), (time.perf_counter() - start) * 1000)

    @property
    def answers_from_contexts(self) -> bool:
        return True

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        """The same URL with {"question", "contexts"}: the service must answer from those contexts only."""
        start = time.perf_counter()
        try:
            obj, latency = self.post(self.build_body(case.question, contexts=contexts))
            return Answer(answer_field(obj, self.response_fields["answer"]), None, latency)
        except (RuntimeError, ValueError) as exc:
            return Answer(None, self._failed(exc), (time.perf_counter() - start) * 1000)

    def _innermost(self, exc: Exception) -> str:
        """The innermost reason of a requests/urllib3 error, without the long wrapper chain: redacted, then cut."""
        inner: BaseException = exc
        while inner.__context__ is not None and inner.__context__ is not inner:
            inner = inner.__context__
        return self.redactor.shorten(str(inner) or type(inner).__name__, 160)

    def close(self) -> None:
        with self._lock:
            for s in self._sessions:
                s.close()
            self._sessions.clear()
