"""A fake GitHub REST API on 127.0.0.1 for tests and benchmarks (stdlib only, no mocks).

It speaks the parts of GitHub's REST protocol (API version 2022-11-28) rag-gate uses, with
GitHub's response shapes, status codes and error bodies:

    GET    /repos/{o}/{r}                                 default_branch, ...
    GET    /repos/{o}/{r}/issues/{n}/comments             ?per_page (30, max 100) &page, Link header
    POST   /repos/{o}/{r}/issues/{n}/comments             201 comment; 422 body missing or too long
    GET    /repos/{o}/{r}/issues/comments/{id}            200 comment | 404
    PATCH  /repos/{o}/{r}/issues/comments/{id}            200 comment | 404
    DELETE /repos/{o}/{r}/issues/comments/{id}            204 | 404
    GET    /repos/{o}/{r}/contents/{path}?ref=            file (base64, 60-char lines) | dir listing | 404
    PUT    /repos/{o}/{r}/contents/{path}                 201 create | 200 update | 409 stale sha | 422 sha missing
    GET    /repos/{o}/{r}/git/ref/heads/{branch}          200 | 404
    POST   /repos/{o}/{r}/git/refs                        201 | 422 "Reference already exists"
    GET    /repos/{o}/{r}/commits?sha=&per_page=&page=    first-parent history, newest first
    GET    /repos/{o}/{r}/commits/{sha}                   minimal commit | 422
    GET    /repos/{o}/{r}/pulls/{n}                       pull request (number, state, head/base sha and ref) | 404
    GET    /repos/{o}/{r}/issues?state=&labels=&creator=  issues (and pull requests, with a "pull_request" key), newest first
    POST   /repos/{o}/{r}/issues                          201 issue (title, body, labels: unknown labels are created)
    GET    /repos/{o}/{r}/issues/{n}                      issue | 404 | 410 deleted
    PATCH  /repos/{o}/{r}/issues/{n}                      200 issue (title, body, state, state_reason, labels)

    with GitHubServer() as gh:        # gh.api_url, gh.requests, gh.count(status=409), ...
        client = GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo)

Git objects are real enough: blob shas are git's (sha1 of ``blob <len>\\0<data>``), every
contents write is a commit whose parent is the branch head, and branches are refs to commits.

Auth (``Authorization: Bearer <t>`` or ``token <t>``): ``WRITE_TOKEN`` may do anything,
``READ_TOKEN`` gets 403 "Resource not accessible by integration" on every write (a fork's
pull_request token), a missing header gets 401 "Requires authentication", any other token
401 "Bad credentials". ``tokens=`` maps more tokens to "write" / "read". ``PAT_TOKEN`` is a personal
access token of the user ``PAT_USER`` (write access): ``GET /user`` answers that user, and the comments it
creates are that user's. For the installation tokens (``ghs_...``, the job token) ``GET /user`` answers 403
"Resource not accessible by integration", as GitHub does, and their comments are ``github-actions[bot]``'s.

Faults: ``inject(action, times=, method=, path=)`` answers the next ``times`` matching requests
with ``action`` instead (path is a regex searched in the path): ``status(code)`` (e.g. 502;
``after=True`` does the work first and then answers with the error, like a gateway timing
out on a request GitHub did carry out; ``echo_auth=True`` puts the Authorization header in the
error body), ``secondary_rate_limit(retry_after)``, ``primary_rate_limit(reset_in)``, ``drop()``
(close the connection without a response). ``force_conflicts(n)`` makes the next n contents
PUTs answer 409 whatever their sha (a conflict storm). ``hold_reads(n)`` makes the next n
contents GETs wait for each other (a barrier) so that concurrent writers all read the same
sha. ``latency`` (seconds) is added to every request.

Every request is recorded (``Received``: method, path, query, headers without Authorization,
whether Authorization was present and its scheme, body, the status answered) under a lock.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.support.standin import StandIn, StandInHandler

__all__ = [
    "PAT_TOKEN", "PAT_USER", "READ_TOKEN", "WRITE_TOKEN", "Action", "Fault", "GitHubServer", "Received", "drop", "primary_rate_limit",
    "secondary_rate_limit", "status",
]

# Shaped like GitHub's tokens (so redaction is tested on realistic values); valid only here.
WRITE_TOKEN = "ghs_FakeWriteToken0123456789abcdefABCDEF"
READ_TOKEN = "ghs_FakeReadOnlyToken0123456789abcdefABCD"
PAT_TOKEN = "ghp_FakePersonalToken0123456789abcdefABC"
PAT_USER = "release-bot-user"

DOCS = "https://docs.github.com/rest"
MAX_COMMENT = 65536
BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}


@dataclass(frozen=True)
class Action:
    """What the server answers instead of the normal response."""

    kind: str  # status | drop
    code: int = 502
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    after: bool = False  # carry the request out first, then answer with the error
    echo_auth: bool = False  # put the request's Authorization header in the error body


def status(code: int, body: Any = None, *, headers: dict[str, str] | None = None, after: bool = False,
           echo_auth: bool = False) -> Action:
    return Action("status", code, body, tuple((headers or {}).items()), after, echo_auth)


def secondary_rate_limit(retry_after: int | None = 1, code: int = 403) -> Action:
    headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4990", "x-ratelimit-resource": "core"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    body = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
                       "If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api", "status": str(code)}
    return status(code, body, headers=headers)


def primary_rate_limit(reset_in: float = 1.0, code: int = 403) -> Action:
    """``x-ratelimit-remaining: 0`` and the reset time ``reset_in`` seconds from now (computed when answered)."""
    body = {"message": "API rate limit exceeded for installation ID 1.", "documentation_url": DOCS, "status": str(code)}
    return Action("primary_rate_limit", code, body, (("reset_in", str(reset_in)),))


def drop() -> Action:
    return Action("drop")


@dataclass
class Fault:
    action: Action
    times: int
    method: str | None = None
    path: str | None = None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.hits < self.times and (self.method is None or self.method == method)
                and (self.path is None or re.search(self.path, path) is not None))


@dataclass
class Received:
    """One request as the server got it. The Authorization value is never kept."""

    method: str
    path: str  # without the API prefix and the query
    query: dict[str, str]
    headers: dict[str, str]  # every header but Authorization
    auth_present: bool
    auth_scheme: str | None  # "Bearer", "token", ...
    body: Any  # parsed JSON, the raw text if not JSON, None if empty
    status: int = 0  # what the server answered (0: no answer, connection dropped)
    fault: str = ""  # the injected action, if any


@dataclass
class Commit:
    sha: str
    tree: dict[str, str]  # path -> blob sha
    parents: list[str]
    message: str
    date: str


@dataclass
class Repo:
    full_name: str
    id: int
    default_branch: str = "main"
    refs: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    commits: dict[str, Commit] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> comment (with "issue")
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)  # number -> {"head": (sha, ref, fork), "base": (sha, ref)}
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)  # number -> issue (pull requests are not in it)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> label


class _Reply(Exception):
    def __init__(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(code)
        self.code, self.body, self.headers = code, body, headers or {}


def _error(code: int, message: str, **extra: Any) -> _Reply:
    return _Reply(code, {"message": message, "documentation_url": DOCS, "status": str(code), **extra})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def blob_sha(data: bytes) -> str:
    """Git's object id of a blob."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _b64_lines(data: bytes) -> str:
    """Base64 the way the contents API returns it: lines of 60 characters, each ending in a newline."""
    b64 = base64.b64encode(data).decode("ascii")
    return "".join(b64[i : i + 60] + "\n" for i in range(0, len(b64), 60))


