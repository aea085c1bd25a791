"""Target: a RAG service over HTTP (the default protocol in docs/spec.md, fields remappable).

Each case is one POST. Connection errors, timeouts, 429 and 5xx are retried with exponential backoff (a Retry-After
header is honoured, up to ``max_retry_after_s``). A case whose call still fails, or whose body is not the expected
JSON, comes back with ``error`` set; nothing is raised, nothing is scored as 0.

The body is read as a stream: it may hold at most ``max_response_bytes`` once decoded (gzip included), and a call
still reading at the deadline (``max_duration_s``) ends there, its connection closed. A redirect is an error naming
where it points, unless ``follow_redirects``: then at most 5 are followed here (not by requests), only 307 and 308
(which keep the POST and its body; 301, 302 and 303 would make it a GET), and none of the configured headers, nor the
URL's credentials, goes to another origin (scheme, host and port).

``preset: langserve`` speaks LangServe's ``/invoke``: ``{"input": question}`` answered by ``{"output": ..., "metadata":
{"run_id", "feedback_tokens"}}``, the output a string (the answer) or a chain's output (``answer``/``result`` beside
``context``/``source_documents``, serialised LangChain Documents). A key of ``request``/``response`` set to anything but
its default overrides the preset's. The noise test's call (``contexts``) has its own URL, body and mappings, each
defaulting to the main call's. A body of the wrong shape fails its case with what was received (its type or its keys)
and the mapping to set, and sets ``wrong_shape``; so does a body that is a stream (server-sent events, JSON lines).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.core.redact import Redactor
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.io.http import DeadlineReached, TooLarge, Watchdog, innermost, json_of, origin, read_body, retry_after_s, text_of
from gate.targets import DEFAULT_FIELDS, Beside, Target, answer_field, get_path, output_from, parse_output
from gate.targets.httpmap import (
    DEFAULT_REQUEST,
    LANGSERVE_CONTEXTS_REQUEST,
    LANGSERVE_REQUEST,
    LANGSERVE_RESPONSE,
    SHAPE_EXAMPLE,
    StreamBody,
    describe,
    endpoint_note,
    explicit,
    invoke_url,
    misplaced,
    received,
    set_path,
    stream_body,
)

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_REDIRECTS = 5
KEEP_METHOD = frozenset({307, 308})  # the redirects that re-send the POST as it was
ERROR_BODY_BYTES = 64 * 1024  # what is read of an error status's body, for its message
DEFAULT_HEADERS = {"Content-Type": "application/json", "User-Agent": "rag-gate"}


# answers that say the request itself is refused (credentials, method): every case would get the same. Not 404 or 422:
# a search service may answer them for one question it finds nothing for, or one it finds too long.
REFUSED_STATUS = frozenset({401, 403, 405})


class StatusError(RuntimeError):
    """A final answer of an error status (one not retried), which it keeps."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Refused(StatusError):
    """An error status every case would get too (REFUSED_STATUS): the run stops after the first case."""


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


