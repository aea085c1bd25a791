"""The dashboard (gate.render.dashboard, gate.cli.dashboard): the page is a fixed template with the runs as escaped
JSON, allowed by its CSP to run only its own script and style; hostile text in a history stays data; the command reads
a history file or a branch, and says what is wrong with an input (exit 2) without a traceback."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from gate.cli.dashboard import add_parser, charts_from_spec, dashboard_command, page_assets
from gate.render.dashboard import ChartSpec, dashboard_data, render_dashboard

HOSTILE = "<img src=x onerror=alert(1)>"
CLOSE = "</script><script>alert(2)</script>"
BIDI = "main\u202eevil"
RUN = "https://github.com/acme/rag/actions/runs/123"
BLOCK = re.compile(r'<script type="application/json" id="rag-gate-data">(.*?)</script>', re.S)


def entry(when: str, commit: str | None, values: dict[str, float], **extra: Any) -> dict[str, Any]:
    """A history entry as today's schema has it (``extra``: the newer optional fields)."""
    return {"schema_version": 1, "created_at": when, "commit": commit, "branch": "main", "verdict": extra.pop("verdict", "pass"),
            "fingerprints": {"golden_set": "sha256:ab"}, "stages": {"retrieval": {"metrics": values}}, **extra}


def crafted() -> list[dict[str, Any]]:
    """Five runs in file order, not in time order, two at the same second; every kind; a change; hostile text."""
    return [
        entry("2025-01-03T10:00:00+00:00", "c" * 40, {"hit_rate@5": 0.82, "mrr": 0.61}, kind="merge", url=RUN,
              changes=[{"key": "target.k", "before": 5, "after": 10}]),
        entry("2025-01-01T10:00:00+00:00", "a" * 40, {"hit_rate@5": 0.9, "mrr": 0.7}),  # no kind: a push
        entry("2025-01-02T10:00:00+00:00", HOSTILE, {"hit_rate@5": 0.85, "mrr": 0.65}, kind="schedule", branch=CLOSE,
              url="javascript:alert(3)", verdict="fail",
              changes=[{"key": HOSTILE, "before": CLOSE, "after": "javascript:alert(4)"}], system={"values": {"<b>os</b>": HOSTILE}, "counts": {"<b>os</b>": {HOSTILE: 3}}}),
        entry("2025-01-03T10:00:00+00:00", "d" * 40, {"hit_rate@5": 0.8, "mrr": 0.6, HOSTILE: 0.5}, kind="pr", branch=BIDI,
              url="https://evil.example/x"),
        entry("2025-01-04T09:00:00Z", "e" * 40, {"hit_rate@5": 0.79}, kind="deployment", verdict="error",
              system={"index": {"name": "bm25", "v": 3}}),  # no "values": the object's own keys
    ]


GATED = [ChartSpec.from_gate("retrieval", "hit_rate@5", {"min": 0.8, "max_drop": 0.02}),
         ChartSpec.from_gate("retrieval", "mrr", {"min": 0.6, "max": 0.95})]
BASELINE = {"schema_version": 1, "stages": {"retrieval": {"metrics": {"hit_rate@5": 0.86}}}}


def page(entries: list[dict[str, Any]] | None = None, gated: list[ChartSpec] | None = GATED) -> str:
    return render_dashboard(crafted() if entries is None else entries, gated, BASELINE, page_assets(), title="acme <dashboard>")


def digest(s: str) -> str:
    return base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()


def block(html: str) -> str:
    m = BLOCK.search(html)
    assert m
    return m.group(1)


# ------------------------------------------------------------------------------------------------ the page


def test_the_csp_allows_exactly_the_pages_own_script_and_style():
    html = page()
    css = re.search(r"<style>(.*?)</style>", html, re.S).group(1)  # type: ignore[union-attr]
    js = re.search(r"<script>(.*?)</script>", html, re.S).group(1)  # type: ignore[union-attr]
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)  # type: ignore[union-attr]
    assert policy.startswith("default-src 'none';")
    assert f"script-src 'sha256-{digest(js)}'" in policy and f"style-src 'sha256-{digest(css)}'" in policy
    assert "img-src 'none'" in policy and "base-uri 'none'" in policy and "form-action 'none'" in policy
    assert css == page_assets().css and js == page_assets().js


