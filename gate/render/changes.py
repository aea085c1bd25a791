"""What changed since the reference run, in the PR comment, the watch issue and the console. Pure.

The values come from the target (``system``) and from a report that may be a fork's: every one is untrusted text,
escaped by gate.render.escape before it is shown.
"""

from __future__ import annotations

from typing import Any

from gate.core.changes import change_text
from gate.core.report import Change, Report
from gate.render.escape import cell, code

SHOWN = 15  # changes listed; the rest are counted


def _shortened(change: Change) -> Change:
    """A commit or a fingerprint cut to what a reader compares (12 characters of a sha)."""
    if change["key"] != "commit":
        return change
    return {"key": "commit", "before": _sha(change["before"]), "after": _sha(change["after"])}


def _sha(value: Any) -> Any:
    return value[:12] if isinstance(value, str) else value


def _source(report: Report) -> str:
    src = report.get("changes_from")
    if src is None:
        return "the reference run"
    when = (src["created_at"] or "")[:10]
    return src["source"] + (f", {when}" if when else "")


def changes_lines(report: Report, *, heading: str = "What changed") -> list[str]:
    """The Markdown list of what differs from the reference run (nothing when nothing does, or there is none)."""
    items = report.get("changes") or []
    if not items:
        return []
    lines = [f"**{heading}** since {cell(_source(report), 300)}:", ""]
    lines += [f"- {code(_shortened(c)['key'], 120)}: {cell(change_text(_shortened(c)).split(': ', 1)[1], 300)}" for c in items[:SHOWN]]
    if len(items) > SHOWN:
        lines.append(f"- and {len(items) - SHOWN} more (report.json `changes`)")
    return [*lines, ""]


def changes_console(report: Report) -> list[str]:
    """One line per change for the terminal (made safe for a log by the caller)."""
    items = report.get("changes") or []
    if not items:
        return []
    out = [f"changed since {_source(report)}:"]
    out += [f"  {change_text(_shortened(c))}" for c in items[:SHOWN]]
    if len(items) > SHOWN:
        out.append(f"  and {len(items) - SHOWN} more (report.json changes)")
    return out
