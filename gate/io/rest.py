"""What the GitHub and GitLab clients share: a token in one header, the retry policy, and one REST call retried.

``RestClient._request`` sends one call and retries it with backoff on a 5xx answer or no answer at all (unless told
not to: a create that may have happened), and after the wait the API asks for on a rate limit (always). Each client
says what a rate limit looks like on its API (``_rate_limit_wait``) and which error an answer becomes (``_error``).
Every message passes the token's redactor before it is raised or logged. ``upsert_marked`` is the one marked comment
(GitHub) or note (GitLab), created once and then edited in place.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import requests

from gate.core.errors import ApiError
from gate.core.redact import Redactor
from gate.io.http import innermost


class TokenAuth(requests.auth.AuthBase):
    """A token in one header (``Authorization: Bearer ...`` by default; GitLab's ``PRIVATE-TOKEN`` too), set on the
    session so a ~/.netrc never replaces it; its repr shows no token."""

    def __init__(self, token: str, header: str = "Authorization", prefix: str = "Bearer ") -> None:
        self._token, self._header, self._prefix = token, header, prefix

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers[self._header] = f"{self._prefix}{self._token}"
        return r

    def __repr__(self) -> str:
        return "<token ***>"


@dataclass(frozen=True)
class Retrying:
    """How the client waits and retries: each request's timeout, the retries after the first attempt, the longest
    Retry-After it waits, and how it sleeps (a test gives its own, so it never really waits)."""

    timeout: float = 30.0
    max_retries: int = 4
    max_wait: float = 60.0
    sleep: Callable[[float], None] = time.sleep


class RestClient:
    """One API root, one token, one session: the calls, their retries and their errors."""

    service: ClassVar[str] = "the API"  # named in messages: "no answer from GitHub"
    error: ClassVar[type[ApiError]] = ApiError  # the client's own error class

    def __init__(self, api_url: str, token: str, retrying: Retrying, headers: dict[str, str], auth: TokenAuth | None) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout, self.max_retries, self.max_wait, self.sleep = retrying.timeout, retrying.max_retries, retrying.max_wait, retrying.sleep
        self.redactor = Redactor([token] if token else [])
        self.session = requests.Session()
        self.session.headers.update({**headers, "User-Agent": "rag-gate"})
        if auth is not None:
            self.session.auth = auth

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
                 accept: str | None = None, retry: bool = True) -> requests.Response:
        """One API call, retried on 5xx / no answer (if ``retry``) and after a rate limit's wait (always)."""
        url = path if path.startswith(("http://", "https://")) else self.api_url + path
        what = f"{method} {urlsplit(url).path}"
        headers = {"Accept": accept} if accept else None
        for attempt in range(1, self.max_retries + 2):
            try:
                resp = self.session.request(method, url, params=params, json=body, headers=headers, timeout=self.timeout)
            except requests.RequestException as exc:
                reason = f"{what}: no answer from {self.service} ({type(exc).__name__}: {innermost(exc)})"
                if not retry or attempt > self.max_retries:
                    raise self.error(None, self._redact(reason)) from None
                self._pause(attempt, reason)
                continue
            if resp.status_code < 400:
                return resp
            wait = self._rate_limit_wait(resp)
            if wait is not None:
                if wait > self.max_wait or attempt > self.max_retries:
                    raise self._error(resp, what, rate_limited=True)
                self._pause(attempt, f"{what}: rate limited ({resp.status_code})", wait)
            elif retry and resp.status_code >= 500 and attempt <= self.max_retries:
                self._pause(attempt, f"{what} answered {resp.status_code}")
            else:
                raise self._error(resp, what)
        raise self.error(None, f"{what}: gave up")  # pragma: no cover

    def _rate_limit_wait(self, resp: requests.Response) -> float | None:
        """Seconds the API asks to wait, if the answer is a rate limit; None otherwise."""
        return None

    def _error(self, resp: requests.Response, what: str, rate_limited: bool = False) -> ApiError:
        """The error an answer of status 400 or more becomes."""
        return self.error(resp.status_code, self._redact(f"{what} answered {resp.status_code}"))

    def _pause(self, attempt: int, reason: str, wait: float | None = None) -> None:
        if wait is None:
            wait = min(2.0 ** (attempt - 1), 16.0) * random.uniform(0.5, 1.0)
        logging.getLogger(type(self).__module__).warning(  # the client's own logger: gate.github.client, gate.gitlab.client
            "rag-gate: %s; retrying in %.1f s (attempt %d of %d)", self._redact(reason), wait, attempt + 1, self.max_retries + 1)
        self.sleep(wait)

    def _redact(self, text: str, limit: int = 500) -> str:
        """Text that may echo the token: redacted, then cut (never the other way round)."""
        return self.redactor.shorten(text, limit)

    def _json(self, resp: requests.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise self.error(resp.status_code, f"{resp.request.method} {urlsplit(resp.url).path}: the answer is not JSON") from None


def upsert_marked(client: RestClient, find: Callable[[], dict[str, Any] | None], edit: Callable[[dict[str, Any]], requests.Response],
                  create: Callable[[], requests.Response], body: str, what: str) -> tuple[int, str]:
    """Create the one marked comment (GitHub) or note (GitLab), or edit the one ``find`` gives in place: (id, "created"
    | "updated" | "unchanged"). A create that failed with no answer or a 5xx is not sent again blindly: ``find`` looks
    first (the forge may have created it), so there is never a second one; one deleted meanwhile is created again."""
    existing, posted = find(), False
    for attempt in range(1, client.max_retries + 2):
        if existing is not None:
            if (existing.get("body") or "").replace("\r\n", "\n") == body.replace("\r\n", "\n"):
                return int(existing["id"]), "created" if posted else "unchanged"
            try:
                return int(client._json(edit(existing))["id"]), "created" if posted else "updated"
            except ApiError as exc:
                if exc.status != 404:
                    raise
                existing = None  # deleted meanwhile
                continue
        try:
            return int(client._json(create())["id"]), "created"
        except ApiError as exc:
            if not (exc.status is None or exc.status >= 500) or attempt > client.max_retries:
                raise
            client._pause(attempt, f"POST {what}: {exc.message}")
            existing, posted = find(), True
    raise ApiError(None, f"could not create the {what}")  # pragma: no cover
