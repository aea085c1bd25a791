"""gate.github against a fake GitHub REST API on 127.0.0.1 (tests/support/github_server.py): comments, contents,
branches, retries and rate limits, permissions, the repository history store and its concurrency."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import requests

from gate.core.errors import InputError, RunError
from gate.core.records import baseline_entry
from gate.core.report import SCHEMA_VERSION
from gate.github.client import Conflict, GitHubClient, GitHubError, NotFound, PermissionDenied, Retrying
from gate.github.history import RepoHistoryStore
from gate.render.markdown import marker
from tests.support.github_server import (
    READ_TOKEN,
    WRITE_TOKEN,
    GitHubServer,
    blob_sha,
    drop,
    primary_rate_limit,
    secondary_rate_limit,
    status,
)

ROOT = Path(__file__).resolve().parents[2]
MARK = marker()
PR = 7
COMMENTS = rf"/issues/{PR}/comments$"
CONTENTS = r"/contents/"


@pytest.fixture
def gh():
    with GitHubServer() as srv:
        yield srv


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(gh, sleeps):
    with GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append)) as c:
        yield c


def entry(i: int | str, **extra: Any) -> dict[str, Any]:
    e = {
        "schema_version": SCHEMA_VERSION,
        "created_at": "2025-03-01T00:00:00+00:00",
        "commit": f"c{i}",
        "branch": "main",
        "verdict": "pass",
        "fingerprints": {"golden_set": "sha256:aaaa"},
        "stages": {"generation": {"metrics": {"faithfulness": 0.8}, "samples": [{"id": "q1", "metrics": {"faithfulness": 0.8}}]}},
    }
    e.update(extra)
    return e


BOT = "github-actions[bot]"  # who the job token's comments are by: rag-gate's own earlier comments


def body(text: str) -> str:
    return f"{MARK}\n## rag-gate\n{text}\n"


# --------------------------------------------------------------------------- the wire


def test_every_request_carries_githubs_headers_and_a_bearer_token(gh, client):
    client.upsert_comment(PR, body("hello"), MARK)
    assert gh.requests, "nothing reached the server"
    for r in gh.requests:
        assert (r.auth_present, r.auth_scheme) == (True, "Bearer")
        assert r.headers["Accept"] == "application/vnd.github+json"
        assert r.headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert "authorization" not in {k.lower() for k in r.headers}
    assert [(r.method, r.path) for r in gh.requests] == [("GET", f"/repos/{gh.repo}/issues/{PR}/comments"),
                                                        ("POST", f"/repos/{gh.repo}/issues/{PR}/comments")]
    assert gh.requests[0].query == {"per_page": "100"}
    assert gh.requests[1].body == {"body": body("hello")}


def test_the_fake_paginates_like_github_30_by_default_with_next_and_last_links(gh):
    for i in range(65):
        gh.add_comment(PR, f"c{i}")
    url = f"{gh.api_url}/repos/{gh.repo}/issues/{PR}/comments"
    auth = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    first = requests.get(url, headers=auth, timeout=10)
    assert len(first.json()) == 30
    assert first.links["next"]["url"].endswith("per_page=30&page=2")
    assert first.links["last"]["url"].endswith("per_page=30&page=3")
    last = requests.get(first.links["last"]["url"], headers=auth, timeout=10)
    assert [c["body"] for c in last.json()] == ["c60", "c61", "c62", "c63", "c64"]
    assert "next" not in last.links and last.links["prev"]["url"].endswith("page=2")
    capped = requests.get(url, params={"per_page": 500}, headers=auth, timeout=10)
    assert len(capped.json()) == 65 and "next" not in capped.links  # per_page is capped at 100, 65 fit


# --------------------------------------------------------------------------- comments


def test_comment_is_created_then_edited_in_place(gh, client):
    cid, what = client.upsert_comment(PR, body("run 1"), MARK)
    assert what == "created"
    cid2, what2 = client.upsert_comment(PR, body("run 2"), MARK)
    assert (cid2, what2) == (cid, "updated")
    comments = gh.comments(PR)
    assert [(c["id"], c["body"]) for c in comments] == [(cid, body("run 2"))]
    assert comments[0]["user"] == {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
    assert gh.count(method="PATCH", path=rf"/issues/comments/{cid}$", status=200) == 1
    assert gh.count(method="POST", status=201) == 1


def test_identical_body_is_unchanged_and_sends_no_write(gh, client):
    cid, _ = client.upsert_comment(PR, body("same"), MARK)
    gh.reset()
    assert client.upsert_comment(PR, body("same"), MARK) == (cid, "unchanged")
    assert {r.method for r in gh.requests} == {"GET"}


def test_marker_on_page_3_of_250_comments_is_found_and_edited(gh, client):
    ids = []
    for i in range(250):
        text = body("old report") if i == 230 else f"a comment by someone ({i}) mentioning rag-gate"
        ids.append(gh.add_comment(PR, text, login=BOT if i == 230 else "octocat")["id"])
    found = client.find_comment(PR, MARK)
    assert found is not None and found["id"] == ids[230]
    pages = [r.query.get("page", "1") for r in gh.requests if r.method == "GET" and r.path.endswith("/comments")]
    assert pages == ["1", "2", "3"]
    assert client.upsert_comment(PR, body("new report"), MARK) == (ids[230], "updated")
    assert len(gh.comments(PR)) == 250


def test_the_newest_of_several_marked_comments_is_the_one(gh, client):
    gh.add_comment(PR, body("first"), login=BOT)
    newer = gh.add_comment(PR, body("second"), login=BOT)
    gh.add_comment(PR, "unrelated")
    assert client.find_comment(PR, MARK)["id"] == newer["id"]
    assert client.find_comment(PR, marker("other-config")) is None


def test_a_body_without_the_marker_is_refused_before_any_request(gh, client):
    with pytest.raises(ValueError, match="marker"):
        client.upsert_comment(PR, "## no marker", MARK)
    assert gh.requests == []


def test_delete_comment(gh, client):
    cid, _ = client.upsert_comment(PR, body("x"), MARK)
    assert client.delete_comment(cid) is True
    assert gh.comments(PR) == []
    assert gh.count(method="DELETE", status=204) == 1
    assert client.delete_comment(cid) is False  # already gone: not an error


def test_comment_deleted_between_find_and_edit_is_created_again(gh, client):
    cid, _ = client.upsert_comment(PR, body("x"), MARK)
    gh.inject(status(404, {"message": "Not Found"}), method="PATCH")
    new_id, what = client.upsert_comment(PR, body("y"), MARK)
    assert what == "created" and new_id != cid


def test_enterprise_server_prefix_and_pagination_under_it(sleeps):
    with GitHubServer(prefix="/api/v3") as gh:
        for i in range(150):
            gh.add_comment(PR, body("old") if i == 149 else f"c{i}", login=BOT if i == 149 else "octocat")
        c = GitHubClient(gh.api_url + "/", WRITE_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append))
        assert c.upsert_comment(PR, body("new"), MARK)[1] == "updated"
        assert gh.comments(PR)[-1]["body"] == body("new")
        assert gh.count(method="GET", status=200) == 2  # two pages, both under /api/v3


# --------------------------------------------------------------------------- permissions and auth


def test_read_only_token_cannot_comment_and_says_so(gh, sleeps):
    gh.add_comment(PR, body("old"), login=BOT)
    ro = GitHubClient(gh.api_url, READ_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append))
    assert ro.find_comment(PR, MARK) is not None  # reading is allowed
    with pytest.raises(PermissionDenied) as err:
        ro.upsert_comment(PR, body("new"), MARK)
    e = err.value
    assert e.status == 403 and isinstance(e, RunError)
    assert f"cannot write to {gh.repo}" in str(e)
    assert "Resource not accessible by integration" in str(e)
    assert "pull-requests: write" in (e.hint or "")
    assert READ_TOKEN not in str(e) + (e.hint or "") + repr(e)
    assert sleeps == []  # a permission error is not retried
    assert gh.comments(PR)[0]["body"] == body("old")


def test_read_only_token_cannot_record_history(gh, sleeps):
    ro = GitHubClient(gh.api_url, READ_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append))
    with pytest.raises(PermissionDenied, match="cannot write to"):
        RepoHistoryStore(ro).append(entry(1))
    assert gh.branch_sha("rag-gate-history") is None


@pytest.mark.parametrize(("token", "said"), [("ghp_NotAKnownToken1234567890", "Bad credentials"), ("", "Requires authentication")])
def test_unknown_or_missing_token_is_401_not_a_permission_problem(gh, sleeps, token, said):
    c = GitHubClient(gh.api_url, token, gh.repo, retrying=Retrying(sleep=sleeps.append))
    with pytest.raises(GitHubError) as err:
        c.find_comment(PR, MARK)
    assert err.value.status == 401 and not isinstance(err.value, PermissionDenied)
    assert said in str(err.value) and "token was refused" in str(err.value)
    if token:
        assert token not in str(err.value)
    assert gh.requests[0].auth_present is bool(token)


def test_repository_must_be_owner_slash_name():
    with pytest.raises(InputError, match="GITHUB_REPOSITORY"):
        GitHubClient("http://127.0.0.1:1", WRITE_TOKEN, "not-a-repo")


# --------------------------------------------------------------------------- retries and rate limits


def test_502_twice_then_ok_succeeds(gh, client, sleeps):
    fault = gh.inject(status(502), times=2, method="GET", path=COMMENTS)
    gh.add_comment(PR, body("x"), login=BOT)
    assert client.find_comment(PR, MARK) is not None
    assert fault.hits == 2 and gh.count(method="GET", path=COMMENTS) == 3
    assert len(sleeps) == 2 and all(0 < s <= 16 for s in sleeps)


def test_dropped_connection_is_retried(gh, client, sleeps):
    gh.inject(drop(), times=1, method="GET", path=COMMENTS)
    assert client.find_comment(PR, MARK) is None
    assert gh.count(method="GET", path=COMMENTS, status=200) == 1 and len(sleeps) == 1


def test_5xx_that_never_ends_gives_up_with_the_path(gh, client, sleeps):
    gh.inject(status(503), times=100, method="GET")
    with pytest.raises(GitHubError) as err:
        client.find_comment(PR, MARK)
    assert err.value.status == 503 and f"/repos/{gh.repo}/issues/{PR}/comments" in str(err.value)
    assert gh.count(method="GET") == client.max_retries + 1 and len(sleeps) == client.max_retries


def test_502_on_create_before_github_acted_still_makes_one_comment(gh, client):
    gh.inject(status(502), times=2, method="POST", path=COMMENTS)
    cid, what = client.upsert_comment(PR, body("x"), MARK)
    assert what == "created"
    assert [c["id"] for c in gh.comments(PR)] == [cid]
    assert gh.count(method="POST") == 3


def test_502_on_create_after_github_acted_does_not_duplicate_the_comment(gh, client):
    gh.inject(status(502, after=True), times=1, method="POST", path=COMMENTS)
    cid, what = client.upsert_comment(PR, body("x"), MARK)
    assert what == "created"
    assert [c["id"] for c in gh.comments(PR)] == [cid]  # found again, not posted twice
    assert gh.count(method="POST") == 1


def test_secondary_rate_limit_403_with_retry_after_is_waited_out(gh, client, sleeps):
    gh.inject(secondary_rate_limit(retry_after=1), times=1, method="POST")
    cid, what = client.upsert_comment(PR, body("x"), MARK)
    assert what == "created" and len(gh.comments(PR)) == 1
    assert sleeps == [1.0]
    assert gh.count(method="POST", status=403) == 1 and gh.count(method="POST", status=201) == 1


def test_primary_rate_limit_waits_until_the_reset(gh, client, sleeps):
    gh.inject(primary_rate_limit(reset_in=1), times=1, method="GET")
    assert client.find_comment(PR, MARK) is None
    assert len(sleeps) == 1 and 0 < sleeps[0] <= 4


def test_429_without_retry_after_waits_a_minute(gh, client, sleeps):
    gh.inject(status(429, {"message": "Too Many Requests"}), times=1, method="GET")
    assert client.find_comment(PR, MARK) is None
    assert sleeps == [60.0]


def test_rate_limit_longer_than_max_wait_fails_at_once_and_is_not_a_permission_error(gh, client, sleeps):
    gh.inject(secondary_rate_limit(retry_after=3600), times=1, method="POST")
    with pytest.raises(GitHubError) as err:
        client.upsert_comment(PR, body("x"), MARK)
    assert not isinstance(err.value, PermissionDenied)
    assert "rate limit" in str(err.value) and sleeps == []


def test_retries_are_logged_without_the_token(gh, client, caplog):
    gh.inject(status(502), times=1, method="GET")
    with caplog.at_level(logging.WARNING, logger="gate.github"):
        client.find_comment(PR, MARK)
    assert "answered 502; retrying" in caplog.text
    assert WRITE_TOKEN not in caplog.text


# --------------------------------------------------------------------------- contents and branches


def test_file_create_update_and_stale_sha(gh, client):
    assert client.read_file("rag-gate/notes.txt", "main") is None
    text = "line one — ünïcode\n" * 10  # long enough for several 60-character base64 lines
    sha1 = client.write_file("rag-gate/notes.txt", "main", text, None, "add notes")
    assert sha1 == blob_sha(text.encode("utf-8"))
    assert gh.count(method="PUT", status=201) == 1
    assert client.read_file("rag-gate/notes.txt", "main") == (text, sha1)
    sha2 = client.write_file("rag-gate/notes.txt", "main", text + "more\n", sha1, "update notes")
    assert sha2 != sha1 and gh.count(method="PUT", status=200) == 1
    assert gh.file("rag-gate/notes.txt", "main") == text + "more\n"
    with pytest.raises(Conflict) as stale:
        client.write_file("rag-gate/notes.txt", "main", "lost\n", sha1, "stale write")
    assert stale.value.status == 409 and "does not match" in str(stale.value)
    with pytest.raises(Conflict) as missing:
        client.write_file("rag-gate/notes.txt", "main", "lost\n", None, "blind write")
    assert missing.value.status == 422 and "sha" in str(missing.value)
    assert gh.file("rag-gate/notes.txt", "main") == text + "more\n"


def test_the_fake_returns_base64_in_60_character_lines_like_github(gh, client):
    text = "x" * 200
    client.write_file("f.txt", "main", text, None, "add")
    got = requests.get(f"{gh.api_url}/repos/{gh.repo}/contents/f.txt", params={"ref": "main"},
                       headers={"Authorization": f"token {WRITE_TOKEN}"}, timeout=10).json()
    lines = got["content"].split("\n")
    assert lines[-1] == "" and all(len(ln) == 60 for ln in lines[:-2]) and 0 < len(lines[-2]) <= 60
    assert base64.b64decode(got["content"]).decode() == text and got["encoding"] == "base64" and got["type"] == "file"


def test_a_file_over_githubs_1mb_inline_limit_is_read_raw(sleeps):
    with GitHubServer(large_file_limit=100) as gh:
        c = GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append))
        text = "".join(f"{i}\n" for i in range(200))
        sha = c.write_file("big.jsonl", "main", text, None, "add")
        assert c.read_file("big.jsonl", "main") == (text, sha)
        assert any("raw" in r.headers.get("Accept", "") for r in gh.requests)


def test_missing_branch_reads_as_none_and_cannot_be_written(gh, client):
    assert client.read_file("README.md", "no-such-branch") is None
    with pytest.raises(NotFound, match="Branch no-such-branch not found"):
        client.write_file("a.txt", "no-such-branch", "x", None, "add")


def test_a_directory_is_not_a_file(gh, client):
    client.write_file("rag-gate/a.txt", "main", "a", None, "add")
    with pytest.raises(GitHubError, match="is not a file"):
        client.read_file("rag-gate", "main")


def test_ensure_branch_creates_it_once_from_the_default_head(gh, client):
    head = gh.add_commit("main", "work")
    assert client.ensure_branch("rag-gate-history") is True
    assert gh.branch_sha("rag-gate-history") == head
    assert client.ensure_branch("rag-gate-history") is False
    assert gh.count(method="POST", path=r"/git/refs$") == 1


def test_ensure_branch_race_with_another_run_is_fine(gh, client):
    gh.put_file("x.txt", "rag-gate-history", "made by another run")  # the branch exists ...
    gh.inject(status(404, {"message": "Not Found"}), method="GET", path=r"/git/ref/heads/rag-gate-history")  # ... but we saw it missing
    assert client.ensure_branch("rag-gate-history") is False
    assert gh.count(method="POST", path=r"/git/refs$", status=422) == 1


def test_recent_commits_follows_pages_newest_first(gh, client):
    made = [gh.add_commit("main", f"c{i}") for i in range(120)]
    shas = client.recent_commits("main", limit=200)
    assert shas[:120] == made[::-1] and len(shas) == 121  # plus the initial commit
    assert client.recent_commits(made[50], limit=3) == [made[50], made[49], made[48]]


def test_pull_head_sha_follows_the_pull_request_and_is_none_for_an_unknown_one(gh, client, sleeps):
    head, base = gh.add_commit("main", "pr head"), gh.branch_sha("main")
    gh.add_pull(PR, head, base, fork=True)
    assert client.pull_head_sha(PR) == head
    gh.add_pull(PR, "f" * 40, base)  # a new push to the pull request moves its head
    assert client.pull_head_sha(PR) == "f" * 40
    assert client.pull_head_sha(PR + 1) is None
    assert gh.count(method="GET", path=rf"/pulls/{PR + 1}$", status=404) == 1
    got = requests.get(f"{gh.api_url}/repos/{gh.repo}/pulls/{PR}", headers={"Authorization": f"Bearer {READ_TOKEN}"}, timeout=10)
    assert got.status_code == 200  # a read-only token may read it
    assert (got.json()["number"], got.json()["head"]["sha"], got.json()["base"]["sha"]) == (PR, "f" * 40, base)
    gh.inject(status(500, {"message": "Oops"}), times=99, method="GET", path=r"/pulls/")
    with pytest.raises(GitHubError) as err:  # a server error is not "no such pull request"
        client.pull_head_sha(PR)
    assert err.value.status == 500 and not isinstance(err.value, NotFound)


# --------------------------------------------------------------------------- RepoHistoryStore


def test_history_round_trip_on_its_own_branch(gh, client):
    store = RepoHistoryStore(client)
    assert store.read() == []
    for i in range(3):
        store.append(entry(i, branch="main/ü"))
    assert store.read() == [entry(0, branch="main/ü"), entry(1, branch="main/ü"), entry(2, branch="main/ü")]
    assert gh.file("rag-gate/history.jsonl", "main") is None  # the default branch is untouched
    lines = gh.file("rag-gate/history.jsonl", "rag-gate-history").splitlines()
    assert [json.loads(ln)["commit"] for ln in lines] == ["c0", "c1", "c2"]
    puts = [r for r in gh.requests if r.method == "PUT"]
    assert all("[skip ci]" in r.body["message"] and r.body["branch"] == "rag-gate-history" for r in puts)
    assert "sha" not in puts[0].body and all("sha" in r.body for r in puts[1:])


def test_history_cap_keeps_the_newest_and_unreadable_lines_stay(gh, client):
    gh.put_file("h.jsonl", "hist", "{damaged line\n" + json.dumps(entry("future", schema_version=2)) + "\n")
    store = RepoHistoryStore(client, path="h.jsonl", branch="hist", max_entries=4)
    store.append(entry(1))
    store.append(entry(2))
    text = gh.file("h.jsonl", "hist")
    assert text.splitlines()[0] == "{damaged line"  # kept as it was, not dropped
    assert [e["commit"] for e in store.read()] == ["c1", "c2"]
    assert store.warnings == [f"{gh.repo}@hist:h.jsonl:1: not JSON, skipped",
                              f"{gh.repo}@hist:h.jsonl:2: not a rag-gate history entry (schema_version 1), skipped"]
    for i in range(3, 8):
        store.append(entry(i))
    assert [json.loads(ln)["commit"] for ln in gh.file("h.jsonl", "hist").splitlines()] == ["c4", "c5", "c6", "c7"]


def test_history_append_retries_through_a_conflict_storm(gh, client, sleeps):
    store = RepoHistoryStore(client)
    store.append(entry(0))
    gh.force_conflicts(3)
    store.append(entry(1))
    assert store.conflicts == 3 and len(sleeps) == 3
    assert [e["commit"] for e in store.read()] == ["c0", "c1"]
    assert gh.count(method="PUT", status=409) == 3


def test_history_append_gives_up_after_max_attempts_with_a_clear_message(gh, client):
    store = RepoHistoryStore(client, max_attempts=10)
    gh.force_conflicts(1000)
    with pytest.raises(Conflict) as err:
        store.append(entry(1))
    assert "rag-gate-history:rag-gate/history.jsonl" in str(err.value) and "10 attempts" in str(err.value)
    assert gh.count(method="PUT", status=409) == 10
    assert gh.file("rag-gate/history.jsonl", "rag-gate-history") is None


def test_history_write_that_landed_but_answered_502_is_not_appended_twice(gh, client):
    store = RepoHistoryStore(client)
    store.append(entry(0))
    gh.inject(status(502, after=True), times=1, method="PUT")
    store.append(entry(1))
    assert [e["commit"] for e in store.read()] == ["c0", "c1"]


def _race(gh: GitHubServer, n: int, create_first: bool) -> list[RepoHistoryStore]:
    if create_first:
        gh.put_file("rag-gate/history.jsonl", "rag-gate-history", "")
    gh.hold_reads(n)  # every writer reads the same version before anyone writes
    stores = [RepoHistoryStore(GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo)) for _ in range(n)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            stores[i].append(entry(i))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    return stores


def test_ten_threads_appending_at_once_lose_nothing(gh):
    stores = _race(gh, 10, create_first=True)
    got = RepoHistoryStore(GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo)).read()
    assert sorted(e["commit"] for e in got) == sorted(f"c{i}" for i in range(10))
    assert gh.count(method="PUT", status=409) >= 9  # ten writers with one sha: nine lose the first round
    assert sum(s.conflicts for s in stores) == gh.count(method="PUT", status=409)
    assert gh.count(method="PUT", status=200) == 10


def test_ten_threads_creating_the_branch_and_file_at_once_lose_nothing(gh):
    stores = _race(gh, 10, create_first=False)
    got = RepoHistoryStore(GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo)).read()
    assert sorted(e["commit"] for e in got) == sorted(f"c{i}" for i in range(10))
    assert gh.count(method="POST", path=r"/git/refs$", status=201) == 1
    assert gh.count(method="PUT", status=422) >= 9  # "sha" wasn't supplied: the file appeared meanwhile
    assert sum(s.conflicts for s in stores) == gh.count(method="PUT", status=409) + gh.count(method="PUT", status=422)


_RECORD = textwrap.dedent("""
    import json, os, sys
    from gate.github.client import GitHubClient
    from gate.github.history import RepoHistoryStore
    client = GitHubClient(os.environ["GITHUB_API_URL"], os.environ["GITHUB_TOKEN"], os.environ["GITHUB_REPOSITORY"])
    store = RepoHistoryStore(client)
    store.append(json.loads(sys.argv[1]))
    print(store.conflicts)
