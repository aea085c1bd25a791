"""The action's image: build time, size, and the time from container start to verdict.

Builds the image from the repository's Dockerfile (as GitHub does for `image: Dockerfile` on every
workflow run), prints its size (and what the base image and the largest installed packages
take), then runs the container the way GitHub's runner does (GITHUB_WORKSPACE mounted at
/github/workspace, GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files under /github/file_commands, a
pull_request event, no token: the comment is skipped) on a copy of the quickstart, for

- a retrieval-only gate (the quickstart spec with only its retrieval stage), and
- the full offline quickstart spec (retrieval, offline generation metrics, robustness),

--runs times each. For each run it reads Docker's own State.StartedAt / FinishedAt (container
start to exit: the exit code is the verdict) and times the whole `docker run` command (create,
start, wait, remove). The same entry point outside Docker, in this Python, gives the cost of the
container itself. One more run under `python -X importtime` lists which heavy modules a
retrieval-only run imports (none of ragas, deepeval, openai... may be).

    python bench/bench_action.py [--runs 10] [--tag rag-gate:bench] [--cold] [--compressed]

--cold builds with --no-cache (downloads and installs every package again: about a minute);
--compressed also sizes `docker save | gzip -6`, about what a registry stores and a runner pulls
for the published image (takes a minute). Needs Docker (.ci/container-env.sh sets it
up on the development machine). Exit status 1 if a run's verdict was not "pass" or a
retrieval-only run imported a heavy module; 2 if Docker is not there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
HEAVY = ("ragas", "deepeval", "openai", "instructor", "langchain_core", "langchain_community", "httpx", "pandas", "numpy", "datasets")
BASE_IMAGE = "python:3.11-slim-bookworm"


def docker(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, **kw)


def docker_time(stamp: str) -> float:
    """Docker's RFC 3339 timestamps carry nanoseconds; Python parses microseconds."""
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + float("0." + (frac or "0"))


