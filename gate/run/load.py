"""What a run reads before it asks anything: the spec, the golden set, the history and the baseline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.config.loader import load_spec
from gate.config.spec import Spec
from gate.core.cases import fingerprint
from gate.core.model import GoldenCase
from gate.core.records import window
from gate.core.report import HistoryEntry, StoredRun
from gate.deadline import Deadline
from gate.io.golden import load_corpus_ids, load_golden_set
from gate.io.history import HistoryStore, LocalHistoryStore
from gate.io.reports import read_baseline
from gate.run.options import RunOptions

if TYPE_CHECKING:
    from gate.core.calibration import CalibrationSettings
    from gate.run.traces import TracesRead
    from gate.targets.results import Read

COMMITTED = "the committed baseline file"


@dataclass
class Loaded:
    """What a run reads before it asks anything: the spec, the golden set, the history and the baseline."""

    spec: Spec
    cases: list[GoldenCase]
    store: HistoryStore
    entries: list[HistoryEntry]
    baseline: StoredRun | None
    source: str  # where the baseline is from, in words
    deadline: Deadline
    pending: int = 0  # generated cases left out: they await review
    corpus_ids: frozenset[str] | None = None  # the corpus's document ids (--corpus), read before any question is sent
    calibration: tuple[CalibrationSettings, dict[str, Any] | None] | None = None  # judge.calibration and its file (None: none)
    traces: TracesRead | None = None  # a traces run: the sampled traces (the cases) and what they answered
    results_read: Callable[[], Read] | None = None  # a results file's target: the file, read while the golden set was
    fingerprint: str | None = None  # the golden set's (gate.core.cases.fingerprint of cases), where it was made early

    @property
    def history(self) -> list[HistoryEntry]:
        """The history entries a run may compare with: the newest history.max_entries, oldest first."""
        return window(self.entries, int(self.spec.data["history"]["max_entries"]))


def load(config: str, options: RunOptions, *, unset_ok: bool = False) -> Loaded:
    """Read the spec, the golden set, the history and the baseline (the one ``options.choose_baseline`` picks).
    ``unset_ok``: the spec may read variables that are not set (a merge asks no target and no judge)."""
    spec = load_spec(config, unset_ok=unset_ok)
    results_read = _prefetch(spec)
    max_entries = int(spec.data["history"]["max_entries"])
    traces = None
    if spec.traces is not None:  # a traces run only
        from gate.run.traces import read_window

        traces = read_window(spec, options.now())
    everything = traces.cases if traces is not None else load_golden_set(spec.golden_set_path)
    cases = [c for c in everything if not c.pending_review]  # generated cases wait for a reviewer's approval
    store = options.history_store or LocalHistoryStore(spec.history_path, max_entries)
    store.max_entries = max_entries
    entries = store.read()
    baseline: StoredRun | None = read_baseline(spec.baseline_path)
    source = COMMITTED
    chosen = options.choose_baseline(entries) if options.choose_baseline else None
    if chosen is not None and chosen[0] is not None:
        baseline, source = chosen
    elif chosen is not None:
        source = f"{chosen[1]}; {COMMITTED}" if baseline else chosen[1]
    deadline = Deadline(options.max_duration_s if options.max_duration_s is not None else spec.data["max_duration_s"])
    corpus = frozenset(load_corpus_ids(Path(options.corpus))) if options.corpus else None
    # while a thread still reads the results file, the golden set's fingerprint costs the run nothing: made now
    early = fingerprint(cases) if results_read is not None else None
    return Loaded(spec, cases, store, entries, baseline, source, deadline, len(everything) - len(cases), corpus, calibration(spec),
                  traces, results_read, early)


def _prefetch(spec: Spec) -> Callable[[], Read] | None:
    """A results file's target: its file, read in a thread while the golden set is read (gate.targets.results)."""
    results = spec.results_file
    if results is None or spec.traces is not None:
        return None
    from gate.targets.results import prefetch

    path, id_key = results
    return prefetch(path, ranked=id_key is None and not spec.stages.reads_texts)  # read_results' shape _LineOfIds


def calibration(spec: Spec) -> tuple[CalibrationSettings, dict[str, Any] | None] | None:
    """The spec's judge.calibration and the file it names (None when the file does not exist yet)."""
    block = (spec.data.get("judge") or {}).get("calibration")
    if not block:  # (CalibrationSettings.read's None, without importing it)
        return None
    from gate.core.calibration import CalibrationSettings

    settings = CalibrationSettings.read(block)
    if settings is None:
        return None
    from gate.io.calibration import read_calibration

    return settings, read_calibration(spec.resolve(settings.file))
