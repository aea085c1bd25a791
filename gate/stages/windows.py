"""A traces run's windows: the earlier windows of the history it is compared with, their anchor traces judged again in
this run (never from the cache: the point is today's judge), and the comparison records (gate.core.windows).

The reference of ``max_drop`` is the previous window; of ``trend: {window: N}`` the last N windows, each corrected by
its own anchors. Every per-case metric of the stage is compared; only a judge's scores are anchored (an answer check or
a share of refusals is an exact figure of the answers: no judge to drift).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.core.catalog import EngineMetric, higher_is_better, judge_noise
from gate.core.report import HistoryEntry, WindowComparison
from gate.core.windows import ReferenceWindow, anchor_ids, compare
from gate.judges import JudgeInput
from gate.stages.judging import JudgeSession, Result, Task


@dataclass(frozen=True)
class StoredWindow:
    """An earlier traces window as its history entry keeps it: each metric's scores then, and what its anchor traces
    were asked and answered (to judge them again)."""

    created_at: str
    label: str
    scores: Mapping[str, Mapping[str, float]]  # metric -> trace id -> score as judged then
    anchors: Mapping[str, JudgeInput]  # anchor trace id -> its question, answer and passages


@dataclass(frozen=True)
class WindowRefs:
    """What one kind of relative gate compares a traces window with: ``previous`` or ``trend:N``."""

    key: str
    label: str
    windows: Sequence[StoredWindow]
    anchor: int  # target.traces.anchor: 0 compares the scores as stored (no judge drift cancelled)
    min_sample: int  # target.traces.min_sample


def stored_window(entry: HistoryEntry, texts: Mapping[str, str], anchor: int, seed: int) -> StoredWindow | None:
    """The entry's generation stage as a StoredWindow (None when it measured none); its anchor: ``anchor`` of the
    traces it kept with their question, drawn by seed (the same ids whichever later run asks)."""
    stage = entry["stages"].get("generation")
    if stage is None:
        return None
    scores: dict[str, dict[str, float]] = {}
    inputs: dict[str, JudgeInput] = {}
    for case in stage.get("samples", []):
        for metric, value in case["metrics"].items():
            scores.setdefault(metric, {})[case["id"]] = value
        out = case.get("output")
        if not out or "question" not in out or out["question"] not in texts or not out["answer"] or out["answer"] not in texts:
            continue
        if any(c not in texts for c in out["contexts"]):
            continue
        inputs[case["id"]] = JudgeInput(texts[out["question"]], texts[out["answer"]], tuple(texts[c] for c in out["contexts"]))
    chosen = anchor_ids(sorted(inputs), anchor, seed)
    when = entry["created_at"]
    return StoredWindow(when, f"the window judged {when[:16].replace('T', ' ')}", scores, {i: inputs[i] for i in chosen})


def anchor_tasks(refs: Sequence[WindowRefs], metrics: Sequence[EngineMetric], session: JudgeSession) -> list[Task]:
    """One task per (reference window, anchor trace, judged metric), each window once however many gates read it."""
    seen: set[str] = set()
    tasks: list[Task] = []
    for ref in refs:
        for window in ref.windows:
            if window.created_at in seen:
                continue
            seen.add(window.created_at)
            for trace_id, item in window.anchors.items():
                tasks += [session.task(f"{window.created_at}\n{trace_id}", m, item) for m in metrics if m.engine != "offline"]
    return tasks


def anchor_scores(tasks: Sequence[Task], results: Mapping[int, Result]) -> dict[tuple[str, str, str], float]:
    """(window created_at, trace id, metric) -> today's score, for the anchors judged."""
    out: dict[tuple[str, str, str], float] = {}
    for i, task in enumerate(tasks):
        result = results.get(i)
        if isinstance(result, float):
            when, _, trace_id = task.case_id.partition("\n")
            out[(when, trace_id, task.scored.name)] = result
    return out


def window_records(refs: Sequence[WindowRefs], per_case: Mapping[str, Mapping[str, float]], metrics: Sequence[str],
                   now: Mapping[tuple[str, str, str], float], judgings: int) -> dict[str, WindowComparison]:
    """Each reference's comparison record: every metric of this window against it (gate.core.windows.compare)."""
    out: dict[str, WindowComparison] = {}
    for ref in refs:
        per_metric = {}
        for metric in metrics:
            anchored = judge_noise("generation", metric)
            windows = [ReferenceWindow(w.label, w.scores.get(metric, {}),
                                       {i: now[(w.created_at, i, metric)] for i in w.anchors if (w.created_at, i, metric) in now})
                       for w in ref.windows]
            current = [s[metric] for s in per_case.values() if metric in s]
            per_metric[metric] = compare(current, windows, higher_is_better=higher_is_better(metric), min_sample=ref.min_sample,
                                         anchored=anchored and ref.anchor > 0)
        out[ref.key] = {"against": "previous" if ref.key == "previous" else "trend", "label": ref.label,
                        "windows": [w.created_at for w in ref.windows],
                        "anchor": sorted({i for w in ref.windows for i in w.anchors}), "judgings": judgings,
                        "min_sample": ref.min_sample, "metrics": per_metric}
    return out
