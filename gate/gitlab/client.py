"""GitLab's REST API v4 for one project: who the token is, and the notes of a merge request.

The API root comes from the caller (GitLab CI's ``CI_API_V4_URL``, so a self-managed GitLab works). The token is sent
as ``PRIVATE-TOKEN`` (a personal, project or group access token) or as ``Authorization: Bearer`` (an OAuth token) and
never appears in a message or a log line. Requests are retried with backoff on 5xx answers and connection errors,
and after the wait GitLab asks for on a rate limit (429 with ``Retry-After``, or ``RateLimit-Reset``). A new note is
not posted twice on a 5xx: the notes are listed again first. Errors::

    GitLabError            (a RunError, exit 3) ``status``: the HTTP status, None when GitLab did not answer
    ├── PermissionDenied   403: the token may not do this
    └── NotFound           404: no such project, merge request or note (or the token may not see it)
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from gate.core.errors import ApiError, InputError
from gate.core.redact import Redactor
from gate.github.client import Retrying, TokenAuth, upsert_marked
from gate.gitlab import AUTH_SCHEMES, TOKEN_HINT
from gate.io.http import retry_after_s

log = logging.getLogger(__name__)


class GitLabError(ApiError):
    slug = "gitlab-error"


class PermissionDenied(GitLabError):
    slug = "gitlab-permission-denied"


class NotFound(GitLabError):
    slug = "gitlab-not-found"


class GitLabClient:
    """GitLab's REST API v4 for one project (its numeric id or its path, ``group/project``)."""

    def __init__(self, api_url: str, token: str, project: str, *, auth: str = "private-token", retrying: Retrying | None = None) -> None:
        if urlsplit(api_url or "").scheme not in ("http", "https") or not urlsplit(api_url).netloc:
            raise InputError(f"must be the API's http(s) URL (such as https://gitlab.com/api/v4), got {api_url!r}", key="CI_API_V4_URL")
        if auth not in AUTH_SCHEMES:
            raise InputError(f"must be one of {', '.join(AUTH_SCHEMES)}, got {auth!r}", key="--auth")
        retrying = retrying or Retrying()
        self.api_url = api_url.rstrip("/")
        self.project = str(project)
        self._project_path = f"/projects/{quote(self.project, safe='')}"
        self.timeout, self.max_retries, self.max_wait, self.sleep = retrying.timeout, retrying.max_retries, retrying.max_wait, retrying.sleep
        self.redactor = Redactor([token] if token else [])
        self.session = requests.Session()
        self.session.headers.update({"Accept": "application/json", "User-Agent": "rag-gate"})
        self.session.auth = TokenAuth(token) if auth == "bearer" else TokenAuth(token, "PRIVATE-TOKEN", "")
        self._user: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"GitLabClient({self.api_url!r}, project={self.project!r})"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> GitLabClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- who the token acts as ------------------------------------------------------------
    def user(self) -> dict[str, Any]:
        """The token's user ({id, username}): a project or group access token acts as its own bot user."""
        if self._user is None:
            data = self._json(self._request("GET", "/user"))
            if not isinstance(data, dict) or not isinstance(data.get("id"), int):
                raise GitLabError(None, "GET /user: the answer has no user id")
            self._user = data
        return self._user

    # -- notes -------------------------------------------------------------------------------
    def _notes_path(self, iid: int) -> str:
        return f"{self._project_path}/merge_requests/{int(iid)}/notes"

    def notes(self, iid: int) -> Iterator[dict[str, Any]]:
        """Every note of merge request ``iid``, every page."""
        return self._pages(self._notes_path(iid), {"per_page": 100, "sort": "asc", "order_by": "created_at"})

    def find_note(self, iid: int, marker: str) -> dict[str, Any] | None:
        """The newest note of the merge request that carries ``marker`` and was written by the token's user (a system
        note, or anyone else's note that quotes the marker, is never ours)."""
        marked = [n for n in self.notes(iid) if not n.get("system") and marker in (n.get("body") or "")]
        if not marked:
            return None
        me = self.user()["id"]
        ours = [n for n in marked if (n.get("author") or {}).get("id") == me]
        return max(ours, key=lambda n: int(n["id"])) if ours else None

    def upsert_note(self, iid: int, body: str, marker: str) -> tuple[int, str]:
        """Create the note, or edit the one carrying ``marker`` in place: (id, "created" | "updated" | "unchanged")."""
        if marker not in body:
            raise ValueError("the note body must contain the marker, or the next run cannot find the note")
        return upsert_marked(
            self, lambda: self.find_note(iid, marker),
            lambda n: self._request("PUT", f"{self._notes_path(iid)}/{int(n['id'])}", body={"body": body}),
            lambda: self._request("POST", self._notes_path(iid), body={"body": body}, retry=False),
            body, f"note on merge request !{iid}")

    # -- HTTP -------------------------------------------------------------------------------
    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list: the Link header's rel="next", else the X-Next-Page header."""
        url: str | None = path
        query: dict[str, Any] | None = params
        origin = urlsplit(self.api_url)[:2]
        for _ in range(10_000):
            assert url is not None
            resp = self._request("GET", url, params=query)
            items = self._json(resp)
            if not isinstance(items, list):
                raise GitLabError(resp.status_code, f"GET {urlsplit(resp.url).path}: expected a list, got {type(items).__name__}")
            yield from items
            link, following = resp.links.get("next", {}).get("url"), (resp.headers.get("X-Next-Page") or "").strip()
            if link:
                if urlsplit(link)[:2] != origin:
                    raise GitLabError(None, f"GitLab's next-page link leaves {self.api_url}: not followed (the token would go with it)")
                url, query = link, None
            elif following.isdigit():
                url, query = path, {**params, "page": int(following)}
            else:
                return

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
                 retry: bool = True) -> requests.Response:
        """One API call, retried on 5xx / no answer (if ``retry``) and after a rate limit's wait (always)."""
        url = path if path.startswith(("http://", "https://")) else self.api_url + path
        what = f"{method} {urlsplit(url).path}"
        for attempt in range(1, self.max_retries + 2):
            try:
                resp = self.session.request(method, url, params=params, json=body, timeout=self.timeout)
            except requests.RequestException as exc:
                reason = f"{what}: no answer from GitLab ({type(exc).__name__}: {exc})"
                if not retry or attempt > self.max_retries:
                    raise GitLabError(None, self._redact(reason)) from None
                self._pause(attempt, reason)
                continue
            if resp.status_code < 400:
                return resp
            if resp.status_code == 429:
                wait = _rate_limit_wait(resp)
                if wait > self.max_wait or attempt > self.max_retries:
                    raise self._error(resp, what, hint="GitLab's rate limit was hit: re-run the job later")
                self._pause(attempt, f"{what}: rate limited (429)", wait)
            elif retry and resp.status_code >= 500 and attempt <= self.max_retries:
                self._pause(attempt, f"{what} answered {resp.status_code}")
            else:
                raise self._error(resp, what)
        raise GitLabError(None, f"{what}: gave up")  # pragma: no cover

    def _pause(self, attempt: int, reason: str, wait: float | None = None) -> None:
        if wait is None:
            wait = min(2.0 ** (attempt - 1), 16.0) * random.uniform(0.5, 1.0)
        log.warning("%s; retrying in %.1f s (attempt %d of %d)", self._redact(reason), wait, attempt + 1, self.max_retries + 1)
        self.sleep(wait)

    def _error(self, resp: requests.Response, what: str, hint: str | None = None) -> GitLabError:
        code = resp.status_code
        msg = _message(resp)
        msg = msg[len(str(code)):].lstrip() if msg.startswith(f"{code} ") else msg  # GitLab's messages start with the status
        said = self._redact(f"{what} answered {code} {msg}".rstrip())
        if code == 401:
            return GitLabError(code, f"the GitLab token was refused: {said}", hint=hint or TOKEN_HINT)
        if code == 403:
            return PermissionDenied(code, f"the GitLab token may not do this: {said}", hint=hint or TOKEN_HINT)
        if code == 404:
            return NotFound(code, said, hint=hint or "check CI_PROJECT_ID and CI_MERGE_REQUEST_IID, and that the token's user can see the project")
        return GitLabError(code, said, hint=hint)

    def _redact(self, text: str, limit: int = 500) -> str:
        """Text that may echo the token: redacted, then cut (never the other way round)."""
        return self.redactor.shorten(text, limit)

    def _json(self, resp: requests.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise GitLabError(resp.status_code, f"{resp.request.method} {urlsplit(resp.url).path}: the answer is not JSON") from None


def _rate_limit_wait(resp: requests.Response) -> float:
    """Seconds GitLab asks to wait after a 429 (Retry-After, else RateLimit-Reset, a Unix time), else a minute."""
    wait = retry_after_s(resp.headers.get("Retry-After"))
    if wait is not None:
        return wait
    try:
        return max(float(resp.headers.get("RateLimit-Reset", "")) - time.time(), 0.0) + 1.0
    except ValueError:
        return 60.0


def _message(resp: requests.Response) -> str:
    """GitLab's ``message`` (a string, or the fields' errors as an object) or ``error``, else the start of the body."""
    try:
        data = resp.json()
    except ValueError:
        return " ".join(resp.text.split())[:200] or resp.reason or ""
    if not isinstance(data, dict):
        return ""
    msg = data.get("message", data.get("error", ""))
    if isinstance(msg, dict):
        msg = "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in msg.items())
    return " ".join(str(msg).split())
