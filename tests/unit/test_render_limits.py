"""The PR comment under GitHub's limits, with hostile text, and the trend chart."""

from __future__ import annotations

import copy
import re

from gate.render.markdown import COMMENT_LIMIT, marker, render_comment, render_summary
from gate.render.trend import render_trend

EVIL = "<img src=x onerror=alert(1)> @org/team ping #12 | broken | `code` [link](http://x) "


def hostile_report(n_cases: int, answer_kb: int) -> dict:
    answer = (EVIL * (answer_kb * 1024 // len(EVIL) + 1))[: answer_kb * 1024]
    worse = [{"id": f"{EVIL}{i}", "question": EVIL * 3, "drops": {"hit_rate@5": [1.0, 0.0]},
              "lost": [{"id": f"doc|{i}", "from": 1, "to": None, "left_top_k": True}]} for i in range(n_cases)]
    samples = [{"id": f"c{i}", "metrics": {}, "error": answer} for i in range(n_cases)]
    return {
        "schema_version": 1, "verdict": "fail", "exit_code": 1, "errors": [], "warnings": [EVIL],
        "tool": {"version": "0.1.0"}, "run": {"comment_id": "default", "max_cases": 500, "created_at": "2026-11-29T00:00:00+00:00"},
        "golden_set": {"n": n_cases, "by_type": {"answerable": n_cases}}, "target": {"kind": "http", "calls": n_cases, "errors": n_cases},
        "baseline": {"found": True, "path": "eval/baseline.json", "created_at": "2026-11-01T00:00:00+00:00", "mismatch": []},
        "stages": {"retrieval": {"status": "fail", "metrics": {"hit_rate@5": 0.1}, "baseline_metrics": {"hit_rate@5": 0.9},
                                 "gates": [{"metric": "hit_rate@5", "status": "fail", "rule": "min 0.8", "reason": EVIL}],
                                 "samples": samples, "worse_cases": worse, "reference_k": 5}},
    }


def assert_safe_comment(body: str, *, cut: bool = True, limit: int = COMMENT_LIMIT) -> None:
    """A comment built from hostile text: under the limit, found by its marker, no HTML tag, mention or issue reference
    outside inline code spans (where GitHub renders text literally), every table row as wide as its header, and it says
    it was shortened (``cut``) or not."""
    assert len(body) <= limit
    assert body.startswith(marker("default"))
    prose = re.sub(r"(?<!\\)`[^`]*(?<!\\)`", "", body)
    assert "<img" not in prose
    assert not re.search(r"@org", prose)  # every @ outside code is broken by a zero-width space
    assert "#12" not in prose
    assert ("cut to" in body or "was cut to fit" in body) is cut  # the comment says when it was shortened
    for block in body.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        if rows:
            widths = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
            assert len(widths) == 1, rows[:3]


def test_huge_hostile_report_fits_and_pings_nobody() -> None:
    assert_safe_comment(render_comment(hostile_report(400, 200)))


def test_the_job_summary_shows_more_cases_and_stays_under_1_mib() -> None:
    report = hostile_report(400, 200)
    summary, comment = render_summary(report), render_comment(report)
    assert len(summary.encode("utf-8")) <= 1024 * 1024 and len(summary) > 2 * len(comment)
    rows = lambda body: sum(1 for r in body.splitlines() if r.startswith("| `<img"))  # noqa: E731
    # report.max_cases is 500 here: the summary shows all 400 worse cases, the comment had to cut them
    assert rows(summary) == 400 and 0 < rows(comment) < 400 and "cut to" in comment
    assert_safe_comment(summary, cut=False, limit=256 * 1024)
    small = hostile_report(3, 1)
    assert render_summary(small) == render_comment(small)  # nothing to add: the same report


def test_small_report_is_not_cut() -> None:
    body = render_comment(hostile_report(3, 1))
    assert "cut to" not in body and len(body) < 20_000


def test_trend_chart_and_table_fallback() -> None:
    report = hostile_report(1, 1)
    report["stages"]["generation"] = {"status": "pass", "metrics": {"faithfulness": 0.82, "token_f1": 0.4}, "gates": [], "samples": []}
    report["history"] = {"entries": 3, "runs": [
        {"commit": "aaaaaaa1111", "metrics": {"generation": {"faithfulness": 0.90, "token_f1": 0.41}}},
        {"commit": "bbbbbbb2222", "metrics": {"generation": {"faithfulness": 0.88}}},
        {"commit": "ccccccc3333", "metrics": {"generation": {"faithfulness": 0.91, "token_f1": 0.40}}},
    ]}
    lines = render_trend(report)
    text = "\n".join(lines)
    assert text.count("```mermaid") == 2 and "xychart-beta" in text
    assert '"aaaaaaa", "bbbbbbb", "ccccccc", "this PR"' in text
    assert "line [0.900, 0.880, 0.910, 0.820]" in text
    assert "| this PR | 0.8200 | 0.4000 |" in text and "| bbbbbbb | 0.8800 | — |" in text
    assert "Trend over the last 3 default-branch runs" in render_comment(report)


def test_no_history_no_chart() -> None:
    report = copy.deepcopy(hostile_report(1, 1))
    assert render_trend(report) == []
