#!/usr/bin/env python3
"""Stand-in for actions/upload-artifact@v4, for workflows run under act.

Artifacts live in a folder of the host bound into the job's containers (``STANDIN_STORE``, default /standin-store):
``artifacts/<owner>/<repo>/<run id>/<name>/meta.json`` and ``.../files/``. What matters of the real action's
behaviour (its src/shared/search.ts over @actions/glob):

- ``path`` is one or more lines of files, folders (everything below them) or glob patterns (``*``, ``**``, ``?``),
  relative to the workspace; ``!pattern`` leaves files out;
- hidden files and folders (a name starting with ".") met while searching are left out unless
  ``include-hidden-files`` is true; a literal path to a file inside a hidden folder is not searched, so it is kept;
- the artifact's root: the least common ancestor of the search paths when there are several, the file's folder for
  one literal file, else the search path (``.rag-gate/judge-cache.sqlite`` is stored as ``judge-cache.sqlite``);
- nothing found: ``if-no-files-found`` warn (default; a warning, nothing uploaded), error (the step fails) or ignore;
- a name already uploaded in this run fails the step (409 Conflict) unless ``overwrite`` is true.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path


def inp(name: str, default: str = "") -> str:
    for key in (f"INPUT_{name.upper()}", f"INPUT_{name.upper().replace('-', '_')}"):
        if key in os.environ and os.environ[key].strip():
            return os.environ[key].strip()
    return default


def store() -> Path:
    root = Path(os.environ.get("STANDIN_STORE", "/standin-store"))
    if not root.is_dir():
        fail(f"the stand-ins' store {root} is not there: bind a host folder at that path into the job's containers")
    return root


def fail(message: str) -> None:
    print(f"::error::{message}", flush=True)
    sys.exit(1)


def output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
        f.write(f"{name}={value}\n")


def workspace() -> Path:
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())


def segments_match(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(segments_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], pattern[0]) and segments_match(pattern[1:], path[1:])


def search_path(pattern: Path) -> Path:
    """The pattern's leading segments without a wildcard: where the search starts."""
    parts: list[str] = []
    for part in pattern.parts:
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    return Path(*parts)


def absolute(line: str) -> Path:
    text = os.path.expanduser(line)
    return Path(os.path.normpath(text if os.path.isabs(text) else workspace() / text))


def matched(pattern: Path, file: Path, start: Path) -> bool:
    """The file matches, or one of its folders from the search path down does (a folder brings what is below it)."""
    candidates = [file, *[p for p in file.parents if p == start or start in p.parents]]
    return any(segments_match(pattern.parts, c.parts) for c in candidates)


def walk(start: Path, include_hidden: bool) -> list[Path]:
    """The files from ``start`` down; a hidden name (the start's own too) is not searched unless asked for."""
    if not start.exists() or (not include_hidden and start.name.startswith(".")):
        return []
    if start.is_file():
        return [start]
    found = []
    for folder, dirs, names in os.walk(start, followlinks=True):
        if not include_hidden:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            names = [n for n in names if not n.startswith(".")]
        found.extend(Path(folder, n) for n in sorted(names))
    return found


def find(lines: list[str], include_hidden: bool) -> tuple[list[Path], Path | None]:
    """The files to upload and the artifact's root folder."""
    includes = [absolute(s) for s in lines if not s.startswith("!")]
    excludes = [absolute(s[1:].strip()) for s in lines if s.startswith("!")]
    files: dict[Path, None] = {}
    for pattern in includes:
        start = search_path(pattern)
        files.update((f, None) for f in walk(start, include_hidden) if matched(pattern, f, start))
    chosen = [f for f in files if not any(matched(p, f, search_path(p)) for p in excludes)]
    starts = sorted({search_path(p) for p in includes})
    starts = [s for s in starts if not any(o in s.parents for o in starts)]
    if not starts:
        return chosen, None
    if len(starts) > 1:
        return chosen, Path(os.path.commonpath([str(s) for s in starts]))
    if len(chosen) == 1 and chosen[0] == starts[0]:
        return chosen, chosen[0].parent
    return chosen, starts[0]


def main() -> int:
    name = inp("name", "artifact")
    path_text = inp("path")
    if not path_text:
        fail("Input required and not supplied: path")
    lines = [s.strip() for s in path_text.splitlines() if s.strip()]
    if_none = inp("if-no-files-found", "warn").lower()
    if if_none not in ("warn", "error", "ignore"):
        fail(f"Unrecognized if-no-files-found input. Provided: {if_none}. Available options: warn, error, ignore")
    files, root_dir = find(lines, inp("include-hidden-files", "false").lower() == "true")
    if not files:
        message = f"No files were found with the provided path: {path_text}. No artifacts will be uploaded."
        if if_none == "error":
            fail(message)
        print(f"::warning::{message}" if if_none == "warn" else message)
        return 0
    repo = os.environ.get("GITHUB_REPOSITORY", "owner/repo")
    run_id = os.environ.get("GITHUB_RUN_ID", "1")
    runs = store() / "artifacts" / repo / run_id
    runs.mkdir(parents=True, exist_ok=True)
    target = runs / name
    if target.exists() and inp("overwrite", "false").lower() == "true":
        shutil.rmtree(target)
    try:
        target.mkdir()
    except FileExistsError:
        fail("Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: "
             "an artifact with this name already exists on the workflow run")
    assert root_dir is not None
    digest = hashlib.sha256()
    size = 0
    for f in sorted(files):
        rel = f.relative_to(root_dir)
        dest = target / "files" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
        data = dest.read_bytes()
        digest.update(str(rel).encode() + b"\0" + data)
        size += len(data)
    artifact_id = str(time.time_ns() // 1000)
    meta = {"id": artifact_id, "name": name, "size": size, "digest": digest.hexdigest(), "created": time.time_ns(),
            "files": sorted(str(f.relative_to(root_dir)) for f in files)}
    (target / "meta.json").write_text(json.dumps(meta, indent=1))
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    output("artifact-id", artifact_id)
    output("artifact-url", f"{server}/{repo}/actions/runs/{run_id}/artifacts/{artifact_id}")
    output("artifact-digest", meta["digest"])
    print(f"With the provided path, there will be {len(files)} file(s) uploaded")
    print(f"Artifact {name} has been successfully uploaded! Final size is {size} bytes. Artifact ID is {artifact_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
