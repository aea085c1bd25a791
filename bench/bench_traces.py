"""How long a traces run takes to read its trace file and draw its sample: the whole process, Python's start included.

Writes (in a temporary folder) --traces rag-gate-format traces (default 100,000) over 30 days, weekdays busier than
weekends: each with 5 retrieved passages of about 300 characters (ids, texts, scores), an answer of about 300
characters, a question, a timestamp, latency, token usage and the model; a tenth carry feedback, one in a hundred
failed in production (no answer, an error). Then runs, --repeat times (default 3),

    python -c "import gate.io.traces, gate.core.tracesample; read the file; sample rate 0.05, max 300"

in a subprocess and times it from start to exit (wall clock). The child keeps the sample and lets the file's traces go,
as a traces run does. Prints the file's size, the best and the median of the runs, and the child's own split of its
best run (imports, reading, sampling) and CPU seconds.

    python bench/bench_traces.py [--traces 100000] [--repeat 3] [--budget 5.0] [--keep traces.jsonl]

Exit status 1 when the best run is over --budget seconds (default 5), or when the child did not read every trace or
draw the sample it should.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_scoring import _text  # run as a script, bench/ is on sys.path

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2024, 4, 1, tzinfo=UTC)
DAYS, RATE, MAX = 30, 0.05, 300
CHILD = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from gate.io.traces import read_traces
from gate.core.tracesample import sample_traces
t1 = time.perf_counter()

def draw(path):  # as a traces run does (gate/run/traces.py): the sample is kept, the file's traces are let go
    read = read_traces(path, "rag-gate")
    t2 = time.perf_counter()
    drawn = sample_traces(read.traces, rate=float(sys.argv[2]), max=int(sys.argv[3]), seed=0, since=None, until=None)
    return read.lines, len(read.traces), len(read.unreadable), drawn, t2

lines, n, unreadable, drawn, t2 = draw(Path(sys.argv[1]))
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "read": t2 - t1, "sample": t3 - t2, "traces": n, "unreadable": unreadable,
                  "sampled": len(drawn.traces), "days": len(drawn.by_day)}))
"""


def write_traces(path: Path, n: int, seed: int = 5) -> None:
    """``n`` traces over DAYS days (weekdays twice as busy as weekends), texts drawn from pools of realistic sizes."""
    rng = random.Random(seed)
    passages = [_text(rng, rng.randint(260, 340)) for _ in range(2000)]
    answers = [_text(rng, rng.randint(260, 340)) for _ in range(1000)]
    questions = [_text(rng, rng.randint(40, 90)).capitalize() + "?" for _ in range(1000)]
    weights = [2 if (START + timedelta(days=d)).weekday() < 5 else 1 for d in range(DAYS)]
    days = rng.choices(range(DAYS), weights=weights, k=n)
    with path.open("w", encoding="utf-8") as f:
        for i, day in enumerate(days):
            ts = START + timedelta(days=day, seconds=rng.randrange(86400), milliseconds=rng.randrange(1000))
            docs = rng.sample(range(2000), 5)
            failed = rng.random() < 0.01
            row = {
                "id": f"tr-{i:07d}", "timestamp": ts.isoformat().replace("+00:00", "Z"), "question": rng.choice(questions),
                "retrieved": [{"id": f"doc{d}#chunk_{d % 7}", "text": passages[d], "score": round(0.95 - 0.07 * r - rng.random() * 0.05, 4)}
                              for r, d in enumerate(docs)],
                "answer": None if failed else rng.choice(answers), "latency_ms": round(rng.lognormvariate(6.8, 0.4), 1),
                "usage": {"prompt_tokens": rng.randint(900, 1600), "completion_tokens": rng.randint(40, 120)},
                "system": {"model": "gpt-4o-mini", "prompt_version": "v7"},
            }
            if failed:
                row["error"] = "upstream timeout"
            if rng.random() < 0.1:
                row["feedback"] = rng.choice((1, 1, 1, -1))
            f.write(json.dumps(row) + "\n")


def run_child(path: Path) -> tuple[float, dict]:
    """One whole process: (wall seconds from start to exit, what the child measured and counted, with its CPU
    seconds, user + system, as "cpu")."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(RATE), str(MAX)], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, {**json.loads(done.stdout), "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--budget", type=float, default=5.0, help="most seconds the whole process may take (default 5)")
    p.add_argument("--keep", type=Path, help="write the trace file here and keep it")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "traces.jsonl"
        t0 = time.perf_counter()
        write_traces(path, args.traces)
        written = time.perf_counter() - t0
        size = path.stat().st_size
        runs = [run_child(path) for _ in range(args.repeat)]
    best_s, best = min(runs, key=lambda r: r[0])
    walls = [w for w, _ in runs]
    expected = min(MAX, round(RATE * args.traces))
    print(f"{args.traces:,} traces over {DAYS} days, {size / 1e6:.1f} MB (written in {written:.1f} s)")
    print(f"  read + sample (rate {RATE}, max {MAX}), whole process, best of {args.repeat}   {best_s:6.2f} s (budget {args.budget} s)")
    print(f"  the runs' median                                                {statistics.median(walls):6.2f} s, "
          f"from {min(walls):.2f} to {max(walls):.2f} s")
    print(f"  the best run inside: imports {best['imports']:.2f} s, reading {best['read']:.2f} s, sampling {best['sample']:.2f} s; "
          f"CPU {best['cpu']:.2f} s")
    print(f"  read {best['traces']:,} traces ({best['unreadable']} unreadable), sampled {best['sampled']} over {best['days']} days")
    ok = best["traces"] == args.traces and best["unreadable"] == 0 and best["sampled"] == expected
    if not ok:
        print(f"  expected {args.traces:,} traces read and {expected} sampled", file=sys.stderr)
    return 0 if ok and best_s <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