def test_the_template_is_fixed_and_the_data_is_escaped_json():
    one, other = page(), page(crafted()[:2], None)
    assert one.replace(block(one), "") == other.replace(block(other), "")  # the same bytes whatever the history holds
    data = block(one)
    assert "<" not in data and ">" not in data and "&" not in data
    parsed = json.loads(data)
    assert parsed["title"] == "acme <dashboard>"
    outside = one.replace(data, "")
    for bad in ("<img", "onerror", "javascript:", "alert(", "evil.example"):
        assert bad not in outside
    assert "<img" not in one and CLOSE not in one


def test_runs_in_time_order_ties_in_file_order_and_every_field_kept_as_text():
    runs = dashboard_data(crafted(), GATED, BASELINE, title="t")["runs"]
    assert [r["commit"][:1] for r in runs] == ["a", "<", "c", "d", "e"]  # 01-01, 01-02, then the two at 01-03 in file order
    assert [r["t"] for r in runs] == sorted(r["t"] for r in runs) and runs[2]["t"] == runs[3]["t"]
    assert [r["kind"] for r in runs] == ["push", "schedule", "merge", "pr", "deployment"]
    assert [r["shape"] for r in runs] == ["push", "schedule", "merge", "other", "other"]
    hostile = runs[1]
    assert hostile["commit"] == HOSTILE and hostile["short"] == HOSTILE[:12] and hostile["branch"] == CLOSE
    assert hostile["changes"] == [[HOSTILE, CLOSE, "javascript:alert(4)"]] and hostile["system"] == [["<b>os</b>", HOSTILE]]
    assert runs[2]["changes"] == [["target.k", "5", "10"]] and runs[0]["changes"] == []
    assert runs[3]["branch"] == "main<U+202E>evil"  # a bidi control by name: nothing after it reads reversed
    assert runs[4]["date"] == "2025-01-04 09:00 UTC" and runs[4]["verdict"] == "error"
    assert runs[4]["system"] == [["index", '{"name":"bm25","v":3}']] and runs[0]["system"] == []


def test_only_a_run_page_becomes_a_link():
    runs = dashboard_data(crafted(), GATED, None, title="t")["runs"]
    assert runs[2]["link"] == RUN and "url" not in runs[2]
    assert runs[1]["link"] is None and runs[1]["url"] == "javascript:alert(3)"  # shown as text
    assert runs[3]["link"] is None and runs[3]["url"] == "https://evil.example/x"  # http, but no run page
    assert runs[0]["link"] is None and "url" not in runs[0]
    js = page_assets().js
    assert js.count('setAttribute("href"') == 1 and "LINK.test(run.link)" in js and "innerHTML" not in js
    assert "noopener noreferrer" in js


def test_charts_thresholds_and_baseline():
    charts = dashboard_data(crafted(), GATED, BASELINE, title="t")["charts"]
    assert [(c["metric"], c["rule"], c["min"], c["max"], c["baseline"]) for c in charts] == [
        ("hit_rate@5", "min 0.8, max_drop 0.02", 0.8, None, 0.86), ("mrr", "min 0.6, max 0.95", 0.6, 0.95, None)]
    assert charts[0]["values"] == [0.9, 0.85, 0.82, 0.8, 0.79] and charts[1]["values"] == [0.7, 0.65, 0.61, 0.6, None]
    assert charts[0]["higher"] is True
    latency = dashboard_data(crafted(), [ChartSpec("retrieval", "p95_latency_ms", "max 800", None, 800.0)], None, title="t")
    assert latency["charts"][0]["higher"] is False and latency["charts"][0]["ms"] is True


def test_without_a_spec_one_chart_per_metric_of_the_history_names_kept_as_text():
    data = dashboard_data(crafted(), None, None, title="t")
    assert [(c["stage"], c["metric"]) for c in data["charts"]] == [("retrieval", "hit_rate@5"), ("retrieval", "mrr"), ("retrieval", HOSTILE)]
    assert data["gated"] is False and data["charts"][2]["values"] == [None, None, None, 0.5, None]
    html = page(gated=None)
    assert HOSTILE not in html and json.loads(block(html))["charts"][2]["metric"] == HOSTILE


def test_undated_runs_are_left_out_with_a_note_and_notes_are_capped():
    entries = [*crafted(), entry("yesterday", "f" * 40, {"mrr": 0.5})]
    data = dashboard_data(entries, None, None, title="t", notes=[f"history.jsonl:{i}: not JSON, skipped" for i in range(25)])
    assert len(data["runs"]) == 5
    assert data["notes"][-1] == "1 run without a readable date left out" and data["notes"][20] == "… and 5 more"


