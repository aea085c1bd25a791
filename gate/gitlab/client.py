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

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from gate.core.errors import ApiError, InputError
from gate.gitlab import AUTH_SCHEMES, TOKEN_HINT
from gate.io.http import retry_after_s
from gate.io.rest import RestClient, Retrying, TokenAuth, upsert_marked


class GitLabError(ApiError):
    slug = "gitlab-error"


class PermissionDenied(GitLabError):
    slug = "gitlab-permission-denied"


class NotFound(GitLabError):
    slug = "gitlab-not-found"


class GitLabClient(RestClient):
    """GitLab's REST API v4 for one project (its numeric id or its path, ``group/project``)."""

    service = "GitLab"
    error = GitLabError

    def __init__(self, api_url: str, token: str, project: str, *, auth: str = "private-token", retrying: Retrying | None = None) -> None:
        if urlsplit(api_url or "").scheme not in ("http", "https") or not urlsplit(api_url).netloc:
            raise InputError(f"must be the API's http(s) URL (such as https://gitlab.com/api/v4), got {api_url!r}", key="CI_API_V4_URL")
        if auth not in AUTH_SCHEMES:
            raise InputError(f"must be one of {', '.join(AUTH_SCHEMES)}, got {auth!r}", key="--auth")
        super().__init__(api_url, token, retrying or Retrying(), {"Accept": "application/json"},
                         TokenAuth(token) if auth == "bearer" else TokenAuth(token, "PRIVATE-TOKEN", ""))
        self.project = str(project)
        self._project_path = f"/projects/{quote(self.project, safe='')}"
        self._user: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"GitLabClient({self.api_url!r}, project={self.project!r})"

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

    def _rate_limit_wait(self, resp: requests.Response) -> float | None:
        """Seconds GitLab asks to wait after a 429 (Retry-After, else RateLimit-Reset, a Unix time), else a minute;
        None for any other answer."""
        if resp.status_code != 429:
            return None
        wait = retry_after_s(resp.headers.get("Retry-After"))
        if wait is not None:
            return wait
        try:
            return max(float(resp.headers.get("RateLimit-Reset", "")) - time.time(), 0.0) + 1.0
        except ValueError:
            return 60.0

    def _error(self, resp: requests.Response, what: str, rate_limited: bool = False) -> GitLabError:
        """GitLab's answer of status 400 or more, as the error it means."""
        hint = "GitLab's rate limit was hit: re-run the job later" if rate_limited else None
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


def _message(resp: requests.Response) -> str:
    """GitLab's ``message`` (a string, or the fields' errors as an object) or ``error`` with its ``error_description``
    (what GitLab answers for a token without the scope: ``insufficient_scope``, or an expired one), else the start of
    the body."""
    try:
        data = resp.json()
    except ValueError:
        return " ".join(resp.text.split())[:200] or resp.reason or ""
    if not isinstance(data, dict):
        return ""
    msg = data.get("message", data.get("error", ""))
    if isinstance(msg, dict):
        msg = "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in msg.items())
    described = data.get("error_description")
    if "message" not in data and isinstance(described, str) and described.strip():
        needs = f" (scope needed: {data['scope']})" if isinstance(data.get("scope"), str) else ""
        msg = f"{msg}: {described}{needs}"
    return " ".join(str(msg).split())[:500]
