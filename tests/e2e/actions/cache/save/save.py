#!/usr/bin/env python3
"""Stand-in for actions/cache/save@v4 (and, with ``--post``, the post step of actions/cache@v4), for act.

The store is the one of ../restore/restore.py. What matters of the real action's behaviour:

- the cache is saved under ``key`` in the scope of this run's ref (``GITHUB_REF``), with a version made of its paths;
- a key that already exists in that scope (with that version) is never overwritten: the save is refused ("Unable to
  reserve cache with key ..."), with a warning, and the step still succeeds;
- paths are files, folders (everything below them) or glob patterns, relative to the workspace; when none exists
  nothing is saved (a warning, the step succeeds);
- the post step of actions/cache does not save when the main step restored the key itself (an exact hit).

The paths are copied as they are: a SQLite file's -wal is saved only if the paths name it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path


def inp(name: str, default: str = "") -> str:
    for key in (f"INPUT_{name.upper()}", f"INPUT_{name.upper().replace('-', '_')}"):
        if key in os.environ:
            return os.environ[key].strip()
    return default


def lines(text: str) -> list[str]:
    return [s.strip() for s in text.splitlines() if s.strip()]


def store() -> Path:
    root = Path(os.environ.get("STANDIN_STORE", "/standin-store"))
    if not root.is_dir():
        print(f"::error::the stand-ins' store {root} is not there: bind a host folder at that path into the job's containers")
        sys.exit(1)
    return root


def version(paths: list[str]) -> str:
    return hashlib.sha256("|".join([*paths, "standin-1"]).encode()).hexdigest()


def entry_id(scope: str, ver: str, key: str) -> str:
    return hashlib.sha256(f"{scope}\n{ver}\n{key}".encode()).hexdigest()[:40]


def workspace() -> Path:
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())


def expand(patterns: list[str]) -> list[Path]:
    """The files the patterns name (a folder: every file below it; ``!pattern`` removes), as absolute paths."""
    chosen: dict[Path, None] = {}
    for pattern in patterns:
        negate = pattern.startswith("!")
        text = os.path.expanduser(pattern[1:].strip() if negate else pattern)
        full = text if os.path.isabs(text) else str(workspace() / text)
        found: list[Path] = []
        for hit in glob.glob(full, recursive=True, include_hidden=True):
            p = Path(hit)
            found.extend(sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p])
        for p in found:
            if negate:
                chosen.pop(p, None)
            else:
                chosen[p] = None
    return list(chosen)


def warn_failed(message: str) -> int:
    print(f"[warning]{message}")
    print("::warning::Cache save failed.")
    return 0


def main(post: bool = False) -> int:
    key = inp("key")
    if not key:
        print("::warning::Key is not specified.")
        return 0
    paths = lines(inp("path"))
    root = store()
    scope = os.environ.get("GITHUB_REF", "")
    ver = version(paths)
    target = root / "caches" / entry_id(scope, ver, key)
    if post and (target / "meta.json").exists():
        print(f"Cache hit occurred on the primary key {key}, not saving cache.")
        return 0
    files = expand(paths)
    if not files:
        return warn_failed("Path Validation Error: Path(s) specified in the action for caching do(es) not exist, "
                           "hence no cache is being saved.")
    (root / "caches").mkdir(exist_ok=True)
    try:
        target.mkdir()  # the reservation: atomic, so two jobs saving one key cannot both win
    except FileExistsError:
        return warn_failed(f"Failed to save: Unable to reserve cache with key {key}, another job may be creating this cache.")
    base = workspace().resolve()
    for src in files:
        resolved = src.resolve()
        rel = resolved.relative_to(base) if resolved.is_relative_to(base) else Path("__abs__", *resolved.parts[1:])
        dest = target / "files" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    meta = {"key": key, "version": ver, "scope": scope, "paths": paths, "created": time.time_ns(),
            "files": sorted(str(p.relative_to(target / "files")) for p in (target / "files").rglob("*") if p.is_file())}
    (target / "meta.json.tmp").write_text(json.dumps(meta, indent=1))
    (target / "meta.json.tmp").rename(target / "meta.json")  # complete: restorable from now on
    print(f"Cache saved with key: {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main(post="--post" in sys.argv[1:]))
