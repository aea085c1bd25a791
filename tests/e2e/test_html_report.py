"""The HTML report (`rag-gate run --html`) in a real browser: the distribution's headless Chromium, driven over the
DevTools protocol (tests/support/cdp.py), opens the quickstart's report of a run with a baseline, a history and a regression,
and the assertions read the DOM after the page's script ran. Each test saves a screenshot in build/screenshots/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cdp import Browser, chromium

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
SHOTS = ROOT / "build" / "screenshots"

pytestmark = pytest.mark.skipif(chromium() is None, reason="needs Chromium (apt-get install chromium); .ci/run installs it")

# A worse retriever and generator: on fee and fine questions the best passage drops to rank 6 and the answer is
# drawn from the passages that are left (the real quickstart RAG, only its retrieval reordered).
WORSE = """import quickrag

def answer(question, k):
    out = quickrag.answer(question, k)
    docs = out["retrieved"]
    if "fine" in question.lower() or "fee" in question.lower():
        docs = docs[1:6] + docs[:1] + docs[6:]
        again = quickrag.answer_from_contexts(question, [d["text"] for d in docs[:3]])
        return {**out, "retrieved": docs, "answer": again["answer"]}
    return out
"""


def rag_gate(ws: Path, *args: str, sha: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    if sha:
        env["GITHUB_SHA"] = sha
    return subprocess.run([sys.executable, "-m", "gate", *args, *(() if args[0] != "run" else ("--no-progress",))], cwd=ws,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=180)


def copy_quickstart(dest: Path) -> Path:
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def regression(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The quickstart with two recorded default-branch runs, then a pull request whose target got worse."""
    ws = copy_quickstart(tmp_path_factory.mktemp("html") / "qs")
    for sha in ("1111111aaaaaaa", "2222222bbbbbbb"):
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "main.json", sha=sha)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert rag_gate(ws, "history", "record", "--config", "rag-eval.yml", "--report", "main.json").returncode == 0
    (ws / "worse.py").write_text(WORSE, encoding="utf-8")
    spec = ws / "rag-eval.yml"
    spec.write_text(spec.read_text(encoding="utf-8").replace('function: "quickrag:answer"', 'function: "worse:answer"'), encoding="utf-8")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--html", "report.html", sha="3333333ccccccc")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the regression fails the gate
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    golden = [json.loads(line) for line in (ws / "golden_set.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    baseline = json.loads((ws / "eval" / "baseline.json").read_text(encoding="utf-8"))
    return {"ws": ws, "report": report, "golden": {g["id"]: g for g in golden}, "baseline": baseline, "html": ws / "report.html"}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium"), width=1400, height=1000) as b:
        yield b


def opened(browser: Browser, page: Path, fragment: str = "") -> Browser:
    browser.events.clear()
    browser.open(page.as_uri() + fragment)
    assert browser.evaluate("document.body.dataset.ready") == "1", browser.console_errors()
    return browser


def visible_ids(b: Browser) -> list[str]:
    return b.evaluate("[...document.querySelectorAll('#cases tr.case')].filter(r => !r.hidden).map(r => r.dataset.id)")


def choose(b: Browser, select: str, value: str) -> None:
    b.evaluate(f"(() => {{ const s = document.querySelector({json.dumps(select)}); s.value = {json.dumps(value)};"
               " s.dispatchEvent(new Event('change')); })()")


def shot(b: Browser, name: str, full_page: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = b.screenshot(SHOTS / name, full_page=full_page)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    return path


def only_the_page(b: Browser, page: Path) -> None:
    """The page asked for nothing but itself: no script, style, font, image or beacon from anywhere."""
    assert [u.split("#")[0] for u in b.requests()] == [page.as_uri()]
    assert b.console_errors() == []  # no CSP violation either: the page's own script and style are allowed by hash


def test_one_row_per_case_gates_and_trends(regression, browser):
    report, page = regression["report"], regression["html"]
    b = opened(browser, page)
    assert visible_ids(b) == [c["id"] for c in report["cases"]]  # every case, in the golden set's order
    assert b.evaluate("document.getElementById('shown').textContent") == f"showing {len(report['cases'])} of {len(report['cases'])} cases"
    assert b.evaluate("document.getElementById('verdict').dataset.verdict") == "fail"
    failed = [(s, g["metric"]) for s, st in report["stages"].items() for g in st["gates"] if g["status"] == "fail"]
    assert failed
    for stage, metric in failed:
        status = b.evaluate(f"document.querySelector('table.gates[data-stage={stage}] tr[data-metric=\"{metric}\"] td:last-child').textContent")
        assert status.endswith("fail")
    # the trend charts: one point per recorded run and one for this run
    charts = b.evaluate("[...document.querySelectorAll('svg.trend')].map(s => [s.dataset.metric, s.querySelectorAll('circle').length])")
    assert ["token_f1", 3] in charts
    only_the_page(b, page)
    print("screenshot:", shot(b, "html-report-page.png"))


def test_filters_show_the_right_rows(regression, browser):
    report, golden, page = regression["report"], regression["golden"], regression["html"]
    b = opened(browser, page)
    worse = {w["id"] for st in report["stages"].values() for w in st.get("worse_cases", [])}
    assert worse
    choose(b, "#f-status", "worse")
    assert set(visible_ids(b)) == worse
    choose(b, "#f-status", "all")
    assert len(visible_ids(b)) == len(report["cases"])
    choose(b, "#f-category", "fees")
    assert visible_ids(b) == [i for i in golden if golden[i].get("category") == "fees"]
    choose(b, "#f-type", "out_of_scope")  # filters add up: no out-of-scope question is about fees
    assert visible_ids(b) == [i for i in golden if golden[i].get("category") == "fees" and golden[i]["type"] == "out_of_scope"]
    choose(b, "#f-type", "")
    choose(b, "#f-category", "")
    choose(b, "#f-stage", "generation")
    assert visible_ids(b) == [i for i in golden if i in set(report["stages"]["generation"]["sample"]["ids"])]
    choose(b, "#f-stage", "")
    choose(b, "#f-tag", "faq")
    assert visible_ids(b) == [i for i in golden if "faq" in golden[i].get("tags", [])]
    choose(b, "#f-tag", "")
    b.evaluate("(() => { const s = document.getElementById('search'); s.value = 'DVD'; s.dispatchEvent(new Event('input')); })()")
    answers = {c["id"]: c["answer"] or "" for c in report["cases"]}
    expected = [i for i in golden if "dvd" in (golden[i]["question"] + golden[i].get("ground_truth", "") + answers[i] + i).lower()]
    assert expected and visible_ids(b) == expected
    only_the_page(b, page)


def test_pages_of_cases(regression, browser):
    """The table shows one page of the matching cases (200 by default; a browser takes seconds to lay out thousands of
    rows): pages follow the sort order, and a filter starts again at the first page."""
    report, page = regression["report"], regression["html"]
    ids = [c["id"] for c in report["cases"]]
    b = opened(browser, page)
    choose(b, "#page-size", "25")
    assert visible_ids(b) == ids[:25]
    assert b.evaluate("document.getElementById('shown').textContent") == f"showing 1–25 of {len(ids)} matching cases ({len(ids)} in all)"
    assert b.evaluate("[document.getElementById('prev').disabled, document.getElementById('next').disabled]") == [True, False]
    b.evaluate("document.getElementById('next').click()")
    assert visible_ids(b) == ids[25:50]
    assert b.evaluate("document.getElementById('page').textContent") == f"page 2 of {-(-len(ids) // 25)}"
    choose(b, "#f-type", "answerable")
    answerable = [c["id"] for c in report["cases"] if c["type"] == "answerable"]
    assert visible_ids(b) == answerable[:25] and b.evaluate("document.getElementById('page').textContent").startswith("page 1 of")
    choose(b, "#page-size", "0")
    assert visible_ids(b) == answerable


def test_columns_sort_with_missing_values_last(regression, browser):
    report, page = regression["report"], regression["html"]
    b = opened(browser, page)
    mrr = {s["id"]: s["metrics"]["mrr"] for s in report["stages"]["retrieval"]["samples"] if "mrr" in s["metrics"]}
    b.evaluate("document.querySelector('#cases th[data-key=\"retrieval:mrr\"]').click()")
    order = visible_ids(b)
    scored = [i for i in order if i in mrr]
    assert [mrr[i] for i in scored] == sorted(mrr.values())
    assert order[: len(scored)] == scored  # the cases without an mrr (out of scope) come last
    assert b.evaluate("document.querySelector('#cases th[data-key=\"retrieval:mrr\"]').getAttribute('aria-sort')") == "ascending"
    b.evaluate("document.querySelector('#cases th[data-key=\"retrieval:mrr\"]').click()")
    assert [mrr[i] for i in visible_ids(b) if i in mrr] == sorted(mrr.values(), reverse=True)


def _worse_judged_case(data: dict[str, Any]) -> str:
    """A case whose best passage was pushed down and whose answer changed, with the baseline's answer on file."""
    report, baseline = data["report"], data["baseline"]
    lost = {w["id"] for w in report["stages"]["retrieval"]["worse_cases"] if w.get("lost")}
    base_rows = {s["id"]: s for s in baseline["stages"]["generation"]["samples"]}
    answers = {c["id"]: c["answer"] for c in report["cases"]}
    for cid in lost:
        row = base_rows.get(cid)
        if row and row.get("output") and baseline["texts"][row["output"]["answer"]] != answers[cid]:
            return cid
    raise AssertionError("the regression made no judged case with a changed answer")


def test_a_cases_drill_down_shows_its_passages_and_the_answer_diff(regression, browser):
    report, golden, baseline, page = regression["report"], regression["golden"], regression["baseline"], regression["html"]
    cid = _worse_judged_case(regression)
    b = opened(browser, page)
    b.evaluate(f"document.querySelector('#cases tr.case[data-id=\"{cid}\"]').click()")
    detail = f"#cases tr.detail[data-for=\"{cid}\"]"
    out = next(c for c in report["cases"] if c["id"] == cid)
    passages = b.evaluate(f"[...document.querySelectorAll('{detail} ol.passages li')].map(li => "
                          "[li.dataset.passage, li.classList.contains('relevant'), (li.querySelector('.move') || {}).textContent || '',"
                          " (li.querySelector('.text') || {}).textContent || ''])")
    assert [p[0] for p in passages] == out["retrieved"][: report["target"]["k"]]
    relevant = golden[cid]["relevant_doc_ids"]
    relevant = set(relevant) if isinstance(relevant, list) else set(relevant)
    assert {p[0] for p in passages if p[1]} == relevant & set(out["retrieved"])
    assert all(p[3] for p in passages)  # each passage's text, as the target returned it
    base_ranks = next(s for s in baseline["stages"]["retrieval"]["samples"] if s["id"] == cid)["relevant_ranks"]
    now_ranks = next(s for s in report["stages"]["retrieval"]["samples"] if s["id"] == cid)["relevant_ranks"]
    moved = [(rid, base_ranks[rid], now_ranks[rid]) for rid in now_ranks if base_ranks.get(rid) != now_ranks[rid] and now_ranks[rid]]
    assert moved
    for rid, was, now in moved:
        text = next(p[2] for p in passages if p[0] == rid)
        assert text == f"{'▼ down' if now > was else '▲ up'} from rank {was} in the baseline"
    # the answer against the baseline's, word by word: the struck and the added words rebuild both answers
    base_answer = baseline["texts"][next(s for s in baseline["stages"]["generation"]["samples"] if s["id"] == cid)["output"]["answer"]]
    parts = b.evaluate(f"[...document.querySelector('{detail} .diff').childNodes].map(n => [n.nodeName, n.textContent])")
    assert {n for n, _ in parts} >= {"DEL", "INS"}
    assert "".join(t for n, t in parts if n != "INS") == base_answer
    assert "".join(t for n, t in parts if n != "DEL") == out["answer"]
    scores = b.evaluate(f"[...document.querySelectorAll('{detail} table.scores tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    mrr_row = next(r for r in scores if r[0] == "retrieval" and r[1] == "mrr")
    base_mrr = next(s for s in baseline["stages"]["retrieval"]["samples"] if s["id"] == cid)["metrics"]["mrr"]
    now_mrr = next(s for s in report["stages"]["retrieval"]["samples"] if s["id"] == cid)["metrics"]["mrr"]
    assert mrr_row[2:4] == [f"{base_mrr:.4f}", f"{now_mrr:.4f}"]
    flags = b.evaluate(f"[...document.querySelectorAll('{detail} .flags-why li')].map(li => li.textContent)")
    assert any(f.startswith("worse") and "mrr" in f for f in flags)
    b.evaluate(f"document.querySelector('#cases tr.case[data-id=\"{cid}\"]').scrollIntoView()")
    print("screenshot:", shot(b, "html-report-drill-down.png", full_page=False))
    b.evaluate(f"document.querySelector('#cases tr.case[data-id=\"{cid}\"]').click()")  # closes it
    assert b.evaluate(f"document.querySelector('{detail}')") is None
    only_the_page(b, page)


def test_robustness_and_refusal_drill_downs(regression, browser):
    report, page = regression["report"], regression["html"]
    stage = report["stages"]["robustness"]
    noisy = next(s for s in stage["samples"] if s.get("distractors"))
    refused = next(r for r in stage["rejection"]["cases"] if r["type"] == "out_of_scope" and r.get("refused"))
    browser.open("about:blank")
    b = opened(browser, page, f"#case={noisy['id']}")  # the address opens a case
    texts = b.evaluate(f"[...document.querySelectorAll('#cases tr.detail[data-for=\"{noisy['id']}\"] .noise li')].map(li => li.textContent)")
    assert texts == [f"{d['id']}: {d['text']}" for d in noisy["distractors"]]
    b.evaluate(f"document.querySelector('#cases tr.case[data-id=\"{refused['id']}\"]').click()")
    rej = b.evaluate(f"document.querySelector('#cases tr.detail[data-for=\"{refused['id']}\"] .rejection').textContent")
    assert "Decisionrefused" in rej and f"Decided by{refused['method']}" in rej and "As it should." in rej


# ------------------------------------------------------------------------------------------ hostile text

# every element the page's script makes (no chart here: the hostile run has no history)
TEMPLATE_TAGS = {"main", "header", "h1", "h2", "h3", "h4", "dl", "dt", "dd", "div", "section", "p", "table", "thead", "tbody",
                 "tr", "th", "td", "code", "span", "ul", "ol", "li", "select", "option", "label", "input", "ins", "del",
                 "noscript", "script", "button"}

PAYLOAD = "<img src=x onerror=\"window.__pwned=1;alert(1)\"><script>window.__pwned=2</script></script>"
HOSTILE = [
    PAYLOAD,
    "</script><script>alert('x')</script>",
    "<!--<script>window.__pwned=3</script>",
    "<a href=\"javascript:alert(1)\">click</a><iframe src=\"https://evil.example\"></iframe>",
    "<svg onload=\"alert(1)\"><style>@import url(https://evil.example/x.css)</style>",
    "\u2028\u2029 ${alert(1)} {{constructor.constructor('alert(1)')()}} &lt;b&gt; &#60;i&#62;",
]


def test_hostile_text_is_shown_as_text_and_nothing_runs(tmp_path, browser):
    """Questions, ground truths, categories, tags, passages' ids and texts and the answers all carry HTML and script:
    the page shows them as typed and makes no element, request, dialog or script of them."""
    ws = copy_quickstart(tmp_path / "qs")
    lines = []
    for i, line in enumerate((ws / "golden_set.jsonl").read_text(encoding="utf-8").splitlines()):
        case = json.loads(line)
        bad = HOSTILE[i % len(HOSTILE)]
        case.update(question=f"{case['question']} {bad}", category=bad, tags=[bad, "faq"])
        if case.get("ground_truth"):
            case["ground_truth"] = f"{case['ground_truth']} {bad}"
        lines.append(json.dumps(case))
    (ws / "golden_set.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (ws / "hostile.py").write_text(
        "import quickrag\n"
        f"HOSTILE = {HOSTILE!r}\n"
        "def answer(question, k):\n"
        "    out = quickrag.answer(question.split(' <')[0], k)\n"
        "    bad = HOSTILE[len(question) % len(HOSTILE)]\n"
        "    docs = [{**d, 'text': d['text'] + ' ' + bad} for d in out['retrieved']]\n"
        "    docs.append({'id': bad, 'text': bad, 'score': 0.0})\n"
        "    return {**out, 'retrieved': docs, 'answer': (out['answer'] or '') + ' ' + bad}\n", encoding="utf-8")
    spec = ws / "rag-eval.yml"
    spec.write_text(spec.read_text(encoding="utf-8").replace('function: "quickrag:answer"', 'function: "hostile:answer"')
                    .replace("baseline:\n  path: eval/baseline.json", "baseline:\n  path: eval/none.json"), encoding="utf-8")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--html", "report.html")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    html = (ws / "report.html").read_text(encoding="utf-8")
    assert "evil.example" in html and "<img" not in html and "</script><script>" not in html  # in the file: escaped JSON only
    b = opened(browser, ws / "report.html")
    b.evaluate("[...document.querySelectorAll('#cases tr.case')].forEach(r => r.click())")  # every drill-down open
    tags = set(b.evaluate("[...document.body.querySelectorAll('*')].map(e => e.localName)"))
    assert tags <= TEMPLATE_TAGS, tags - TEMPLATE_TAGS
    assert b.evaluate("document.scripts.length") == 2  # the data block and the page's own script
    assert b.evaluate("document.querySelectorAll('style, link, meta').length") == 5  # the template's: 1 style, 4 meta
    assert b.evaluate("typeof window.__pwned") == "undefined"
    assert b.dialogs() == []
    text = b.evaluate("document.body.innerText")
    for bad in HOSTILE[:5]:
        assert bad.split("\u2028")[0] in text  # shown as typed
    attrs = b.evaluate("[...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))")
    assert not [a for a in attrs if a.startswith("on") or a in ("src", "href", "style", "srcdoc", "action")]
    only_the_page(b, ws / "report.html")
    b.evaluate("document.querySelector('#cases tr.case').scrollIntoView()")
    print("screenshot:", shot(b, "html-report-hostile.png", full_page=False))


# ------------------------------------------------------------------------------------------ the file itself (no browser)


def test_the_page_is_a_fixed_template_with_the_data_as_escaped_json(regression):
    html = regression["html"].read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="rag-gate-data">(.*?)</script>', html, re.S)
    assert m and "<" not in m.group(1) and ">" not in m.group(1) and "&" not in m.group(1)
    data = json.loads(m.group(1))
    assert [c["id"] for c in data["cases"]] == [c["id"] for c in regression["report"]["cases"]]
    # the CSP allows exactly the page's own script and style, by their hashes
    import base64
    import hashlib

    css = re.search(r"<style>(.*?)</style>", html, re.S).group(1)  # type: ignore[union-attr]
    js = re.search(r"<script>(.*?)</script>", html, re.S).group(1)  # type: ignore[union-attr]

    def digest(s: str) -> str:
        return base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()

    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)  # type: ignore[union-attr]
    assert f"script-src 'sha256-{digest(js)}'" in policy and f"style-src 'sha256-{digest(css)}'" in policy
    assert policy.startswith("default-src 'none';")


# ------------------------------------------------------------------------------------------ paraphrases and asking again

PARAPHRASED = """import quickrag

def answer(question, k):  # the quickstart's RAG; a question in a user's words ("u", "pricey") finds nothing
    out = quickrag.answer(question, k)
    if " u " in f" {question} " or "pricey" in question:
        return {**out, "retrieved": out["retrieved"][::-1]}
    return out
"""


def test_the_paraphrase_and_asked_again_drill_downs(tmp_path, browser):
    """A run with the paraphrase test (the golden set's own rewrites: one kept, one lost) and the stability test (each
    sampled question asked twice more, answers compared by token F1), opened in the browser: the case's rewrites
    with found / lost, its asks with right / wrong, and the two figures."""
    ws = copy_quickstart(tmp_path / "qs")
    rows = [json.loads(line) for line in (ws / "golden_set.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    first = next(r for r in rows if r.get("relevant_doc_ids"))
    first["paraphrases"] = ["when do u shut on dec 24", "What are the opening hours on 24 December?"]
    (ws / "golden_set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (ws / "paraphrased.py").write_text(PARAPHRASED, encoding="utf-8")
    spec = ws / "rag-eval.yml"
    text = spec.read_text(encoding="utf-8").replace('function: "quickrag:answer"', 'function: "paraphrased:answer"')
    text = text.replace("  robustness:\n", "  robustness:\n    paraphrase: {sample: {size: all}, metrics: [hit_rate@5]}\n"
                        "    stability: {repeats: 2, sample: {size: 3, seed: 1}, method: token_f1, correctness: {method: offline}}\n", 1)
    assert "paraphrase:" in text, "the quickstart spec has no robustness stage to extend"
    spec.write_text(text, encoding="utf-8")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--html", "report.html")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    robustness = json.loads((ws / "report.json").read_text(encoding="utf-8"))["stages"]["robustness"]
    lost = next(c for c in robustness["paraphrase"]["cases"] if c["id"] == first["id"])
    asked = robustness["stability"]["cases"][0]
    b = opened(browser, ws / "report.html", f"#case={first['id']}")
    items = b.evaluate(f"[...document.querySelectorAll('#cases tr.detail[data-for=\"{first['id']}\"] .paraphrase li')]"
                       ".map(li => [li.textContent, li.className])")
    assert [t for t, _ in items] == [f"{r['text']} ({r['source']}: {'found' if r['found'] else 'lost'})" for r in lost["rewrites"]]
    assert [c for _, c in items] == ["" if r["found"] else "s-fail" for r in lost["rewrites"]]
    assert any(not r["found"] for r in lost["rewrites"]) and any(r["found"] for r in lost["rewrites"])
    b.evaluate(f"document.querySelector('#cases tr.case[data-id=\"{asked['id']}\"]').click()")
    part = f"#cases tr.detail[data-for=\"{asked['id']}\"] .stability"
    answers = b.evaluate(f"[...document.querySelectorAll('{part} li')].map(li => li.textContent)")
    assert len(answers) == len(asked["answers"]) == 3 and all(a.startswith(str(x)[:20]) for a, x in zip(answers, asked["answers"], strict=True))
    figures = b.evaluate(f"document.querySelector('{part} dl').textContent")
    assert f"Top-k overlap{asked['jaccard']:.3f}" in figures and f"Answers agree{asked['agreement']:.3f}" in figures
    plain = next(c for c in robustness["paraphrase"]["cases"] if c["id"] == asked["id"])  # no rewrite of its own
    said = b.evaluate(f"document.querySelector('#cases tr.detail[data-for=\"{asked['id']}\"] .paraphrase').textContent")
    assert plain["rewrites"] == [] and "No rewrite was asked" in said and "Found on the original" not in said
    shot(b, "paraphrase-and-stability.png")
    only_the_page(b, ws / "report.html")
