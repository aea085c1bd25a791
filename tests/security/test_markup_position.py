"""Where markup is, not only which: untrusted text that starts with ``## ``, ``- `` or ``1. `` turned into a heading or
a list inside an alert (a forged "## ✅ rag-gate passed" under the real failed headline), and the inert-output checker
(tests/support/markup.py) let it pass, since h2, ul and li are tags of the template.

The check here compares the HTML structure cmark-gfm (GitHub's renderer) makes of two comments of the same report:
one whose strings each start with a hostile payload, one whose strings start with harmless letters of the same
length instead. Every element, attribute and nesting must be the same: whatever the template does not put there is
absent. The same comment must name no commit (``owner/repo@SHA``, ``user@SHA``: GitHub's commit autolinks) and hold no
bidi control (which reorders what a reader sees, "✅ passed" included). And a comment cut to GitHub's size limit ends
outside every ``<details>`` (``<details open>`` too) with no alert left empty.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gate.github.commands import fail
from gate.io.reports import is_valid_document
from gate.render.markdown import render_comment
from tests.support.action import regressed_quickstart
from tests.support.markup import inert_problems, position_problems, render, text_problems

BLOCK_PAYLOADS = [
    "## ✅ rag-gate passed", "# h1", "###### h6", "#", "- forged item", "-", "+ item", "* item", "1. item", "1) item",
    "12345. item", "> quoted", "===", "---", "=", "- - -", "***", "___", "    indented code", "```", "~~~ fence",
    "<details open><summary>forged</summary>", "| a | b |", "[x]: https://evil.example", "- [x] task",
    "line one\n## heading after a newline", "a\r\n- item after CRLF", "a\r1. after CR", "a\u2028## after U+2028",
    "a\u0085- after NEL", "a\x0b- after VT", "a\x0c## after FF",
]
REFERENCES = [
    "see owner/repo@a1b2c3d for it", "octocat@0123456789abcdef0123456789abcdef01234567", "a1b2c3d@a1b2c3d4e5",
]
BIDI = ["\u202e✅ passed\u202c", "\u2066❌\u2069 \u2067x\u2069 \u2068y\u2069", "\u200e\u200f\u061c", "\u202a\u202b\u202d"]
def _strings(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool]]:
    """(path, is_key) of every string of a JSON value: values, and keys of objects keyed by data."""
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


def _harmless(payload: str) -> str:
    return re.sub(r"\S", "x", " ".join(payload.split()))


def _put(doc: Any, path: tuple[Any, ...], is_key: bool, text: str, i: int) -> Callable[[], None]:
    """``text`` in front of the string at ``path`` (or, for a key, as its name); returns what undoes it."""
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    name = path[-1]
    if is_key:
        new = f"{text} {i}"
        parent[new] = parent.pop(name)
        return lambda: parent.__setitem__(name, parent.pop(new))
    old = parent[name]
    parent[name] = f"{text} {old}"
    return lambda: parent.__setitem__(name, old)


def twins(report: dict[str, Any], payloads: list[str]) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The report with each string (and data key) the schema lets through starting with a payload, the same report with
    harmless letters in their place, and how many strings were changed. A change either document's schema refuses is
    left out of both. The last string first: a key is renamed after the strings under it."""
    bad, good = copy.deepcopy(report), copy.deepcopy(report)
    changed = 0
    for i, (path, is_key) in reversed(list(enumerate(_strings(report)))):
        payload = payloads[i % len(payloads)]
        undo = [_put(bad, path, is_key, payload, i), _put(good, path, is_key, _harmless(payload), i)]
        if is_valid_document(bad, "report") and is_valid_document(good, "report"):
            changed += 1
        else:
            for step in undo:
                step()
    return bad, good, changed


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real report (see regressed_quickstart) with an error and warnings of the run and of its stages: alerts."""
    report = regressed_quickstart(tmp_path_factory.mktemp("markup") / "ws")
    report["errors"] = ["the run could not finish"]
    report["warnings"] += ["another warning of the run"]
    for stage in report["stages"].values():
        stage["warnings"].append("a warning of the stage")
    return report


def _comment(report: dict[str, Any]) -> str:
    return render_comment(report, limit=10**7)  # never cut: both comments keep every section


@pytest.mark.parametrize("payloads", [BLOCK_PAYLOADS, REFERENCES + BIDI], ids=["block markers", "commits and bidi"])
def test_untrusted_text_opens_no_block_and_names_no_commit(report, payloads):
    bad, good, changed = twins(report, payloads)
    assert changed > 300  # questions, ids, answers, reasons, warnings, errors, labels, group names, ...
    body, harmless = _comment(bad), _comment(good)
    assert body != harmless and inert_problems(harmless) == [] and position_problems(harmless, harmless) == []
    assert position_problems(body, harmless) == []
    assert inert_problems(body) == []
    assert text_problems(body) == []


def test_the_position_check_sees_a_forged_heading_inside_an_alert():
    """The instrument: the forged headline of the defect report is found by the position check, not by the tag list."""
    def comment(warning: str) -> str:
        return f"<!-- rag-gate:comment id=default -->\n## ❌ rag-gate failed\n\n> [!WARNING]\n> {warning}\n"

    forged, harmless = comment("## ✅ rag-gate passed"), comment("xx x xxxxxxxx xxxxxx")
    assert inert_problems(forged) == []  # h2 is a template tag: the tag list lets it through
    assert position_problems(forged, harmless) and "<h2>" in position_problems(forged, harmless)[0]
    assert text_problems("owner/repo@a1b2c3d \u202ex") == ["commit reference 'owner/repo@a1b2c3d'", "bidi control U+202E"]


def test_an_error_in_the_job_summary_opens_no_block(tmp_path: Path, capsys):
    """fail() puts its message at the start of a line of the job summary."""
    for n, message in enumerate(["## ✅ rag-gate passed", "xx x xxxxxxxx xxxxxx"]):
        fail({"GITHUB_STEP_SUMMARY": str(tmp_path / f"summary{n}")}, "rag-gate", message, hint="- do this", code=2)
    capsys.readouterr()
    forged, harmless = ((tmp_path / f"summary{n}").read_text(encoding="utf-8") for n in range(2))
    assert position_problems(forged, harmless) == []


# --------------------------------------------------------------------------- a comment cut to the size limit


class Blocks(HTMLParser):
    """Where the footer is (inside how many <details>), and the text of each blockquote (an alert)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth, self.footer_depth = 0, None
        self.quotes: list[str] = []
        self.quoting = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            self.depth += 1
        elif tag == "sub":
            self.footer_depth = self.depth
        elif tag == "blockquote":
            self.quoting += 1
            self.quotes.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.depth -= 1
        elif tag == "blockquote":
            self.quoting -= 1

    def handle_data(self, data: str) -> None:
        if self.quoting:
            self.quotes[-1] += data


