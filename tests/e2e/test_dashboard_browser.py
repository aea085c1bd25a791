"""The dashboard (`rag-gate dashboard`) in a real browser: the distribution's headless Chromium, driven over the
DevTools protocol (tests/support/cdp.py), opens the page of a 200-run history (retrieval and judge metrics, runs of
every kind, some whose setup changed, some failing, hostile text in a few) with a spec that gates six metrics, and
the assertions read the DOM after the page's script ran.

Two pages: the one the CLI writes from a history file whose lines hold only the fields report.schema.json knows
today (the CLI reads the file through the schema), and the one the renderer makes of the same runs with the
entries' newer fields (kind, url, changes, system) whatever the schema says. A screenshot goes to
build/screenshots/dashboard.png. bench/bench_dashboard.py makes its history with ``make_history`` here.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.cdp import Browser, chromium

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chromium() is None, reason="needs Chromium (apt-get install chromium); .ci/run installs it")]

# the metrics of the history: (stage, metric) -> (mean, step of the random walk)
METRICS: dict[tuple[str, str], tuple[float, float]] = {
    ("retrieval", "hit_rate@5"): (0.86, 0.012), ("retrieval", "mrr"): (0.70, 0.015), ("retrieval", "ndcg@10"): (0.74, 0.012),
    ("retrieval", "recall@5"): (0.80, 0.012), ("retrieval", "map"): (0.66, 0.012), ("retrieval", "p95_latency_ms"): (620.0, 25.0),
    ("generation", "token_f1"): (0.42, 0.01), ("generation", "faithfulness"): (0.86, 0.012),
    ("generation", "answer_relevancy"): (0.81, 0.012), ("robustness", "noise_robustness"): (0.78, 0.015),
    ("robustness", "rejection_rate"): (0.72, 0.015), ("robustness", "false_rejection_rate"): (0.06, 0.006),
}
SPEC = """version: 1
golden_set: golden_set.jsonl
target:
  python: "rag:answer"
  k: 10
baseline:
  path: eval/baseline.json
history:
  path: eval/history.jsonl
stages:
  retrieval:
    metrics: [hit_rate@5, mrr, ndcg@10, recall@5, map]
    gates:
      hit_rate@5: {min: 0.80, max_drop: 0.02}
      mrr: {min: 0.60}
      ndcg@10: {max_drop: 0.03}
      p95_latency_ms: {max: 800}
  generation:
    metrics: [token_f1, faithfulness, answer_relevancy]
    gates:
      faithfulness: {min: 0.7, trend: {window: 7, max_drop: 0.03}}
      answer_relevancy: {max_drop: 0.05}
