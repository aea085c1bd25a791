"""A retrieval-only run, whole process against whole process: `rag-gate run` against a pytrec_eval script.

Generates (in a temporary folder, seeded) a golden set of 10,000 cases, each with 1-5 relevant ids drawn from a pool
of 15,000 ids, a question and a ground truth, a category and (some) tags; a results file with 20 retrieved passages
per case (ids from the same pool, texts of 200-400 characters, scores falling down the list, latency_ms), the
relevant ids placed at varied ranks (some below the top 10, some absent); and a spec with six metrics (hit_rate@10,
mrr, recall@10, precision@10, ndcg@10, map), the results file as its target, two gates, no judge, no baseline. The
same qrels and run are also written as TREC text files (``qrels.txt``: ``qid 0 docid rel``; ``run.txt``: ``qid Q0
docid rank score tag``) and as JSON (``qrels.json``, ``run.json``) for pytrec_eval. Then it times, as whole
processes (cold start each, best of --repeat, the two taking turns and alternating who goes first):

  a. rag-gate:    rag-gate run --config rag-eval.yml --report report.json --markdown comment.md --junit junit.xml
  b. pytrec_eval: a script that imports pytrec_eval, reads qrels and run from the files (TREC text, or JSON: both
                  are timed and the faster is the one compared), builds the dicts, evaluates recip_rank, recall.10,
                  P.10, ndcg_cut.10, map and success.10 with one RelevanceEvaluator, and writes the per-query values
                  and the means as JSON.

Byte-code caching is on (PYTHONDONTWRITEBYTECODE unset) after one untimed run of each, as an installed package runs.
It prints both times, their ratio (of the best times, and the median of the ratios of the runs side by side), each
process's CPU seconds (user + system: what other jobs on the machine move least) and the load average, the
time of ``python -c pass``, where rag-gate's run spends its time (one more cold process with timing hooks on the run's
phases: imports, spec, golden set, results file, metrics, stale-label check, fingerprints, gates, report writing,
exit), and checks that rag-gate's six means equal pytrec_eval's to 1e-9.

    python bench/bench_retrieval_run.py [--cases 10000] [--docs 20] [--pool 15000] [--repeat 7] [--no-texts] [--keep DIR]

With --keep DIR the data is kept there and reused by the next run of the same sizes. Exit status 1 if a mean
differs; 2 if pytrec_eval is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_vs_trec import compare  # the means side by side (run as a script, bench/ is on sys.path)

METRICS = ["hit_rate@10", "mrr", "recall@10", "precision@10", "ndcg@10", "map"]
GATES = {"hit_rate@10": {"min": 0.2}, "mrr": {"min": 0.1}}
EQUIVALENT = {"hit_rate@10": "success_10", "mrr": "recip_rank", "recall@10": "recall_10", "precision@10": "P_10",
              "ndcg@10": "ndcg_cut_10", "map": "map"}
WORDS = ("the of and to in a is that for it as with was on be by this are or at from an not which have has but were "
         "loan branch account card member library renewal interest overdue fee limit policy statement transfer deposit "
         "balance service request holder notice period approval chunk section annual rate minimum schedule").split()

TREC_SCRIPT = '''\
"""What a pytrec_eval user writes: qrels and run from files, per-query values and means as JSON."""
import json
import math
import sys

import pytrec_eval

form, qrels_path, run_path, out = sys.argv[1:5]
if form == "json":
    with open(qrels_path, encoding="utf-8") as f:
        qrels = json.load(f)
    with open(run_path, encoding="utf-8") as f:
        run = json.load(f)
else:
    qrels, run = {}, {}
    with open(qrels_path, encoding="utf-8") as f:
        for line in f:
            qid, _, doc, rel = line.split()
            qrels.setdefault(qid, {})[doc] = int(rel)
    with open(run_path, encoding="utf-8") as f:
        for line in f:
            qid, _, doc, _, score, _ = line.split()
            run.setdefault(qid, {})[doc] = float(score)
measures = {"recip_rank", "recall.10", "P.10", "ndcg_cut.10", "map", "success.10"}
per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
names = sorted(next(iter(per_query.values())))
means = {m: math.fsum(q[m] for q in per_query.values()) / len(per_query) for m in names}
with open(out, "w", encoding="utf-8") as f:
    json.dump({"n": len(per_query), "means": means, "per_query": per_query}, f)
'''

# Run in a fresh process by --phases: rag-gate's run with a timer around each phase. A phase function is replaced in
# every gate module that holds it (``from x import f`` copies the name), so nested calls are timed where they happen.
PHASES = [
    ("gate.config.loader", "load_spec", "spec (YAML, schema, defaults)"),
    ("gate.io.golden", "load_golden_set", "golden set"),
    ("gate.core.cases", "fingerprint", "golden-set fingerprint (while the results are scanned)"),
    ("gate.run.measure", "measure", "results file (the target's answers)"),
    ("gate.run.evaluate", "evaluate", "evaluate (all of the following)"),
    ("gate.stages.retrieval", "retrieval_stage", "  metrics (retrieval stage)"),
    ("gate.stages.retrieval", "stale_labels", "  stale-label check"),
    ("gate.run.evaluate", "gate_stages", "  gates"),
    ("gate.run.evaluate", "question_groups", "  question types"),
    ("gate.run.flow", "viewed", "redaction"),
    ("gate.run.flow", "gc_paused", "run (all of the above, and the GC switched back on)"),
    ("gate.app", "write_reports", "report.json, comment.md, junit.xml"),
    ("gate.render.console", "render_console", "console report"),
]

PHASE_CHILD = '''\
import functools, json, sys, time
t0 = time.time()
import importlib
import gate.cli.main
modules = {m: importlib.import_module(m) for m in {m for m, _, _ in PHASES}}
t_imports = time.time()
spent = {}

def timer(key, f):
    @functools.wraps(f)
    def wrapped(*a, **k):
        s = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - s
    return wrapped

def timer_cm(key, f):  # a context manager: time from entering to leaving it
    import contextlib
    @contextlib.contextmanager
    def wrapped(*a, **k):
        s = time.perf_counter()
        try:
            with f(*a, **k):
                yield
        finally:
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - s
    return wrapped

for mod, name, _ in PHASES:
    original = getattr(modules[mod], name)
    key = mod + "." + name
    new = (timer_cm if name == "gc_paused" else timer)(key, original)
    for m in list(sys.modules.values()):
        if getattr(m, "__name__", "").startswith("gate"):
            for attr, value in list(vars(m).items()):
                if value is original:  # under its own name or another (from x import f as g)
                    setattr(m, attr, new)
import atexit  # the console script's run ends the process at once (gate.cli.main.end_now), after the atexit handlers
atexit.register(lambda: sys.stderr.write("PHASES " + json.dumps(
    {"t0": t0, "imports": t_imports, "main": t_main, "end": time.time(), "spent": spent}) + "\\n"))
t_main = time.time()
sys.argv = ["rag-gate", *sys.argv[1:]]
raise SystemExit(gate.cli.main.main())
'''


def text(rng: random.Random, low: int = 200, high: int = 400) -> str:
    n, out, size = rng.randint(low, high), [], 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def generate(folder: Path, n_cases: int, n_docs: int, pool: int, texts: bool = True, seed: int = 11) -> None:
    """The golden set, the results file (``texts`` False: the passages with no text, only id and score, what
    pytrec_eval's run holds), the spec, and the same qrels and run for pytrec_eval (TREC text and JSON)."""
    rng = random.Random(seed)
    doc_ids = [f"doc{i:05d}#chunk_{i % 7}" for i in range(pool)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    with (folder / "golden_set.jsonl").open("w", encoding="utf-8") as golden, \
            (folder / "results.jsonl").open("w", encoding="utf-8") as results:
        for i in range(n_cases):
            qid = f"q{i:05d}"
            relevant = rng.sample(doc_ids, rng.randint(1, 5))
            qrels[qid] = dict.fromkeys(relevant, 1)
            row = {"id": qid, "question": text(rng, 40, 120).capitalize() + "?", "ground_truth": text(rng, 60, 200),
                   "relevant_doc_ids": relevant, "category": rng.choice(("lending", "accounts", "cards", "services"))}
            if i % 3 == 0:
                row["tags"] = rng.sample(["faq", "badcase", "long", "multi-hop"], rng.randint(1, 2))
            golden.write(json.dumps(row) + "\n")
            ranked = [d for d in rng.sample(doc_ids, n_docs + 5) if d not in qrels[qid]][:n_docs]
            for d in relevant:  # at a varied rank: near the top, lower down, or not retrieved at all
                where = rng.choice(("top", "top", "low", "absent"))
                if where != "absent":
                    ranked[rng.randrange(3) if where == "top" else rng.randrange(n_docs)] = d
            # distinct scores falling down the list: trec_eval's order (by score) is rag-gate's (by position)
            scores = sorted(rng.sample(range(50_000, 990_000), len(ranked)), reverse=True)
            scores = [s / 1e6 for s in scores]
            ranked_docs = [{"id": d, "text": text(rng), "score": s} for d, s in zip(ranked, scores, strict=True)]
            if not texts:
                ranked_docs = [{"id": d["id"], "score": d["score"]} for d in ranked_docs]
            run[qid] = {}
            for d in ranked_docs:  # a repeated id keeps its first (highest) score, as rag-gate keeps its first rank
                run[qid].setdefault(d["id"], d["score"])
            results.write(json.dumps({"id": qid, "retrieved": ranked_docs, "answer": text(rng, 100, 300),
                                      "latency_ms": round(rng.uniform(80, 900), 1)}) + "\n")
    with (folder / "qrels.txt").open("w", encoding="utf-8") as f:
        f.writelines(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    with (folder / "run.txt").open("w", encoding="utf-8") as f:
        f.writelines(f"{q} Q0 {d} {r} {s} bench\n" for q, docs in run.items() for r, (d, s) in enumerate(docs.items(), 1))
    (folder / "qrels.json").write_text(json.dumps(qrels), encoding="utf-8")
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    spec = {"version": 1, "golden_set": "golden_set.jsonl", "target": {"results": "results.jsonl"}, "max_error_rate": 0,
            "stages": {"retrieval": {"metrics": METRICS, "match": {"level": "exact"}, "gates": GATES}}}
    (folder / "rag-eval.yml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    (folder / "trec_eval_run.py").write_text(TREC_SCRIPT, encoding="utf-8")
    (folder / "phases.py").write_text(f"PHASES = {PHASES!r}\n" + PHASE_CHILD, encoding="utf-8")


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


CPU: dict[str, list[float]] = {}  # command name -> CPU seconds (user + system) of each timed run


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, name: str | None = None) -> float:
    """Wall time of ``cmd`` (its CPU seconds, user + system, go to ``CPU[name]``); exit 1 of rag-gate (a gate failed)
    is a complete run; any other non-zero exit stops here."""
    c0, t0 = cpu_children(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env())
    took = time.perf_counter() - t0
    if name is not None:
        CPU.setdefault(name, []).append(cpu_children() - c0)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and "run" not in cmd):
        raise SystemExit(f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{proc.stdout[-1500:]}{proc.stderr[-2000:]}")
    return took


def phases(folder: Path, args: list[str]) -> list[tuple[str, float]]:
    """One cold rag-gate process with a timer on each phase: (phase, seconds), start-up and exit included."""
    started = time.time()
    proc = subprocess.run([sys.executable, str(folder / "phases.py"), *args], cwd=folder, capture_output=True, text=True,
                          env=env())
    ended = time.time()
    line = next((x for x in proc.stderr.splitlines() if x.startswith("PHASES ")), None)
    if line is None:
        raise SystemExit(f"the timed run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    got = json.loads(line[7:])
    rows = [("Python start-up", got["t0"] - started), ("imports (gate.cli.main, gate.app, gate.run.flow...)", got["imports"] - got["t0"])]
    rows += [(label, got["spent"].get(f"{mod}.{name}", 0.0)) for mod, name, label in PHASES]
    rows += [("argument parsing, the rest of main", got["end"] - got["main"] - got["spent"].get("gate.run.flow.gc_paused", 0.0)
              - sum(got["spent"].get(f"{m}.{n}", 0.0) for m, n, _ in PHASES if n in ("write_reports", "render_console"))),
             ("exit (freeing what the run built)", ended - got["end"]), ("whole process", ended - started)]
    return rows


def rag_gate_command() -> list[str]:
    """The console script next to this Python (``python -m gate`` if there is none)."""
    script = Path(sys.executable).with_name("rag-gate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gate"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--pool", type=int, default=15_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-texts", action="store_true", help="the retrieved passages with no text (only id and score, as "
                    "pytrec_eval's run): the results file is 12 MB, not 74 MB")
    ap.add_argument("--keep", metavar="DIR", help="write the data here (kept; reused by the next run of the same sizes), not in a temporary folder")
    args = ap.parse_args()
    try:
        import pytrec_eval  # noqa: F401
    except ImportError:
        print("pytrec_eval is not installed: pip install pytrec-eval-terrier", file=sys.stderr)
        return 2
    tmp = None if args.keep else tempfile.mkdtemp(prefix="rag-gate-retrieval-run-")
    folder = Path(args.keep or tmp or ".")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return measure(folder, args)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def measure(folder: Path, args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    stamp, made = folder / "generated.json", json.dumps([args.cases, args.docs, args.pool, args.no_texts, PHASE_CHILD,
                                                        TREC_SCRIPT])
    if not (stamp.exists() and stamp.read_text(encoding="utf-8") == made):  # a --keep folder of the same data is reused
        generate(folder, args.cases, args.docs, args.pool, texts=not args.no_texts)
        stamp.write_text(made, encoding="utf-8")
    names = ("golden_set.jsonl", "results.jsonl", "qrels.txt", "run.txt", "run.json")
    sizes = ", ".join(f"{n} {(folder / n).stat().st_size / 1e6:.1f} MB" for n in names)
    print(f"generated {args.cases:,} cases x {args.docs} passages (pool of {args.pool:,} ids) in {time.perf_counter() - t0:.1f} s: {sizes}")
    argv = ["run", "--config", "rag-eval.yml", "--report", "report.json", "--markdown", "comment.md", "--junit", "junit.xml"]
    ours = [*rag_gate_command(), *argv]
    trec = {form: [sys.executable, "trec_eval_run.py", form, f"qrels.{ext}", f"run.{ext}", "trec.json"]
            for form, ext in (("trec", "txt"), ("json", "json"))}
    commands = {"rag-gate": ours, "pytrec_eval (TREC text)": trec["trec"], "pytrec_eval (JSON)": trec["json"],
                "python -c pass": [sys.executable, "-c", "pass"]}
    for cmd in commands.values():  # untimed: byte-code written, files in the page cache
        timed(cmd, folder)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(args.repeat):  # taking turns, who goes first alternating, so that load on the machine hits all alike
        for name in (list(commands) if i % 2 == 0 else list(commands)[::-1]):
            times[name].append(timed(commands[name], folder, name))
    best = {name: min(ts) for name, ts in times.items()}
    print(f"\nwhole process, best of {args.repeat} (every run, s):")
    for name, ts in times.items():
        print(f"  {name:<24} {best[name]:6.3f} s   ({' '.join(f'{t:.3f}' for t in ts)})")
    theirs = min(("pytrec_eval (TREC text)", "pytrec_eval (JSON)"), key=lambda n: best[n])
    ratio = best["rag-gate"] / best[theirs]
    paired = statistics.median(a / b for a, b in zip(times["rag-gate"], times[theirs], strict=True))
    print(f"  ratio rag-gate / {theirs} (the faster reading): {ratio:.2f}x of the best times, {paired:.2f}x median side by side")
    print(f"CPU seconds (user + system), best of {args.repeat}: what other jobs on the machine move least:")
    for name, ts in CPU.items():
        print(f"  {name:<24} {min(ts):6.3f} s   ({' '.join(f'{t:.3f}' for t in ts)})")
    cpu_paired = statistics.median(a / b for a, b in zip(CPU["rag-gate"], CPU[theirs], strict=True))
    print(f"  ratio rag-gate / {theirs}: {min(CPU['rag-gate']) / min(CPU[theirs]):.2f}x of the best, {cpu_paired:.2f}x median side by side")
    print(f"  load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} (2 CPUs: {os.cpu_count()})")

    timed(trec["trec"], folder)  # trec.json from the TREC text files, for the comparison
    print("\nwhere rag-gate's run goes (one more cold process, a timer on each phase; indented: inside evaluate):")
    for label, seconds in phases(folder, argv):
        print(f"  {label:<56} {seconds:6.3f} s")
    bad = compare(folder, EQUIVALENT)
    if bad:
        print(f"FAIL: rag-gate and pytrec_eval differ on {', '.join(bad)}")
        return 1
    print(f"OK: rag-gate's means equal pytrec_eval's to 1e-9 ({', '.join(EQUIVALENT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
