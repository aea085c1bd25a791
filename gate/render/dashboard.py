"""The dashboard (``rag-gate dashboard``): one self-contained HTML page of quality over time, drawn from the history
file (one entry a default-branch run). Pure.

What it shows: one chart per gated metric of the spec (or, without a spec, per metric the history holds), the runs
in time order (x by date, y by value), each run's kind told by its marker's shape (push, schedule, merge, any other),
failing runs (verdict fail or error) in red, runs whose setup changed (the entry's ``changes``) ringed, the gate's
``min`` and ``max`` as threshold lines and the baseline's value as a dashed line; below, a table of the runs, newest
first.

How it stays safe with untrusted text (a history file is written by CI runs, and its commits, branches, links,
changes and metric names are data): it is made exactly like the HTML report (gate.render.html). The page is a fixed
template, the same bytes for every dashboard, plus the data as JSON in a ``<script type="application/json">`` block
in which ``<``, ``>`` and ``&`` are JSON escapes (so no data can close the block or open a tag). The page's script
builds every element, the SVG charts included, with ``createElement``/``createElementNS`` and ``textContent``, and
never parses data as HTML. A link is made only for a run page of the form ``gate.render.RUN_PAGE`` (http or https,
checked here and again by the script), with ``rel="noopener noreferrer"``. Bidi controls, which would make a text
read in another order, are shown by name (``<U+202E>``). A Content Security Policy allows the page's own inline
script and style (by hash) and nothing else: no request leaves the page.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gate.core.catalog import higher_is_better
from gate.core.gates import configured_rule
from gate.render import RUN_PAGE, STAGE_ORDER
from gate.render.html import Assets

KINDS = ("push", "schedule", "merge")  # each has its own marker; any other kind (dispatch, deployment, pr...) shares one
DEFAULT_KIND = "push"  # an entry that does not say (entries written before kinds were recorded)
MAX_RUNS = 1000  # the newest runs drawn (the history keeps 200 by default)
MAX_CHARTS = 48  # charts drawn when the history, not a spec, names the metrics
MAX_CHANGES = 50  # changes listed per run
MAX_SYSTEM = 30  # system facts listed per run
TEXT_LIMIT = 300  # characters kept of one untrusted string
SHORT_COMMIT = 12

_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class ChartSpec:
    """One chart: a stage's metric, and what its gate says (``rule`` in words, the ``min``/``max`` lines to draw)."""

    stage: str
    metric: str
    rule: str = ""
    min: float | None = None
    max: float | None = None

    @classmethod
    def from_gate(cls, stage: str, metric: str, gate: Mapping[str, Any]) -> ChartSpec:
        """The chart of a spec's gate (a stage's ``gates`` mapping: metric -> {min, max, max_drop, trend, ...})."""
        return cls(stage, metric, configured_rule(gate), _number(gate.get("min")), _number(gate.get("max")))


def render_dashboard(entries: Sequence[Mapping[str, Any]], gated: Sequence[ChartSpec] | None, baseline: Mapping[str, Any] | None,
                     assets: Assets, *, title: str = "rag-gate dashboard", notes: Sequence[str] = ()) -> str:
    """The page for the history ``entries`` (in file order; drawn in time order). ``gated``: the charts to draw (one per
    gated metric of the spec), or None for one per metric found in the history. ``baseline``: the baseline file (its
    values are drawn as dashed lines), or None. ``assets``: the page's stylesheet and script (dashboard.css and
    dashboard.js of gate/render/assets). ``notes``: lines shown above the charts (the history's unreadable lines)."""
    return render_page(dashboard_data(entries, gated, baseline, title=title, notes=notes), assets)


def render_page(page: Mapping[str, Any], assets: Assets) -> str:
    """The fixed template with ``page`` (what ``dashboard_data`` made) as its data block."""
    from gate.render.page import self_contained_page

    return self_contained_page(page, assets, title="rag-gate dashboard", noscript="This dashboard is drawn by its own script, "
                               "which the browser did not run. The same figures are in the history file it was made from.")


# ---------------------------------------------------------------------------------------------- the page's data