"""
GATED = [("retrieval", "hit_rate@5"), ("retrieval", "mrr"), ("retrieval", "ndcg@10"), ("retrieval", "p95_latency_ms"),
         ("generation", "faithfulness"), ("generation", "answer_relevancy")]
LIMITS = {"hit_rate@5": ("min", 0.8), "mrr": ("min", 0.6), "p95_latency_ms": ("max", 800.0), "faithfulness": ("min", 0.7)}
BASELINE = {"hit_rate@5": 0.85, "mrr": 0.69, "ndcg@10": 0.73, "faithfulness": 0.85}
HOSTILE_BRANCH = "</script><script>window.__pwned=1</script>"
HOSTILE_COMMIT = "<img src=x onerror=alert(1)>deadbeef"
HOSTILE_CHANGE = "<img src=x onerror=alert(2)>"
HOSTILE_URL = "javascript:alert(3)"
NEW_FIELDS = ("kind", "url", "changes", "system")
KINDS = ["push"] * 10 + ["schedule"] * 5 + ["merge"] * 4 + ["dispatch", "pr"]


def _changes(i: int) -> list[dict[str, Any]]:
    if i == 60:
        return [{"key": HOSTILE_CHANGE, "before": "</script>", "after": HOSTILE_URL}]
    if i % 23 == 11:
        return [{"key": "target.k", "before": 5, "after": 10}, {"key": "judge.model", "before": "gpt-4o-mini", "after": "gpt-4.1-mini"}]
    if i % 23 == 17:
        return [{"key": "golden_set", "before": "sha256:1a2b", "after": "sha256:3c4d"}]
    return []


def make_history(n: int = 200, seed: int = 7, metrics: dict[tuple[str, str], tuple[float, float]] = METRICS) -> list[dict[str, Any]]:
    """``n`` default-branch runs in file order (a few out of time order, two at the same second): random walks around
    each metric's mean, a kind each, changes on some, a verdict from the gates, hostile text in runs 10, 30, 40 and 60."""
    rng = random.Random(seed)
    level = {key: mean for key, (mean, _) in metrics.items()}
    when = datetime(2025, 3, 1, 6, 0, tzinfo=UTC)
    out: list[dict[str, Any]] = []
    for i in range(n):
        when += timedelta(hours=0 if i == 100 else rng.randint(2, 20))  # run 100 at the same second as run 99
        for key, (mean, step) in metrics.items():
            level[key] += rng.gauss(0, step) + 0.15 * (mean - level[key]) - (4 * step if _changes(i) else 0)
            if not key[1].endswith("_ms"):
                level[key] = min(1.0, max(0.0, level[key]))
        stages: dict[str, Any] = {}
        for (stage, metric), _ in metrics.items():
            stages.setdefault(stage, {"metrics": {}})["metrics"][metric] = round(level[(stage, metric)], 6)
        failing = level.get(("retrieval", "hit_rate@5"), 1) < 0.8 or level.get(("retrieval", "mrr"), 1) < 0.6
        entry: dict[str, Any] = {
            "schema_version": 1, "created_at": when.isoformat(timespec="seconds"), "commit": f"{rng.getrandbits(160):040x}",
            "branch": "main", "verdict": "error" if i % 37 == 36 else "fail" if failing else "pass",
            "fingerprints": {"golden_set": "sha256:75db661d83287f9c", "k": "k=10"}, "stages": stages,
            "kind": KINDS[rng.randrange(len(KINDS))], "url": f"https://github.com/acme/rag/actions/runs/{9_000_000 + i}",
            "changes": _changes(i), "system": {"values": {"model": "gpt-4o-mini", "index": "bm25-v3", "chunk_size": 512}},
        }
        if i == 10:
            entry["commit"], entry["branch"] = HOSTILE_COMMIT, HOSTILE_BRANCH
        if i == 30:
            entry["branch"] = "feature\u202eevil"
        if i == 40:
            entry["url"], entry["system"] = HOSTILE_URL, {"values": {"<b>os</b>": HOSTILE_CHANGE}}
        out.append(entry)
    for i in (50, 120, 170):  # written out of time order: the page sorts by created_at
        if i + 1 < n:
            out[i], out[i + 1] = out[i + 1], out[i]
    return out


def shown(metric: str, value: float) -> str:
    """A value as the page writes it."""
    return f"{value:.1f} ms" if metric.endswith("_ms") else f"{value:.4f}"


def time_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: datetime.fromisoformat(e["created_at"]))  # stable: ties keep file order


@cache
def schema_fields() -> frozenset[str]:
    schema = json.loads((ROOT / "gate" / "report.schema.json").read_text(encoding="utf-8"))
    return frozenset(schema["$defs"]["history_entry"]["properties"])


def schema_line(entry: dict[str, Any]) -> str:
    """The entry as a history line the schema accepts: the fields it does not know (yet) left out, and the newer
    fields too if their values are refused."""
    from gate.core.errors import InputError
    from gate.io.reports import check_document

    kept = {k: v for k, v in entry.items() if k in schema_fields()}
    try:
        check_document(json.loads(json.dumps(kept)), "history_entry", file="history.jsonl")
    except InputError:
        kept = {k: v for k, v in kept.items() if k not in NEW_FIELDS}
    return json.dumps(kept, ensure_ascii=False)


