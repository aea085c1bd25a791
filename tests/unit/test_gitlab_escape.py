"""The merge request note (gate.render.gitlab): untrusted text holding GitLab's own references (``!12``, ``~label``,
``%milestone``, ``&epic``, ``$snippet``, math, ``@user``, quick actions...) shows as typed and makes none, checked on the
HTML cmark-gfm makes of the note (tests/support/gitlab_server.gitlab_problems); the note is the GitHub comment with only
zero-width spaces and a quick action's backslash added, and the GitHub comment's bytes are those of its gold files."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.render.escape import ZWSP, cell, code
from gate.render.gitlab import gitlab_body, job_page, render_note
from tests.support.gitlab_server import gitlab_problems
from tests.support.markup import inert_problems, position_problems, render

GOLD = Path(__file__).resolve().parents[1] / "gold"
GITLAB_PAYLOADS = [
    "see !12 and group/project!34", "~bug ~123 ~\"two words\" ~group::scoped", "%v1.0 %123 %\"Sprint 4\" %*group",
    "&12 and group&34", "$12 costs $5 and $x^2$ or $$\\sum$$", "*iteration:12 *iteration:\"next\"",
    "[vulnerability:12] [feature_flag:3] [work_item:4]", "[[_TOC_]]", "[TOC]", "{+ added +} {- removed -} [+ a +] [- b -]",
    "@.dot", "/merge", "/close", "/label ~bad", "/assign @root", "   /approve",
]
# what the GitHub comment's escaping already stops, GitLab's way of reading it included
ALREADY_INERT = ["@root @all @here @group/sub _x@y a.@b", "#12 project#34 ^alert#12",
                 "https://gitlab.example.com/x www.gitlab.example.com", "mail root@gitlab.example.com"]
HARMLESS = ["hit_rate@5 holds", "3% of cases", "a & b", "cost 5$ only", "x ~ y", "50 % off", "ratio !x"]


def _note_lines(payload: str) -> str:
    """The places untrusted text takes in the comment's template: a table cell, an alert, a list item, the start of
    a line, a code span, a ``<details>`` block."""
    return "\n".join([
        "<!-- rag-gate:comment id=default -->", "## ❌ rag-gate failed", "",
        "| Case | Question |", "|---|---|", f"| {code(payload, 40)} | {cell(payload)} |", "",
        f"> [!WARNING]\n> {cell(payload, 500)}", "", f"- {code('mrr')}: {cell(payload, 300)}", "", cell(payload, 600), "",
        f"<details><summary>1 case</summary>\n\n| {cell(payload)} |\n|---|\n\n</details>", "",
    ]) + "\n"


@pytest.mark.parametrize("payload", GITLAB_PAYLOADS + ALREADY_INERT)
def test_gitlab_references_in_untrusted_text_stay_inert(payload):
    github = _note_lines(payload)
    note = gitlab_body(github)
    if payload in GITLAB_PAYLOADS:  # the instrument sees what the GitHub comment lets through (else this proves nothing)
        assert gitlab_problems(github)
    assert gitlab_problems(note) == []
    assert inert_problems(note) == [] and position_problems(note, github) == []


@pytest.mark.parametrize("payload", HARMLESS)
def test_harmless_text_is_left_as_it_is(payload):
    github = _note_lines(payload)
    assert gitlab_problems(github) == [] and gitlab_body(github).replace(ZWSP, "") == github.replace(ZWSP, "")


def test_code_spans_fences_and_the_marker_are_not_touched():
    body = "<!-- rag-gate:comment id=a!1 -->\n| `!12 ~x %y &amp;1` | \\`!12\\` |\n```mermaid\n~x %y !1\n```\n"
    note = gitlab_body(body)
    assert note.split("\n")[:1] == ["<!-- rag-gate:comment id=a!1 -->"]
    assert "`!12 ~x %y &amp;1`" in note and f"\\`!{ZWSP}12\\`" in note and "~x %y !1\n```" in note


def test_a_quick_action_gets_a_backslash_and_shows_as_typed():
    assert gitlab_body("x\n/close\n  /merge now\n") == "x\n\\/close\n  \\/merge now\n"
    assert "<p>/close" in render(gitlab_body("/close\n"))


@pytest.mark.parametrize("which", ["first", "regressed", "mismatch"])
def test_the_gold_comments_become_notes_with_the_same_structure(which):
    github = (GOLD / f"comment_{which}.md").read_text(encoding="utf-8")
    note = gitlab_body(github)
    assert gitlab_problems(note) == [] and position_problems(note, github) == []
    assert note.replace(ZWSP, "").replace("\n\\/", "\n/") == github.replace(ZWSP, "")


def test_the_job_link_is_added_only_for_a_job_page():
    assert job_page("https://gitlab.example.com/acme/rag/-/jobs/123") == "https://gitlab.example.com/acme/rag/-/jobs/123"
    for bad in ["https://gitlab.example.com/acme/rag/-/jobs/123)x", "javascript:alert(1)", "https://e.x/-/jobs/1", None, ""]:
        assert job_page(bad) is None
    report = {"run": {"comment_id": "default", "max_cases": 5}, "stages": {}, "errors": [], "warnings": [], "tool": {"version": "0.1.0"},
              "schema_version": 1, "golden_set": {"n": 0}, "target": {}, "baseline": {}}
    page = "https://gitlab.example.com/acme/rag/-/jobs/7"
    with_link, without = render_note(report, page), render_note(report, "https://evil.example/x")  # type: ignore[arg-type]
    assert f"[this job's artifacts]({page}/artifacts/browse)" in with_link and "artifacts" not in without
    assert inert_problems(with_link, link=f"{page}/artifacts/browse") == [] and gitlab_problems(with_link) == []


def test_escape_html_is_the_html_module_s_escape() -> None:
    """gate.render's escape_html (a run imports no html module for it) gives html.escape's text, quoted or not."""
    import html
    import random

    from gate.render.escape import escape_html

    rng = random.Random(5)
    alphabet = "&<>\"'amp;lt#x27 é日\u2028\x00"
    for _ in range(2000):
        s = "".join(rng.choices(alphabet, k=rng.randint(0, 12)))
        assert escape_html(s) == html.escape(s) and escape_html(s, quote=False) == html.escape(s, quote=False)
