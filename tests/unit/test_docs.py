"""The documentation: README.md is the front door, docs/ the reference.

- README.md stays short, links every page of docs/, and its two commands are the two that CI (.ci/run) runs.
- Every relative link of README.md and docs/*.md (Markdown links, images and <a href>) reaches a file of the
  repository, and its #fragment a heading of that file, with GitHub's slugs (-1, -2 for repeated headings).
- docs/action.md's INPUTS and OUTPUTS tables list exactly action.yml's inputs and outputs.

Pages are read as GitHub reads them: rendered by cmark-gfm (GitHub's own renderer), so that a link in a code span
or a fenced block is no link, and a heading is its text. The checkers are tried on made-up pages too, so that each
check can fail.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import cmarkgfm
import lxml.html
import pytest
import yaml
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ACTION_DOC = DOCS / "action.md"
NO_DEFAULT = "—"  # the default cell of an input whose default is the empty string


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def render(text: str) -> Any:
    """The HTML cmark-gfm makes of a Markdown text (raw HTML kept, as GitHub keeps <a href>), as one element."""
    html = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    return lxml.html.fragment_fromstring(html or "<p></p>", create_parent="div")


# --------------------------------------------------------------------------- headings and links


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation but hyphens and underscores removed, each
    space a hyphen (letters and digits of any script are kept)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The fragments a page has: one per heading (the second "Usage" is usage-1, the third usage-2), and every
    id or name set in its raw HTML."""
    tree = render(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    seen: dict[str, int] = {}
    for h in tree.iter("h1", "h2", "h3", "h4", "h5", "h6"):
        slug = github_slug(h.text_content())
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    for el in tree.iter():
        for attr in ("id", "name"):
            if isinstance(el.tag, str) and el.get(attr):
                found.add(el.get(attr))
    return found


def links(path: Path) -> list[str]:
    """Every link target of a page: <a href> (Markdown links, reference links, raw HTML) and <img src>."""
    tree = render(path.read_text(encoding="utf-8"))
    out = [a.get("href") for a in tree.iter("a") if a.get("href") is not None]
    out += [img.get("src") for img in tree.iter("img") if img.get("src") is not None]
    return out


def _git_ignored(root: Path, target: Path) -> bool:
    if not (root / ".git").exists():
        return False
    proc = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", str(target)], capture_output=True, timeout=30)
    return proc.returncode == 0


def link_problems(page: Path, root: Path) -> list[str]:
    """What is wrong with the relative links of ``page``: a target that is not a file (or folder) of ``root``, or a
    fragment that is not an anchor of its target. Links with a scheme or a host are not checked."""
    problems = []
    where = page.relative_to(root)
    for href in links(page):
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            continue
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
        if not target.is_relative_to(root.resolve()):
            problems.append(f"{where}: {href!r} points outside the repository")
            continue
        if not target.exists():
            problems.append(f"{where}: {href!r}: no such file {target.relative_to(root.resolve())}")
            continue
        if _git_ignored(root, target):
            problems.append(f"{where}: {href!r}: {target.relative_to(root.resolve())} is ignored by git, not in the repository")
            continue
        if not parts.fragment:
            continue
        fragment = unquote(parts.fragment)
        if target.suffix.lower() != ".md" or target.is_dir():
            if not re.fullmatch(r"L\d+(-L\d+)?", fragment):  # GitHub's line anchors of a source file
                problems.append(f"{where}: {href!r}: a fragment on a file that has no headings")
        elif fragment not in anchors(target):
            problems.append(f"{where}: {href!r}: no heading #{fragment} in {target.relative_to(root.resolve())}")
    return problems


@pytest.mark.parametrize(
    "heading, slug",
    [
        ("Judge gates: both sides judged in the same run", "judge-gates-both-sides-judged-in-the-same-run"),
        ("What the action trusts, and what it does not", "what-the-action-trusts-and-what-it-does-not"),
        ("Try it (two commands)", "try-it-two-commands"),
        ("stages.robustness", "stagesrobustness"),
        ("${NAME}: values from the environment", "name-values-from-the-environment"),
        ("max_drop — and rank@k", "max_drop--and-rankk"),
        ("Große Änderungen", "große-änderungen"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_the_link_checker_finds_broken_links_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# B\n\n## Usage\n\ntext\n\n## Usage\n\n## `code` and *emphasis*\n", encoding="utf-8")
    (tmp_path / "data.txt").write_text("x\n", encoding="utf-8")
    (tmp_path / "a.md").write_text(
        "# Title\n\n"
        "[good](b.md#usage), [repeated heading](b.md#usage-1), [code heading](b.md#code-and-emphasis), "
        "[this page](#title), [a file](data.txt), [a line](data.txt#L1), [outside](https://example.invalid/x.md)\n\n"
        '<a href="b.md#usage">good HTML link</a>\n\n'
        "[no file](missing.md) [no anchor](b.md#install) [third usage](b.md#usage-2) [no anchor here](#nowhere)\n\n"
        '<a href="gone.md">broken HTML link</a> [anchor on a text file](data.txt#usage) [up and out](../../etc/x.md)\n\n'
        "`[in a code span](code-span.md)`\n\n```\n[in a fence](fence.md)\n```\n",
        encoding="utf-8",
    )
    problems = link_problems(tmp_path / "a.md", tmp_path)
    flagged = [re.search(r"'([^']*)'", p).group(1) for p in problems]  # type: ignore[union-attr]
    assert flagged == ["missing.md", "b.md#install", "b.md#usage-2", "#nowhere", "gone.md", "data.txt#usage", "../../etc/x.md"]
    assert "no such file" in problems[0] and "no heading #install" in problems[1]


def test_every_relative_link_of_the_docs_resolves() -> None:
    problems = [p for page in pages() for p in link_problems(page, ROOT)]
    assert not problems, "\n".join(problems)
    assert sum(len(links(p)) for p in pages()) > 20  # the pages are read: they link to each other


def test_the_readme_is_the_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    # the quickstart, a first spec, the three frameworks' examples and the pull-request workflow; the reference is docs/
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move reference text to docs/"
    linked = {(README.parent / urlsplit(h).path).resolve() for h in links(README) if not urlsplit(h).scheme}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"README.md links no docs page {missing}"
    assert (ROOT / "LICENSE").resolve() in linked


def test_the_docs_index_lists_every_page() -> None:
    index = DOCS / "README.md"
    linked = {(DOCS / urlsplit(h).path).resolve() for h in links(index) if not urlsplit(h).scheme}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p != index and p.resolve() not in linked]
    assert not missing, f"docs/README.md lists no {missing}"


# --------------------------------------------------------------------------- the README's two commands are CI's


def section_code_blocks(text: str, heading: str) -> list[str]:
    """The fenced blocks under the h2 ``heading`` (up to the next h2), as they are written."""
    tree = render(text)
    blocks: list[str] = []
    inside = False
    for el in tree:
        if el.tag == "h2":
            inside = el.text_content().strip() == heading
        elif inside:
            blocks += [pre.text_content() for pre in el.iter("pre")]
    return blocks


def ci_readme_commands(run: str) -> list[str]:
    """The line after each "# README command N" comment of .ci/run, in order."""
    lines = run.splitlines()
    marked = [(int(m.group(1)), lines[i + 1]) for i, line in enumerate(lines)
              if (m := re.match(r"\s*# README command (\d+)\b", line)) and i + 1 < len(lines)]
    assert [n for n, _ in marked] == list(range(1, len(marked) + 1)), marked
    return [cmd for _, cmd in marked]


def test_the_readme_commands_are_the_ones_ci_runs() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = ci_readme_commands(run)
    assert len(commands) == 2, commands
    executed = [line for line in run.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert all(c in executed for c in commands), "a README command of .ci/run is no command"
    blocks = section_code_blocks(README.read_text(encoding="utf-8"), "Try it (two commands)")
    assert blocks == [c + "\n" for c in commands], blocks


def test_the_command_check_sees_a_changed_command() -> None:
    text = "## Try it (two commands)\n\n```sh\nmake\n```\n\n```sh\nmake  test\n```\n\n## Next\n\n```sh\nother\n```\n"
    assert section_code_blocks(text, "Try it (two commands)") == ["make\n", "make  test\n"]
    assert ci_readme_commands("# README command 1: build\nmake\n# README command 2\nmake test\n") == ["make", "make test"]
    assert section_code_blocks(text, "Try it (two commands)") != [c + "\n" for c in ["make", "make test"]]


# --------------------------------------------------------------------------- docs/action.md against action.yml


def doc_table(text: str, heading: str) -> list[dict[str, Any]]:
    """The first table under the h2 ``heading``: one dict a row, by header; each cell as {"text", "code"} (the
    text of its first code span, or None)."""
    tree = render(text)
    inside = False
    for el in tree:
        if el.tag == "h2":
            inside = el.text_content().strip() == heading
        elif inside and el.tag == "table":
            header = [th.text_content().strip().lower() for th in el.iter("th")]
            rows = []
            for tr in el.iter("tr"):
                cells = tr.findall("td")
                if not cells:
                    continue
                row = {}
                for name, td in zip(header, cells, strict=True):
                    code = td.find(".//code")
                    row[name] = {"text": td.text_content().strip(), "code": None if code is None else code.text_content()}
                rows.append(row)
            return rows
    raise AssertionError(f"no table under a heading {heading!r}")


def input_table_problems(rows: list[dict[str, Any]], inputs: dict[str, Any]) -> list[str]:
    """How an INPUTS table (input | required | default | description) differs from action.yml's inputs."""
    problems = []
    names = []
    for row in rows:
        name = row["input"]
        if name["code"] is None or name["code"] != name["text"]:
            problems.append(f"input {name['text']!r}: the name is not in backticks")
        names.append(name["text"])
        spec = inputs.get(name["text"])
        if spec is None:
            problems.append(f"input {name['text']!r} is not in action.yml")
            continue
        required = {"yes": True, "no": False}.get(row["required"]["text"].lower())
        if required is None or required != bool(spec.get("required", False)):
            problems.append(f"input {name['text']!r}: required {row['required']['text']!r}, action.yml {spec.get('required')!r}")
        cell = row["default"]
        default = cell["code"] if cell["code"] is not None and cell["code"] == cell["text"] else (
            "" if cell["text"] == NO_DEFAULT else None)
        if default != str(spec.get("default", "")):
            problems.append(f"input {name['text']!r}: default {cell['text']!r}, action.yml {spec.get('default')!r}")
        if not row["description"]["text"]:
            problems.append(f"input {name['text']!r}: no description")
    problems += [f"input {n!r} is listed twice" for n in sorted(set(names)) if names.count(n) > 1]
    problems += [f"input {n!r} of action.yml is not listed" for n in inputs if n not in names]
    return problems


def output_table_problems(rows: list[dict[str, Any]], outputs: dict[str, Any]) -> list[str]:
    problems = []
    names = []
    for row in rows:
        name = row["output"]
        if name["code"] is None or name["code"] != name["text"]:
            problems.append(f"output {name['text']!r}: the name is not in backticks")
        names.append(name["text"])
        if name["text"] not in outputs:
            problems.append(f"output {name['text']!r} is not in action.yml")
        if not row["description"]["text"]:
            problems.append(f"output {name['text']!r}: no description")
    problems += [f"output {n!r} is listed twice" for n in sorted(set(names)) if names.count(n) > 1]
    problems += [f"output {n!r} of action.yml is not listed" for n in outputs if n not in names]
    return problems


def action_yml() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def test_the_inputs_table_is_action_yml() -> None:
    rows = doc_table(ACTION_DOC.read_text(encoding="utf-8"), "Inputs")
    assert list(rows[0]) == ["input", "required", "default", "description"]
    inputs = action_yml()["inputs"]
    assert len(inputs) >= 10
    assert input_table_problems(rows, inputs) == []


def test_the_outputs_table_is_action_yml() -> None:
    rows = doc_table(ACTION_DOC.read_text(encoding="utf-8"), "Outputs")
    assert list(rows[0]) == ["output", "description"]
    outputs = action_yml()["outputs"]
    assert outputs
    assert output_table_problems(rows, outputs) == []


def test_the_table_checks_find_a_difference() -> None:
    inputs = {"config": {"required": False, "default": "rag-eval.yml"}, "mode": {"required": False, "default": ""},
              "token": {"required": True, "default": "${{ github.token }}"}}
    good = ("## Inputs\n\n| input | required | default | description |\n|---|---|---|---|\n"
            "| `config` | no | `rag-eval.yml` | the spec |\n| `mode` | no | — | the mode |\n"
            "| `token` | yes | `${{ github.token }}` | a token |\n")
    assert input_table_problems(doc_table(good, "Inputs"), inputs) == []
    bad = ("## Inputs\n\n| input | required | default | description |\n|---|---|---|---|\n"
           "| config | no | `rag-eval.yml` | the spec |\n| `mode` | yes | `gate` | |\n| `extra` | no | — | more |\n")
    assert input_table_problems(doc_table(bad, "Inputs"), inputs) == [
        "input 'config': the name is not in backticks",
        "input 'mode': required 'yes', action.yml False",
        "input 'mode': default 'gate', action.yml ''",
        "input 'mode': no description",
        "input 'extra' is not in action.yml",
        "input 'token' of action.yml is not listed",
    ]
    outputs = {"verdict": {"description": "pass, fail or error."}, "report": {"description": "x"}}
    table = "## Outputs\n\n| output | description |\n|---|---|\n| `verdict` | pass or fail |\n| `verdict` | again |\n"
    assert output_table_problems(doc_table(table, "Outputs"), outputs) == [
        "output 'verdict' is listed twice", "output 'report' of action.yml is not listed"]


def test_the_repository_cites_nothing_outside_it() -> None:
    """Code, messages and docs stand alone: no tracked file points into a folder beside the repository or at the
    articles the project grew from (a console message once named them, in the tracker's word for them)."""
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    pattern = re.compile(r"\.\./shared|\bthe seeds\b|\bseeds'|\bseeds/", re.I)
    found = []
    for name in files:
        path = ROOT / name
        if path.suffix in {".py", ".md", ".yml", ".yaml", ".json", ".jsonl", ".txt", ".toml", ".sh", ".html", ".js", ".css"} and path.is_file():
            found += [f"{name}:{i}" for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
                      if pattern.search(line)]
    assert not found, found
