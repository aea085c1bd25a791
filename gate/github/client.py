"""GitHub's REST API for one repository: PR comments, repository files, branches, pull requests.

The API base URL comes from the caller (``GITHUB_API_URL``, so GitHub Enterprise Server works).
Requests are retried with backoff on 5xx answers and connection errors, and after the wait
GitHub asks for on a rate limit (429, or 403 with ``Retry-After`` / ``x-ratelimit-remaining: 0``
/ "secondary rate limit"). The token is sent as ``Authorization: Bearer`` and never appears in
a message or a log line. Errors::

    GitHubError             (a RunError, exit 3) ``status``: the HTTP status, None when GitHub did not answer
    ├── PermissionDenied    403 that is not a rate limit: the token may not do this (a fork's read-only token)
    ├── NotFound            404
    └── Conflict            409, or 422 "sha wasn't supplied": the file changed since it was read
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from gate.core.errors import ApiError, InputError
from gate.io.http import retry_after_s
from gate.io.rest import RestClient, Retrying, TokenAuth, upsert_marked

DEFAULT_API_URL = "https://api.github.com"
JOB_TOKEN_AUTHOR = "github-actions[bot]"  # who the job token (GITHUB_TOKEN) acts as
API_VERSION = "2022-11-28"
WRITE_HINT = ("give the job `permissions: pull-requests: write` (for the comment) and `contents: write` (for the history); "
              "a pull request from a fork only gets a read-only token: use the fork-safe workflow_run pattern of docs/action.md (fork pull requests)")


class GitHubError(ApiError):
    slug = "github-error"


class PermissionDenied(GitHubError):
    slug = "github-permission-denied"


class NotFound(GitHubError):
    slug = "github-not-found"


class Conflict(GitHubError):
    slug = "github-conflict"


class GitHubClient(RestClient):
    """GitHub's REST API for one repository."""

    service = "GitHub"
    error = GitHubError

    def __init__(self, api_url: str | None, token: str, repository: str, *, retrying: Retrying | None = None,
                 author: str | None = None) -> None:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository or ""):
            raise InputError(f"{repository!r} is not an owner/name repository", key="GITHUB_REPOSITORY")
        super().__init__(api_url or DEFAULT_API_URL, token, retrying or Retrying(),
                         {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION},
                         TokenAuth(token) if token else None)
        self.repository = repository
        self.author = author
        self._repo_path = f"/repos/{repository}"

    def __repr__(self) -> str:
        return f"GitHubClient({self.api_url!r}, repository={self.repository!r})"

    # -- who the token acts as ------------------------------------------------------------
    def whoami(self) -> str | None:
        """The login of the user the token belongs to; None for an installation token (the job token, a GitHub
        App's), for which GitHub answers GET /user with 403 or 401."""
        try:
            data = self._json(self._request("GET", "/user"))
        except (PermissionDenied, GitHubError) as exc:
            if isinstance(exc, PermissionDenied) or exc.status == 401:
                return None
            raise
        login = data.get("login") if isinstance(data, dict) else None
        return login if isinstance(login, str) and login else None

    @property
    def comment_author(self) -> str:
        """Whose comments rag-gate may edit: ``author`` when set (the action's comment-author input), else the token's
        user, else ``github-actions[bot]`` (the job token). A comment by anyone else is never edited, whatever it says."""
        if self.author is None:
            self.author = self.whoami() or JOB_TOKEN_AUTHOR
        return self.author

    # -- comments ---------------------------------------------------------------------------
    def find_comment(self, issue_number: int, marker: str) -> dict[str, Any] | None:
        """The newest comment on the issue or PR whose body contains ``marker`` and whose author is ``comment_author``,
        looking through every page. A human's comment that quotes the marker is not ours: it is left alone."""
        marked = [c for c in self._pages(f"{self._repo_path}/issues/{issue_number}/comments") if marker in (c.get("body") or "")]
        if not marked:
            return None  # nothing to tell apart: who the token is need not be asked
        author = self.comment_author
        ours = [c for c in marked if (c.get("user") or {}).get("login") == author]
        return max(ours, key=lambda c: c["id"]) if ours else None

    def upsert_comment(self, issue_number: int, body: str, marker: str) -> tuple[int, str]:
        """Create the comment, or edit the one carrying ``marker`` in place: (id, "created" | "updated" | "unchanged").

        Creating is not retried blindly (a 502 may hide a comment GitHub did create): the comments are searched
        again first, so a PR never gets two."""
        if marker not in body:
            raise ValueError("the comment body must contain the marker, or the next run cannot find the comment")
        return upsert_marked(
            self, lambda: self.find_comment(issue_number, marker),
            lambda c: self._request("PATCH", f"{self._repo_path}/issues/comments/{c['id']}", body={"body": body}),
            lambda: self._request("POST", f"{self._repo_path}/issues/{issue_number}/comments", body={"body": body}, retry=False),
            body, f"comment on #{issue_number}")

    def delete_comment(self, comment_id: int) -> bool:
        """Delete a comment; False if it was already gone."""
        try:
            self._request("DELETE", f"{self._repo_path}/issues/comments/{comment_id}")
        except NotFound:
            return False
        return True

    # -- issues ------------------------------------------------------------------------------
    def open_issues(self) -> Iterator[dict[str, Any]]:
        """Every open issue of the repository (pull requests, which the list also holds, left out), newest first."""
        return (i for i in self._pages(f"{self._repo_path}/issues", {"state": "open", "per_page": 100}) if "pull_request" not in i)

    def create_issue(self, title: str, body: str, labels: list[str]) -> dict[str, Any]:
        """Open an issue (not retried: a 502 may hide an issue GitHub did open; the caller looks again)."""
        resp = self._request("POST", f"{self._repo_path}/issues", body={"title": title, "body": body, "labels": labels}, retry=False)
        return dict(self._json(resp))

    def edit_issue(self, number: int, **fields: Any) -> dict[str, Any]:
        return dict(self._json(self._request("PATCH", f"{self._repo_path}/issues/{int(number)}", body=fields)))

    def add_comment(self, number: int, body: str) -> int:
        """A new comment on issue or PR ``number`` (not retried, as create_issue); its id."""
        resp = self._request("POST", f"{self._repo_path}/issues/{int(number)}/comments", body={"body": body}, retry=False)
        return int(self._json(resp)["id"])

    # -- repository contents ----------------------------------------------------------------
    def read_file(self, path: str, branch: str) -> tuple[str, str] | None:
        """(text, blob sha) of ``path`` on ``branch``; None if the file or the branch does not exist."""
        url = f"{self._repo_path}/contents/{quote(path.strip('/'))}"
        try:
            resp = self._request("GET", url, params={"ref": branch})
        except NotFound:
            return None
        data = self._json(resp)
        if not isinstance(data, dict) or data.get("type") != "file":
            raise GitHubError(resp.status_code, f"{path} on branch {branch} of {self.repository} is not a file")
        if data.get("encoding") == "base64" and (data.get("content") or not data.get("size")):
            raw = base64.b64decode(data.get("content") or "")
        else:  # over 1 MB GitHub leaves "content" empty (encoding "none"): ask for the raw bytes
            raw = self._request("GET", url, params={"ref": branch}, accept="application/vnd.github.raw+json").content
        try:
            return raw.decode("utf-8"), str(data["sha"])
        except UnicodeDecodeError:
            raise GitHubError(None, f"{path} on branch {branch} of {self.repository} is not UTF-8 text") from None

    def write_file(self, path: str, branch: str, text: str, sha: str | None, message: str) -> str:
        """Create ``path`` (sha None) or replace the version ``sha``; the new blob sha. Conflict if the file changed."""
        payload = {"message": message, "content": base64.b64encode(text.encode("utf-8")).decode("ascii"), "branch": branch}
        if sha:
            payload["sha"] = sha
        resp = self._request("PUT", f"{self._repo_path}/contents/{quote(path.strip('/'))}", body=payload)
        return str(self._json(resp)["content"]["sha"])

    def ensure_branch(self, branch: str) -> bool:
        """Create ``branch`` from the default branch's head if it does not exist; True if this call created it."""
        try:
            self._request("GET", f"{self._repo_path}/git/ref/heads/{quote(branch)}")
            return False
        except NotFound:
            pass
        default = self._json(self._request("GET", self._repo_path))["default_branch"]
        head = self._json(self._request("GET", f"{self._repo_path}/git/ref/heads/{quote(default)}"))["object"]["sha"]
        try:
            self._request("POST", f"{self._repo_path}/git/refs", body={"ref": f"refs/heads/{branch}", "sha": head})
        except GitHubError as exc:
            if exc.status == 422 and "already exists" in exc.message:  # another run created it meanwhile
                return False
            raise
        return True

    def recent_commits(self, ref: str, limit: int = 100) -> list[str]:
        """Shas of ``ref`` and its ancestors, newest first (at most ``limit``): the ``ancestors`` of baseline_entry."""
        shas: list[str] = []
        for commit in self._pages(f"{self._repo_path}/commits", {"sha": ref, "per_page": min(limit, 100)}):
            shas.append(str(commit["sha"]))
            if len(shas) >= limit:
                break
        return shas

    def pull_head(self, number: int) -> tuple[str, str | None] | None:
        """(head commit, head repository owner/name) of pull request ``number``; None if there is no such pull request.
        The repository is None when GitHub no longer knows it (a deleted fork)."""
        try:
            data = self._json(self._request("GET", f"{self._repo_path}/pulls/{int(number)}"))
        except NotFound:
            return None
        head = ((data.get("head") or {}) if isinstance(data, dict) else {})
        sha = head.get("sha")
        if not isinstance(sha, str) or not sha:
            raise GitHubError(None, f"GET {self._repo_path}/pulls/{int(number)}: the answer has no head.sha")
        repo = (head.get("repo") or {}).get("full_name")
        return sha, repo if isinstance(repo, str) else None

    def pull_head_sha(self, number: int) -> str | None:
        """The head commit of pull request ``number``; None if there is no such pull request."""
        head = self.pull_head(number)
        return head[0] if head else None

    # -- HTTP -------------------------------------------------------------------------------
    def _pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list, following the Link header's rel="next"."""
        url: str | None = path
        params = params or {"per_page": 100}
        origin = urlsplit(self.api_url)[:2]
        while url:
            resp = self._request("GET", url, params=params)
            items = self._json(resp)
            if not isinstance(items, list):
                raise GitHubError(resp.status_code, f"GET {urlsplit(resp.url).path}: expected a list, got {type(items).__name__}")
            yield from items
            url, params = resp.links.get("next", {}).get("url"), None
            if url and urlsplit(url)[:2] != origin:
                raise GitHubError(None, f"GitHub's next-page link leaves {self.api_url}: not followed (the token would go with it)")

    def _rate_limit_wait(self, resp: requests.Response) -> float | None:
        """Seconds GitHub asks to wait, if the answer is a rate limit; None otherwise."""
        retry_after, remaining = resp.headers.get("Retry-After"), resp.headers.get("x-ratelimit-remaining")
        if resp.status_code not in (403, 429):
            return None
        if retry_after:
            wait = retry_after_s(retry_after)
            return 60.0 if wait is None else wait
        if remaining == "0":
            try:
                return max(float(resp.headers.get("x-ratelimit-reset", "")) - time.time(), 0.0) + 1.0
            except ValueError:
                return 60.0
        if resp.status_code == 429 or "rate limit" in _message(resp).lower():
            return 60.0  # GitHub: without a Retry-After, wait at least a minute
        return None

    def _error(self, resp: requests.Response, what: str, rate_limited: bool = False) -> GitHubError:
        """GitHub's answer of status 400 or more, as the error it means."""
        code, msg = resp.status_code, _message(resp)
        said = self._redact(f"{what} answered {code} {msg}".rstrip())
        if rate_limited:
            return GitHubError(code, f"GitHub's rate limit was hit: {said}", hint="re-run the job later")
        if code == 401:
            return GitHubError(code, f"the GitHub token was refused: {said}", hint="check the github-token input")
        if code == 403:
            verb = "read" if what.startswith("GET ") else "write to"
            return PermissionDenied(code, f"the GitHub token cannot {verb} {self.repository}: {said}", hint=WRITE_HINT)
        if code == 404:
            return NotFound(code, said)
        if code == 409 or (code == 422 and '"sha"' in msg):
            return Conflict(code, f"the file changed since it was read: {said}")
        return GitHubError(code, said)


def _message(resp: requests.Response) -> str:
    """GitHub's error message (with the details of a 422), else the start of the body."""
    try:
        data = resp.json()
    except ValueError:
        text = re.sub(r"<[^>]+>", " ", resp.text)
        return " ".join(text.split()) or resp.reason or ""
    if not isinstance(data, dict):
        return ""
    details = [e.get("message") or e.get("code", "") for e in data.get("errors", []) if isinstance(e, dict)]
    msg = " ".join(str(data.get("message", "")).split())
    return f"{msg} ({'; '.join(map(str, details))})" if details else msg