""")


def test_ten_processes_appending_at_once_lose_nothing(gh):
    gh.put_file("rag-gate/history.jsonl", "rag-gate-history", "")
    gh.hold_reads(10, timeout=60)
    env = {**os.environ, "GITHUB_API_URL": gh.api_url, "GITHUB_TOKEN": WRITE_TOKEN, "GITHUB_REPOSITORY": gh.repo}
    procs = [subprocess.Popen([sys.executable, "-c", _RECORD, json.dumps(entry(i))], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(10)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 10, [err for _, err in outs]
    got = RepoHistoryStore(GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo)).read()
    assert sorted(e["commit"] for e in got) == sorted(f"c{i}" for i in range(10))
    conflicts = gh.count(method="PUT", status=409)
    assert conflicts >= 9
    assert sum(int(out.strip()) for out, _ in outs) == conflicts


# --------------------------------------------------------------------------- baseline_entry

BASE = "b" * 40
P1, P2, P3 = "1" * 40, "2" * 40, "3" * 40
HIST = [entry("p3", commit=P3, label="p3"), entry("p2", commit=P2, label="p2"), entry("p1", commit=P1, label="p1"),
        entry("p2-rerun", commit=P2, label="p2-rerun")]


@pytest.mark.parametrize(
    ("entries", "base", "ancestors", "want", "words"),
    [
        (HIST + [entry(0, commit=BASE, label="base")], BASE, [P1, P2], "base", "entry of base commit bbbbbbb"),
        (HIST + [entry(0, commit=BASE, label="b1"), entry(0, commit=BASE, label="b2")], BASE, None, "b2", "entry of base commit bbbbbbb"),
        (HIST + [entry(0, commit=BASE[:7], label="short")], BASE, None, "short", "entry of base commit bbbbbbb"),
        (HIST + [entry(0, commit=BASE.upper(), label="upper")], BASE, None, "upper", "entry of base commit bbbbbbb"),
        (HIST, BASE, [BASE, P1, P2], "p1", "newest ancestor entry (1111111)"),
        (HIST, BASE, [BASE, "9" * 40, P2, P1], "p2-rerun", "newest ancestor entry (2222222)"),
        (HIST + [entry(0, commit=BASE, verdict="error", label="broken")], BASE, [P3], "p3", "newest ancestor entry (3333333)"),
        (HIST + [entry(0, commit="bbb", label="too-short")], BASE, None, None, "no history entry for the base commit"),
        (HIST, BASE, None, None, "no history entry for the base commit"),
        (HIST, BASE, ["9" * 40], None, "no history entry for the base commit"),
        ([], None, None, None, "no history entry for the base commit"),
    ],
)
def test_baseline_entry(entries, base, ancestors, want, words):
    got, said = baseline_entry(entries, base, ancestors)
    assert (got["label"] if got else None) == want
    assert said == words


# --------------------------------------------------------------------------- secrets


def test_the_token_never_appears_in_errors_logs_or_what_the_server_recorded(gh, sleeps, caplog):
    texts: list[str] = []
    write = GitHubClient(gh.api_url, WRITE_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append))
    read = GitHubClient(gh.api_url, READ_TOKEN, gh.repo, retrying=Retrying(sleep=sleeps.append))
    gh.inject(status(403, {"message": "Forbidden"}, echo_auth=True), method="POST")  # a proxy that echoes the header
    gh.inject(status(500, {"message": "Oops"}, echo_auth=True), times=99, method="DELETE")
    attempts = [
        lambda: write.upsert_comment(PR, body("x"), MARK),
        lambda: write.delete_comment(1),
        lambda: read.upsert_comment(PR, body("x"), MARK),
        lambda: RepoHistoryStore(read).append(entry(1)),
        lambda: write.write_file("a", "main", "x", "0" * 40, "m") and write.write_file("a", "main", "y", "0" * 40, "m"),
        lambda: GitHubClient("http://127.0.0.1:9", WRITE_TOKEN, gh.repo, retrying=Retrying(max_retries=0, sleep=sleeps.append)).find_comment(PR, MARK),
    ]
    with caplog.at_level(logging.DEBUG):
        for attempt in attempts:
            with pytest.raises(GitHubError) as err:
                attempt()
            texts += [str(err.value), repr(err.value), err.value.hint or ""]
    assert "***" in texts[0]  # the echoed header was there, and was redacted
    texts += [caplog.text, repr(write), repr(write.session.auth), repr(gh.requests)]
    for text in texts:
        assert WRITE_TOKEN not in text and READ_TOKEN not in text
