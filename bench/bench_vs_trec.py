"""rag-gate against pytrec_eval on the same files: whole-process time of a retrieval-only run, and equal results.

Generates (in a temporary folder, seeded) the same kind of data as bench_scoring.py: a golden set of 10,000 cases
(1-3 relevant ids each, a quarter graded), a results file with 20 retrieved passages per case (~200-character
texts, scores in descending order, latency_ms), and a spec with retrieval metrics only and the results file as its
target (no baseline, no history). Then it times, as whole processes, best of --repeat, the two tools taking turns
in every repeat so that load on the machine hits both alike:

  a. rag-gate:    python -m gate run --config rag-eval.yml --report report.json --no-progress -q
  b. pytrec_eval: a small script (what a user would write) that reads the same golden set (qrels from
                  relevant_doc_ids) and results file (run from the retrieved ids and scores) with the json module,
                  evaluates recip_rank, recall_10, P_5, ndcg_cut_10, map and success_5 with
                  pytrec_eval.RelevanceEvaluator, and writes the per-query values and the means as JSON.

The processes run with byte-code caching on (PYTHONDONTWRITEBYTECODE unset), after one untimed run of each, as an
installed package runs (pip compiles it at install time; so does the action's image): compiling rag-gate's own
modules on every run would cost it 0.03-0.07 s more.

It prints both times, their ratio (of the best times, and the median of the ratios of the runs side by side, which
load on the machine moves less), `python -c pass` for scale, and checks that rag-gate's means of mrr, map, ndcg@10,
recall@10, precision@5 (and hit_rate@5 = success_5) equal pytrec_eval's to 1e-9.

    python bench/bench_vs_trec.py [--cases 10000] [--docs 20] [--repeat 5] [--profile]

--profile: cProfile of rag-gate's run in this process (gate.cli.main.main with the same arguments), top 20 by own time.
Exit status 1 if a mean differs by more than 1e-9; 2 if pytrec_eval is not installed.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from bench_scoring import _text, size_args  # the same passage texts (run as a script, bench/ is on sys.path)

METRICS = ["hit_rate@5", "mrr", "recall@10", "precision@5", "ndcg@10", "map", "context_recall@5"]
GATES = {"hit_rate@5": {"min": 0.3}, "mrr": {"min": 0.2}, "ndcg@10": {"min": 0.2}, "p95_latency_ms": {"max": 2000}}  # pass at 10,000 cases
# rag-gate metric -> trec_eval measure (context_recall@5, a micro average, has no trec_eval counterpart)
EQUIVALENT = {"mrr": "recip_rank", "map": "map", "ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "precision@5": "P_5",
              "hit_rate@5": "success_5"}

TREC_SCRIPT = '''\
"""What a pytrec_eval user writes: qrels and run from the same JSONL files, per-query values and means as JSON."""
import json
import math
import sys

import pytrec_eval

golden, results, out = sys.argv[1:4]
qrels = {}
with open(golden, encoding="utf-8") as f:
    for line in f:
        row = json.loads(line)
        rel = row["relevant_doc_ids"]
        qrels[row["id"]] = {d: int(g) for d, g in rel.items()} if isinstance(rel, dict) else {d: 1 for d in rel}
run = {}
with open(results, encoding="utf-8") as f:
    for line in f:
        row = json.loads(line)
        docs = run[row["id"]] = {}
        for item in row["retrieved"]:
            docs.setdefault(item["id"], float(item["score"]))  # a repeated id keeps its first (highest) score
measures = {"recip_rank", "recall.10", "P.5", "ndcg_cut.10", "map", "success.5"}
per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
names = sorted(next(iter(per_query.values())))
means = {m: math.fsum(q[m] for q in per_query.values()) / len(per_query) for m in names}
with open(out, "w", encoding="utf-8") as f:
    json.dump({"n": len(per_query), "means": means, "per_query": per_query}, f)
'''


def generate(folder: Path, n_cases: int, n_docs: int, seed: int = 7) -> Path:
    """golden_set.jsonl, results.jsonl and rag-eval.yml in ``folder`` (as bench_scoring.py, without a baseline).
    Scores strictly decrease down each list, so trec_eval's order (by score) is rag-gate's (by position)."""
    rng = random.Random(seed)
    n_corpus = max(1000, n_cases * 3)
    with (folder / "golden_set.jsonl").open("w", encoding="utf-8") as golden, (folder / "results.jsonl").open("w", encoding="utf-8") as results:
        for i in range(n_cases):
            n_rel = rng.choice((1, 1, 2, 3))
            rel = rng.sample(range(n_corpus), n_rel)
            relevant: Any = [f"doc{r}#chunk_{r % 5}" for r in rel]
            if i % 4 == 0:  # a quarter with graded relevance
                relevant = {d: rng.randint(1, 3) for d in relevant}
            golden.write(json.dumps({
                "id": f"case-{i:05d}",
                "question": f"Question {i}: {_text(rng, 60)}?",
                "ground_truth": _text(rng, 80),
                "relevant_doc_ids": relevant,
                "category": rng.choice(("lending", "accounts", "services", "events")),
                "tags": rng.sample(["faq", "badcase", "long", "multi-hop"], rng.randint(0, 2)),
            }) + "\n")
            ids = [f"doc{rng.randrange(n_corpus)}#chunk_{rng.randrange(5)}" for _ in range(n_docs)]
            for r in rel:  # put the relevant passages somewhere in (or just outside) the list
                pos = rng.randrange(n_docs + 4)
                if pos < n_docs:
                    ids[pos] = f"doc{r}#chunk_{r % 5}"
            results.write(json.dumps({
                "id": f"case-{i:05d}",
                "retrieved": [{"id": d, "text": _text(rng), "score": round(1 - j / n_docs, 4)} for j, d in enumerate(ids)],
                "answer": _text(rng, 150),
                "latency_ms": round(rng.uniform(80, 900), 1),
            }) + "\n")
    spec = {
        "version": 1,
        "golden_set": "golden_set.jsonl",
        "target": {"results": "results.jsonl"},
        "max_error_rate": 0,
        "stages": {"retrieval": {"metrics": METRICS, "match": {"level": "exact"}, "gates": GATES}},
    }
    (folder / "rag-eval.yml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    (folder / "trec_eval_run.py").write_text(TREC_SCRIPT, encoding="utf-8")
    return folder / "rag-eval.yml"


def timed(cmd: list[str], cwd: Path) -> float:
    """Wall time of ``cmd``. rag-gate's exit 1 (a gate failed: on a small generated set the fixed gates can) is a
    complete run, timed like a pass; any other non-zero exit stops the benchmark."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    if proc.returncode != 0 and not (proc.returncode == 1 and "gate" in cmd and "run" in cmd):
        raise SystemExit(f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{proc.stdout[-1500:]}{proc.stderr[-2000:]}")
    return took


def profile(folder: Path, argv: list[str], top: int = 20) -> str:
    from gate.cli.main import main

    prof = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()):
        prof.enable()
        main(argv)
        prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return "\n".join("  " + line for line in buf.getvalue().splitlines() if line.strip())


