"""A run from end to end: load, ask, measure, evaluate; the report redacted in one place, and what the HTML report
shows beside it (``Viewed``)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import cast

from gate.core.model import GoldenCase, TargetOutput
from gate.core.redact import Redactor
from gate.core.report import Report, StoredRun
from gate.run.load import Loaded, load
from gate.run.options import RunOptions


@dataclass(frozen=True)
class Viewed:
    """A run's report, and what the HTML report shows beside it: the golden cases, the stored run the report was
    compared with, and (``passages()``) the retrieved passages' texts as the target returned them. ``redact`` holds the
    run's secrets: whatever is shown from these goes through it, as the report did."""

    report: Report
    cases: Sequence[GoldenCase]
    baseline: StoredRun | None
    outputs: Mapping[str, TargetOutput]
    k: int
    redact: Redactor

    def passages(self) -> dict[str, str]:
        """Passage id -> text, for the top k of every answer (read only when the HTML report is written)."""
        return {p.id: p.text for o in self.outputs.values() for p in o.retrieved[: self.k] if p.text}


def viewed(report: Report, loaded: Loaded, outputs: Mapping[str, TargetOutput], options: RunOptions) -> Viewed:
    """The report redacted (one place for it: no output can hold a secret the target or a judge echoed), with the rest."""
    redactor = loaded.spec.redactor(options.secrets)
    return Viewed(cast(Report, redactor.document(report)), loaded.cases, loaded.baseline, outputs, loaded.spec.target_k, redactor)


def run(config: str, options: RunOptions | None = None) -> Report:
    """Load, ask, judge, evaluate: the report (see ``run_viewed``)."""
    return run_viewed(config, options).report


def run_viewed(config: str, options: RunOptions | None = None) -> Viewed:
    """Load, ask, judge, evaluate. Raises InputError (exit 2) for bad input; everything else is in the report.

    ``options.history_store`` replaces the spec's local history file (the action passes the repository-backed
    store; it keeps the spec's history.max_entries); ``options.choose_baseline(entries)`` may pick the baseline
    from the history (the entry of the PR's base commit) and say which, or return None to use the committed file.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    with gc_paused():  # millions of small, acyclic JSON objects: the cyclic GC would only rescan them
        loaded = load(config, options)
        # what runs after the load is imported now, while a thread may still read the results file (gate.run.load)
        from gate.run.context import run_facts
        from gate.run.evaluate import evaluate
        from gate.run.measure import measure
        from gate.run.notes import deadline_note

        measured = measure(loaded, options)
        note = deadline_note(loaded.deadline, measured.outputs, measured.judged)
        facts = run_facts(loaded, options, measured, time.perf_counter() - started, note)
        report = evaluate(loaded.spec, loaded.cases, measured.outputs, facts, measured.judged, loaded.fingerprint)
        return viewed(report, loaded, measured.outputs, options)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting still frees memory)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()  # freeze + unfreeze: what the run left alive moves to the oldest generation at once, so the first
            gc.unfreeze()  # collection after it does not scan it all (0.1 s on 10,000 cases); cycles are still found
            gc.enable()
