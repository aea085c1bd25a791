"""The merge request note on GitLab: the PR comment's body (gate.render.markdown), made safe for GitLab Flavored
Markdown. Pure.

The comment's escaping (gate.render.escape) already keeps untrusted text from making HTML, Markdown, a block, a
mention, an issue reference or a link. GitLab reads more in a note's text, after the Markdown is rendered (where a
backslash escape no longer counts), and acts on some of it when the note is saved. ``gitlab_body`` adds a zero-width
space where GitLab would see a reference, outside code spans and fenced blocks (where GitLab sees none):

* ``!123`` (a merge request), ``~label`` / ``~"two words"``, ``%milestone``, ``&123`` (an epic), ``$123`` (a snippet)
  and ``$…$`` (math), ``*iteration:…``, ``[vulnerability:…]``, ``[feature_flag:…]``, ``[[_TOC_]]``, the inline diffs
  ``{+ +}`` / ``[- -]``, and ``@name`` wherever GitLab sees a mention (after anything but a letter, digit or
  ``_``);
* a line that starts with ``/`` (a quick action, such as ``/merge`` or ``/close``, which GitLab runs when a note is
  posted) gets a backslash before the ``/``: it shows as typed and runs nothing.

The template's own text has none of these; the bytes of the GitHub comment are not changed (its gold files hold).
"""

from __future__ import annotations

import re

from gate.core.report import Report
from gate.render.escape import ZWSP
from gate.render.markdown import render_comment

NOTE_LIMIT = 1_000_000  # GitLab refuses a longer note body
# the note when the run wrote no report (``rag-gate gitlab note --missing-report note``): the earlier result is out of date
NO_REPORT_BODY = ("## ⚠️ rag-gate wrote no report\n\nThe newest pipeline's rag-gate run ended before it wrote its report: an "
                  "input is invalid (exit 2) or the run could not start (exit 3). The rag-gate job's log says which. The "
                  "result an earlier run posted here is out of date.\n")
# what untrusted text can hold after gate.render.escape.cell (``~`` is ``\~``, ``&`` is ``&amp;``, ``$`` is ``\$``...)
_REFERENCE = re.compile(
    r"(?<=!)(?=[0-9])"  # !123, group/project!123: a merge request
    r"|(?<=~)(?=[^\s\u200b])"  # ~bug, ~123, ~"two words", ~group::scoped: a label
    r"|(?<=%)(?=[^\s\u200b])"  # %v1.0, %123, %"two words": a milestone
    r"|(?<=&amp;)(?=[\w\"])"  # &123, group&123: an epic
    r"|(?<=\\\$)"  # $123 (a snippet), $x$ and $$ (math)
    r"|(?<=\\\*)(?=[A-Za-z])"  # *iteration:123
    r"|(?<=\\\[)(?=[^\s\u200b])"  # [vulnerability:1], [feature_flag:1], [[_TOC_]], [TOC], [+ +], [- -]
    r"|(?<=\{)(?=[+-])"  # {+ added +}, {- removed -}
    r"|(?<=@)(?<![A-Za-z0-9_]@)(?=[A-Za-z0-9_.])"  # @user, @group, @all (GitLab: no word character before the @)
)
_QUICK_ACTION = re.compile(r"^( {0,3})/")
_JOB_PAGE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9_.-]+)+/-/jobs/[0-9]{1,20}")


def _spans(line: str) -> list[tuple[str, bool]]:
    """The line cut into (text, is_code) pieces: a code span opens at a backtick that no backslash escapes (an escaped
    one is preceded by an odd run of backslashes) and closes at the next backtick."""
    pieces: list[tuple[str, bool]] = []
    start = i = 0
    while i < len(line):
        if line[i] == "`":
            slashes = len(line[:i]) - len(line[:i].rstrip("\\"))
            end = line.find("`", i + 1)
            if slashes % 2 == 0 and end != -1:
                pieces += [(line[start:i], False), (line[i:end + 1], True)]
                start = i = end + 1
                continue
        i += 1
    return pieces + [(line[start:], False)]


def gitlab_body(markdown: str) -> str:
    """The comment body with every GitLab reference and quick action left inert (see the module)."""
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or line.startswith(("```", "<!-- rag-gate:")):
            out.append(line)
            continue
        line = "".join(piece if is_code else _REFERENCE.sub(ZWSP, piece) for piece, is_code in _spans(line))
        out.append(_QUICK_ACTION.sub(r"\1\\/", line))
    return "\n".join(out).replace("GitHub's size limit", "GitLab's size limit")


def job_page(url: str | None) -> str | None:
    """The CI job's page (GitLab's CI_JOB_URL) when it has the form of one; its artifacts are where the HTML report is."""
    return url if isinstance(url, str) and _JOB_PAGE.fullmatch(url) else None


def render_note(report: Report, job_url: str | None = None, limit: int = NOTE_LIMIT) -> str:
    """The merge request note: the comment's body for GitLab, with a link to the job's artifacts when ``job_url`` is a
    job page (the comment's own link is to a GitHub run page, which a GitLab job has not)."""
    body = gitlab_body(render_comment(report, limit - 300))
    page = job_page(job_url)
    if page and "\n<sub>rag-gate" in body:
        line = f"Every case, with its passages, answer diff and scores: the HTML report in [this job's artifacts]({page}/artifacts/browse).\n\n"
        head, tail = body.rsplit("\n<sub>rag-gate", 1)
        body = f"{head}\n{line}<sub>rag-gate{tail}"
    return body
