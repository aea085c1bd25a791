"""The history of default-branch runs, for trend gates: one JSON entry a line (gate.core.report.HistoryEntry).

``HistoryStore`` is what a run needs from a history; ``LocalHistoryStore`` keeps it in a local file
for CLI use; gate.github.history.RepoHistoryStore keeps it on a branch of the repository.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Protocol

from gate.core.errors import InputError
from gate.core.report import HistoryEntry
from gate.io.files import write_text
from gate.io.reports import appended_history, parse_history


class HistoryStore(Protocol):
    warnings: list[str]  # lines that could not be read, each with its place and what is wrong
    max_entries: int  # the newest entries an append keeps (the spec's history.max_entries: a run sets it)

    def read(self) -> list[HistoryEntry]: ...

    def append(self, entry: HistoryEntry) -> None: ...


class LocalHistoryStore:
    """History in a local JSONL file; appends are serialised with an exclusive file lock."""

    def __init__(self, path: Path, max_entries: int = 200) -> None:
        self.path = path
        self.max_entries = max_entries
        self.warnings: list[str] = []

    def read(self) -> list[HistoryEntry]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read the history: {exc.strerror}", file=str(self.path)) from None
        return parse_history(text, str(self.path), self.warnings)

    def append(self, entry: HistoryEntry) -> None:
        """Add an entry; keep the newest ``max_entries`` lines. Lines this version cannot read (a newer
        rag-gate's entries, damaged lines) are kept as they are, not dropped; each answer or passage text is kept
        once (gate.io.reports.appended_history)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # the lock is the folder's (the file itself is replaced by each write): no lock file is left beside the history
        # for a commit of the folder to pick up
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                text = ""
            write_text(self.path, appended_history(text, entry, self.max_entries), what="history")
        finally:
            os.close(folder)  # and the lock with it
