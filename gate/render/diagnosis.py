"""Where it broke and what the answer checks found, for the PR comment (Markdown). Pure. Every string from the report
goes through gate.render.escape: the report may be a fork's artifact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.core.report import Report, StageResult
from gate.render.escape import cell, code

SHOWN_IDS = 8  # case ids named on a layer's line


def where_it_broke(report: Report) -> list[str]:
    """The comment's opening lines: one per layer that moved, the cheapest to look at first, with its cases."""
    layers = report.get("diagnosis", {}).get("layers", [])
    if not layers:
        return []
    lines = ["**Where it broke** (look at the layers in this order):", ""]
    for entry in layers:
        ids = [str(i) for i in entry.get("cases", [])]
        named = ", ".join(code(i, 40) for i in ids[:SHOWN_IDS]) + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")
        lines.append(f"- {cell(entry.get('line', ''), 400)}" + (f" — {named}" if named else ""))
    return [*lines, ""]


def checks_note(stage: StageResult) -> list[str]:
    """How many answers the answer checks read."""
    checks = stage.get("checks")
    if not checks:
        return []
    return [f"Answer checks (no model): {int(checks['checked'])} answers checked, {int(checks['keywords'])} against their "
            "expected keywords.", ""]


def answer_check_cases(stage: StageResult, max_cases: int) -> list[str]:
    """The answers that failed a check or missed a keyword, each with the evidence."""
    rows = stage.get("checks", {}).get("cases", [])
    failed = [r for r in rows if r.get("failed")]
    missing = [r for r in rows if r.get("missing")]
    if not rows or max_cases == 0:
        return []
    checks = stage["checks"]
    lines: list[str] = []
    if failed:
        shown = failed[:max_cases]
        lines += [f"<details><summary>{len(failed)} of {int(checks.get('checked', 0))} checked answers failed an answer check"
                  + (f" (showing {len(shown)})" if len(shown) < len(failed) else "") + "</summary>", "",
                  "| Case | Check | Evidence |", "|---|---|---|"]
        for r in shown:
            for f in r["failed"]:
                lines.append(f"| {code(r['id'], 40)} | {code(f.get('check', ''), 40)} | {cell(f.get('evidence', ''), 200)} |")
        lines += ["", *_the_rest(failed[len(shown):]), "</details>", ""]
    if missing:
        shown = missing[:max_cases]
        lines += [f"<details><summary>{len(missing)} of {int(checks.get('keywords', 0))} answers with expected keywords missed some"
                  + (f" (showing {len(shown)})" if len(shown) < len(missing) else "") + "</summary>", "",
                  "| Case | Missing keywords |", "|---|---|"]
        lines += [f"| {code(r['id'], 40)} | {', '.join(code(k, 60) for k in r['missing'][:10])} |" for r in shown]
        lines += ["", "</details>", ""]
    return lines


NAMED = 500  # case ids named beyond a table's rows


def _the_rest(rows: list[Any]) -> list[str]:
    """The ids of the rows a table left out, so that the comment names every case (up to NAMED)."""
    if not rows:
        return []
    named = ", ".join(code(r["id"], 40) for r in rows[:NAMED])
    more = f" and {len(rows) - NAMED} more (report.json has them all)" if len(rows) > NAMED else ""
    return [f"Also failed: {named}{more}.", ""]


def diagnosed(row: Mapping[str, Any]) -> str:
    """A worse case's diagnosis code for its row, or nothing."""
    found = row.get("diagnosis")
    return f" · {code(found, 30)}" if found else ""