def dashboard_data(entries: Sequence[Mapping[str, Any]], gated: Sequence[ChartSpec] | None, baseline: Mapping[str, Any] | None,
                   *, title: str, notes: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the page shows, as plain JSON: ``runs`` oldest first, ``charts`` each with one value per run."""
    dated, undated = timeline(entries)
    out_notes = [text(n) for n in notes[:20]] + ([f"… and {len(notes) - 20} more"] if len(notes) > 20 else [])
    if undated:
        out_notes.append(f"{undated} run{'s' if undated != 1 else ''} without a readable date left out")
    if len(dated) > MAX_RUNS:
        out_notes.append(f"the newest {MAX_RUNS} of {len(dated)} runs drawn")
        dated = dated[-MAX_RUNS:]
    specs = list(gated) if gated is not None else history_charts([e for _, e in dated])
    if gated is None and len(specs) > MAX_CHARTS:
        out_notes.append(f"the first {MAX_CHARTS} of {len(specs)} metrics drawn")
        specs = specs[:MAX_CHARTS]
    runs = [run_data(entry, when) for when, entry in dated]
    return {"title": text(title), "notes": out_notes, "runs": runs, "kinds": [*KINDS, "other"],
            "gated": gated is not None, "charts": [chart_data(s, [e for _, e in dated], baseline) for s in specs]}


def timeline(entries: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[datetime, Mapping[str, Any]]], int]:
    """The entries with a readable ``created_at``, sorted by it (ties keep file order), and how many had none."""
    dated: list[tuple[datetime, Mapping[str, Any]]] = []
    undated = 0
    for entry in entries:
        when = parse_time(entry.get("created_at"))
        if when is None:
            undated += 1
        else:
            dated.append((when, entry))
    dated.sort(key=lambda pair: pair[0])  # stable: equal times keep the file's order
    return dated, undated


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 date-time as an aware datetime (a time without a zone is taken as UTC); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def history_charts(entries: Sequence[Mapping[str, Any]]) -> list[ChartSpec]:
    """One chart per (stage, metric) the entries hold: the stages in report order, each's metrics as first met."""
    found: dict[str, dict[str, None]] = {}
    for entry in entries:
        stages = entry.get("stages")
        for stage, body in (stages.items() if isinstance(stages, Mapping) else ()):
            metrics = body.get("metrics") if isinstance(body, Mapping) else None
            for metric, value in (metrics.items() if isinstance(metrics, Mapping) else ()):
                if _number(value) is not None:
                    found.setdefault(str(stage), {}).setdefault(str(metric), None)
    order = [s for s in STAGE_ORDER if s in found] + [s for s in found if s not in STAGE_ORDER]
    return [ChartSpec(stage, metric) for stage in order for metric in found[stage]]


def run_data(entry: Mapping[str, Any], when: datetime) -> dict[str, Any]:
    """One run as the page shows it (every string made safe to show by ``text``)."""
    commit, url = _string(entry, "commit"), _string(entry, "url")
    kind = _string(entry, "kind") or DEFAULT_KIND
    verdict = entry.get("verdict") if entry.get("verdict") in ("pass", "fail", "error") else None
    run: dict[str, Any] = {
        "t": int(when.timestamp()), "date": when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": text(commit), "short": text(commit[:SHORT_COMMIT]), "branch": text(_string(entry, "branch")),
        "kind": text(kind), "shape": kind if kind in KINDS else "other", "verdict": verdict,
        "link": run_link(url), "changes": changes(entry.get("changes")), "system": system(entry.get("system")),
    }
    if url and run["link"] is None:
        run["url"] = text(url)  # shown as text, never linked
    return run


def run_link(url: str) -> str | None:
    """The run's page, when it has the form of one (``gate.render.RUN_PAGE``: http or https only); else None."""
    return url if RUN_PAGE.fullmatch(url) else None


def changes(raw: Any) -> list[list[str]]:
    """``[key, before, after]`` for each change the entry lists (what differed from the run it was compared with)."""
    if not isinstance(raw, list):
        return []
    out = [[text(c.get("key", "")), _shown(c.get("before")), _shown(c.get("after"))] for c in raw[:MAX_CHANGES] if isinstance(c, Mapping)]
    if len(raw) > MAX_CHANGES:
        out.append(["…", "", f"{len(raw) - MAX_CHANGES} more changes"])
    return out


def system(raw: Any) -> list[list[str]]:
    """``[name, value]`` for each fact of the entry's ``system``: its ``values`` (key -> the value most answers gave),
    or the object itself when it has no ``values`` mapping; a nested value as compact JSON."""
    if not isinstance(raw, Mapping):
        return []
    facts = raw["values"] if isinstance(raw.get("values"), Mapping) else raw
    return [[text(k), _shown(v)] for k, v in list(facts.items())[:MAX_SYSTEM]]


def chart_data(spec: ChartSpec, entries: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """A chart: its metric, the gate's lines, the baseline's value and one value per run (None where it has none)."""
    return {"stage": text(spec.stage), "metric": text(spec.metric), "rule": text(spec.rule), "min": spec.min, "max": spec.max,
            "baseline": metric_value(baseline, spec.stage, spec.metric) if baseline is not None else None,
            "higher": higher_is_better(spec.metric), "ms": spec.metric.endswith("_ms"), "tokens": spec.metric.endswith("_tokens"),
            "values": [_rounded(metric_value(e, spec.stage, spec.metric)) for e in entries]}


def metric_value(run: Mapping[str, Any], stage: str, metric: str) -> float | None:
    """A stored run's (history entry's, baseline's) value of a stage's metric, or None."""
    stages = run.get("stages")
    body = stages.get(stage) if isinstance(stages, Mapping) else None
    metrics = body.get("metrics") if isinstance(body, Mapping) else None
    return _number(metrics.get(metric)) if isinstance(metrics, Mapping) else None


def text(value: Any, limit: int = TEXT_LIMIT) -> str:
    """An untrusted string to show: one line, bidi controls by name, cut to ``limit`` characters."""
    s = _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", " ".join(str(value).split()))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _string(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    return value if isinstance(value, str) else ""


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return text(value)
    try:
        return text(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError):
        return text(repr(value))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _rounded(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")
