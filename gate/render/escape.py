"""Untrusted text in the PR comment: the one place that makes any string safe to show, whatever its origin
(a golden set, a target's answer, a judge's error, or a fork's report artifact in the workflow_run job).

``cell`` is for text in prose and in table cells, ``code`` for an inline code span, ``label`` for a Mermaid
chart. What comes out renders as the same characters and nothing else:

* no HTML: ``<``, ``>`` and ``&`` become entities (so ``&#35;12`` shows as typed, it is not a ``#``);
* no Markdown: backslash, backtick, ``*``, ``~``, ``[``, ``]``, ``|``, ``$`` are backslash-escaped, and ``_``
  too unless it sits inside a word (where CommonMark never reads it as emphasis: ``max_drop`` stays as is);
* no block: a line that starts with a block's marker (``#`` to ``######``, ``-``, ``+``, ``1.`` or ``1)`` before a
  space or the end; a run of ``=`` or ``-``, a setext heading's underline) has the marker backslash-escaped, since a
  cell may start a line (of an alert, or of the job summary): no heading, list or quote inside the template's blocks
  (``*`` and ``>`` are escaped everywhere already);
* no GitHub reference: a zero-width space follows ``@`` before a name (not inside a word, as in ``hit_rate@5``, where
  GitHub sees no mention, but before a domain, as in an e-mail address, and before a commit sha, as in
  ``owner/repo@a1b2c3d`` or ``user@a1b2c3d``), and ``#`` and ``GH-`` before a number, so GitHub links no user, team,
  commit of another repository, issue or pull request (it links references on the rendered text, where an entity
  would already be decoded). A bare commit sha is left as it is: GitHub links it only to a commit of this repository;
* no link: a zero-width space breaks ``://`` and ``www.``, which GitHub's autolink extension would link;
* one line: every run of whitespace (newlines, tabs, CR, Unicode separators) becomes one space, so nothing
  leaves a table row, a list item or a ``<details>`` block;
* no reordering: a bidi control (U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C), which would make the
  text after it read in another order ("✅ passed" included), is shown as its name, ``<U+202E>`` (in code spans and
  chart labels too);
* no table wider than the page: a run of more than 40 characters without a space gets a zero-width space every
  30, where the browser may wrap it.

Cutting happens before escaping, so an escape is never cut in half (secrets were redacted before either).
"""

from __future__ import annotations

import re
from typing import Any

ZWSP = "\u200b"
_ESCAPED = str.maketrans({c: "\\" + c for c in "\\`*~[]|$"})
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # an underscore not between two letters or digits
_BREAKS = re.compile(
    r"(?<=@)(?<![A-Za-z0-9]@)(?=[A-Za-z0-9_-])"  # @name, @org/team (not hit_rate@5)
    r"|(?<=@)(?=[A-Za-z0-9-]+\.[A-Za-z])"  # an e-mail address
    r"|(?<=#)(?=\d)|(?i:(?<=\bgh-))(?=\d)"  # #12, org/repo#12, GH-12
    r"|(?<=:)(?=//)|(?i:(?<=\bwww))(?=\.)"  # https://..., www....
    r"|(?<=[A-Za-z0-9_.-]@)(?=[0-9A-Fa-f]{7,40}(?![0-9A-Za-z]))"  # user@sha, owner/repo@sha: a commit
)
_BLOCK_MARKER = re.compile(r"^(?=(?:#{1,6}|[-+])(?: |$)|=+$|-+$)")  # at the start: a heading, a list item, an underline
_ORDERED_MARKER = re.compile(r"^([0-9]{1,9})(?=[.)](?: |$))")  # 1. or 1) at the start: an ordered list item
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


_LONG_RUN = re.compile(r"[^\s\u200b]{41,}")
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_HTML_QUOTED = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def escape_html(s: str, quote: bool = True) -> str:
    """``html.escape(s, quote)``, the same text (the html module, whose entity table a run never reads, not imported)."""
    return s.translate(_HTML_QUOTED if quote else _HTML)


def _wrappable(m: re.Match[str]) -> str:
    run = m.group(0)
    return ZWSP.join(run[i:i + 30] for i in range(0, len(run), 30))


def _one_line(value: Any) -> str:
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", " ".join(str(value).split()))


def cell(value: Any, limit: int = 120) -> str:
    """Untrusted text for prose or one table cell: cut to ``limit`` characters, then escaped (see the module)."""
    s = _one_line(value)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = escape_html(_LONG_RUN.sub(_wrappable, _BREAKS.sub(ZWSP, s)), quote=False).translate(_ESCAPED)
    s = _UNDERSCORE.sub(r"\\_", s)
    return _ORDERED_MARKER.sub(r"\1\\", _BLOCK_MARKER.sub(r"\\", s))


def code(value: Any, limit: int = 60) -> str:
    """Untrusted text as an inline code span (GitHub renders its content literally: no markup, no reference, no link).
    Backticks become quotes, so nothing leaves the span; ``|`` is escaped for table cells. An id too long is cut in
    the middle: ids that share a long prefix still differ in what is shown (`policy_…#chunk_7`)."""
    s = _one_line(value).replace("`", "'")
    if len(s) > limit:
        head = (limit - 1) // 2
        s = s[:head] + "…" + s[len(s) - (limit - 1 - head):]
    return "`" + s.replace("|", "\\|") + "`"


_LABEL = re.compile(r"[^A-Za-z0-9 _@/.:+-]")


def label(value: Any, limit: int = 60) -> str:
    """Text inside a Mermaid chart's quotes: letters, digits and a few signs; anything else (a quote, a newline, a
    backtick that could close the code block) becomes ``_``."""
    return _LABEL.sub("_", _one_line(value))[:limit]
