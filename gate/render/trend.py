"""The trend chart of the judge metrics over recent default-branch runs: a Mermaid xychart-beta
block (GitHub renders it) with a plain table as the fallback. Pure."""

from __future__ import annotations

from gate.core.report import HistoryRun, Report
from gate.render.escape import code, label

MAX_METRICS = 3  # one chart each; more would drown the comment


def _label(run: HistoryRun, i: int) -> str:
    commit = (run.get("commit") or "")[:7]
    return label(commit) if commit and commit.isascii() and commit.isalnum() else f"run {i + 1}"


def render_trend(report: Report) -> list[str]:
    """Charts for the judge stages' metrics that have history, the current run as the last point."""
    runs = report.get("history", {}).get("runs", [])
    if not runs:
        return []
    series: dict[str, list[float | None]] = {}
    for stage_name in ("generation", "robustness"):
        stage = report["stages"].get(stage_name)
        current = stage["metrics"] if stage else {}
        for metric, now in current.items():
            past = [r.get("metrics", {}).get(stage_name, {}).get(metric) for r in runs]
            if any(isinstance(v, (int, float)) for v in past) and not metric.endswith("_ms"):
                series[metric] = [*(float(v) if isinstance(v, (int, float)) else None for v in past), float(now)]
    if not series:
        return []
    traces = "traces" in report  # a traces run is one window of production traffic, not a pull request
    labels = [_label(r, i) for i, r in enumerate(runs)] + ["this window" if traces else "this PR"]
    shown = list(series)[:MAX_METRICS]
    what = "traces window" if traces else "default-branch run"
    lines = [f"<details><summary>Trend over the last {len(runs)} {what}{'s' if len(runs) != 1 else ''}</summary>", ""]
    for metric in shown:
        # a run without the metric is left out of its chart (a point at the axis minimum would draw a drop that
        # never happened); the table below still has its row, with a dash
        kept = [(x, v) for x, v in zip(labels, series[metric], strict=True) if v is not None]
        known = [v for _, v in kept]
        lo = max(0.0, min(known) - 0.05)
        hi = min(1.0, max(known) + 0.05) if max(known) <= 1.0 else max(known) * 1.05
        points = ", ".join(f"{v:.3f}" for v in known)
        lines += ["```mermaid", "xychart-beta", f'  title "{label(metric)}"',
                  "  x-axis [" + ", ".join(f'"{x}"' for x, _ in kept) + "]",
                  f'  y-axis "{label(metric)}" {lo:.2f} --> {hi:.2f}', f"  line [{points}]", "```", ""]
    # the fallback: the same numbers as a table (clients without Mermaid, screen readers)
    lines += ["| Run | " + " | ".join(code(m) for m in shown) + " |", "|---|" + "---:|" * len(shown)]
    for i, run_label in enumerate(labels):
        cells = [f"{series[m][i]:.4f}" if series[m][i] is not None else "—" for m in shown]
        lines.append(f"| {run_label} | " + " | ".join(cells) + " |")
    return lines + ["", "</details>", ""]