class GitHubServer(StandIn):
    """A fake GitHub REST API on 127.0.0.1:<free port>, in a background thread. Use as a context manager."""

    def __init__(
        self,
        repos: Iterable[str] = ("octo-org/rag-app",),
        *,
        tokens: dict[str, str] | None = None,
        prefix: str = "",
        latency: float = 0.0,
        large_file_limit: int = 1024 * 1024,
    ) -> None:
        super().__init__()
        self.tokens = {WRITE_TOKEN: "write", READ_TOKEN: "read", PAT_TOKEN: "write", **(tokens or {})}
        self.users = {PAT_TOKEN: PAT_USER}  # tokens of a user (the others are installation tokens: the bot)
        self.prefix = prefix.rstrip("/")  # "/api/v3" for a GitHub Enterprise Server layout
        self.latency = latency
        self.large_file_limit = large_file_limit  # beyond it GET contents gives encoding "none", like GitHub over 1 MB
        self._ids = itertools.count(1_000_001)
        self._requests: list[Received] = []
        self._faults: list[Fault] = []
        self._conflict_storm = 0
        self._held = 0
        self._barrier: threading.Barrier | None = None
        self._barrier_timeout = 20.0
        self._hold_path = re.compile(r"/contents/")
        self.repos: dict[str, Repo] = {}
        for name in repos:
            self.add_repo(name)

    def on_stop(self) -> None:
        if self._barrier is not None:  # readers held by hold_reads() give up waiting
            self._barrier.abort()

    @property
    def api_url(self) -> str:
        return f"{self.base_url}{self.prefix}"

    @property
    def repo(self) -> str:
        """The first repository's owner/name."""
        return next(iter(self.repos))

    # -- state, directly (set-up and assertions) ---------------------------------------------
    def add_repo(self, full_name: str, default_branch: str = "main") -> Repo:
        with self._lock:
            repo = Repo(full_name, id=len(self.repos) + 1, default_branch=default_branch)
            self.repos[full_name] = repo
            readme = f"# {full_name}\n".encode()
            repo.blobs[blob_sha(readme)] = readme
            self._commit(repo, default_branch, {"README.md": blob_sha(readme)}, "Initial commit", parents=[])
            return repo

    def add_commit(self, branch: str | None = None, message: str = "change", repo: str | None = None) -> str:
        """A new commit (same tree) on ``branch``; its sha."""
        with self._lock:
            r = self._repo(repo)
            branch = branch or r.default_branch
            head = r.commits[r.refs[branch]]
            return self._commit(r, branch, dict(head.tree), message, parents=[head.sha])

    def branch_sha(self, branch: str, repo: str | None = None) -> str | None:
        with self._lock:
            return self._repo(repo).refs.get(branch)

    def file(self, path: str, branch: str, repo: str | None = None) -> str | None:
        """The text of ``path`` on ``branch``, or None."""
        with self._lock:
            r = self._repo(repo)
            if branch not in r.refs or path not in r.commits[r.refs[branch]].tree:
                return None
            return r.blobs[r.commits[r.refs[branch]].tree[path]].decode("utf-8")

    def put_file(self, path: str, branch: str, text: str, repo: str | None = None) -> str:
        """Write ``path`` on ``branch`` (created from the default branch if missing); the blob sha."""
        with self._lock:
            r = self._repo(repo)
            if branch not in r.refs:
                r.refs[branch] = r.refs[r.default_branch]
            head = r.commits[r.refs[branch]]
            data = text.encode("utf-8")
            r.blobs[blob_sha(data)] = data
            self._commit(r, branch, {**head.tree, path: blob_sha(data)}, f"Write {path}", parents=[head.sha])
            return blob_sha(data)

    def add_comment(self, issue: int, body: str, login: str = "octocat", repo: str | None = None) -> dict[str, Any]:
        with self._lock:
            r = self._repo(repo)
            who = BOT if login == BOT["login"] else {"login": login, "id": 583231, "type": "User"}
            return self._new_comment(r, issue, body, who, "https://github.com")

    def add_pull(self, number: int, head_sha: str, base_sha: str, *, head_ref: str = "feature", base_ref: str | None = None,
                 fork: bool = False, repo: str | None = None) -> None:
        """Register pull request ``number`` (or move its head: a new push); ``fork``: its head is in another repository."""
        with self._lock:
            r = self._repo(repo)
            r.pulls[number] = {"head": (head_sha, head_ref, fork), "base": (base_sha, base_ref or r.default_branch)}

    def add_issue(self, title: str, body: str, login: str = "octocat", *, labels: Iterable[str] = (), state: str = "open",
                  repo: str | None = None) -> dict[str, Any]:
        """An issue opened by ``login`` (a human by default; ``github-actions[bot]`` for the job token's own)."""
        with self._lock:
            r = self._repo(repo)
            who = BOT if login == BOT["login"] else {"login": login, "id": 583231, "type": "User"}
            issue = _new_issue(r, title, body, who, list(labels), f"{self.base_url}{self.prefix}")
            if state == "closed":
                issue["state"], issue["closed_at"], issue["state_reason"] = "closed", _now(), "completed"
            return dict(issue)

    def issues(self, repo: str | None = None) -> list[dict[str, Any]]:
        """Every issue, oldest first, with its comments under "comments_list"."""
        with self._lock:
            r = self._repo(repo)
            return [{**i, "labels": [dict(x) for x in i["labels"]],
                     "comments_list": [self._public(c) for c in r.comments.values() if c["issue"] == n]}
                    for n, i in sorted(r.issues.items())]

    def comments(self, issue: int, repo: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [self._public(c) for c in self._repo(repo).comments.values() if c["issue"] == issue]

    # -- faults -----------------------------------------------------------------------------
    def inject(self, action: Action, times: int = 1, *, method: str | None = None, path: str | None = None) -> Fault:
        fault = Fault(action, times, method, path)
        with self._lock:
            self._faults.append(fault)
        return fault

    def force_conflicts(self, n: int) -> None:
        """The next ``n`` contents PUTs answer 409, whatever sha they carry."""
        with self._lock:
            self._conflict_storm = n

    def hold_reads(self, n: int, timeout: float = 20.0, *, path: str = r"/contents/", rounds: int = 1) -> None:
        """The next ``n`` GETs of ``path`` (a regex searched in the path after /repos/{o}/{r}; default the contents) are
        answered only once all ``n`` have been read (or ``timeout`` passed): every one of them sees the same state, as
        concurrent writers that all read before anyone writes (``path=r"/issues$"``: runs that all list the issues
        before any opens one). ``rounds``: so many times over, ``n`` readers each time."""
        with self._lock:
            self._held = n * rounds
            self._hold_path = re.compile(path)
            self._barrier = threading.Barrier(n)
            self._barrier_timeout = timeout

    # -- what was received ------------------------------------------------------------------
    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._requests)

    def count(self, *, method: str | None = None, path: str | None = None, status: int | None = None) -> int:
        """Requests received with this method, a path matching the regex ``path``, answered with ``status``."""
        return sum(1 for r in self.requests if (method is None or r.method == method) and (status is None or r.status == status)
                   and (path is None or re.search(path, r.path) is not None))

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- the protocol -----------------------------------------------------------------------
    def handle(self, h: StandInHandler) -> None:
        raw = h.body()
        url = urlsplit(h.path)
        path = url.path
        if self.prefix and path.startswith(self.prefix + "/"):
            path = path[len(self.prefix) :]
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        auth = h.headers.get("Authorization")
        scheme, _, token = (auth or "").strip().partition(" ")
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        rec = Received(h.command, path, query, {k: v for k, v in h.headers.items() if k.lower() != "authorization"},
                       auth is not None, scheme or None, body)
        with self._lock:
            self._requests.append(rec)
            fault = next((f for f in self._faults if f.matches(h.command, path)), None)
            if fault is not None:
                fault.hits += 1
                rec.fault = fault.action.kind
        if self.latency:
            self.pause(self.latency)
        base = f"http://{h.headers.get('Host', '127.0.0.1')}{self.prefix}"
        if fault is not None and fault.action.kind == "drop":
            h.drop()
            return
        held = h.command == "GET" and (m := re.match(r"^/repos/[^/]+/[^/]+(/.*)$", path)) and self._hold_path.search(m[1])
        barrier = self._take_hold() if held else None
        if fault is not None and not fault.action.after:
            code, payload, headers = self._fault_reply(fault.action, auth)
        else:
            try:
                code, out, headers = self._route(h.command, path, query, body, token.strip(), scheme.lower(), auth, base, h)
            except _Reply as reply:
                code, out, headers = reply.code, reply.body, reply.headers
            if headers.pop("_raw", None):
                payload = str(out).encode("utf-8")
            else:
                payload = b"" if out is None else json.dumps(out, ensure_ascii=False).encode("utf-8")
            if fault is not None:
                code, payload, headers = self._fault_reply(fault.action, auth)
        if barrier is not None:  # answered from the state every held reader saw, only once all of them have read it
            try:
                barrier.wait(self._barrier_timeout)
            except threading.BrokenBarrierError:
                pass
        headers.setdefault("X-GitHub-Api-Version-Selected", "2022-11-28")
        headers.setdefault("X-GitHub-Request-Id", f"FAKE:{id(rec):X}")
        rec.status = code
        h.reply(code, payload, headers, None if code == 204 else headers.pop("Content-Type", "application/json; charset=utf-8"))

    def _fault_reply(self, action: Action, auth: str | None) -> tuple[int, bytes, dict[str, str]]:
        headers = {k: v for k, v in action.headers if k != "reset_in"}
        body = action.body if action.body is not None else {"message": "Server Error" if action.code >= 500 else "Error",
                                                            "documentation_url": DOCS, "status": str(action.code)}
        if action.kind == "primary_rate_limit":
            reset_in = float(dict(action.headers)["reset_in"])
            headers.update({"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000",
                            "x-ratelimit-reset": str(int(time.time() + reset_in + 0.999)), "x-ratelimit-resource": "core"})
        if action.echo_auth:
            body = {**body, "message": f"{body.get('message', '')} (received Authorization: {auth})"}
        if action.code == 502 and action.body is None:
            return 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", {"Content-Type": "text/html"}
        return action.code, json.dumps(body).encode("utf-8"), headers

    def _repo(self, name: str | None) -> Repo:
        return self.repos[name or self.repo]

    def _route(self, method: str, path: str, query: dict[str, str], body: Any, token: str, scheme: str,
               auth: str | None, base: str, h: StandInHandler) -> tuple[int, Any, dict[str, str]]:
        if auth is None:
            raise _error(401, "Requires authentication")
        if scheme not in ("bearer", "token") or token not in self.tokens:
            raise _error(401, "Bad credentials")
        if path == "/user" and method == "GET":
            if token not in self.users:
                raise _error(403, "Resource not accessible by integration")
            return 200, {"login": self.users[token], "id": 583232, "type": "User"}, {}
        m = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        if not m or f"{m[1]}/{m[2]}" not in self.repos:
            raise _error(404, "Not Found")
        full, rest = f"{m[1]}/{m[2]}", m[3] or ""
        if method != "GET" and self.tokens[token] != "write":
            raise _error(403, "Resource not accessible by integration")
        with self._lock:
            repo = self.repos[full]
            ctx = _Ctx(self, repo, base, query, body, token)
            for verb, pattern, fn in _ROUTES:
                mm = re.fullmatch(pattern, rest)
                if mm and verb == method:
                    return fn(ctx, *[unquote(g) for g in mm.groups()], accept=h.headers.get("Accept", ""))
        raise _error(404, "Not Found")

    def _take_hold(self) -> threading.Barrier | None:
        with self._lock:
            if self._held <= 0 or self._barrier is None:
                return None
            self._held -= 1
            return self._barrier

    # -- objects ------------------------------------------------------------------------------
    def _commit(self, repo: Repo, branch: str, tree: dict[str, str], message: str, parents: list[str]) -> str:
        sha = hashlib.sha1(f"{parents}{sorted(tree.items())}{message}{next(self._ids)}".encode()).hexdigest()
        repo.commits[sha] = Commit(sha, tree, parents, message, _now())
        repo.refs[branch] = sha
        return sha

    def _new_comment(self, repo: Repo, issue: int, body: str, user: dict[str, Any], base: str) -> dict[str, Any]:
        cid, now = next(self._ids), _now()
        comment = {
            "id": cid, "node_id": "IC_kwDO" + base64.b64encode(str(cid).encode()).decode().rstrip("="),
            "url": f"{base}/repos/{repo.full_name}/issues/comments/{cid}",
            "html_url": f"https://github.com/{repo.full_name}/pull/{issue}#issuecomment-{cid}",
            "issue_url": f"{base}/repos/{repo.full_name}/issues/{issue}",
            "body": body, "user": dict(user), "created_at": now, "updated_at": now,
            "author_association": "NONE" if user["type"] == "Bot" else "CONTRIBUTOR", "issue": issue,
        }
        repo.comments[cid] = comment
        return self._public(comment)

    @staticmethod
    def _public(comment: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in comment.items() if k != "issue"}