def compare(folder: Path, equivalent: dict[str, str] = EQUIVALENT) -> list[str]:
    """The metrics whose means differ by more than 1e-9 (empty: all equal), after printing them side by side:
    rag-gate's report.json in ``folder`` against pytrec_eval's trec.json, ``equivalent`` naming each metric's
    trec_eval measure."""
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    trec = json.loads((folder / "trec.json").read_text(encoding="utf-8"))
    ours = report["stages"]["retrieval"]["metrics"]
    print(f"\nmeans over {report['stages']['retrieval']['n']} cases (rag-gate) / {trec['n']} queries (pytrec_eval):")
    bad = []
    width = max(map(len, equivalent)) + 1
    for metric, measure in equivalent.items():
        a, b = ours[metric], trec["means"][measure]
        ok = abs(a - b) <= 1e-9
        bad += [] if ok else [metric]
        print(f"  {metric:<{width}} {a:.12f}   {measure:<12} {b:.12f}   {'equal' if ok else 'DIFFERENT'}")
    return bad


def main() -> int:
    args = size_args(__doc__.split("\n\n")[0], "also print cProfile's top 20 functions (own time) of rag-gate's run")
    try:
        import pytrec_eval  # noqa: F401
    except ImportError:
        print("pytrec_eval is not installed: pip install pytrec-eval-terrier", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="rag-gate-vs-trec-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        spec = generate(folder, args.cases, args.docs)
        size = (folder / "results.jsonl").stat().st_size
        print(f"generated {args.cases} cases x {args.docs} passages in {time.perf_counter() - t0:.1f} s "
              f"(results.jsonl {size / 1e6:.1f} MB, golden_set.jsonl {(folder / 'golden_set.jsonl').stat().st_size / 1e6:.1f} MB)")

        argv = ["run", "--config", str(spec), "--report", str(folder / "report.json"), "--no-progress", "-q"]
        ours = [sys.executable, "-m", "gate", *argv]
        theirs = [sys.executable, str(folder / "trec_eval_run.py"), str(folder / "golden_set.jsonl"), str(folder / "results.jsonl"),
                  str(folder / "trec.json")]
        bare = [sys.executable, "-c", "pass"]
        times: dict[str, list[float]] = {"rag-gate": [], "pytrec_eval": [], "python -c pass": []}
        for cmd in (ours, theirs):  # untimed: byte-code written, files in the page cache
            timed(cmd, folder)
        for i in range(args.repeat):  # taking turns (and swapping who goes first), so both see the same load
            order = [("rag-gate", ours), ("pytrec_eval", theirs)]
            for name, cmd in (order if i % 2 == 0 else order[::-1]):
                times[name].append(timed(cmd, folder))
            times["python -c pass"].append(timed(bare, folder))
        best = {name: min(ts) for name, ts in times.items()}
        print(f"\nwhole process, best of {args.repeat} (all runs, s):")
        for name, ts in times.items():
            print(f"  {name:<15} {best[name]:6.3f} s   ({' '.join(f'{t:.3f}' for t in ts)})")
        ratio = best["rag-gate"] / best["pytrec_eval"]
        paired = statistics.median(a / b for a, b in zip(times["rag-gate"], times["pytrec_eval"], strict=True))
        py = best["python -c pass"]
        print(f"  ratio rag-gate / pytrec_eval: {ratio:.2f}x of the best times, {paired:.2f}x median of the runs side by side "
              f"(beyond bare Python start-up: {best['rag-gate'] - py:.3f} s / {best['pytrec_eval'] - py:.3f} s = "
              f"{(best['rag-gate'] - py) / (best['pytrec_eval'] - py):.2f}x)")

        bad = compare(folder)
        if args.profile:
            print("\ncProfile of rag-gate's run in this process (gate.cli.main, same arguments), top 20 by own time:")
            print(profile(folder, argv)[:8000])
        if bad:
            print(f"FAIL: rag-gate and pytrec_eval differ on {', '.join(bad)}")
            return 1
        print(f"OK: rag-gate's means equal pytrec_eval's to 1e-9 ({', '.join(EQUIVALENT)})")
        return 0


if __name__ == "__main__":
    sys.exit(main())
