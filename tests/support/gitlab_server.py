"""A stand-in for GitLab's REST API v4 (the part ``rag-gate gitlab note`` uses), answering as GitLab does:

* the token in ``PRIVATE-TOKEN`` or ``Authorization: Bearer``; none or an unknown one: 401 ``{"message": "401
  Unauthorized"}``; a token of a user who may only read: 403 on a write; a token with scope ``read_api`` only
  (``READ_API_TOKEN``): 403 ``{"error": "insufficient_scope", "error_description": ..., "scope": "api"}`` on a write;
* ``GET /user``: the token's user, ``{id, username, ...}``;
* ``GET /projects/:id/merge_requests/:iid/notes``: the notes (``id``, ``body``, ``author: {id, username}``,
  ``system``, ``created_at``...), paginated (``page``, ``per_page`` up to ``max_per_page``; the headers X-Page,
  X-Per-Page, X-Next-Page, X-Prev-Page, X-Total, X-Total-Pages and Link); ``:id`` a number or a URL-encoded path;
* ``POST .../notes`` ``{"body"}``: 201 and the note; ``PUT .../notes/:note_id`` ``{"body"}``: 200, only by the note's
  author (403 otherwise; a system note: 403 too);
* an unknown project: 404 ``{"message": "404 Project Not Found"}``; an unknown merge request: 404 ``{"message":
  "404 Merge Request Not Found"}``; an unknown note: 404 ``{"message": "404 Note Not Found"}``.

``fail(status, times, method=..., headers=...)`` answers the next matching requests with an error first (a 429 with
Retry-After, a 502); ``created_then_fail`` makes the next POST create its note and answer 502 (what a proxy does when
GitLab is slow). Every request is recorded (method, path, query, which auth header it carried).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.standin import StandIn, StandInHandler

BOT = {"id": 41, "username": "project_7_bot_rag", "name": "rag-gate bot", "state": "active", "bot": True}
HUMAN = {"id": 2, "username": "alice", "name": "Alice", "state": "active", "bot": False}
READER = {"id": 3, "username": "rita", "name": "Rita", "state": "active", "bot": False}
BOT_TOKEN, HUMAN_TOKEN, READER_TOKEN = "glpat-Bot0Token0For0Tests0x1", "glpat-Human0Token0For0Tests2", "glpat-Reader0Token0Tests03"
READ_API_TOKEN = "glpat-ReadApi0Scope0Only0x4"  # the bot's user, a token created with scope read_api only


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, str]
    auth: str  # "private-token", "bearer" or ""


@dataclass
class Project:
    id: int
    path: str
    merge_requests: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


class _Reply(Exception):
    def __init__(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(code)
        self.code, self.body, self.headers = code, body, headers or {}


class GitLabServer(StandIn):
    def __init__(self, max_per_page: int = 100) -> None:
        super().__init__()
        self.max_per_page = max_per_page
        self.tokens: dict[str, tuple[dict[str, Any], bool]] = {BOT_TOKEN: (BOT, True), HUMAN_TOKEN: (HUMAN, True),
                                                               READER_TOKEN: (READER, False), READ_API_TOKEN: (BOT, True)}
        self.read_api_only = {READ_API_TOKEN}
        self.projects: dict[int, Project] = {}
        self.received: list[Received] = []
        self._faults: list[tuple[str | None, int, dict[str, str]]] = []
        self._created_then_fail = 0
        self._ids = iter(range(1001, 10**9))
        self._data = threading.Lock()

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/v4"

    # -- the state -----------------------------------------------------------------------
    def add_project(self, pid: int = 7, path: str = "acme/rag-service", mrs: tuple[int, ...] = (5,)) -> Project:
        project = Project(pid, path, {iid: [] for iid in mrs})
        self.projects[pid] = project
        return project

    def add_note(self, iid: int, body: str, author: dict[str, Any] = HUMAN, *, system: bool = False, pid: int = 7) -> dict[str, Any]:
        with self._data:
            return self._new_note(self.projects[pid].merge_requests[iid], body, author, system)

    def notes(self, iid: int, pid: int = 7) -> list[dict[str, Any]]:
        return [dict(n) for n in self.projects[pid].merge_requests[iid]]

    def fail(self, status: int, times: int = 1, *, method: str | None = None, headers: dict[str, str] | None = None) -> None:
        self._faults += [(method, status, headers or {})] * times

    def created_then_fail(self, times: int = 1) -> None:
        self._created_then_fail += times

    def count(self, method: str | None = None, path_part: str = "") -> int:
        return sum(1 for r in self.received if (method is None or r.method == method) and path_part in r.path)

    # -- HTTP ----------------------------------------------------------------------------
    def handle(self, h: StandInHandler) -> None:
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        token = h.headers.get("PRIVATE-TOKEN") or ""
        scheme = "private-token" if token else ""
        bearer = h.headers.get("Authorization") or ""
        if not token and bearer.startswith("Bearer "):
            token, scheme = bearer[len("Bearer "):], "bearer"
        self.received.append(Received(h.command, url.path, query, scheme))
        raw = h.body()
        try:
            code, body, headers = self._answer(h.command, url.path, query, token, raw)
        except _Reply as r:
            code, body, headers = r.code, r.body, r.headers
        h.reply(code, json.dumps(body).encode(), headers)

    def _answer(self, method: str, path: str, query: dict[str, str], token: str, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        for i, (m, status, headers) in enumerate(self._faults):
            if m is None or m == method:
                del self._faults[i]
                raise _Reply(status, {"message": f"{status} {HTTPStatus(status).phrase}"}, headers)
        if token not in self.tokens:
            raise _Reply(401, {"message": "401 Unauthorized"})
        user, can_write = self.tokens[token]
        if not path.startswith("/api/v4/"):
            raise _Reply(404, {"error": "404 Not Found"})
        parts = path[len("/api/v4/"):].split("/")
        if parts == ["user"] and method == "GET":
            return 200, {**user, "web_url": f"{self.base_url}/{user['username']}"}, {}
        if len(parts) >= 5 and parts[0] == "projects" and parts[2] == "merge_requests" and parts[4] == "notes":
            notes = self._merge_request(unquote(parts[1]), parts[3])
            if method in ("POST", "PUT") and token in self.read_api_only:
                raise _Reply(403, {"error": "insufficient_scope", "scope": "api",
                                   "error_description": "The request requires higher privileges than provided by the access token."})
            if method in ("POST", "PUT") and not can_write:
                raise _Reply(403, {"message": "403 Forbidden"})
            body = self._body(raw) if method in ("POST", "PUT") else ""
            if len(parts) == 5 and method == "GET":
                return self._page(notes, query, path)
            if len(parts) == 5 and method == "POST":
                return self._create(notes, body, user)
            if len(parts) == 6 and method == "PUT":
                return 200, self._edit(notes, parts[5], body, user), {}
        raise _Reply(404, {"error": "404 Not Found"})

    def _merge_request(self, pid: str, iid: str) -> list[dict[str, Any]]:
        project = next((p for p in self.projects.values() if pid in (str(p.id), p.path)), None)
        if project is None:
            raise _Reply(404, {"message": "404 Project Not Found"})
        if not iid.isdigit() or int(iid) not in project.merge_requests:
            raise _Reply(404, {"message": "404 Merge Request Not Found"})
        return project.merge_requests[int(iid)]

    @staticmethod
    def _body(raw: bytes) -> str:
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            raise _Reply(400, {"error": "body is invalid"}) from None
        body = data.get("body") if isinstance(data, dict) else None
        if not isinstance(body, str) or not body.strip():
            raise _Reply(400, {"error": "body is missing"})
        if len(body) > 1_000_000:
            raise _Reply(400, {"message": {"note": ["is too long (maximum is 1000000 characters)"]}})
        return body

    def _create(self, notes: list[dict[str, Any]], body: str, user: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        with self._data:
            note = self._new_note(notes, body, user, False)
        if self._created_then_fail:
            self._created_then_fail -= 1
            raise _Reply(502, {"message": "502 Bad Gateway"})
        return 201, note, {}

    def _edit(self, notes: list[dict[str, Any]], note_id: str, body: str, user: dict[str, Any]) -> dict[str, Any]:
        note = next((n for n in notes if str(n["id"]) == note_id), None)
        if note is None:
            raise _Reply(404, {"message": "404 Note Not Found"})
        if note["system"] or note["author"]["id"] != user["id"]:
            raise _Reply(403, {"message": "403 Forbidden"})
        note.update(body=body, updated_at=_now())
        return dict(note)

    def _new_note(self, notes: list[dict[str, Any]], body: str, author: dict[str, Any], system: bool) -> dict[str, Any]:
        now = _now()
        note = {"id": next(self._ids), "type": None, "body": body, "author": {k: author[k] for k in ("id", "username", "name", "state")},
                "created_at": now, "updated_at": now, "system": system, "noteable_type": "MergeRequest", "resolvable": False,
                "confidential": False, "internal": False}
        notes.append(note)
        return dict(note)

    def _page(self, notes: list[dict[str, Any]], query: dict[str, str], path: str) -> tuple[int, Any, dict[str, str]]:
        per_page = max(1, min(int(query.get("per_page", "20")), self.max_per_page))
        page = max(1, int(query.get("page", "1")))
        ordered = sorted(notes, key=lambda n: n["id"], reverse=query.get("sort", "desc") == "desc")
        total_pages = max(1, -(-len(ordered) // per_page))
        items = ordered[(page - 1) * per_page: page * per_page]
        nxt = str(page + 1) if page < total_pages else ""
        rest = "&".join(f"{k}={v}" for k, v in query.items() if k not in ("page", "per_page"))

        def link(p: int) -> str:
            return f"<{self.base_url}{path}?page={p}&per_page={per_page}{'&' + rest if rest else ''}>"

        links = [f'{link(page + 1)}; rel="next"'] if nxt else []
        links += [f'{link(1)}; rel="first"', f'{link(total_pages)}; rel="last"']
        headers = {"X-Page": str(page), "X-Per-Page": str(per_page), "X-Next-Page": nxt, "X-Prev-Page": str(page - 1) if page > 1 else "",
                   "X-Total": str(len(ordered)), "X-Total-Pages": str(total_pages), "Link": ", ".join(links)}
        return 200, items, headers


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- what GitLab would make of a note's text ------------------------------------------------------------------------

# GitLab reads references in the rendered note's text outside code, pre and links (a backslash escape is gone by then)
GITLAB_REFERENCES = {
    "merge request": re.compile(r"!\d"),
    "label": re.compile(r"~[\w\"]"),
    "milestone": re.compile(r"%[\w\"*]"),
    "epic": re.compile(r"&[\w\"]"),
    "snippet or math": re.compile(r"\$(?=[^\s\u200b])"),
    "iteration": re.compile(r"(?i)\*iteration:"),
    "vulnerability, feature flag, work item or table of contents": re.compile(r"(?i)\[(?:[a-z_]+:|\[|toc\])"),
    "inline diff": re.compile(r"[{\[][+-]"),
    "mention": re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9_.]"),
    "issue": re.compile(r"#\d"),
    "URL": re.compile(r"(?i)\b(?:https?|ftp)://|\bwww\.[A-Za-z0-9]"),
}
QUICK_ACTION = re.compile(r"^/[A-Za-z]", re.M)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data: str) -> None:
        if not {"code", "pre", "a"} & set(self.stack):
            self.texts.append(data)


def gitlab_problems(markdown: str) -> list[str]:
    """Every GitLab reference in the text the note shows outside code and links, and every line GitLab would run as a
    quick action; [] when the note only shows text. The template's own alerts (``[!WARNING]``) are no reference."""
    from tests.support.markup import render

    parser = _Text()
    parser.feed(render(markdown))
    parser.close()
    text = "".join(parser.texts)
    problems = [f"{what} {text[max(0, m.start() - 20): m.end() + 20]!r}" for what, pattern in GITLAB_REFERENCES.items()
                for m in pattern.finditer(text)]
    outside_fences = re.sub(r"(?ms)^```.*?^```", "", markdown)
    return problems + [f"quick action {m.group()!r}" for m in QUICK_ACTION.finditer(outside_fences)]
