"""A content-addressed cache of judge scores in one SQLite file.

A score is stored under a key that hashes everything that can change it: engine, engine
version, metric, judge model, temperature, the metric's prompt fingerprint, and the case's
question, answer, contexts (in order) and ground truth. Change any of them and the key
changes, so a stale score is never served; nothing ever needs to be invalidated.

Only successful scores are cached. A JudgeError, a timeout or a malformed judge reply is
never stored, so the next run asks again. Values are floats in [0, 1]; NaN is refused.

Judge outputs that are texts rather than scores (a generated distractor passage, a refusal
verdict) live in a second table of the same file under keys from ``text_cache_key`` (its
own namespace: a text key never equals a score key). Both key functions are in gate.judges.keys. Same rules: only successful outputs,
never an empty text.

The file is safe to share between processes (CI matrix jobs restoring one cache): WAL
journal, a busy timeout, one short transaction per write (``INSERT OR REPLACE``, so two
jobs writing the same key simply agree), and a few retries when SQLite still answers
"database is locked". Close the cache (or use it as a context manager) before CI saves
the file: closing the last connection folds the ``-wal`` file back into the database.

A file that is not a SQLite database, is corrupt, belongs to something else or has another
schema version raises InputError naming the file: it is only a cache, so the fix is to
delete it (or to run with ``--no-cache``, which uses ``NullCache``).

Layout, for inspection with the ``sqlite3`` shell::

    schema_version(version INTEGER)
    scores(key TEXT PRIMARY KEY, value REAL, created_at TEXT, meta TEXT)  -- meta: JSON
    texts(key TEXT PRIMARY KEY, text TEXT, created_at TEXT, meta TEXT)    -- meta: JSON

``texts`` came later within schema version 1: a file without it gets it on open (older
rag-gate versions ignore it), so a score-only cache keeps its scores.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from gate.core.errors import InputError, RagGateError, RunError
from gate.io.files import not_regular
from gate.judges import JudgeInput
from gate.judges.keys import ScoreSource, cache_key, text_cache_key

SCHEMA_VERSION = 1
CHUNK = 500  # keys per SELECT in get_many, well under any SQLite variable limit
RETRIES = 5

T = TypeVar("T")

HINT = "it is only a cache of judge scores and is rebuilt on the next run; or run with --no-cache"


@dataclass(frozen=True, slots=True)
class CacheStats:
    entries: int  # scores in the file now
    hits: int  # lookups answered from the cache by this object
    misses: int  # lookups not found by this object


def _checked_text(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"a cached text must be a string, not {type(text).__name__}")
    if not text.strip():
        raise ValueError("refusing to cache an empty text: only successful judge outputs are cached")
    return text


def _checked(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a cached score must be a number, not {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ValueError("refusing to cache NaN: only successful scores are cached")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a cached score must lie in [0, 1], not {value}")
    return value


class ScoreCache(Protocol):
    """What the generation stage needs from a cache: JudgeCache or NullCache."""

    def key(self, source: ScoreSource, item: JudgeInput) -> str: ...

    def get(self, key: str) -> float | None: ...

    def get_many(self, keys: Iterable[str]) -> dict[str, float]: ...

    def put(self, key: str, value: float, meta: dict[str, Any]) -> None: ...

    def stats(self) -> CacheStats: ...

    def key_text(
        self, kind: str, prompt_fingerprint: str, model: str | None, temperature: float | None, payload: dict[str, Any]
    ) -> str: ...

    def get_text(self, key: str) -> str | None: ...

    def put_text(self, key: str, text: str, meta: dict[str, Any]) -> None: ...

    def text_stats(self) -> CacheStats: ...

    def close(self) -> None: ...


class JudgeCache:
    """Judge scores (and judge-written texts) in a SQLite file at ``path`` (parent folders are created)."""

    key = staticmethod(cache_key)
    key_text = staticmethod(text_cache_key)

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0, retries: int = RETRIES) -> None:
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._retries = retries
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._text_hits = 0
        self._text_misses = 0
        kind = not_regular(self.path)
        if kind is not None:  # SQLite would answer "locked" for /dev/null and block or fail on a FIFO
            raise InputError(f"is {kind}, not a regular file: point cache.path at a file (it is created if missing)",
                             file=str(self.path), hint=HINT)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"{self.path}: cannot create the folder for the judge cache: {exc.strerror or exc}",
                           hint="point cache.path at a writable folder, or run with --no-cache") from None
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._unusable(exc) from None
        try:
            self._call(self._open)
        except BaseException:
            self._conn.close()
            raise

    # --- public interface ---

    def get(self, key: str) -> float | None:
        row = self._call(lambda: self._conn.execute("SELECT value FROM scores WHERE key = ?", (key,)).fetchone())
        if row is None:
            self._misses += 1
            return None
        self._hits += 1
        return float(row[0])

    def get_many(self, keys: Iterable[str]) -> dict[str, float]:
        """The cached scores among ``keys`` (missing keys are absent): one SELECT per 500 keys."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, float] = {}
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            sql = f"SELECT key, value FROM scores WHERE key IN ({','.join('?' * len(chunk))})"
            rows = self._call(functools.partial(self._fetch_all, sql, chunk))
            found.update((k, float(v)) for k, v in rows)
        self._hits += len(found)
        self._misses += len(wanted) - len(found)
        return found

    def put(self, key: str, value: float, meta: dict[str, Any]) -> None:
        """Store a successful score (replacing any earlier one under the same key)."""
        self._insert("scores", "value", key, _checked(value), meta)

    def stats(self) -> CacheStats:
        """The score table: entries in the file, and this object's score lookups."""
        (entries,) = self._call(lambda: self._conn.execute("SELECT COUNT(*) FROM scores").fetchone())
        return CacheStats(entries=entries, hits=self._hits, misses=self._misses)

    def get_text(self, key: str) -> str | None:
        """The text stored under ``key`` by ``put_text``, or None."""
        row = self._call(lambda: self._conn.execute("SELECT text FROM texts WHERE key = ?", (key,)).fetchone())
        if row is None:
            self._text_misses += 1
            return None
        self._text_hits += 1
        return str(row[0])

    def put_text(self, key: str, text: str, meta: dict[str, Any]) -> None:
        """Store a successful judge-written text (replacing any earlier one under the same key)."""
        self._insert("texts", "text", key, _checked_text(text), meta)

    def _insert(self, table: str, column: str, key: str, value: float | str, meta: dict[str, Any]) -> None:
        row = (key, value, datetime.now(UTC).isoformat(timespec="seconds"), json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str))
        sql = f"INSERT OR REPLACE INTO {table} (key, {column}, created_at, meta) VALUES (?, ?, ?, ?)"  # our own table names
        self._call(lambda: self._conn.execute(sql, row))

    def text_stats(self) -> CacheStats:
        """The text table: entries in the file, and this object's text lookups."""
        (entries,) = self._call(lambda: self._conn.execute("SELECT COUNT(*) FROM texts").fetchone())
        return CacheStats(entries=entries, hits=self._text_hits, misses=self._text_misses)

    def fold_in(self, other: Path) -> tuple[int, int]:
        """Copy every score and text of the cache file ``other`` that this one lacks (read only: ``other`` is not
        changed; a key both hold keeps this cache's value: both are successful judgings of the same input). One
        transaction: a failure leaves this cache as it was. (scores added, texts added)."""
        tables = cache_tables(other)
        uri = read_only(other)

        def fold() -> tuple[int, int]:
            conn = self._conn
            conn.execute("ATTACH DATABASE ? AS src", (uri,))
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    before = conn.total_changes
                    conn.execute("INSERT OR IGNORE INTO scores (key, value, created_at, meta) "
                                 "SELECT key, value, created_at, meta FROM src.scores WHERE value = value")  # NaN never
                    scores = conn.total_changes - before
                    texts = 0
                    if "texts" in tables:
                        before = conn.total_changes
                        conn.execute("INSERT OR IGNORE INTO texts (key, text, created_at, meta) "
                                     "SELECT key, text, created_at, meta FROM src.texts WHERE length(trim(text)) > 0")
                        texts = conn.total_changes - before
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                return scores, texts
            finally:
                conn.execute("DETACH DATABASE src")

        return self._call(fold)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals ---

    def _fetch_all(self, sql: str, parameters: list[str]) -> list[tuple[str, float]]:
        return self._conn.execute(sql, parameters).fetchall()

    def _open(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "schema_version" in tables:
                row = conn.execute("SELECT version FROM schema_version").fetchone()
                if row is None or row[0] != SCHEMA_VERSION or "scores" not in tables:
                    found = "no version" if row is None else f"version {row[0]}"
                    raise InputError(
                        f"the judge cache has schema {found}, this rag-gate reads version {SCHEMA_VERSION}: delete the file",
                        file=str(self.path),
                        hint=HINT,
                    )
                if "texts" not in tables:  # a cache written before the text table existed
                    conn.execute(_CREATE_TEXTS)
            elif tables:
                raise InputError(
                    f"is a SQLite database but not a rag-gate judge cache (tables: {', '.join(sorted(tables))}): "
                    "delete it or point the cache somewhere else",
                    file=str(self.path),
                    hint=HINT,
                )
            else:
                conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
                conn.execute(
                    "CREATE TABLE scores (key TEXT PRIMARY KEY, value REAL NOT NULL, created_at TEXT NOT NULL, meta TEXT NOT NULL) WITHOUT ROWID"
                )
                conn.execute(_CREATE_TEXTS)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _call(self, operation: Callable[[], T]) -> T:
        """Run one statement; retry while the file is locked; turn SQLite errors into rag-gate errors."""
        with self._lock:
            for attempt in range(self._retries + 1):
                try:
                    return operation()
                except sqlite3.OperationalError as exc:
                    if not _is_locked(exc):
                        raise self._unusable(exc) from None
                    if attempt == self._retries:
                        raise RunError(
                            f"{self.path}: the judge cache stayed locked by another process ({exc})",
                            hint="another rag-gate run is writing to the same cache file; retry, or run with --no-cache",
                        ) from None
                    time.sleep(0.05 * 2**attempt * (1 + random.random()))
                except sqlite3.DatabaseError as exc:
                    raise self._unusable(exc) from None
            raise AssertionError("unreachable")

    def _unusable(self, exc: sqlite3.Error) -> RagGateError:
        """A file SQLite cannot read as a cache is a bad input (delete it); a place it cannot write is not (exit 3)."""
        message = str(exc).lower()
        if self.path.is_dir():
            return InputError("is a folder, not a judge cache file: point cache.path at a file", file=str(self.path), hint=HINT)
        if any(s in message for s in ("readonly", "read-only", "unable to open", "disk i/o", "database or disk is full")):
            exists = "exists" if self.path.exists() else "does not exist yet"
            writable = os.access(self.path.parent, os.W_OK)
            where = f"the folder {self.path.parent} is not writable" if not writable else "the file or its folder cannot be written"
            return RunError(f"{self.path}: cannot write the judge cache ({exc}): the file {exists} and {where}",
                            hint="point cache.path at a writable folder (the CI cache restores it there), or run with --no-cache")
        return InputError(f"is not a usable judge cache ({exc}): delete the file", file=str(self.path), hint=HINT)


_CREATE_TEXTS = "CREATE TABLE IF NOT EXISTS texts (key TEXT PRIMARY KEY, text TEXT NOT NULL, created_at TEXT NOT NULL, meta TEXT NOT NULL)"


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


class NullCache:
    """The cache for ``--no-cache``: every lookup misses and nothing is stored."""

    key = staticmethod(cache_key)
    key_text = staticmethod(text_cache_key)

    def __init__(self) -> None:
        self._misses = 0
        self._text_misses = 0

    def get(self, key: str) -> float | None:
        self._misses += 1
        return None

    def get_many(self, keys: Iterable[str]) -> dict[str, float]:
        self._misses += len(dict.fromkeys(keys))
        return {}

    def put(self, key: str, value: float, meta: dict[str, Any]) -> None:
        _checked(value)  # the same contract as JudgeCache, so --no-cache hides no bug

    def stats(self) -> CacheStats:
        return CacheStats(entries=0, hits=0, misses=self._misses)

    def get_text(self, key: str) -> str | None:
        self._text_misses += 1
        return None

    def put_text(self, key: str, text: str, meta: dict[str, Any]) -> None:
        _checked_text(text)  # the same contract as JudgeCache

    def text_stats(self) -> CacheStats:
        return CacheStats(entries=0, hits=0, misses=self._text_misses)

    def close(self) -> None:
        return None

    def __enter__(self) -> NullCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_only(path: Path) -> str:
    return "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"


def cache_tables(path: Path) -> set[str]:
    """The tables of the judge cache file at ``path`` (opened read only); InputError naming it if it is not one."""
    if not path.is_file():
        raise InputError("no judge cache file here", file=str(path), hint="name the cache files the shards saved")
    try:
        with contextlib.closing(sqlite3.connect(read_only(path), uri=True)) as src:
            tables = {name for (name,) in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = src.execute("SELECT version FROM schema_version").fetchone() if "schema_version" in tables else None
    except sqlite3.Error as exc:
        raise InputError(f"cannot be read as a judge cache ({exc})", file=str(path), hint=HINT) from None
    if version is None or version[0] != SCHEMA_VERSION or "scores" not in tables:
        raise InputError(f"is not a rag-gate judge cache of schema version {SCHEMA_VERSION} "
                         f"(tables: {', '.join(sorted(tables)) or 'none'})", file=str(path), hint=HINT)
    return tables