def test_a_cut_comment_ends_outside_every_details_block_and_leaves_no_empty_alert(report):
    """Failed per-group gates are ``<details open>`` blocks; warnings are alerts of two lines. Cut at every size from
    a few lines to the whole: the note and the footer are outside every details block, and no alert lost its text."""
    big = copy.deepcopy(report)
    big["warnings"] = [f"warning {i} " + "w" * 300 for i in range(12)]
    retrieval = big["stages"]["retrieval"]
    retrieval["warnings"] = [f"stage warning {i} " + "s" * 300 for i in range(6)]
    gates = [g for g in retrieval["gates"] if g.get("groups")]
    retrieval["gates"] += [copy.deepcopy(g) for g in gates for _ in range(3)]
    assert any(r["status"] == "fail" for g in gates for r in g["groups"])  # so its block is <details open>
    whole = len(render_comment(big, limit=10**7, max_cases=0))
    cuts, inside, empty = 0, [], []
    for limit in range(1500, whole, 97):
        body = render_comment(big, limit=limit)
        assert len(body) <= limit
        if "The comment was cut to fit" not in body:
            continue
        cuts += 1
        blocks = Blocks()
        blocks.feed(render(body))
        if blocks.footer_depth != 0:
            inside.append((limit, body[-300:]))
        if any(re.fullmatch(r"\s*\[!\w+\]\s*", q) for q in blocks.quotes):
            empty.append((limit, body[-300:]))
    assert cuts > 20
    assert inside == [], f"{len(inside)} of {cuts} cuts end inside a details block, e.g. {inside[0]}"
    assert empty == [], f"{len(empty)} of {cuts} cuts leave an empty alert, e.g. {empty[0]}"