def workspace(parent: Path) -> Path:
    """A copy of the quickstart (no judge cache) with a retrieval-only spec beside the full one."""
    ws = parent / "workspace"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__", ".pytest_cache"))
    spec = yaml.safe_load((ws / "rag-eval.yml").read_text(encoding="utf-8"))
    spec["stages"] = {"retrieval": spec["stages"]["retrieval"]}
    spec.pop("history", None)
    (ws / "rag-eval.retrieval.yml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    runner = parent / "runner"
    runner.mkdir()
    event = {"action": "synchronize", "number": 1,
             "pull_request": {"number": 1, "head": {"sha": "1" * 40, "ref": "feature"}, "base": {"sha": "0" * 40, "ref": "main"}},
             "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    (runner / "event.json").write_text(json.dumps(event), encoding="utf-8")
    return ws


def github_env(config: str, workspace_dir: str, files_dir: str) -> dict[str, str]:
    """What GitHub's runner gives a Docker action's container (no token: the PR comment is skipped)."""
    return {
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_WORKSPACE": workspace_dir, "GITHUB_REPOSITORY": "owner/repo",
        "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": f"{files_dir}/event.json",
        "GITHUB_OUTPUT": f"{files_dir}/output", "GITHUB_STEP_SUMMARY": f"{files_dir}/summary", "GITHUB_SHA": "1" * 40,
        "INPUT_CONFIG": config, "INPUT_COMMENT": "never", "INPUT_MODE": "gate", "INPUT_REPORT-PATH": "rag-gate-report.json",
    }


def verdict(runner: Path) -> str:
    text = (runner / "output").read_text(encoding="utf-8") if (runner / "output").exists() else ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("verdict<<") and i + 1 < len(lines):
            return lines[i + 1]
    return "(none)"


def reset_files(runner: Path) -> None:
    for name in ("output", "summary"):
        (runner / name).write_text("", encoding="utf-8")


def container_run(tag: str, ws: Path, runner: Path, config: str, *extra: str) -> tuple[int, float, float, str, str]:
    """One `docker run` as GitHub's runner makes it; returns exit code, start->exit s, whole command s, verdict, stderr."""
    reset_files(runner)
    env = github_env(config, "/github/workspace", "/github/file_commands")
    args = ["create", "--workdir", "/github/workspace", "-v", f"{ws}:/github/workspace", "-v", f"{runner}:/github/file_commands",
            "--network", "none", *(x for k, v in env.items() for x in ("-e", f"{k}={v}")), *extra, tag]
    t0 = time.perf_counter()
    cid = docker(*args).stdout.strip()
    started = docker("start", "-a", cid, check=False)
    state = json.loads(docker("inspect", "--format", "{{json .State}}", cid).stdout)
    docker("rm", cid)
    whole = time.perf_counter() - t0
    inside = docker_time(state["FinishedAt"]) - docker_time(state["StartedAt"])
    return state["ExitCode"], inside, whole, verdict(runner), started.stderr


def host_run(ws: Path, runner: Path, config: str) -> tuple[int, float, str]:
    reset_files(runner)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env.update(github_env(config, str(ws), str(runner)))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "entrypoint.py")], cwd=ws, env=env, capture_output=True, text=True)
    return proc.returncode, time.perf_counter() - t0, verdict(runner)


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tag", default="rag-gate:bench")
    ap.add_argument("--cold", action="store_true", help="build with --no-cache")
    ap.add_argument("--compressed", action="store_true", help="also size docker save | gzip -6")
    args = ap.parse_args()
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        print("needs a running Docker engine (on the development machine: bash .ci/container-env.sh)", file=sys.stderr)
        return 2
    ok = True

    t0 = time.perf_counter()
    build = docker("build", *(["--no-cache"] if args.cold else []), "-t", args.tag, str(ROOT), check=False)
    build_s = time.perf_counter() - t0
    if build.returncode != 0:
        print(build.stdout[-3000:] + build.stderr[-3000:], file=sys.stderr)
        return 1
    size = int(docker("image", "inspect", "--format", "{{.Size}}", args.tag).stdout)
    base = docker("image", "inspect", "--format", "{{.Size}}", BASE_IMAGE, check=False)
    print(f"build ({'no cache' if args.cold else 'layer cache as it is'}): {build_s:.1f} s")
    print(f"image {args.tag}: {mb(size)}" + (f" (base {BASE_IMAGE}: {mb(int(base.stdout))}, added: {mb(size - int(base.stdout))})"
                                              if base.returncode == 0 else ""))
    listing = docker("run", "--rm", "--network", "none", "--entrypoint", "sh", args.tag, "-c",
                     'cd "$(python -c "import ragas, os; print(os.path.dirname(os.path.dirname(ragas.__file__)))")" && '
                     "du -sk -- * | sort -rn | head -8", check=False)
    if listing.returncode == 0:
        print("largest installed packages: " + ", ".join(f"{name} {int(kb) / 1000:,.0f} MB"
                                                         for kb, name in (ln.split("\t", 1) for ln in listing.stdout.splitlines())))
    if args.compressed:
        t0 = time.perf_counter()
        base_layers = set(json.loads(docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", BASE_IMAGE).stdout or "[]"))
        packed = compressed_layers(args.tag)
        ours = sum(n for digest, n in packed.items() if digest not in base_layers)
        print(f"layers gzip -6 (about what a registry stores and a runner pulls): {mb(sum(packed.values()))} in all, "
              f"{mb(ours)} added by rag-gate ({time.perf_counter() - t0:.0f} s to compress)")

    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp))
        runner = Path(tmp) / "runner"
        print(f"\n{args.runs} runs each; container start -> exit (the verdict) from Docker's State, and the whole `docker run`")
        print(f"{'spec':<24} {'start->verdict s':>28} {'whole docker run s':>28} {'host entrypoint s':>18}  verdicts")
        print(f"{'':<24} {'median   min    max':>28} {'median   min    max':>28} {'median':>18}")
        for config in ("rag-eval.retrieval.yml", "rag-eval.yml"):
            container_run(args.tag, ws, runner, config)  # warm the page cache: every repeat starts alike
            rows = [container_run(args.tag, ws, runner, config) for _ in range(args.runs)]
            hosts = [host_run(ws, runner, config) for _ in range(min(args.runs, 5))]
            verdicts = sorted({r[3] for r in rows} | {h[2] for h in hosts})
            if verdicts != ["pass"] or any(r[0] != 0 for r in rows) or any(h[0] != 0 for h in hosts):
                ok = False
                print(rows[-1][4][-2000:], file=sys.stderr)
            inside, whole, host = [r[1] for r in rows], [r[2] for r in rows], [h[1] for h in hosts]
            print(f"{config:<24} {statistics.median(inside):>12.2f} {min(inside):6.2f} {max(inside):6.2f}"
                  f" {statistics.median(whole):>14.2f} {min(whole):6.2f} {max(whole):6.2f} {statistics.median(host):>18.2f}  {','.join(verdicts)}")

        reset_files(runner)
        env = github_env("rag-eval.retrieval.yml", "/github/workspace", "/github/file_commands")
        proc = docker("run", "--rm", "--network", "none", "-v", f"{ws}:/github/workspace", "-v", f"{runner}:/github/file_commands",
                      *(x for k, v in env.items() for x in ("-e", f"{k}={v}")), "--entrypoint", "python", args.tag,
                      "-X", "importtime", "/action/entrypoint.py", check=False)
        modules = {ln.split("|")[-1].strip().split(".")[0] for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
        heavy = sorted(m for m in modules if m in HEAVY)
        print(f"\nretrieval-only run in the image: {len(modules)} top-level modules imported; heavy ones: {', '.join(heavy) or 'none'}")
        if heavy or proc.returncode != 0:
            ok = False
    return 0 if ok else 1


def compressed_layers(tag: str) -> dict[str, int]:
    """Each layer's gzip -6 size, by its diff id (sha256 of the layer's tar), from a `docker save` stream."""
    saver = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
    sizes: dict[str, int] = {}
    with tarfile.open(fileobj=saver.stdout, mode="r|") as archive:
        for member in archive:
            if not member.name.endswith("layer.tar") or not member.isfile():
                continue
            handle = archive.extractfile(member)
            digest, packer, n = hashlib.sha256(), zlib.compressobj(6, zlib.DEFLATED, 31), 0
            while chunk := handle.read(1 << 20):  # type: ignore[union-attr]
                digest.update(chunk)
                n += len(packer.compress(chunk))
            sizes["sha256:" + digest.hexdigest()] = n + len(packer.flush())
    saver.wait()
    return sizes


if __name__ == "__main__":
    sys.exit(main())