def test_a_long_hostile_text_is_cut():
    long = "x" * 5000
    run = dashboard_data([entry("2025-01-01T00:00:00+00:00", long, {"mrr": 0.5}, branch="a\nb\tc")], None, None, title="t")["runs"][0]
    assert len(run["commit"]) == 300 and run["commit"].endswith("…") and run["branch"] == "a b c"


def test_200_runs_of_12_metrics_stay_small_and_fast():
    from tests.e2e.test_dashboard_browser import METRICS, make_history

    entries = make_history(200)
    gated = [ChartSpec(stage, metric) for stage, metric in METRICS]
    t0 = time.perf_counter()
    html = render_dashboard(entries, gated, None, page_assets())
    took = time.perf_counter() - t0
    assert len(json.loads(block(html))["charts"]) == 12
    assert len(html.encode()) < 400_000, len(html.encode())
    assert took < 1.0, took


# ------------------------------------------------------------------------------------------------ the command


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rag-gate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return dashboard_command(parser.parse_args(["dashboard", *argv]))


def history_text(entries: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in entries)


def schema_entries() -> list[dict[str, Any]]:
    """The crafted runs as today's schema has them: no newer field, metric names the schema allows."""
    out = []
    for e in crafted():
        bare = {k: v for k, v in e.items() if k not in ("kind", "url", "changes", "system")}
        bare["stages"] = {"retrieval": {"metrics": {k: v for k, v in e["stages"]["retrieval"]["metrics"].items() if k != HOSTILE}}}
        out.append(bare)
    return out


SPEC = """version: 1
golden_set: golden_set.jsonl
target:
  python: "rag:answer"
baseline:
  path: baseline.json
stages:
  retrieval:
    metrics: [hit_rate@5, mrr]
    gates:
      hit_rate@5: {min: 0.8}
      mrr: {max_drop: 0.03}
      p95_latency_ms: {max: 800}
"""


def test_the_command_writes_the_page(tmp_path, capsys):
    (tmp_path / "history.jsonl").write_text(history_text(schema_entries()[:2]) + "not json\n" + history_text(schema_entries()[2:]))
    out = tmp_path / "site" / "dashboard.html"
    assert run_cli("--history", str(tmp_path / "history.jsonl"), "--out", str(out), "--title", "acme") == 0
    captured = capsys.readouterr()
    assert captured.out == f"wrote {out}: 5 runs, 2 charts\n"
    assert f"{tmp_path / 'history.jsonl'}:3: not JSON, skipped" in captured.err
    data = json.loads(block(out.read_text(encoding="utf-8")))
    assert data["title"] == "acme" and [r["commit"][:1] for r in data["runs"]] == ["a", "<", "c", "d", "e"]
    assert data["notes"] == [f"{tmp_path / 'history.jsonl'}:3: not JSON, skipped"]
    assert [r["branch"] for r in data["runs"]][1] == CLOSE  # hostile text in today's fields reaches the page as data


def test_the_command_with_a_spec_draws_its_gates_and_baseline(tmp_path, capsys):
    (tmp_path / "rag-eval.yml").write_text(SPEC)
    (tmp_path / "baseline.json").write_text(json.dumps({
        "schema_version": 1, "created_at": "2025-01-01T00:00:00+00:00", "tool_version": "0.4.0", "commit": None,
        "fingerprints": {}, "stages": {"retrieval": {"metrics": {"mrr": 0.66}}}}))
    (tmp_path / "history.jsonl").write_text(history_text(schema_entries()))
    out = tmp_path / "d.html"
    assert run_cli("--history", str(tmp_path / "history.jsonl"), "--config", str(tmp_path / "rag-eval.yml"), "--out", str(out)) == 0
    assert capsys.readouterr().out == f"wrote {out}: 5 runs, 3 charts\n"
    charts = json.loads(block(out.read_text(encoding="utf-8")))["charts"]
    assert [(c["metric"], c["min"], c["max"], c["baseline"]) for c in charts] == [
        ("hit_rate@5", 0.8, None, None), ("mrr", None, None, 0.66), ("p95_latency_ms", None, 800.0, None)]
    (tmp_path / "baseline.json").write_text("{")
    gated, baseline, notes = charts_from_spec(str(tmp_path / "rag-eval.yml"))
    assert gated and baseline is None and notes and "baseline.json" in notes[0] and notes[0].endswith("drawn without the baseline")


