"""Attack 1: a fork's report artifact drives the privileged workflow_run job (mode report), which comments with the
base repository's write token. The fork controls every byte of the artifact.

Reproduced here against the real action (``python entrypoint.py``) and the fake GitHub API: a real report of the
fork's run, with every string the schema lets through replaced by markup, mentions, references, links and ways
out of code spans, tables, ``<details>`` and Mermaid blocks, and a forged verdict. The comment GitHub would show is
rendered with cmark-gfm and must be text only, and its headline must be the one the gate decisions give.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gate.core.errors import InputError
from gate.io.reports import check_document, is_valid_document
from gate.render.markdown import render_comment
from tests.support.action import HEAD, PR, REPO, fork_report, report_workspace, run_action, workflow_run_event
from tests.support.github_server import GitHubServer
from tests.support.markup import headline, inert_problems

PAYLOADS = [
    "<img src=https://evil.example/i.png onerror=alert(1)>",
    "<a href=https://evil.example/rotate>rotate your token</a>",
    "@victim-user @org/team cc:@admin",
    "#1 GH-2 owner/repo#3 see pull #42",
    "[click](https://evil.example) ![i](https://evil.example/i.png) <https://evil.example>",
    "\\[x\\](https://evil.example) \\*bold\\* *em* _em_ ~~del~~ $\\href{https://evil.example}{x}$",
    "` `` ``` closes the code span ` <b>x</b>",
    "| broken | table | cell |",
    "line one\n```\n</details>\n# heading\n<details><summary>forged</summary>",
    "https://evil.example www.evil.example mail@evil.example",
    "&#35;12 &#64;user &lt;img&gt; &amp;",
    "</summary></details><script>alert(1)</script><!-- hidden -->",
    "\"] title \"x\"\n```\n<img src=x>",  # out of a Mermaid title
]


def _strings(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool]]:
    """(path, is_key) of every string in a JSON value: values, and keys of objects keyed by data."""
    out: list[tuple[tuple[Any, ...], bool]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((path + (k,), True))
            out += _strings(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _strings(v, path + (i,))
    elif isinstance(value, str):
        out.append((path, False))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def hostile(report: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The report with every string (and data key) the schema accepts replaced by a payload; how many were replaced.
    Each replacement is kept only if the whole document still passes the schema (what the door lets through)."""
    doc = copy.deepcopy(report)
    replaced = 0
    for i, (path, is_key) in enumerate(_strings(report)):
        payload = PAYLOADS[i % len(PAYLOADS)]
        try:
            parent = _get(doc, path[:-1])
            old = path[-1] if is_key else parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # under a key an earlier replacement renamed
        if is_key:
            new = f"{payload} {i}"
            parent[new] = parent.pop(old)
        else:
            parent[path[-1]] = f"{payload} {old}"
        try:
            if not is_valid_document(doc, "report"):
                raise InputError("refused")
            replaced += 1
        except InputError:  # the schema refuses it at the door: not a way in; undo
            if is_key:
                parent[old] = parent.pop(new)
            else:
                parent[path[-1]] = old
    return doc, replaced


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real report of a fork's failing pull_request run."""
    with GitHubServer(repos=(REPO,)) as gh:
        path = fork_report(gh, tmp_path_factory.mktemp("fork"), fail=True, by_group=True)
    report = json.loads(path.read_text(encoding="utf-8"))
    assert any(g.get("groups") for g in report["stages"]["retrieval"]["gates"])  # per-group records are attacked too
    return report


def test_the_hostile_artifact_reaches_every_field_the_schema_lets_through(artifact):
    bad, replaced = hostile(artifact)
    assert replaced > 300  # questions, ids, answers, reasons, rules, errors, notes, model names, group names...
    check_document(bad, "report", file="artifact")
    assert inert_problems(render_comment(artifact)) == []  # the normal comment is text only (the checker's control)


def test_the_checker_sees_what_an_unescaped_comment_would_do():
    """The instrument, on Markdown that does smuggle things in: each payload is caught when not escaped."""
    problems = [p for payload in PAYLOADS for p in inert_problems(f"<!-- rag-gate:comment id=default -->\n## x\n\n{payload}\n")]
    for what in ("tag <img>", "tag <a>", "tag <b>", "mention", "issue reference", "GH- reference", "URL", "hidden comments"):
        assert any(p.startswith(what) for p in problems), (what, problems)


def test_report_mode_posts_text_only_and_the_recomputed_headline(artifact, tmp_path):
    bad, _ = hostile(artifact)
    bad["run"].update(pr=artifact["run"]["pr"], head_sha=artifact["run"]["head_sha"], comment_id="default")  # else refused
    bad["verdict"], bad["exit_code"] = "pass", 0  # forged: "✅ rag-gate passed"
    failed = sum(g["status"] == "fail" for s in bad["stages"].values() for g in s["gates"])
    total = sum(len(s["gates"]) for s in bad["stages"].values())
    assert failed >= 1
    with GitHubServer(repos=(REPO,)) as gh:
        gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
        ws = report_workspace(tmp_path, text=json.dumps(bad))
        r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD), mode="report")
        assert r.code == 0, str(r)
        (comment,) = gh.comments(PR, REPO)
    body = comment["body"]
    assert body.count("evil.example") > 15 and "victim-user" in body  # the hostile text is there (which payload lands where moves with the fields), shown as text
    assert inert_problems(body) == []
    assert headline(body) == f"❌ rag-gate failed: {failed} of {total} gates failed"
    assert "passed" not in headline(body)
    assert r.outputs["verdict"] == "fail"  # the step output too: recomputed, not the artifact's string
    assert inert_problems(r.summary) == []  # the job summary shows the same, with more rows


@pytest.mark.parametrize("field", ["verdict", "stage", "metric", "status", "by_type"])
def test_fields_with_a_grammar_are_refused_at_the_door(artifact, tmp_path, field):
    bad = copy.deepcopy(artifact)
    if field == "verdict":
        bad["verdict"] = "✅ rag-gate passed"
    elif field == "stage":
        bad["stages"]["<img src=x>"] = bad["stages"].pop("generation")
    elif field == "metric":
        bad["stages"]["retrieval"]["metrics"]["mrr`\n```"] = 0.5
    elif field == "status":
        bad["stages"]["retrieval"]["gates"][0]["status"] = "passed"
    else:
        bad["golden_set"]["by_type"]["@org/team"] = 3
    with GitHubServer(repos=(REPO,)) as gh:
        gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
        r = run_action(gh, report_workspace(tmp_path, text=json.dumps(bad)), "workflow_run", workflow_run_event(HEAD), mode="report")
        assert r.code == 2 and "not a rag-gate report" in r.lines("error")[0], str(r)
        assert gh.comments(PR, REPO) == []


def test_a_workflow_run_from_another_repository_is_refused(artifact, tmp_path):
    """The head sha matches, but the workflow run ran in another repository than the PR's head: no comment."""
    with GitHubServer(repos=(REPO,)) as gh:
        gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
        ws = report_workspace(tmp_path, text=json.dumps(artifact))
        r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD, head_repository="attacker/repo"), mode="report")
        assert r.code == 2, str(r)
        assert "not in 'attacker/repo'" in r.lines("error")[0] and "refusing to comment" in r.lines("error")[0]
        assert gh.comments(PR, REPO) == []
        r = run_action(gh, ws, "workflow_run", workflow_run_event(HEAD), mode="report")  # the fork's own repository: posted
        assert r.code == 0 and len(gh.comments(PR, REPO)) == 1, str(r)