@dataclass
class _Ctx:
    srv: GitHubServer
    repo: Repo
    base: str
    query: dict[str, str]
    body: Any
    token: str = ""

    def identity(self) -> dict[str, Any]:
        """Who the request's token acts as: its user, or the bot for an installation token."""
        login = self.srv.users.get(self.token)
        return {"login": login, "id": 583232, "type": "User"} if login else BOT

    def repo_url(self) -> str:
        return f"{self.base}/repos/{self.repo.full_name}"

    def field(self, name: str) -> Any:
        if not isinstance(self.body, dict) or name not in self.body:
            raise _error(422, f'Invalid request.\n\n"{name}" wasn\'t supplied.')
        return self.body[name]

    def page(self, items: list[Any], path: str) -> tuple[int, Any, dict[str, str]]:
        """One page of ``items`` and GitHub's Link header (first/prev/next/last as they apply)."""
        try:
            per_page = min(max(int(self.query.get("per_page", "30")), 1), 100)
            page = max(int(self.query.get("page", "1")), 1)
        except ValueError:
            raise _error(422, "Invalid request.") from None
        last = max((len(items) + per_page - 1) // per_page, 1)
        others = {k: v for k, v in self.query.items() if k not in ("per_page", "page")}

        def link(p: int) -> str:
            qs = "&".join(f"{k}={quote(v)}" for k, v in {**others, "per_page": str(per_page), "page": str(p)}.items())
            return f"<{self.base}{path}?{qs}>"

        rels = []
        if page > 1:
            rels += [f'{link(page - 1)}; rel="prev"']
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels += [f'{link(1)}; rel="first"']
        return 200, items[(page - 1) * per_page : page * per_page], ({"Link": ", ".join(rels)} if rels else {})

    def head(self, ref: str | None) -> Commit:
        ref = ref or self.repo.default_branch
        sha = self.repo.refs.get(ref) or (ref if ref in self.repo.commits else None)
        if sha is None:
            raise _error(404, f"No commit found for the ref {ref}")
        return self.repo.commits[sha]

    def content_obj(self, path: str, sha: str, ref: str) -> dict[str, Any]:
        url = f"{self.repo_url()}/contents/{quote(path)}?ref={quote(ref)}"
        git = f"{self.repo_url()}/git/blobs/{sha}"
        html = f"https://github.com/{self.repo.full_name}/blob/{ref}/{path}"
        return {"name": path.rsplit("/", 1)[-1], "path": path, "sha": sha, "size": len(self.repo.blobs[sha]), "url": url,
                "html_url": html, "git_url": git, "download_url": f"https://raw.githubusercontent.com/{self.repo.full_name}/{ref}/{path}",
                "type": "file", "_links": {"self": url, "git": git, "html": html}}

    def commit_obj(self, c: Commit) -> dict[str, Any]:
        who = {"name": "github-actions[bot]", "email": "41898282+github-actions[bot]@users.noreply.github.com", "date": c.date}
        return {"sha": c.sha, "node_id": "C_" + c.sha[:20], "url": f"{self.repo_url()}/git/commits/{c.sha}",
                "html_url": f"https://github.com/{self.repo.full_name}/commit/{c.sha}", "author": who, "committer": who,
                "message": c.message, "tree": {"sha": hashlib.sha1(repr(sorted(c.tree.items())).encode()).hexdigest()},
                "parents": [{"sha": p, "url": f"{self.repo_url()}/git/commits/{p}"} for p in c.parents]}

    def ref_obj(self, branch: str) -> dict[str, Any]:
        sha = self.repo.refs[branch]
        return {"ref": f"refs/heads/{branch}", "node_id": "REF_" + sha[:12], "url": f"{self.repo_url()}/git/refs/heads/{quote(branch)}",
                "object": {"sha": sha, "type": "commit", "url": f"{self.repo_url()}/git/commits/{sha}"}}


Reply = tuple[int, Any, dict[str, str]]


def _get_repo(c: _Ctx, *, accept: str) -> Reply:
    r = c.repo
    return 200, {"id": r.id, "node_id": f"R_{r.id}", "name": r.full_name.split("/")[1], "full_name": r.full_name, "private": True,
                 "owner": {"login": r.full_name.split("/")[0], "type": "Organization"}, "default_branch": r.default_branch,
                 "url": c.repo_url(), "html_url": f"https://github.com/{r.full_name}",
                 "permissions": {"admin": False, "push": True, "pull": True}}, {}


def _list_comments(c: _Ctx, issue: str, *, accept: str) -> Reply:
    items = sorted((cm for cm in c.repo.comments.values() if cm["issue"] == int(issue)), key=lambda cm: cm["id"])
    return c.page([c.srv._public(cm) for cm in items], f"/repos/{c.repo.full_name}/issues/{issue}/comments")


def _check_body(c: _Ctx) -> str:
    body = c.field("body")
    if not isinstance(body, str):
        raise _error(422, "Invalid request.\n\nFor 'properties/body', nil is not a string.")
    if len(body) > MAX_COMMENT:
        raise _error(422, "Validation Failed", errors=[{"resource": "IssueComment", "code": "custom", "field": "body",
                                                        "message": f"body is too long (maximum is {MAX_COMMENT} characters)"}])
    return body


def _create_comment(c: _Ctx, issue: str, *, accept: str) -> Reply:
    comment = c.srv._new_comment(c.repo, int(issue), _check_body(c), c.identity(), c.base)
    return 201, comment, {"Location": comment["url"]}


def _comment(c: _Ctx, cid: str) -> dict[str, Any]:
    comment = c.repo.comments.get(int(cid))
    if comment is None:
        raise _error(404, "Not Found")
    return comment


def _get_comment(c: _Ctx, cid: str, *, accept: str) -> Reply:
    return 200, c.srv._public(_comment(c, cid)), {}


def _update_comment(c: _Ctx, cid: str, *, accept: str) -> Reply:
    comment = _comment(c, cid)
    comment["body"], comment["updated_at"] = _check_body(c), _now()
    return 200, c.srv._public(comment), {}


def _delete_comment(c: _Ctx, cid: str, *, accept: str) -> Reply:
    del c.repo.comments[_comment(c, cid)["id"]]
    return 204, None, {}


def _get_contents(c: _Ctx, path: str, *, accept: str) -> Reply:
    ref = c.query.get("ref") or c.repo.default_branch
    tree = c.head(ref).tree
    path = path.strip("/")
    if path in tree:
        data = c.repo.blobs[tree[path]]
        if "raw" in accept:
            return 200, data.decode("utf-8"), {"Content-Type": "application/vnd.github.raw+json; charset=utf-8", "_raw": "1"}
        obj = c.content_obj(path, tree[path], ref)
        large = len(data) > c.srv.large_file_limit
        return 200, {**obj, "encoding": "none" if large else "base64", "content": "" if large else _b64_lines(data)}, {}
    inside = sorted(p for p in tree if p.startswith(path + "/"))
    if inside:
        names = sorted({p[len(path) + 1 :].split("/")[0] for p in inside})
        return 200, [{"name": n, "path": f"{path}/{n}", "type": "file" if f"{path}/{n}" in tree else "dir"} for n in names], {}
    raise _error(404, "Not Found")


def _put_contents(c: _Ctx, path: str, *, accept: str) -> Reply:
    message, content = c.field("message"), c.field("content")
    try:
        data = base64.b64decode(content, validate=True)
    except (ValueError, TypeError):
        raise _error(422, "content is not valid Base64") from None
    branch = c.body.get("branch") or c.repo.default_branch
    if branch not in c.repo.refs:
        raise _error(404, f"Branch {branch} not found")
    head = c.repo.commits[c.repo.refs[branch]]
    path = path.strip("/")
    sha = c.body.get("sha")
    if c.srv._conflict_storm > 0:
        c.srv._conflict_storm -= 1
        raise _error(409, f"{path} does not match {sha or ''}".rstrip())
    existed = path in head.tree
    if existed and not sha:
        raise _error(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
    if existed and sha != head.tree[path]:
        raise _error(409, f"{path} does not match {sha}")
    c.repo.blobs[blob_sha(data)] = data
    new = c.srv._commit(c.repo, branch, {**head.tree, path: blob_sha(data)}, message, parents=[head.sha])
    return (200 if existed else 201), {"content": c.content_obj(path, blob_sha(data), branch),
                                      "commit": c.commit_obj(c.repo.commits[new])}, {}


def _get_ref(c: _Ctx, branch: str, *, accept: str) -> Reply:
    if branch not in c.repo.refs:
        raise _error(404, "Not Found")
    return 200, c.ref_obj(branch), {}


def _create_ref(c: _Ctx, *, accept: str) -> Reply:
    ref, sha = c.field("ref"), c.field("sha")
    if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
        raise _error(422, f"{ref} is not a valid ref name.")
    if sha not in c.repo.commits:
        raise _error(422, "Object does not exist")
    branch = ref.removeprefix("refs/heads/")
    if branch in c.repo.refs:
        raise _error(422, "Reference already exists")
    c.repo.refs[branch] = sha
    obj = c.ref_obj(branch)
    return 201, obj, {"Location": obj["url"]}


def _list_commits(c: _Ctx, *, accept: str) -> Reply:
    commit: Commit | None = c.head(c.query.get("sha"))
    out = []
    while commit is not None:
        out.append({"sha": commit.sha, "node_id": "C_" + commit.sha[:20], "commit": c.commit_obj(commit),
                    "parents": [{"sha": p} for p in commit.parents], "html_url": f"https://github.com/{c.repo.full_name}/commit/{commit.sha}"})
        commit = c.repo.commits[commit.parents[0]] if commit.parents else None
    return c.page(out, f"/repos/{c.repo.full_name}/commits")


def _get_commit(c: _Ctx, sha: str, *, accept: str) -> Reply:
    found = c.repo.commits.get(sha) or (c.repo.commits[c.repo.refs[sha]] if sha in c.repo.refs else None)
    if found is None:
        raise _error(422, f"No commit found for SHA: {sha}")
    return 200, {"sha": found.sha, "commit": c.commit_obj(found), "parents": [{"sha": p} for p in found.parents]}, {}


def _get_pull(c: _Ctx, number: str, *, accept: str) -> Reply:
    pull = c.repo.pulls.get(int(number))
    if pull is None:
        raise _error(404, "Not Found")
    (head_sha, head_ref, fork), (base_sha, base_ref) = pull["head"], pull["base"]
    owner, name = c.repo.full_name.split("/")
    head_repo = f"contributor/{name}" if fork else c.repo.full_name

    def side(sha: str, ref: str, full: str) -> dict[str, Any]:
        return {"label": f"{full.split('/')[0]}:{ref}", "ref": ref, "sha": sha,
                "repo": {"full_name": full, "name": name, "fork": full != c.repo.full_name, "owner": {"login": full.split("/")[0]}}}

    return 200, {"url": f"{c.repo_url()}/pulls/{number}", "id": 5_000_000 + int(number), "number": int(number), "state": "open",
                 "html_url": f"https://github.com/{c.repo.full_name}/pull/{number}", "title": f"Pull request {number}",
                 "user": {"login": "contributor" if fork else owner, "type": "User"},
                 "head": side(head_sha, head_ref, head_repo), "base": side(base_sha, base_ref, c.repo.full_name)}, {}


def _next_number(repo: Repo) -> int:
    """Issues and pull requests share one sequence of numbers."""
    return max([0, *repo.issues, *repo.pulls]) + 1


def _label(repo: Repo, name: Any) -> dict[str, Any]:
    if not isinstance(name, str) or not name.strip() or len(name) > 50:
        raise _error(422, "Validation Failed", errors=[{"resource": "Label", "code": "invalid", "field": "name"}])
    if name not in repo.labels:
        lid = 7_000_000 + len(repo.labels)
        repo.labels[name] = {"id": lid, "node_id": f"LA_{lid}", "name": name, "color": "ededed", "default": False, "description": None}
    return dict(repo.labels[name])


def _new_issue(repo: Repo, title: str, body: str, user: dict[str, Any], labels: list[Any], base: str) -> dict[str, Any]:
    number, now = _next_number(repo), _now()
    issue = {
        "id": 9_000_000 + number, "node_id": f"I_kwDO{number:08d}", "number": number, "title": title, "body": body,
        "user": dict(user), "labels": [_label(repo, x) for x in labels], "state": "open", "state_reason": None, "locked": False,
        "assignees": [], "milestone": None, "comments": 0, "created_at": now, "updated_at": now, "closed_at": None,
        "author_association": "NONE" if user["type"] == "Bot" else "OWNER",
        "url": f"{base}/repos/{repo.full_name}/issues/{number}", "html_url": f"https://github.com/{repo.full_name}/issues/{number}",
        "comments_url": f"{base}/repos/{repo.full_name}/issues/{number}/comments",
    }
    repo.issues[number] = issue
    return issue


def _issue_out(c: _Ctx, issue: dict[str, Any]) -> dict[str, Any]:
    count = sum(1 for cm in c.repo.comments.values() if cm["issue"] == issue["number"])
    return {**issue, "labels": [dict(x) for x in issue["labels"]], "comments": count}


def _list_issues(c: _Ctx, *, accept: str) -> Reply:
    state = c.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise _error(422, "Validation Failed", errors=[{"resource": "Issue", "code": "invalid", "field": "state"}])
    wanted = [x for x in c.query.get("labels", "").split(",") if x]
    creator = c.query.get("creator")
    items = []
    for issue in sorted(c.repo.issues.values(), key=lambda i: i["number"], reverse=True):  # newest first, as GitHub sorts
        names = {x["name"] for x in issue["labels"]}
        if (state == "all" or issue["state"] == state) and all(w in names for w in wanted) \
                and (creator is None or issue["user"]["login"] == creator):
            items.append(_issue_out(c, issue))
    return c.page(items, f"/repos/{c.repo.full_name}/issues")


def _check_issue_text(c: _Ctx, key: str, limit: int) -> str:
    value = c.body.get(key) if isinstance(c.body, dict) else None
    if not isinstance(value, str) or len(value) > limit:
        raise _error(422, "Validation Failed", errors=[{"resource": "Issue", "code": "custom", "field": key,
                                                        "message": f"{key} is too long (maximum is {limit} characters)"}])
    return value


def _create_issue(c: _Ctx, *, accept: str) -> Reply:
    title = _check_issue_text(c, "title", 256) if isinstance(c.body, dict) and "title" in c.body else c.field("title")
    body = _check_issue_text(c, "body", MAX_COMMENT) if isinstance(c.body, dict) and c.body.get("body") is not None else ""
    labels = c.body.get("labels") or []
    if not isinstance(labels, list):
        raise _error(422, "Invalid request.\n\nFor 'properties/labels', is not an array.")
    issue = _new_issue(c.repo, title, body, c.identity(), labels, c.base)
    return 201, _issue_out(c, issue), {"Location": issue["url"]}


def _issue(c: _Ctx, number: str) -> dict[str, Any]:
    issue = c.repo.issues.get(int(number))
    if issue is None:
        raise _error(404, "Not Found")
    return issue


def _get_issue(c: _Ctx, number: str, *, accept: str) -> Reply:
    return 200, _issue_out(c, _issue(c, number)), {}


def _update_issue(c: _Ctx, number: str, *, accept: str) -> Reply:
    issue = _issue(c, number)
    body = c.body if isinstance(c.body, dict) else {}
    if "title" in body:
        issue["title"] = _check_issue_text(c, "title", 256)
    if "body" in body:
        issue["body"] = _check_issue_text(c, "body", MAX_COMMENT)
    if "labels" in body:
        issue["labels"] = [_label(c.repo, x) for x in body["labels"] or []]
    if "state" in body:
        if body["state"] not in ("open", "closed"):
            raise _error(422, "Validation Failed", errors=[{"resource": "Issue", "code": "invalid", "field": "state"}])
        if body["state"] != issue["state"]:
            issue["state"] = body["state"]
            issue["closed_at"] = _now() if body["state"] == "closed" else None
            issue["state_reason"] = body.get("state_reason") or ("completed" if body["state"] == "closed" else "reopened")
    issue["updated_at"] = _now()
    return 200, _issue_out(c, issue), {}


def _create_issue_comment(c: _Ctx, issue: str, *, accept: str) -> Reply:
    if int(issue) not in c.repo.issues and int(issue) not in c.repo.pulls and c.repo.issues:
        raise _error(404, "Not Found")  # a number that is neither (the PR-comment tests use numbers never registered)
    return _create_comment(c, issue, accept=accept)


_ROUTES: list[tuple[str, str, Callable[..., Reply]]] = [
    ("GET", r"", _get_repo),
    ("GET", r"/issues/(\d+)/comments", _list_comments),
    ("POST", r"/issues/(\d+)/comments", _create_issue_comment),
    ("GET", r"/issues", _list_issues),
    ("POST", r"/issues", _create_issue),
    ("GET", r"/issues/(\d+)", _get_issue),
    ("PATCH", r"/issues/(\d+)", _update_issue),
    ("GET", r"/issues/comments/(\d+)", _get_comment),
    ("PATCH", r"/issues/comments/(\d+)", _update_comment),
    ("DELETE", r"/issues/comments/(\d+)", _delete_comment),
    ("GET", r"/contents/(.+)", _get_contents),
    ("PUT", r"/contents/(.+)", _put_contents),
    ("GET", r"/git/ref/heads/(.+)", _get_ref),
    ("POST", r"/git/refs", _create_ref),
    ("GET", r"/commits", _list_commits),
    ("GET", r"/commits/([^/]+)", _get_commit),
    ("GET", r"/pulls/(\d+)", _get_pull),
]
