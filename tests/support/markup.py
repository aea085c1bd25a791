"""What a PR comment turns into on GitHub, checked on the HTML that cmark-gfm (GitHub's own Markdown renderer, with
its table, autolink, strikethrough and tag-filter extensions) makes of it, never with regexes on the Markdown.

``inert_problems(markdown)`` lists every way the rendered comment could act on a reader or on GitHub: a link, an
image, a tag rag-gate's template does not use, an attribute, a mention, an issue or pull-request reference, an
autolinkable URL, a table row that lost or gained a cell, a second hidden marker. An empty list: the comment only
shows text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import cmarkgfm
from cmarkgfm.cmark import Options

# the tags the comment's template itself produces (headings, tables, lists, details blocks, alerts, code, the footer)
TEMPLATE_TAGS = {"p", "h2", "h3", "table", "thead", "tbody", "tr", "th", "td", "code", "strong", "em", "ul", "li",
                 "blockquote", "details", "summary", "sub", "pre"}
# class/lang: the trend chart's mermaid fence; open: a per-group gate's table, opened when a group failed
ATTRIBUTES = {("th", "align"), ("td", "align"), ("code", "class"), ("pre", "lang"), ("details", "open")}
REFERENCES = {
    "mention": re.compile(r"(?<![\w@])@[A-Za-z0-9-]"),
    "issue reference": re.compile(r"#\d"),
    "GH- reference": re.compile(r"(?i)\bgh-\d"),
    "URL": re.compile(r"(?i)\b(?:https?|ftp)://|\bwww\.[A-Za-z0-9]"),
    "e-mail": re.compile(r"[A-Za-z0-9._%+-]@[A-Za-z0-9-]+\.[A-Za-z]"),
}


def render(markdown: str) -> str:
    """GitHub-flavoured HTML, raw HTML kept (so that any tag the Markdown smuggles in shows up here)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


class _Walker(HTMLParser):
    def __init__(self, link: str | None = None) -> None:
        super().__init__(convert_charrefs=True)
        self.link = link  # the one link the template may make: to the run's page (its artifacts)
        self.problems: list[str] = []
        self.stack: list[str] = []
        self.comments: list[str] = []
        self.rows: list[int] = []  # cells of each table row, in order
        self.row_widths: list[list[int]] = []  # per table
        self.texts: list[str] = []  # text outside code and pre

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and self.link is not None and attrs == [("href", self.link)]:
            self.link = None  # once
            self.stack.append(tag)
            return
        if tag not in TEMPLATE_TAGS:
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            if (tag, name) not in ATTRIBUTES or (name in ("class", "lang") and value not in ("language-mermaid", "mermaid")) \
                    or (name == "open" and value is not None):
                self.problems.append(f"attribute {name}={value!r} on <{tag}>")
        if tag == "table":
            self.row_widths.append([])
        elif tag == "tr":
            self.rows.append(0)
        elif tag in ("td", "th") and self.rows:
            self.rows[-1] += 1
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self.rows and self.row_widths:
            self.row_widths[-1].append(self.rows.pop())
        while self.stack:
            if self.stack.pop() == tag:
                break

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.stack.pop()

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        if not {"code", "pre"} & set(self.stack):
            self.texts.append(data)


def inert_problems(markdown: str, link: str | None = None) -> list[str]:
    """Every way the rendered comment is more than text (see the module); [] when it is only text. ``link``: the run's
    page, the one link the template makes when the report has it (allowed once, with exactly that address)."""
    walker = _Walker(link)
    walker.feed(render(markdown))
    walker.close()
    problems = list(walker.problems)
    if len(walker.comments) != 1 or not walker.comments[0].startswith(" rag-gate:comment id="):
        problems.append(f"hidden comments {walker.comments!r} (only rag-gate's one marker may be there)")
    text = "".join(walker.texts)
    for what, pattern in REFERENCES.items():
        for m in pattern.finditer(text):
            problems.append(f"{what} {text[max(0, m.start() - 20): m.end() + 20]!r}")
    for widths in walker.row_widths:
        if len(set(widths)) > 1:
            problems.append(f"a table whose rows have {sorted(set(widths))} cells")
    return problems


def headline(markdown: str) -> str:
    """The text of the comment's first heading (the verdict line) as GitHub shows it."""
    m = re.search(r"<h2>(.*?)</h2>", render(markdown), re.S)
    return re.sub(r"<[^>]+>", "", m.group(1)) if m else ""


# -- where markup is, not only which (the template's structure with hostile text against harmless text)

BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
COMMIT = re.compile(r"[\w.-]@[0-9a-fA-F]{7,40}\b")  # user@SHA, owner/repo@SHA, as GitHub links them


class Structure(HTMLParser):
    """Every start and end tag, with its attributes, in order: the HTML without its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(f"<{tag}{''.join(f' {k}={v!r}' for k, v in attrs)}>")

    def handle_endtag(self, tag: str) -> None:
        self.events.append(f"</{tag}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.events.append(f"</{tag}>")


def structure(markdown: str) -> list[str]:
    parser = Structure()
    parser.feed(render(markdown))
    parser.close()
    return parser.events


def position_problems(markdown: str, harmless: str) -> list[str]:
    """Where the HTML of ``markdown`` differs from that of ``harmless`` (the same comment with harmless text): the
    first difference, in context. [] when each holds the same elements at the same places."""
    got, want = structure(markdown), structure(harmless)
    if got == want:
        return []
    i = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    return [f"at element {i}: {' '.join(got[max(0, i - 4): i + 4])!r} where the template has {' '.join(want[max(0, i - 4): i + 4])!r}"]


def text_problems(markdown: str) -> list[str]:
    """Commit references in the text GitHub shows outside code (where it links none), and bidi controls anywhere (in
    a code span too, they reorder what follows)."""
    html = render(markdown)
    prose = re.sub(r"<[^>]+>", "", re.sub(r"<code>.*?</code>|<pre.*?</pre>", "", html, flags=re.S))
    problems = [f"commit reference {prose[max(0, m.start() - 20): m.end()]!r}" for m in COMMIT.finditer(prose)]
    return problems + [f"bidi control U+{ord(m.group()):04X}" for m in BIDI_CONTROLS.finditer(re.sub(r"<[^>]+>", "", html))]
