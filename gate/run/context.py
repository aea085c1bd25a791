"""The two things a run builds once from what it loaded: the context its judged stages share (``stage_context``) and
the facts its report records beside the figures (``run_facts``). A single run and a merge of shards build both here."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gate.core.changes import summarise_system
from gate.core.model import TargetOutput
from gate.core.report import HistoryEntry, StageMeasurement, StoredRun, SystemInfo, TracesInfo
from gate.run.load import Loaded
from gate.run.notes import passage_text_warning, pending_note, retrieval_warning, target_notes
from gate.run.options import RunOptions

if TYPE_CHECKING:
    from gate.core.calibration import CalibrationSettings
    from gate.judges.cache import ScoreCache
    from gate.stages.context import StageContext


def stage_context(loaded: Loaded, outputs: Mapping[str, TargetOutput], options: RunOptions, cache: ScoreCache,
                  only: Collection[str] | None = None) -> StageContext:
    """What the judged stages of this run share: the judge resolved once (its key read from the environment), the
    cache, the deadline, the shard's cases, the progress and the run's secrets."""
    from gate.judges import resolve_judge  # a judged stage's run only
    from gate.stages.context import StageContext, Traffic

    spec = loaded.spec
    judge, no_judge = resolve_judge(spec.judge, os.environ, secrets=spec.secrets)
    traffic = None
    if loaded.traces is not None:
        from gate.core.rejection import DEFAULT_REFUSAL_PHRASES

        phrases = (spec.traces or {}).get("refusal_phrases") or DEFAULT_REFUSAL_PHRASES
        traffic = Traffic({c["id"]: c["negative"] for c in loaded.traces.info["cases"]}, tuple(phrases))
    return StageContext(cases=loaded.cases, outputs=outputs, cache=cache, judge=judge, no_judge=no_judge, deadline=loaded.deadline,
                        only=only, progress=options.progress, redactor=spec.redactor(options.secrets),
                        golden_dir=spec.base_dir if spec.traces is not None else spec.golden_set_path.parent, traffic=traffic,
                        cutoff=spec.cutoff)


@dataclass
class Measured:
    """What a run (or one shard of it) got from its target and its judges."""

    outputs: dict[str, TargetOutput]
    judged: dict[str, StageMeasurement]
    target_kind: str
    unmatched: Sequence[int]  # lines of a results file that match no golden case


@dataclass(frozen=True)
class RunFacts:
    """What a run is compared with and the facts about it that come from outside: its time, commit and pull request."""

    created_at: str
    commit: str | None = None
    duration_s: float | None = None
    baseline: StoredRun | None = None
    baseline_source: str | None = None
    history: Sequence[HistoryEntry] = ()  # usable entries (same golden set and spec), oldest first
    warnings: Sequence[str] = ()  # from reading the history, and the run's notes
    target_kind: str = "results"
    target_notes: Sequence[str] = ()
    pull_request: tuple[int | None, str | None] | None = None  # (number, head commit): set by the action
    deadline_note: str | None = None  # how far the run got when max_duration_s ran out (a run error)
    run_url: str | None = None  # the CI run's page (the action), recorded in report.run.url
    corpus_ids: frozenset[str] | None = None  # the corpus's document ids (run --corpus): where it broke tells missing from unfound
    system: SystemInfo | None = None  # what the answers said about the system
    kind: str | None = None  # how the run came (report.run.kind)
    changes_from: tuple[StoredRun, str] | None = None  # the run the changes are counted from, and its name in words
    calibration: tuple[CalibrationSettings, dict[str, Any] | None] | None = None  # judge.calibration and its file
    traces: TracesInfo | None = None  # a traces run: what it read and sampled


def run_facts(loaded: Loaded, options: RunOptions, measured: Measured, duration_s: float, deadline_note: str | None) -> RunFacts:
    """The facts the report records: a single run's and a merge's alike (``options.commit`` says which commit)."""
    no_text = passage_text_warning(loaded.spec, measured.outputs)
    no_ids = retrieval_warning(loaded.spec, loaded.cases, measured.outputs)
    return RunFacts(created_at=options.now(), commit=options.commit, duration_s=duration_s, deadline_note=deadline_note,
                    baseline=loaded.baseline, baseline_source=loaded.source,
                    history=loaded.history,  # every stage picks the runs it can compare with (gate.run.evaluate.gate_stages)
                    warnings=[*loaded.store.warnings, *([no_text] if no_text else []), *([no_ids] if no_ids else []),
                              *pending_note(loaded)],
                    target_kind=measured.target_kind, target_notes=target_notes(loaded.cases, measured.outputs, measured.unmatched),
                    pull_request=options.pull_request, run_url=options.run_url, corpus_ids=loaded.corpus_ids,
                    system=summarise_system(o.system for o in measured.outputs.values() if o.error is None), kind=options.kind,
                    changes_from=changes_reference(loaded, options), calibration=loaded.calibration,
                    traces=loaded.traces.info if loaded.traces else None)


def changes_reference(loaded: Loaded, options: RunOptions) -> tuple[StoredRun, str] | None:
    """The run the changes are counted from: the one ``options.changes_from`` picks, else the baseline."""
    chosen = options.changes_from(loaded.entries) if options.changes_from else None
    if chosen is not None and chosen[0] is not None:
        return chosen[0], chosen[1]
    return (loaded.baseline, loaded.source) if loaded.baseline is not None else None

