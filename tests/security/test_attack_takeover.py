"""Attack 4: anyone takes over the bot's comment. The comment was found by its hidden marker whoever wrote it: a
human's comment quoting the marker was overwritten with the report, and the bot's own comment went stale.

rag-gate now edits only comments whose author is the identity its token acts as: github-actions[bot] for the job
token (GitHub answers GET /user with 403 for it), the token's user for a personal token, or the login given in the
``comment-author`` input (a GitHub App's bot). Reproduced against the real action and the fake GitHub API.
"""

from __future__ import annotations

from tests.support.action import MARK, PR, REPO, impossible_threshold, pr_event, run_action, workspace
from tests.support.github_server import PAT_TOKEN, PAT_USER, GitHubServer

HUMAN = f"I am quoting the bot: {MARK} -- please do not overwrite me"


def test_a_humans_comment_with_the_marker_is_never_edited(tmp_path):
    ws = workspace(tmp_path)
    with GitHubServer(repos=(REPO,)) as gh:
        human = gh.add_comment(PR, HUMAN, login="mallory", repo=REPO)
        r1 = run_action(gh, ws, "pull_request", pr_event())
        assert r1.code == 0 and "comment created" in r1.stdout, str(r1)
        impossible_threshold(ws)  # the second run's report differs: it must land in the bot's own comment
        r2 = run_action(gh, ws, "pull_request", pr_event())
        assert r2.code == 1 and "comment updated" in r2.stdout, str(r2)
        comments = {c["id"]: c for c in gh.comments(PR, REPO)}
    assert comments[human["id"]]["body"] == HUMAN and comments[human["id"]]["updated_at"] == human["updated_at"]
    (ours,) = [c for c in comments.values() if c["id"] != human["id"]]
    assert ours["user"]["login"] == "github-actions[bot]" and "rag-gate failed" in ours["body"]
    assert gh.count(method="PATCH", path=rf"/issues/comments/{human['id']}$") == 0
    assert gh.count(method="DELETE") == 0


def test_on_failure_never_neutralises_a_humans_comment(tmp_path):
    ws = workspace(tmp_path)
    with GitHubServer(repos=(REPO,)) as gh:
        human = gh.add_comment(PR, HUMAN, login="mallory", repo=REPO)
        r = run_action(gh, ws, "pull_request", pr_event(), comment="on-failure")
        assert r.code == 0 and "no comment needed" in r.stdout, str(r)
        assert [c["body"] for c in gh.comments(PR, REPO)] == [HUMAN] and human["body"] == HUMAN


def test_a_personal_token_edits_its_users_comment_only(tmp_path):
    ws = workspace(tmp_path)
    with GitHubServer(repos=(REPO,)) as gh:
        bots = gh.add_comment(PR, f"{MARK}\nan older report by the job token", login="github-actions[bot]", repo=REPO)
        r = run_action(gh, ws, "pull_request", pr_event(), token=PAT_TOKEN)
        assert r.code == 0 and "comment created" in r.stdout, str(r)
        r = run_action(gh, ws, "pull_request", pr_event(), token=PAT_TOKEN)
        # its own comment, edited in place ("unchanged" when the run's latencies rounded to the same comment)
        assert "comment updated" in r.stdout or "comment unchanged" in r.stdout, str(r)
        comments = gh.comments(PR, REPO)
        assert gh.count(method="GET", path=r"^/user$") >= 1
    assert [c["user"]["login"] for c in comments] == ["github-actions[bot]", PAT_USER]
    assert comments[0]["body"] == bots["body"]


def test_comment_author_names_a_github_apps_bot(tmp_path):
    ws = workspace(tmp_path)
    with GitHubServer(repos=(REPO,)) as gh:
        app = gh.add_comment(PR, f"{MARK}\nan older report by the app", login="my-app[bot]", repo=REPO)
        r = run_action(gh, ws, "pull_request", pr_event(), inputs={"comment-author": "my-app[bot]"})
        assert r.code == 0 and "comment updated" in r.stdout, str(r)
        (comment,) = gh.comments(PR, REPO)
        assert comment["id"] == app["id"] and "rag-gate passed" in comment["body"]
        assert gh.count(method="GET", path=r"^/user$") == 0  # told who it is: it does not ask
