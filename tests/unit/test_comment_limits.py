"""The PR comment at its limits: a large golden set, many misses, a gap in the history, an errored gate, long
unbroken strings. Each report comes from the real CLI on real files; each check reads the HTML that cmark-gfm
(GitHub's renderer) makes of the comment, and the table widths a real browser (headless Chromium with GitHub's
Markdown CSS) lays out."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gate.render.markdown import render_comment
from tests.support.markup import inert_problems, render

ROOT = Path(__file__).resolve().parents[2]
MAX_CASES = 20
CATEGORIES = 300
OUT_OF_SCOPE = 23


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def spec(metrics: str) -> str:
    token_f1_gate = "      token_f1: {min: 0.2}\n" if "token_f1" in metrics else ""
    return f"""\
version: 1
golden_set: golden.jsonl
target: {{results: results.jsonl}}
max_error_rate: 1
history: {{path: history.jsonl}}
report: {{max_cases: {MAX_CASES}}}
stages:
  retrieval:
    metrics: [mrr, hit_rate@3]
    gates:
      mrr: {{min: 0.5}}
  generation:
    metrics: {metrics}
    sample: {{size: 1000}}
    gates:
{token_f1_gate}      rouge_l: {{trend: {{window: 5, max_drop: 0.5}}}}
  robustness:
    rejection: {{}}
    gates:
      rejection_rate: {{min: 0.9}}
