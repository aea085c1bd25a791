#!/usr/bin/env python3
"""Stand-in for actions/download-artifact@v4, for workflows run under act; the store is the one of
../upload-artifact/upload.py. What matters of the real action's behaviour (its src/download-artifact.ts):

- ``name``: that one artifact, its files straight into ``path`` (default: the workspace); not found fails the step;
- no ``name``: every artifact of the run, or those whose name matches ``pattern`` (a glob); each into
  ``path/<artifact name>/``, or all into ``path`` itself with ``merge-multiple: true``; none matching is no error;
- the run is this workflow run, unless ``github-token`` is given: then ``repository`` and ``run-id`` say which run
  (the fork-safe follow-up downloads the pull_request run's artifact that way);
- the ``download-path`` output is the resolved ``path``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import sys
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
    print(f"::error::Unable to download artifact(s): {message}", flush=True)
    sys.exit(1)


def output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
        f.write(f"{name}={value}\n")


def main() -> int:
    name, pattern = inp("name"), inp("pattern")
    if inp("artifact-ids"):
        fail("the stand-in does not know artifact-ids")
    merge = inp("merge-multiple", "false").lower() == "true"
    dest = Path(os.path.expanduser(inp("path") or os.environ.get("GITHUB_WORKSPACE") or os.getcwd())).resolve()
    if inp("github-token"):
        repo, run_id = inp("repository", os.environ.get("GITHUB_REPOSITORY", "")), inp("run-id", os.environ.get("GITHUB_RUN_ID", ""))
        if len([p for p in repo.split("/") if p]) != 2:
            fail(f"Invalid repository: '{repo}'. Must be in format owner/repo")
    else:
        repo, run_id = os.environ.get("GITHUB_REPOSITORY", "owner/repo"), os.environ.get("GITHUB_RUN_ID", "1")
    run = store() / "artifacts" / repo / run_id
    available = sorted(json.loads(m.read_text())["name"] for m in run.glob("*/meta.json")) if run.is_dir() else []
    if name:
        print("Downloading single artifact")
        if name not in available:
            fail(f"Artifact '{name}' not found")
        chosen = [name]
    elif pattern:
        print(f"Filtering artifacts by pattern '{pattern}'")
        chosen = [a for a in available if fnmatch.fnmatchcase(a, pattern)]
    else:
        print("No input name, artifact-ids or pattern filtered specified, downloading all artifacts")
        chosen = available
    for artifact in chosen:
        into = dest if name or merge else dest / artifact
        files = run / artifact / "files"
        for src in sorted(p for p in files.rglob("*") if p.is_file()):
            target = into / src.relative_to(files)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        print(f"Artifact download completed successfully: {artifact} -> {into}")
    print(f"Total of {len(chosen)} artifact(s) downloaded")
    output("download-path", str(dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
