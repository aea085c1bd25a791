"""History of default-branch runs, for trend gates: one JSON entry a line.

An entry holds each stage's metrics and, for judge stages, the per-case scores, so a
pull request can be compared case by case with recent runs (gate.stats). ``LocalHistoryStore``
keeps the file on disk for CLI use; a repository-backed store (GitHub contents API) has
the same two methods.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from gate.errors import InputError
from gate.output import write_text

SCHEMA_VERSION = 1
# Stages whose per-case scores are kept: judge metrics are noisy and compared case by case.
PER_CASE_STAGES = ("generation", "robustness")


class HistoryStore(Protocol):
    def read(self) -> list[dict[str, Any]]: ...

    def append(self, entry: dict[str, Any]) -> None: ...


def entry_from_report(report: dict[str, Any], *, branch: str | None = None, commit: str | None = None) -> dict[str, Any]:
    """The history entry for a report. Pure."""
    stages: dict[str, Any] = {}
    for name, stage in report.get("stages", {}).items():
        if stage.get("status") == "skipped" or not stage.get("metrics"):
            continue
        entry: dict[str, Any] = {"metrics": stage["metrics"]}
        if name in PER_CASE_STAGES:
            # a case keeps the scores it has even when another metric errored (as in the baseline)
            entry["samples"] = {s["id"]: s["metrics"] for s in stage.get("samples", []) if s.get("metrics")}
        stages[name] = entry
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": report.get("run", {}).get("created_at") or datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit or report.get("run", {}).get("commit"),
        "branch": branch,
        "verdict": report.get("verdict"),
        "fingerprints": report.get("fingerprints", {}),
        "stages": stages,
    }


def window(entries: Sequence[dict[str, Any]], size: int, fingerprints: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The last ``size`` entries (oldest first), of runs that completed, measured the same way when
    ``fingerprints`` is given (same golden set and spec)."""
    usable = [e for e in entries if e.get("verdict") != "error"]
    if fingerprints:
        usable = [e for e in usable if all(e.get("fingerprints", {}).get(k) == v for k, v in fingerprints.items() if k != "k")]
    return list(usable[-size:]) if size > 0 else []


def parse_history(text: str, where: str, warnings: list[str]) -> list[dict[str, Any]]:
    """Entries of a history file; unreadable lines are skipped with a warning naming ``where`` and the line."""
    entries = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            warnings.append(f"{where}:{lineno}: not JSON, skipped")
            continue
        if not isinstance(entry, dict) or entry.get("schema_version") != SCHEMA_VERSION:
            warnings.append(f"{where}:{lineno}: not a rag-gate history entry (schema_version 1), skipped")
            continue
        entries.append(entry)
    return entries


class LocalHistoryStore:
    """History in a local JSONL file; appends are serialised with an exclusive file lock."""

    def __init__(self, path: Path, max_entries: int = 200) -> None:
        self.path = path
        self.max_entries = max_entries
        self.warnings: list[str] = []

    def read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read the history: {exc.strerror}", file=str(self.path)) from None
        return parse_history(text, str(self.path), self.warnings)

    def append(self, entry: dict[str, Any]) -> None:
        """Add an entry; keep the newest ``max_entries`` lines. Lines this version cannot read (a newer
        rag-gate's entries, damaged lines) are kept as they are, not dropped."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                try:
                    lines = [ln for ln in self.path.read_text(encoding="utf-8").splitlines() if ln.strip()]
                except FileNotFoundError:
                    lines = []
                lines.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
                write_text(self.path, "".join(ln + "\n" for ln in lines[-self.max_entries :]), what="history")
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def current_branch() -> str | None:
    """The branch a CI run is on (GitHub's GITHUB_REF_NAME), if known."""
    return os.environ.get("GITHUB_REF_NAME") or None
