#!/usr/bin/env python3
"""Stand-in for actions/cache/restore@v4 (and the main step of actions/cache@v4), for workflows run under act.

The caches live in a folder of the host bound into the job's containers (``STANDIN_STORE``, default
/standin-store), one folder per entry: ``caches/<id>/meta.json`` (key, version, scope, created) and
``caches/<id>/files/`` (the saved paths, relative to the workspace). What matters of the real action's behaviour:

- a cache belongs to the ref that saved it (its scope, ``GITHUB_REF``); a run may restore its own ref's caches, then
  those of the pull request's base branch, then those of the default branch, in that order;
- a cache's version is made of its paths: a restore with other paths does not find it;
- per scope: the exact ``key`` first (``cache-hit`` true), else each of ``restore-keys`` in order, the newest cache
  whose key starts with it (``cache-hit`` false); ``cache-matched-key`` names it;
- on a miss ``cache-hit`` is left unset (as actions/cache#1466 keeps it), ``fail-on-cache-miss`` fails the step,
  ``lookup-only`` finds without restoring.

Inputs come as INPUT_<NAME> (a Docker action's hyphenated names, or the composite's underscored ones).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
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
        fail(f"the stand-ins' store {root} is not there: bind a host folder at that path into the job's containers")
    return root


def version(paths: list[str]) -> str:
    return hashlib.sha256("|".join([*paths, "standin-1"]).encode()).hexdigest()


def scopes() -> list[str]:
    """The refs whose caches this run may restore: its own, the PR's base branch, the default branch."""
    out = [os.environ.get("GITHUB_REF", "")]
    if os.environ.get("GITHUB_BASE_REF"):
        out.append(f"refs/heads/{os.environ['GITHUB_BASE_REF']}")
    try:
        event = json.loads(Path(os.environ["GITHUB_EVENT_PATH"]).read_text())
        default = (event.get("repository") or {}).get("default_branch")
    except (KeyError, OSError, ValueError):
        default = None
    if default:
        out.append(f"refs/heads/{default}")
    return list(dict.fromkeys(s for s in out if s))


def entries(root: Path) -> list[dict]:
    """Every complete cache entry (a save in progress has no meta.json yet)."""
    found = []
    for meta in sorted((root / "caches").glob("*/meta.json")):
        data = json.loads(meta.read_text())
        data["dir"] = str(meta.parent)
        found.append(data)
    return found


def find(root: Path, key: str, restore_keys: list[str], ver: str) -> dict | None:
    candidates = [e for e in entries(root) if e["version"] == ver]
    for scope in scopes():
        mine = [e for e in candidates if e["scope"] == scope]
        exact = [e for e in mine if e["key"] == key]
        if exact:
            return exact[0]
        for prefix in restore_keys:
            matched = sorted((e for e in mine if e["key"].startswith(prefix)), key=lambda e: e["created"])
            if matched:
                return matched[-1]
    return None


def workspace() -> Path:
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())


def output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
        f.write(f"{name}={value}\n")


def fail(message: str) -> None:
    print(f"::error::{message}", flush=True)
    sys.exit(1)


def main() -> int:
    key = inp("key")
    if not key:
        fail("Input required and not supplied: key")
    paths = lines(inp("path"))
    if not paths:
        fail("Input required and not supplied: path")
    restore_keys = lines(inp("restore-keys"))
    root = store()
    output("cache-primary-key", key)
    found = find(root, key, restore_keys, version(paths))
    if found is None:
        if inp("fail-on-cache-miss").lower() == "true":
            fail(f"Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: {key}")
        print(f"Cache not found for input keys: {', '.join([key, *restore_keys])}")
        return 0
    output("cache-matched-key", found["key"])
    output("cache-hit", "true" if found["key"] == key else "false")
    if inp("lookup-only").lower() == "true":
        print(f"Cache found and can be restored from key: {found['key']}")
        return 0
    files = Path(found["dir"]) / "files"
    for src in sorted(p for p in files.rglob("*") if p.is_file()):
        rel = src.relative_to(files)
        dest = Path("/", *rel.parts[1:]) if rel.parts[0] == "__abs__" else workspace() / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    print(f"Cache restored from key: {found['key']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