"""


LONG = "x" * 110  # one unbroken run, as an identifier or a base64 blob in an answer or an error would be


def write_run(ws: Path, word: str, *, errored_answers: bool = False) -> None:
    """The golden set (the same every run, so that the history applies) and a results file whose answers end in
    ``word``. Long unbroken runs sit where the comment shows them: a category name, the answers to out-of-scope
    questions (rejection misses), an error message."""
    golden = [{"id": f"q{i}", "question": f"What is rule {i}?", "ground_truth": f"rule {i} says yes", "relevant_doc_ids": [f"d{i}"],
               "category": f"category-{i:03d}" if i else f"category-{LONG}", "tags": [f"tag-{i % 7}"]} for i in range(CATEGORIES)]
    golden += [{"id": f"o{i}", "question": f"What is the weather on day {i}?", "type": "out_of_scope"} for i in range(OUT_OF_SCOPE)]
    (ws / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    rows = []
    for g in golden:
        if g.get("type") == "out_of_scope":  # answered instead of refused: a rejection miss each
            rows.append({"id": g["id"], "retrieved": [{"id": "w", "text": "sunny"}], "answer": f"Sunny, see {LONG}", "latency_ms": 5})
        elif errored_answers:
            rows.append({"id": g["id"], "error": f"upstream said {LONG}"})
        else:
            rows.append({"id": g["id"], "retrieved": [{"id": g["relevant_doc_ids"][0], "text": g["ground_truth"]}],
                         "answer": g["ground_truth"].replace("yes", word), "latency_ms": 5})
    (ws / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def comment(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    """(the comment's Markdown, the report) of a PR run over a history of three default-branch runs, the middle one
    made before token_f1 was in the spec."""
    ws = tmp_path_factory.mktemp("ws")
    for n, (metrics, answer) in enumerate([("[token_f1, rouge_l]", "yes"), ("[rouge_l]", "no"), ("[token_f1, rouge_l]", "maybe")]):
        (ws / "rag-eval.yml").write_text(spec(metrics), encoding="utf-8")
        write_run(ws, answer)
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", f"main{n}.json", "-q")
        assert (ws / f"main{n}.json").exists(), proc.stderr
        proc = rag_gate(ws, "history", "record", "--config", "rag-eval.yml", "--report", f"main{n}.json", "--branch", "main")
        assert proc.returncode == 0, proc.stderr
    (ws / "rag-eval.yml").write_text(spec("[token_f1, rouge_l]"), encoding="utf-8")
    write_run(ws, "maybe")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "pr.json", "--markdown", "pr.md", "-q")
    assert proc.returncode == 1, proc.stderr  # the rejection gate fails: 23 of 23 answered
    return (ws / "pr.md").read_text(encoding="utf-8"), json.loads((ws / "pr.json").read_text(encoding="utf-8"))


class Blocks(HTMLParser):
    """The rendered comment as GitHub shows it: each <details> with its summary and its table rows, and the text
    outside every <details>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.details: list[dict] = []
        self.open: list[dict] = []
        self.outside: list[str] = []
        self.in_summary = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "details":
            self.open.append({"summary": "", "rows": 0, "text": ""})
        elif tag == "summary":
            self.in_summary = True
        elif tag == "tr" and self.open:
            self.open[-1]["rows"] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self.open:
            self.details.append(self.open.pop())
        elif tag == "summary":
            self.in_summary = False

    def handle_data(self, data: str) -> None:
        if not self.open:
            self.outside.append(data)
        elif self.in_summary:
            self.open[-1]["summary"] += data
        else:
            self.open[-1]["text"] += data


def blocks(markdown: str) -> Blocks:
    b = Blocks()
    b.feed(render(markdown))
    b.close()
    assert not b.open, "a <details> left open"
    return b


def summary(b: Blocks, starts: str) -> dict:
    (found,) = [d for d in b.details if d["summary"].startswith(starts)]
    return found


def test_the_breakdown_is_capped_like_the_cases_and_says_so(comment):
    markdown, report = comment
    groups = sum(len(rows) for rows in report["stages"]["retrieval"]["breakdown"].values())
    assert groups == CATEGORIES + 7  # every category and the 7 tags (out-of-scope cases have no retrieval score)
    block = summary(blocks(markdown), "By category and tag")
    assert block["summary"] == f"By category and tag (showing {MAX_CASES} of {groups})"  # before: all 308 rows
    assert block["rows"] == MAX_CASES + 1  # the header row and the groups shown


def test_rejection_misses_say_how_many_there_were(comment):
    markdown, _ = comment
    block = summary(blocks(markdown), f"{OUT_OF_SCOPE} rejection miss")
    assert block["summary"] == f"{OUT_OF_SCOPE} rejection miss(es) (showing {MAX_CASES} of {OUT_OF_SCOPE})"  # before: "20 rejection miss(es)"
    assert block["rows"] == MAX_CASES + 1


@pytest.mark.parametrize(("limit", "note"), [
    (1_200, "The comment was cut to fit GitHub's size limit; the full report is in report.json."),
    (1_600, "The comment was cut to fit GitHub's size limit; the full report is in report.json."),
    (1_950, "The comment was cut to fit GitHub's size limit; the full report is in report.json."),
    (3_400, "Per-case details cut to "),  # the judge gates' evidence block (same-run pairs) made the comment longer
    (4_000, "Per-case details cut to "),
])
def test_a_comment_cut_to_fit_keeps_its_blocks_closed_and_its_footer(comment, limit, note):
    """The limit is GitHub's 65,536 characters; the report here is small, so smaller limits stand in for it."""
    _, report = comment
    markdown = render_comment(report, limit=limit)
    full = render_comment(report, limit=10**7)
    assert len(markdown) <= limit < len(full)
    b = blocks(markdown)
    outside = " ".join("".join(b.outside).split())
    # the note and the footer are outside every block, where the reader sees them (before: inside an open <details>)
    assert note in outside
    assert outside.endswith(" ".join(blocks(full).outside[-1].split()))
    assert full.rstrip().rsplit("\n", 1)[1] == markdown.rstrip().rsplit("\n", 1)[1]
    assert inert_problems(markdown) == []


def test_a_metric_missing_from_a_run_leaves_a_gap_in_its_chart(comment):
    markdown, report = comment
    runs = report["history"]["runs"]
    assert [("token_f1" in r["metrics"].get("generation", {})) for r in runs] == [True, False, True]
    charts = dict(re.findall(r'```mermaid\nxychart-beta\n  title "([^"]+)"\n(.*?)```', markdown, re.S))
    token_f1, rouge_l = charts["token_f1"], charts["rouge_l"]

    def axis_and_points(chart: str) -> tuple[list[str], list[float]]:
        axis = re.search(r"x-axis \[(.*)\]", chart).group(1)
        points = re.search(r"line \[(.*)\]", chart).group(1)
        return re.findall(r'"([^"]+)"', axis), [float(p) for p in points.split(",")]

    labels, points = axis_and_points(token_f1)
    all_labels, all_points = axis_and_points(rouge_l)
    assert len(all_labels) == len(all_points) == 4  # three runs and this PR
    assert labels == [all_labels[0], all_labels[2], all_labels[3]] and len(points) == 3  # the run without it is left out
    low = float(re.search(r'y-axis "[^"]+" ([\d.]+) -->', token_f1).group(1))
    assert min(points) > low  # before: a point at the axis minimum for the missing run, a drop that never happened
    row = re.search(rf"<tr>\s*<td>{all_labels[1]}</td>\s*<td[^>]*>(.*?)</td>", render(markdown))
    assert row and row.group(1) == "—"  # the fallback table keeps the run's row, with a dash for token_f1


def test_an_errored_gate_shows_its_rule(tmp_path):
    (tmp_path / "rag-eval.yml").write_text(spec("[token_f1, rouge_l]").replace("history: {path: history.jsonl}\n", ""), encoding="utf-8")
    write_run(tmp_path, "yes", errored_answers=True)
    proc = rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "r.json", "--markdown", "r.md", "-q")
    assert proc.returncode == 3, proc.stderr
    html = render((tmp_path / "r.md").read_text(encoding="utf-8"))
    rows = {re.sub(r"<[^>]+>", "", r.split("</td>")[0]).strip(): r for r in re.findall(r"<tr>\s*<td>(.*?)</tr>", html, re.S)}
    mrr = next(v for k, v in rows.items() if k.startswith("mrr"))
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", "<td>" + mrr, re.S)]
    assert "min 0.5" in cells  # before: the rule column said "-"
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    (gate,) = [g for g in report["stages"]["retrieval"]["gates"] if g["metric"] == "mrr"]
    assert gate["status"] == "error" and cells[-1] == "⚠️"