def write_workspace(folder: Path, entries: list[dict[str, Any]]) -> Path:
    """A spec gating six metrics, its golden set and baseline, and the history file of ``entries``."""
    (folder / "eval").mkdir(parents=True, exist_ok=True)
    (folder / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (folder / "golden_set.jsonl").write_text('{"id": "q1", "question": "When does the library open?", "ground_truth": "At 9.", '
                                            '"relevant": ["hours#1"]}\n', encoding="utf-8")
    stages: dict[str, Any] = {}
    for (stage, metric), value in ((k, BASELINE[k[1]]) for k in METRICS if k[1] in BASELINE):
        stages.setdefault(stage, {"metrics": {}})["metrics"][metric] = value
    baseline = {"schema_version": 1, "created_at": "2025-03-01T06:00:00+00:00", "tool_version": "0.4.0", "commit": "b" * 40,
                "fingerprints": {"golden_set": "sha256:75db661d83287f9c"}, "stages": stages}
    (folder / "eval" / "baseline.json").write_text(json.dumps(baseline, indent=2), encoding="utf-8")
    (folder / "eval" / "history.jsonl").write_text("".join(schema_line(e) + "\n" for e in entries), encoding="utf-8")
    return folder


@cache
def dashboard_cli() -> tuple[str, ...]:
    """How to run the command: ``python -m gate dashboard`` once the CLI has it, else the module on its own."""
    probe = subprocess.run([sys.executable, "-m", "gate", "dashboard", "--help"], capture_output=True, cwd=ROOT, timeout=120)
    return ("-m", "gate", "dashboard") if probe.returncode == 0 else ("-m", "gate.cli.dashboard")


def rag_gate_dashboard(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, *dashboard_cli(), *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CLI's page (the history file as the schema reads it) and the renderer's (the entries' newer fields too)."""
    from gate.cli.dashboard import charts_from_spec, page_assets
    from gate.render.dashboard import render_dashboard

    entries = make_history()
    ws = write_workspace(tmp_path_factory.mktemp("dashboard"), entries)
    proc = rag_gate_dashboard(ws, "--history", "eval/history.jsonl", "--config", "rag-eval.yml", "--out", "dashboard.html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"wrote dashboard.html: 200 runs, {len(GATED)} charts"
    gated, baseline, notes = charts_from_spec(str(ws / "rag-eval.yml"))
    assert notes == []
    full = ws / "full.html"
    full.write_text(render_dashboard(entries, gated, baseline, page_assets(), title="rag-gate dashboard: acme/rag"), encoding="utf-8")
    return {"cli": ws / "dashboard.html", "full": full, "entries": time_order(entries),
            "cli_has_kinds": "kind" in schema_fields() and '"kind"' in (ws / "eval" / "history.jsonl").read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium"), width=1400, height=1000) as b:
        yield b


def opened(browser: Browser, page: Path) -> Browser:
    browser.events.clear()
    browser.open(page.as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "1", browser.console_errors()
    return browser


def only_the_page(b: Browser, page: Path) -> None:
    """The page asked for nothing but itself, logged no error (no CSP violation) and opened no dialog."""
    assert [u.split("#")[0] for u in b.requests()] == [page.as_uri()]
    assert b.console_errors() == []
    assert b.dialogs() == []


@pytest.mark.parametrize("which", ["cli", "full"])
def test_one_chart_per_gated_metric_with_every_run_in_time_order(pages, browser, which):
    b = opened(browser, pages[which])
    charts = b.evaluate("[...document.querySelectorAll('figure.chart-box')].map(f => [f.dataset.stage, f.dataset.metric])")
    assert [tuple(c) for c in charts] == GATED
    runs = pages["entries"]
    for i in range(len(GATED)):
        pts = b.evaluate(f"[...document.querySelectorAll('svg[data-chart=\"{i}\"] path.pt')].map(p => [Number(p.dataset.run), "
                         "Number(p.dataset.x), p.querySelector('title').textContent])")
        assert len(pts) == 200
        assert [p[0] for p in pts] == list(range(200))
        xs = [p[1] for p in pts]
        assert all(a <= b for a, b in zip(xs, xs[1:], strict=False)) and xs[-1] > xs[0]
        for (_, _, tip), entry in zip(pts, runs, strict=True):  # the point's tooltip names its run
            assert entry["commit"][:12] in tip and entry["created_at"][:10] in tip and (entry["verdict"] or "unknown") in tip
    tie = next(k for k in range(199) if runs[k]["created_at"] == runs[k + 1]["created_at"])  # drawn at one x, in file order
    assert xs[tie] == xs[tie + 1]
    only_the_page(b, pages[which])


@pytest.mark.parametrize("which", ["cli", "full"])
def test_threshold_and_baseline_lines(pages, browser, which):
    b = opened(browser, pages[which])
    for i, (_, metric) in enumerate(GATED):
        lines = b.evaluate(f"[...document.querySelectorAll('svg[data-chart=\"{i}\"] line.threshold')].map(l => Number(l.dataset.value))")
        assert lines == ([LIMITS[metric][1]] if metric in LIMITS else [])
        labels = b.evaluate(f"[...document.querySelectorAll('svg[data-chart=\"{i}\"] text.threshold-label')].map(t => t.textContent)")
        assert labels == ([f"{LIMITS[metric][0]} {shown(metric, LIMITS[metric][1])}"] if metric in LIMITS else [])
        base = b.evaluate(f"[...document.querySelectorAll('svg[data-chart=\"{i}\"] line.baseline')].map(l => Number(l.dataset.value))")
        assert base == ([BASELINE[metric]] if metric in BASELINE else [])
        if metric in BASELINE:
            label = b.evaluate(f"document.querySelector('svg[data-chart=\"{i}\"] text.baseline-label').textContent")
            assert label == f"baseline {shown(metric, BASELINE[metric])}"
    sub = b.evaluate("document.querySelector('svg[data-chart=\"0\"] text.sub').textContent")
    assert sub == "gate: min 0.8, max_drop 0.02 · higher is better"
    assert b.evaluate("document.querySelector('svg[data-chart=\"3\"] text.sub').textContent").endswith("lower is better")


def test_kinds_changes_and_failing_runs_are_told_apart(pages, browser):
    b = opened(browser, pages["full"])
    runs = pages["entries"]
    shapes = b.evaluate("(() => { const out = {}; for (const p of document.querySelectorAll('svg[data-chart=\"0\"] path.pt')) "
                        "{ const k = [...p.classList].find(c => c.startsWith('k-')); out[k] = (out[k] || 0) + 1; } return out; })()")
    expected: dict[str, int] = {}
    for e in runs:
        k = "k-" + (e["kind"] if e["kind"] in ("push", "schedule", "merge") else "other")
        expected[k] = expected.get(k, 0) + 1
    assert shapes == expected and set(shapes) == {"k-push", "k-schedule", "k-merge", "k-other"}
    legend = b.evaluate("[...document.querySelectorAll('ul.legend li')].map(li => li.textContent)")
    assert legend[:3] == ["push", "schedule", "merge"] and legend[3].startswith("other")
    # the four shapes differ: a circle's arc, a square's h/v, a diamond's and a triangle's own outlines
    outlines = b.evaluate("[...document.querySelectorAll('ul.legend li svg path')].slice(0, 4).map(p => p.getAttribute('d').replace(/[-0-9.,]/g, ''))")
    assert len(set(outlines)) == 4
    changed = [i for i, e in enumerate(runs) if e["changes"]]
    rings = b.evaluate("[...document.querySelectorAll('svg[data-chart=\"0\"] path.pt.changed')].map(p => Number(p.dataset.run))")
    assert rings == changed and b.evaluate("document.querySelectorAll('svg[data-chart=\"0\"] circle.ring').length") == len(changed)
    failing = [i for i, e in enumerate(runs) if e["verdict"] in ("fail", "error")]
    assert failing and b.evaluate("[...document.querySelectorAll('svg[data-chart=\"0\"] path.pt.bad')].map(p => Number(p.dataset.run))") == failing
    fills = b.evaluate("[...document.querySelectorAll('svg[data-chart=\"0\"] path.pt')].map(p => getComputedStyle(p).fill)")
    assert {fills[i] for i in failing} == {"rgb(207, 34, 46)"} and fills[0 if 0 not in failing else 1] != "rgb(207, 34, 46)"
    tip = b.evaluate(f"document.querySelector('svg[data-chart=\"0\"] path.pt[data-run=\"{changed[0]}\"] title').textContent")
    assert "changed target.k: 5 → 10" in tip and "run: https://github.com/acme/rag/actions/runs/" in tip


@pytest.mark.parametrize("which", ["cli", "full"])
def test_the_table_of_runs_newest_first(pages, browser, which):
    b = opened(browser, pages[which])
    runs = pages["entries"]
    rows = b.evaluate("[...document.querySelectorAll('#runs tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    assert len(rows) == 200
    head = b.evaluate("[...document.querySelectorAll('#runs thead th')].map(c => c.textContent)")
    assert head == ["Date", "Kind", "Commit", "Branch", "Verdict", *(m for _, m in GATED), "Changes", "Run"]
    newest = runs[-1]
    assert rows[0][2] == newest["commit"][:12] and rows[0][4] == newest["verdict"]
    assert rows[0][5] == f"{newest['stages']['retrieval']['metrics']['hit_rate@5']:.4f}"
    assert rows[-1][2] == runs[0]["commit"][:12]
    if which == "full" or pages["cli_has_kinds"]:
        assert rows[0][1] == newest["kind"]
        changed = next(i for i in range(199, -1, -1) if runs[i]["changes"] and runs[i]["changes"][0]["key"] == "target.k")
        assert rows[199 - changed][-2] == "target.k: 5 → 10judge.model: gpt-4o-mini → gpt-4.1-mini"
        hrefs = b.evaluate("[...document.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.rel])")
        assert len(hrefs) == 199  # every run but the one whose url is javascript:
        assert all(h.startswith("https://github.com/acme/rag/actions/runs/") and rel == "noopener noreferrer" for h, rel in hrefs)
    else:
        assert {r[1] for r in rows} == {"push"} and b.evaluate("document.querySelectorAll('a').length") == 0


@pytest.mark.parametrize("which", ["cli", "full"])
def test_hostile_text_is_shown_as_text(pages, browser, which):
    html = pages[which].read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="rag-gate-data">(.*?)</script>', html, re.S)
    assert block and "<" not in block.group(1) and ">" not in block.group(1) and "\\u003c/script\\u003e" in block.group(1)
    outside = html.replace(block.group(1), "")
    assert "<img" not in html and "onerror" not in outside and "javascript:" not in outside and "__pwned" not in outside
    b = opened(browser, pages[which])
    text = b.evaluate("document.body.textContent")
    assert HOSTILE_BRANCH in text and HOSTILE_COMMIT[:12] in text and "feature<U+202E>evil" in text
    if which == "full" or pages["cli_has_kinds"]:
        assert HOSTILE_CHANGE + ": </script> → " + HOSTILE_URL in text
    assert b.evaluate("document.querySelectorAll('img, iframe, object, embed, form, base').length") == 0
    assert b.evaluate("typeof window.__pwned") == "undefined"
    assert b.evaluate("document.scripts.length") == 2  # the data block and the page's own script
    attrs = b.evaluate("[...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))")
    assert not [a for a in attrs if a.startswith("on") or a in ("src", "style", "srcdoc", "action", "xlink:href")]
    assert all(h.startswith("https://") for h in b.evaluate("[...document.querySelectorAll('[href]')].map(e => e.getAttribute('href'))"))
    only_the_page(b, pages[which])


def test_hover_and_click_show_the_run(pages, browser):
    b = opened(browser, pages["full"])
    runs = pages["entries"]
    i = next(i for i, e in enumerate(runs) if e["commit"] == HOSTILE_COMMIT)
    b.evaluate(f"document.querySelector('svg[data-chart=\"1\"] path.pt[data-run=\"{i}\"]').dispatchEvent(new MouseEvent('mouseover', {{bubbles: true}}))")
    assert b.evaluate("document.getElementById('detail').hidden") is False
    detail = b.evaluate("document.getElementById('detail').textContent")
    assert HOSTILE_COMMIT in detail and HOSTILE_BRANCH in detail and "model: gpt-4o-mini · index: bm25-v3 · chunk_size: 512" in detail
    j = next(i for i, e in enumerate(runs) if e["url"] == HOSTILE_URL)
    b.evaluate(f"document.querySelector('svg[data-chart=\"1\"] path.pt[data-run=\"{j}\"]').dispatchEvent(new MouseEvent('click', {{bubbles: true}}))")
    assert b.evaluate("[...document.querySelectorAll('#runs tr.sel')].map(r => Number(r.dataset.run))") == [j]
    detail = b.evaluate("document.getElementById('detail').textContent")
    assert f"run: {HOSTILE_URL} (not linked)" in detail and f"<b>os</b>: {HOSTILE_CHANGE}" in detail
    assert b.evaluate("document.querySelectorAll('#detail a').length") == 0
    b.evaluate("window.scrollTo(0, 0)")
    b.evaluate(f"document.querySelector('svg[data-chart=\"0\"] path.pt[data-run=\"{199}\"]').dispatchEvent(new MouseEvent('mouseover', {{bubbles: true}}))")
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = b.screenshot(SHOTS / "dashboard.png", full_page=False)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    print("screenshot:", path)
    only_the_page(b, pages["full"])


@pytest.mark.parametrize("entries", [[], make_history(1)], ids=["no-run", "one-run"])
def test_a_page_of_no_run_or_one_run_draws_without_an_error(tmp_path, browser, entries):
    from gate.cli.dashboard import page_assets
    from gate.render.dashboard import render_dashboard

    page = tmp_path / "dashboard.html"
    page.write_text(render_dashboard(entries, None, None, page_assets()), encoding="utf-8")
    b = opened(browser, page)
    assert b.evaluate("document.querySelectorAll('svg.chart path.pt').length") == 12 * len(entries)
    summary = b.evaluate("document.getElementById('summary').textContent")
    assert (summary == "no runs") if not entries else summary.startswith(f"1 run from {entries[0]['created_at'][:10]}")
    only_the_page(b, page)