class _Session(requests.Session):
    """A session that sees no redirect: requests, even told not to follow one, reads the whole body of a 3xx (no cap,
    no deadline) to prepare the next request. The target follows redirects itself (``HttpTarget._redirect``)."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


class ContextsCall:
    """The noise test's call (``target.http.contexts``): its URL, body and mappings, each the main call's unless set."""

    def __init__(self, cfg: dict[str, Any], main: HttpTarget, request: dict[str, Any], langserve: bool) -> None:
        url = cfg.get("url")
        self.url: str = main.url if url is None else invoke_url(url) if langserve else url
        self.shown_url = self.url
        self.body: dict[str, Any] = cfg["body"] if "body" in cfg else main.body
        base = {**DEFAULT_REQUEST, **(LANGSERVE_CONTEXTS_REQUEST if langserve else {}), **request}
        own = cfg.get("request") or {}
        self.question: str = own.get("question") or base["question"]
        self.contexts: str = own.get("contexts") or base["contexts"]
        answer = (cfg.get("response") or {}).get("answer")
        self.answer_places: tuple[str, ...] = (answer,) if answer else main.response_places["answer"]
        self.own_answer = bool(answer)  # the mapping a wrong-shape error names


class HttpTarget(Target):
    kind = "http"
    fail_fast = True  # the first case is asked alone: a service that is down stops the run at once

    def __init__(self, cfg: dict[str, Any], secrets: list[str] | None = None, sleep: Any = time.sleep,
                 deadline: Deadline = NO_DEADLINE) -> None:
        self.preset: str | None = cfg.get("preset")
        langserve = self.preset == "langserve"
        self.url: str = invoke_url(cfg["url"]) if langserve else cfg["url"]
        self.configured_headers: dict[str, str] = dict(cfg.get("headers", {}))  # sent to the URLs' origins only
        self.headers = {**DEFAULT_HEADERS, **self.configured_headers}
        self.body: dict[str, Any] = cfg.get("body", {})
        self.timeout = float(cfg["timeout_s"])
        self.retries = int(cfg["retries"])
        self.backoff = float(cfg["backoff_s"])
        self.max_retry_after = float(cfg["max_retry_after_s"])
        self.concurrency = int(cfg["concurrency"])
        self.max_bytes = int(cfg["max_response_bytes"])
        self.follow_redirects = bool(cfg["follow_redirects"])
        request, response = explicit(cfg["request"], DEFAULT_REQUEST), explicit(cfg["response"], DEFAULT_FIELDS)
        self.request_fields: dict[str, str | None] = {**DEFAULT_REQUEST, **(LANGSERVE_REQUEST if langserve else {}), **request}
        self.response_fields = {**DEFAULT_FIELDS, **response}
        self.explicit_response = response
        # where each response field may be, the first present wins (one place each but for the preset's)
        self.response_places: dict[str, tuple[str, ...]] = {f: (p,) for f, p in self.response_fields.items()}
        if langserve:
            self.response_places.update({f: p for f, p in LANGSERVE_RESPONSE.items() if f not in response})
        self.contexts = ContextsCall(cfg.get("contexts") or {}, self, request, langserve)
        self.redactor = Redactor.with_urls(secrets or [], [self.url, self.contexts.url])  # and the URLs' user:password
        self.shown_url = shown_url(self.url, self.redactor)
        self.contexts.shown_url = shown_url(self.contexts.url, self.redactor)
        self.origins = {origin(self.url), origin(self.contexts.url)}  # where the configured headers go
        self.deadline = deadline
        self._watchdog = Watchdog(deadline)
        self.unreachable: str | None = None  # the error of the last call that could not connect at all
        self._sleep = sleep
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()

    def _session(self) -> requests.Session:
        s = getattr(self._local, "session", None)
        if s is None:
            s = _Session()
            s.headers.update(DEFAULT_HEADERS)  # the configured headers go with each request to the URL's origin
            self._local.session = s
            with self._lock:
                self._sessions.append(s)
        return s

    def build_body(self, question: str, *, k: int | None = None, contexts: list[str] | None = None) -> dict[str, Any]:
        """The main call's body (``k``), or the noise test's (``contexts``: its own body and fields)."""
        if contexts is not None:
            body = copy.deepcopy(self.contexts.body)
            set_path(body, self.contexts.question, question)
            set_path(body, self.contexts.contexts, contexts)
            return body
        body = copy.deepcopy(self.body)
        set_path(body, str(self.request_fields["question"]), question)
        k_field = self.request_fields["k"]
        if k is not None and k_field:
            set_path(body, k_field, k)
        return body

    def post(self, body: dict[str, Any], url: str | None = None) -> tuple[Any, float]:
        """POST to ``url`` (the main URL unless given) with retries. Returns (parsed JSON, latency ms of the whole
        call); raises RuntimeError with the reason."""
        session = self._session()
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        start = time.perf_counter()
        attempts = self.retries + 1
        reason = ""
        connected = False
        for attempt in range(attempts):
            wait = self.backoff * (2**attempt)
            try:
                if self.deadline.reached():
                    raise DeadlineReached()
                code, after, content, headers = self._exchange(session, data, url or self.url)
            except DeadlineReached:
                raise PostError(f"{REACHED}{f' after: {reason}' if reason else ''}") from None
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
                if code not in RETRY_STATUS:
                    return self._outcome(code, content, headers, url or self.url), (time.perf_counter() - start) * 1000
                reason = f"HTTP {code}"
                if after is not None:
                    if after > self.max_retry_after:
                        raise RuntimeError(f"HTTP {code} with Retry-After {after:.0f} s, above max_retry_after_s {self.max_retry_after:g}")
                    wait = after
            if attempt + 1 < attempts:
                self._sleep(self.deadline.cap(wait))
        raise PostError(f"{reason} after {attempts} attempt{'s' if attempts > 1 else ''}", unreachable=not connected)

    def _outcome(self, code: int, content: bytes, headers: Any, url: str) -> Any:
        """The JSON of a final answer (not a status that is retried); RuntimeError for an error status (Refused for one
        that every case would get too), a stream (StreamBody) or a body that is not JSON."""
        encoding = requests.utils.get_encoding_from_headers(headers)  # as requests' Response.encoding
        if code >= 400:
            said = f"HTTP {code}: {self.redactor.shorten(text_of(content, encoding), 200)}{endpoint_note(url, bool(self.preset)) * (code == 404)}"
            raise (Refused if code in REFUSED_STATUS else StatusError)(said, code)
        if (stream := stream_body(headers.get("Content-Type"), content)) is not None:
            raise stream
        try:
            return json_of(content, encoding)
        except ValueError:
            start_of_body = self.redactor.shorten(repr(text_of(content, encoding)), 80)
            raise RuntimeError(f"malformed JSON in the response (HTTP {code}): {start_of_body}") from None

    def _exchange(self, session: requests.Session, data: bytes, start: str) -> tuple[int, float | None, bytes, Any]:
        """One attempt: the POST to ``start``, and the redirects it is allowed to follow. (status, Retry-After, body,
        headers); RuntimeError for a redirect not followed or a body over the cap, DeadlineReached at the deadline."""
        url = start
        headers = self.configured_headers if origin(start) in self.origins else {}
        for hop in range(MAX_REDIRECTS + 1):
            if hop and self.deadline.reached():
                raise DeadlineReached()
            resp = session.post(url, data=data, headers=headers, timeout=self.deadline.cap(self.timeout),
                                allow_redirects=False, stream=True)
            code = resp.status_code
            if 300 <= code < 400:
                location = resp.headers.get("Location")
                resp.close()
                url = self._redirect(code, url, location, hop)
                if origin(url) != origin(start):
                    headers = {}  # the session's defaults only; and no credentials: the new URL's are the server's
                continue
            error = code >= 400
            try:
                content = read_body(resp, ERROR_BODY_BYTES if error else self.max_bytes, self.deadline, self.timeout,
                                    watchdog=self._watchdog, truncate=error)
            except TooLarge as exc:
                raise RuntimeError(f"the response is larger than target.http.max_response_bytes ({exc.limit} bytes)") from None
            return code, retry_after_s(resp.headers.get("Retry-After")), content, resp.headers
        raise AssertionError("unreachable")

    def _redirect(self, code: int, url: str, location: str | None, hop: int) -> str:
        """Where a redirect from ``url`` leads, if it may be followed; else RuntimeError saying why, and what to change
        (the Location shown with its credentials and secrets redacted)."""
        if location is None:
            raise RuntimeError(f"HTTP {code} without a Location header")
        try:
            to = urljoin(url, location)
            shown = self.redactor.shorten(shown_url(to, self.redactor), 200)
            scheme = urlsplit(to).scheme.lower()
        except ValueError:
            raise RuntimeError(f"HTTP {code} redirect to {self.redactor.shorten(repr(location), 200)}, which is no URL") from None
        where = f"HTTP {code} redirect to {shown}: not followed"
        only = "target.http.follow_redirects follows 307 and 308 only"
        if code in (301, 302, 303):
            raise RuntimeError(f"{where}, it would turn the POST into a GET (point target.http.url at that address; {only})")
        if code not in KEEP_METHOD:
            raise RuntimeError(f"{where} (point target.http.url at that address; {only})")
        if not self.follow_redirects:
            raise RuntimeError(f"{where} (set target.http.follow_redirects: true to follow it, or point target.http.url at that address)")
        if scheme not in ("http", "https"):
            raise RuntimeError(f"{where}: not an http or https URL")
        if hop == MAX_REDIRECTS:
            raise RuntimeError(f"more than {MAX_REDIRECTS} redirects (the last to {shown})")
        return to

    def _failed(self, exc: Exception, shown: str | None = None) -> str:
        """The error of a call, naming the URL it went to (credentials and secrets redacted); a stream is a wrong shape."""
        said = self.redactor(f"{shown or self.shown_url}: {exc}")
        if isinstance(exc, PostError) and exc.unreachable:
            self.unreachable = said
        self.refused = said if isinstance(exc, Refused) else None
        self.error_status = exc.status if isinstance(exc, StatusError) else None
        self.wrong_shape, self.shape_hint = (said, exc.hint) if isinstance(exc, StreamBody) else (None, None)
        return said

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        start = time.perf_counter()
        try:
            obj, latency = self.post(self.build_body(case.question, k=k))
        except (RuntimeError, ValueError) as exc:
            return TargetOutput.failed(case.id, self._failed(exc), (time.perf_counter() - start) * 1000)
        self.unreachable = self.refused = self.error_status = None
        try:
            out = self.read(case.id, obj, latency)
        except ValueError as exc:  # gate.targets.ShapeError included
            self.wrong_shape = self.shape_error(obj, exc)
            self.shape_hint = "map target.http.response to where the fields are (or set target.http.preset), and run again"
            return TargetOutput.failed(case.id, self.wrong_shape, latency)
        self.wrong_shape = None
        return out

    def fields_of(self, obj: Any) -> dict[str, str]:
        """The response mapping for this body: of each field's places, the first the body has."""
        if not self.preset:
            return self.response_fields
        fields = {f: next((p for p in places if get_path(obj, p) is not None), places[0])
                  for f, places in self.response_places.items()}
        if isinstance(obj, dict) and isinstance(obj.get("output"), list) and "retrieved" not in self.explicit_response:
            fields["retrieved"] = "output"  # a served retriever: its output is the documents, and there is no answer
            if "answer" not in self.explicit_response:
                fields["answer"] = "output.answer"  # nowhere in a list
        items = get_path(obj, fields["retrieved"])
        first = items[0] if isinstance(items, list) and items else None
        ids = self.response_places["id"]
        fields["id"] = next((p for p in ids if get_path(first, p) not in (None, "")), ids[0])
        return fields

    def read(self, case_id: str, obj: Any, latency: float) -> TargetOutput:
        """The TargetOutput of a body; ValueError when its shape is wrong. A LangServe output that is a string is the
        answer, with no passages (the preset's places for them are inside an object output)."""
        fields = self.fields_of(obj)
        if self.preset and isinstance(obj, dict) and isinstance(obj.get("output"), str) and "retrieved" not in self.explicit_response:
            return output_from(case_id, [], Beside(obj["output"], None, None), fields, latency)
        return parse_output(case_id, obj, fields, latency_ms=latency)

    def shape_error(self, obj: Any, exc: Exception, contexts: bool = False) -> str:
        """A wrong-shape error: what was received, why it does not fit, and the mapping to set."""
        fields = {**self.fields_of(obj), **({"answer": self.contexts_answer(obj)} if contexts else {})}
        field = "answer" if contexts else misplaced(obj, fields)
        key = f"target.http.{'contexts.' if contexts else ''}response.{field}"
        if field in ("id", "text", "score"):  # a document's field: where it is in each document
            where = f"metadata.{SHAPE_EXAMPLE[field]}" if self.preset and field == "id" else SHAPE_EXAMPLE[field]
        else:
            where = f"output.{SHAPE_EXAMPLE[field].rsplit('.', 1)[-1]}" if self.preset else SHAPE_EXAMPLE[field]
        example = f"{{{field}: {where}}}"
        hint = f"set {key} to where {field} is, e.g. `{f'contexts: {{response: {example}}}' if contexts else f'response: {example}'}`"
        if self.preset:
            places = (self.contexts.answer_places if contexts else self.response_places[field])
            hint += f"; preset {self.preset} looks in {', '.join(places)}"
        elif isinstance(obj, dict) and "output" in obj and "metadata" in obj:
            hint = f"the body looks like LangServe's /invoke: set `preset: langserve`; or {hint}"
        else:
            hint += ", or `preset: langserve` for a LangServe chain"
        why = self.redactor.shorten(exc, 300)
        said = received(obj, self.redactor, fields[field])
        top = describe(obj, self.redactor)
        if top in why or "(got an object with key" in why:  # the reason says what was received already: only where the mapping stops is added
            said = said[len(top):].lstrip("; ")
        return self._failed(RuntimeError(f"returned the wrong shape: {said + ': ' if said else ''}{why} ({hint})"),
                            self.contexts.shown_url if contexts else None)

    def contexts_answer(self, obj: Any) -> str:
        places = self.contexts.answer_places
        return next((p for p in places if get_path(obj, p) is not None), places[0])

    @property
    def answers_from_contexts(self) -> bool:
        return True

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        """The noise test's call (target.http.contexts: by default the same URL with {"question", "contexts"}): the
        service must answer from those contexts only, in the order given."""
        start = time.perf_counter()
        try:
            obj, latency = self.post(self.build_body(case.question, contexts=contexts), self.contexts.url)
        except (RuntimeError, ValueError) as exc:
            return Answer(None, self._failed(exc, self.contexts.shown_url), (time.perf_counter() - start) * 1000)
        try:
            return Answer(answer_field(obj, self.contexts_answer(obj)), None, latency)
        except ValueError as exc:
            return Answer(None, self.shape_error(obj, exc, contexts=True), latency)

    def _innermost(self, exc: Exception) -> str:
        """The innermost reason of a requests/urllib3 error (gate.io.http.innermost): redacted, then cut."""
        return self.redactor.shorten(innermost(exc), 160)

    def close(self) -> None:
        self._watchdog.close()
        with self._lock:
            for s in self._sessions:
                s.close()
            self._sessions.clear()