def longest_unbreakable(text: str) -> int:
    return max((len(run) for run in re.split(r"[\s\u200b]+", text)), default=0)


def test_long_unbroken_strings_can_wrap_in_every_cell(comment):
    markdown, _ = comment
    html = render(markdown)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", html, re.S)]
    assert any("x" * 30 in c for c in cells)  # the long answer and question are in the comment
    assert max(longest_unbreakable(c) for c in cells) <= 40  # before: a 110-character run


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


CSS = ROOT / "tools" / "node_modules" / "github-markdown-css" / "github-markdown-light.css"
MEASURE = """<script>
document.body.dataset.widths = JSON.stringify([...document.querySelectorAll("table")].map(
  t => [t.scrollWidth, t.clientWidth]));
document.body.dataset.page = JSON.stringify([document.documentElement.scrollWidth, window.innerWidth]);
</script>"""


def browser_widths(tmp_path: Path, markdown: str) -> tuple[list[list[int]], list[int]]:
    """[(scroll width, visible width)] of every table and of the page, laid out by Chromium at GitHub's comment
    width (about 780 px of Markdown) with GitHub's Markdown CSS."""
    page = tmp_path / "comment.html"
    page.write_text(f'<!doctype html><meta charset="utf-8"><link rel="stylesheet" href="{CSS.as_uri()}">'
                    f'<body style="margin:0"><article class="markdown-body" style="box-sizing:border-box;width:800px;padding:10px">'
                    f"{render(markdown)}</article>{MEASURE}</body>", encoding="utf-8")
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=800,2000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'data-widths="([^"]*)" data-page="([^"]*)"', proc.stdout)
    assert m, proc.stderr[-2000:]
    unq = [json.loads(s.replace("&quot;", '"')) for s in m.groups()]
    return unq[0], unq[1]


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None or not CSS.exists(),
                    reason="needs Chromium (apt-get install chromium) and tools/node_modules (npm install --prefix tools); .ci/run installs both")
def test_no_table_is_wider_than_the_comment_in_a_real_browser(comment, tmp_path):
    markdown, _ = comment
    tables, page = browser_widths(tmp_path, markdown)
    assert len(tables) >= 5 and page[0] <= page[1]
    wide = [(i, w) for i, w in enumerate(tables) if w[0] > w[1] + 1]
    assert wide == []  # GitHub's CSS scrolls a wide table sideways; before the fix the tables with the long run did
    unwrapped = markdown.replace("\u200b", "")  # the same comment without the break opportunities
    tables, _ = browser_widths(tmp_path, unwrapped)
    assert any(w[0] > w[1] + 1 for w in tables)  # proves the check can fail
