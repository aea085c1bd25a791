"""How to run: the clock, the commit and pull request, where the history and baseline come from, and progress."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from gate.core.model import TargetOutput
from gate.core.report import HistoryEntry
from gate.io.history import HistoryStore
from gate.stages.progress import JudgeProgress

# picks the baseline from the history entries: (the entry, and where it is from in words), or None for the committed file
BaselineChooser = Callable[[list[HistoryEntry]], tuple[HistoryEntry | None, str] | None]


class RunProgress(JudgeProgress, Protocol):
    """Where a run says how far it is: the target's calls (``on_start``, ``on_done``) and the judged stages'."""

    def on_start(self, total: int, kind: str) -> None: ...

    def on_done(self, result: TargetOutput) -> None: ...


def now_iso() -> str:
    """The clock a run is recorded under: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunOptions:
    """How to run: the clock, the commit and pull request, where the history and baseline come from, progress."""

    now: Callable[[], str] = now_iso  # the time the run is recorded under (ISO 8601)
    commit: str | None = None
    pull_request: tuple[int | None, str | None] | None = None  # (number, head commit), recorded in report.run
    run_url: str | None = None  # the CI run's page, recorded in report.run.url (the comment links to it)
    use_cache: bool = True
    max_duration_s: float | None = None  # overrides the spec's (the action's max-duration-s input)
    secrets: Sequence[str] = ()  # secrets the run knows besides the spec's (the action's GitHub token)
    history_store: HistoryStore | None = None  # default: the spec's local history file
    choose_baseline: BaselineChooser | None = None  # picks the baseline from the history; None: the committed file
    progress: RunProgress | None = None
    corpus: str | None = None  # the corpus file (JSONL of {id, text}): a relevant id it lacks is diagnosed corpus_missing
    kind: str | None = None  # how the run came (pr, push, schedule, ...): recorded in report.run.kind and the history
    changes_from: BaselineChooser | None = None  # the run the changes are counted from (default: the baseline)