@pytest.mark.parametrize("content, message", [
    (None, "history.jsonl: --history: history file not found"),
    ("", "history.jsonl: the history is empty: no run to draw"),
    ("\n  \n", "history.jsonl: the history is empty: no run to draw"),
    ('not json\n{"schema_version": 1}\n', "history.jsonl: none of its 2 lines is a readable history entry: no run to draw"),
])
def test_a_bad_history_exits_2_naming_the_file(tmp_path, capsys, content, message):
    path = tmp_path / "history.jsonl"
    if content is not None:
        path.write_text(content)
    assert run_cli("--history", str(path), "--out", str(tmp_path / "d.html")) == 2
    err = capsys.readouterr().err
    assert f"rag-gate: {tmp_path}/{message}" in err and "Traceback" not in err
    assert not (tmp_path / "d.html").exists()
    if content and "schema_version" in content:
        assert f"{path}:1: not JSON, skipped" in err and f"{path}:2:" in err  # each unreadable line, with its number


def test_an_invalid_spec_exits_2_naming_its_file_and_line(tmp_path, capsys):
    (tmp_path / "history.jsonl").write_text(history_text(schema_entries()))
    (tmp_path / "rag-eval.yml").write_text(SPEC.replace("hit_rate@5: {min: 0.8}", "hit_rate@5: {min: high}"))
    assert run_cli("--history", str(tmp_path / "history.jsonl"), "--config", str(tmp_path / "rag-eval.yml"), "--out", str(tmp_path / "d.html")) == 2
    err = capsys.readouterr().err
    assert re.search(rf"rag-gate: {re.escape(str(tmp_path / 'rag-eval.yml'))}:11: stages\.retrieval\.gates\.hit_rate@5\.min", err), err
    assert run_cli("--history", str(tmp_path / "history.jsonl"), "--config", str(tmp_path / "none.yml"), "--out", str(tmp_path / "d.html")) == 2
    assert "none.yml: spec file not found" in capsys.readouterr().err


def test_history_or_branch_is_required(capsys):
    with pytest.raises(SystemExit) as exc:
        run_cli("--out", "d.html")
    assert exc.value.code == 2 and "one of the arguments --history --from-branch is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_cli("--history", "h.jsonl", "--from-branch", "b", "--out", "d.html")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A git repository whose branch rag-gate-history holds rag-gate/history.jsonl; the current folder."""
    (tmp_path / "rag-gate").mkdir()
    (tmp_path / "rag-gate" / "history.jsonl").write_text(history_text(schema_entries()))
    git(tmp_path, "init", "-q", "-b", "rag-gate-history")
    git(tmp_path, "add", "rag-gate/history.jsonl")
    git(tmp_path, "commit", "-q", "-m", "history")
    (tmp_path / "rag-gate" / "history.jsonl").unlink()  # only the branch has it
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_from_a_branch(repo, capsys):
    assert run_cli("--from-branch", "rag-gate-history", "--out", "d.html") == 0
    assert capsys.readouterr().out == "wrote d.html: 5 runs, 2 charts\n"
    assert len(json.loads(block((repo / "d.html").read_text(encoding="utf-8")))["runs"]) == 5
    git(repo, "update-ref", "refs/remotes/origin/history-copy", "HEAD")  # a branch only the remote has: origin/BRANCH
    assert run_cli("--from-branch", "history-copy", "--out", "e.html") == 0


@pytest.mark.parametrize("argv, message", [
    (("--from-branch", "gh-pages"), "rag-gate: --from-branch: no branch 'gh-pages' in the repository (nor origin/gh-pages)"),
    (("--from-branch", "rag-gate-history", "--history-path", "eval/h.jsonl"),
     "rag-gate: rag-gate-history:eval/h.jsonl: --history-path: no file eval/h.jsonl on branch rag-gate-history"),
    (("--from-branch=-x",), "rag-gate: --from-branch: not a branch name: '-x'"),  # never an option of git
])
def test_a_missing_branch_or_path_exits_2(repo, capsys, argv, message):
    assert run_cli(*argv, "--out", "d.html") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (repo / "d.html").exists()


def test_from_a_branch_outside_a_repository(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert run_cli("--from-branch", "rag-gate-history", "--out", "d.html") == 2
    assert f"rag-gate: --from-branch: {tmp_path} is not in a git repository" in capsys.readouterr().err
