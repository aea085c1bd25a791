"""The run history on a branch of the repository (trend gates, and the baseline of a pull request: the
entry of its base commit), through GitHub's contents API."""

from __future__ import annotations

import random
from collections.abc import Callable

from gate.core.records import baseline_entry
from gate.core.report import HistoryEntry
from gate.github.client import Conflict, GitHubClient, GitHubError
from gate.github.commands import workflow_command
from gate.io.reports import appended_history, document_json, parse_history, parse_json_line


class RepoHistoryStore:
    """A HistoryStore (gate.io.history) in a JSONL file on a dedicated branch, through the contents API.

    An append re-reads the file and writes it back with the sha it read; when another run wrote in
    between (409), it reads again and retries, so concurrent appends lose nothing."""

    def __init__(self, client: GitHubClient, path: str = "rag-gate/history.jsonl", branch: str = "rag-gate-history",
                 max_entries: int = 200, *, max_attempts: int = 10, sleep: Callable[[float], None] | None = None) -> None:
        self.client, self.path, self.branch, self.max_entries = client, path.strip("/"), branch, max_entries
        self.max_attempts = max_attempts
        self.sleep = sleep or client.sleep
        self.warnings: list[str] = []
        self.conflicts = 0  # conflicts met by the last append

    @property
    def where(self) -> str:
        return f"{self.client.repository}@{self.branch}:{self.path}"

    def read(self) -> list[HistoryEntry]:
        got = self.client.read_file(self.path, self.branch)
        return [] if got is None else parse_history(got[0], self.where, self.warnings)

    def append(self, entry: HistoryEntry) -> None:
        """Add an entry; keep the newest ``max_entries`` lines (lines this version cannot read are kept as they are)."""
        line = document_json(entry, "history_entry", compact=True)
        self.client.ensure_branch(self.branch)
        self.conflicts = 0
        commit = (entry["commit"] or "")[:7]
        for attempt in range(1, self.max_attempts + 1):
            got = self.client.read_file(self.path, self.branch)
            text, sha = got if got is not None else ("", None)
            if attempt > 1 and _landed(entry, text, line):  # an earlier attempt did land (its answer was lost)
                return
            try:
                self.client.write_file(self.path, self.branch, appended_history(text, entry, self.max_entries), sha,
                                       f"rag-gate: record history entry{' for ' + commit if commit else ''} [skip ci]")
                return
            except Conflict as exc:
                self.conflicts += 1
                if attempt == self.max_attempts:
                    raise Conflict(exc.status, f"could not append to the history {self.where}: it changed under every one of "
                                               f"{self.max_attempts} attempts ({exc.message})",
                                   hint="many runs are recording at once; re-run this job") from None
                self.sleep(random.uniform(0.01, min(1.0, 0.05 * 2**attempt)))


def _landed(entry: HistoryEntry, text: str, line: str) -> bool:
    """Whether ``entry`` is in the history text already (its line as written, or as a later append rewrote its texts)."""
    if line in text:
        return True
    bare = {k: v for k, v in entry.items() if k != "texts"}
    for other in text.splitlines():
        data = parse_json_line(other)
        if isinstance(data, dict) and data.get("commit") == entry["commit"] and data.get("created_at") == entry["created_at"]:
            data.pop("texts", None)
            if data == bare:
                return True
    return False


class ReadTolerant:
    """The repository history for a gate run: when it cannot be read (a token without `contents: read`, GitHub
    down), the gate still runs, against the committed baseline, and says so in the report's warnings."""

    def __init__(self, store: RepoHistoryStore) -> None:
        self.store = store
        self.warnings: list[str] = store.warnings

    @property
    def max_entries(self) -> int:
        return self.store.max_entries

    @max_entries.setter
    def max_entries(self, value: int) -> None:
        self.store.max_entries = value

    def read(self) -> list[HistoryEntry]:
        try:
            return list(self.store.read())
        except GitHubError as exc:
            self.warnings.append(f"the history {self.store.where} could not be read, so trend gates have no history and the "
                                 f"baseline is the committed file: {exc.message}")
            return []

    def append(self, entry: HistoryEntry) -> None:  # pragma: no cover - a gate run never records
        self.store.append(entry)


def baseline_chooser(client: GitHubClient, base_sha: str | None) -> Callable[[list[HistoryEntry]], tuple[HistoryEntry | None, str]]:
    """choose_baseline for the run: the history entry of the PR's base commit, else of its newest ancestor
    that has one. The base commit's ancestors cost one API call, made only when the base commit has no entry."""

    def choose(entries: list[HistoryEntry]) -> tuple[HistoryEntry | None, str]:
        found = baseline_entry(entries, base_sha, None)
        if found[0] is not None or not base_sha or not entries:
            return found
        try:
            ancestors: list[str] | None = client.recent_commits(base_sha, 100)
        except GitHubError as exc:
            print(workflow_command("warning", f"the base commit's ancestors could not be listed, so only its own history entry "
                                              f"could be the baseline: {exc.message}"), flush=True)
            ancestors = None
        return baseline_entry(entries, base_sha, ancestors)

    return choose
