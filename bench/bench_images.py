"""The action's two images side by side: size (uncompressed, and gzip -6 of `docker save`) and container start to
verdict for the quickstart spec.

Builds the full image (Dockerfile: rag-gate with the judge engines) and the slim one (Dockerfile.slim: no judge
engine), prints each one's size as Docker counts it (`docker image inspect -f '{{.Size}}'`) and the gzip -6 size of
its `docker save` stream (about what a runner pulls from a registry with no layer cached), then runs
`rag-gate run --config rag-eval.yml` in each on a copy of the quickstart (mounted, `--network none`), --runs times,
and prints the best: container start to exit (the verdict) from Docker's own State.StartedAt / FinishedAt, and the
whole `docker run` (create, start, wait, remove).

    python bench/bench_images.py [--runs 3] [--no-build] [--no-compressed]

--no-build uses the images already tagged rag-gate:bench-full and rag-gate:bench-slim. Needs a running Docker engine
(on the development machine: bash .ci/container-env.sh); without one it says so and skips (exit 0). Exit status 1 if
a build fails or a run does not pass.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from bench_action import docker, docker_time

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
IMAGES = {"full": ("Dockerfile", "rag-gate:bench-full"), "slim": ("Dockerfile.slim", "rag-gate:bench-slim")}


def docker_missing() -> str | None:
    """Why Docker cannot run here, or None."""
    if shutil.which("docker") is None:
        return "Docker is not installed (on the development machine: bash .ci/container-env.sh)"
    if docker("info", check=False).returncode != 0:
        return "no Docker engine runs here (on the development machine: bash .ci/container-env.sh)"
    return None


def gzip_size(tag: str) -> int:
    """Bytes of `docker save TAG | gzip -6`."""
    saver = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
    packer, n = zlib.compressobj(6, zlib.DEFLATED, 31), 0
    assert saver.stdout is not None
    while chunk := saver.stdout.read(1 << 20):
        n += len(packer.compress(chunk))
    saver.wait()
    return n + len(packer.flush())


def one_run(tag: str, ws: Path) -> tuple[int, float, float, str]:
    """One `rag-gate run` of the quickstart in the image: exit code, start -> exit s, whole docker run s, stderr."""
    t0 = time.perf_counter()
    cid = docker("create", "--network", "none", "-v", f"{ws}:/w", "-w", "/w", "--entrypoint", "rag-gate", tag,
                 "run", "--config", "rag-eval.yml", "--no-progress", "-q").stdout.strip()
    started = docker("start", "-a", cid, check=False)
    state = json.loads(docker("inspect", "--format", "{{json .State}}", cid).stdout)
    docker("rm", cid)
    whole = time.perf_counter() - t0
    return state["ExitCode"], docker_time(state["FinishedAt"]) - docker_time(state["StartedAt"]), whole, started.stdout + started.stderr


def measure(name: str, tag: str, ws: Path, runs: int, compressed: bool) -> tuple[bool, str]:
    size = int(docker("image", "inspect", "-f", "{{.Size}}", tag).stdout)
    packed = f"{gzip_size(tag) / 1e6:>9,.0f}" if compressed else f"{'-':>9}"
    one_run(tag, ws)  # warm the page cache: every timed run starts alike
    rows = [one_run(tag, ws) for _ in range(runs)]
    ok = all(r[0] == 0 for r in rows)
    line = (f"{name:<6} {size / 1e6:>10,.0f} {packed} {min(r[1] for r in rows):>17.2f} {min(r[2] for r in rows):>17.2f}"
            f"  {'pass' if ok else 'exit ' + str(rows[-1][0])}")
    if not ok:
        print(rows[-1][3][-2000:], file=sys.stderr)
    return ok, line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-build", action="store_true", help="use the images already tagged")
    ap.add_argument("--no-compressed", action="store_true", help="skip the gzip size (a minute for the full image)")
    args = ap.parse_args()
    why = docker_missing()
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return 0
    for dockerfile, tag in ([] if args.no_build else IMAGES.values()):
        t0 = time.perf_counter()
        build = docker("build", "-q", "-f", str(ROOT / dockerfile), "-t", tag, str(ROOT), check=False)
        if build.returncode != 0:
            print(build.stdout[-3000:] + build.stderr[-3000:], file=sys.stderr)
            return 1
        print(f"built {tag} from {dockerfile} in {time.perf_counter() - t0:.0f} s (layer cache as it is)")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "quickstart"
        shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__", ".pytest_cache"))
        print(f"\nquickstart spec (rag-eval.yml), best of {args.runs} runs after one warm-up")
        print(f"{'image':<6} {'size MB':>10} {'gzip MB':>9} {'start->verdict s':>17} {'whole docker run s':>17}  verdict")
        for name, (_, tag) in IMAGES.items():
            passed, line = measure(name, tag, ws, args.runs, not args.no_compressed)
            ok &= passed
            print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
