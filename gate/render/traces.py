"""A traces run in the PR comment, the job summary, the watch issue and the console: what was read and sampled, and
each window comparison with the judge's drift. Pure. Every value read from a report is untrusted text (a trace's id
or reason comes from production traffic), escaped by gate.render.escape before it is shown."""

from __future__ import annotations

from typing import Any

from gate.core.report import Report, StageResult
from gate.render.escape import cell
from gate.render.escape import cell as escape_cell

SHOWN_PROBLEMS = 5


def _num(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "–"


def _plain(text: Any, limit: int = 200) -> str:
    return str(text)[:limit]


def traces_line(report: Report, *, plain: bool = False) -> str | None:
    """The header line of a traces run (None for a golden-set run); ``plain``: for the console (which makes the whole
    output safe for a log), else Markdown with every value escaped."""
    t = report.get("traces")
    if not t:
        return None
    cell = _plain if plain else escape_cell
    span = " → ".join(cell((x or "…")[:16].replace("T", " ")) for x in (t.get("since") or t.get("first"), t.get("until") or t.get("last")))
    line = (f"Traces: {int(t['sampled'])} sampled of {int(t['in_window'])} in the window ({span}; {cell(t['format'])}, "
            f"{t['rate']:.0%} of each day, at most {int(t['max'])}, seed {int(t['seed'])})")
    if t.get("unreadable"):
        named = "; ".join(f"line {int(p['line'])}{' (' + cell(p['id'], 40) + ')' if p.get('id') else ''}: {cell(p['reason'], 120)}"
                          for p in t.get("problems", [])[:SHOWN_PROBLEMS])
        more = " …" if int(t["unreadable"]) > SHOWN_PROBLEMS else ""
        line += f" · {'' if plain else '**'}{int(t['unreadable'])} unreadable{'' if plain else '**'}: {named}{more}"
    return line


def window_lines(stage: StageResult) -> list[str]:
    """The stage's window comparisons: a table per reference, each metric's means, the judge's drift and the change."""
    lines: list[str] = []
    for key, w in sorted((stage.get("windows") or {}).items()):
        anchored = any(m["drift"] is not None for m in w["metrics"].values())
        how = (f"{len(w['anchor'])} of its traces judged again in this run ({int(w['judgings'])} judgings), so the judge's "
               "drift cancels out" if anchored else "stored scores (no anchor judged again)")
        lines += [f"**This window vs {cell(w['label'], 120)}** ({cell(key)}; {how}; min_sample {int(w['min_sample'])})", "",
                  "| Metric | This window | Reference then | Judge drift | Reference today | Change | p |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for metric, m in w["metrics"].items():
            change = f"{m['delta']:+.3f}" if isinstance(m["delta"], (int, float)) else "–"
            drift = f"{m['drift']:+.3f}" if isinstance(m["drift"], (int, float)) else "–"
            p = f"{m['p_value']:.3g}" if isinstance(m["p_value"], (int, float)) else "–"
            if "insufficient" in m:
                p = "insufficient evidence: " + cell(m["insufficient"], 160)
            lines.append(f"| {cell(metric)} | {_num(m['mean'])} ({int(m['n'])}) | {_num(m['reference_mean'])} ({int(m['reference_n'])}) "
                         f"| {drift} | {_num(m['corrected'])} | {change} | {p} |")
        lines.append("")
    return lines
