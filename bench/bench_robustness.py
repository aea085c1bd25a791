"""What the robustness stage costs: target calls, judge calls and wall time per sampled case.

The target is the quickstart RAG served over HTTP (``python -m quickrag serve --port 0`` in a
child process, run from a temporary copy of examples/quickstart without .rag-gate/ and eval/).
The judge is the OpenAI-compatible test judge of tests/support/judge_server.py on 127.0.0.1, which
answers each request after a fixed latency (default 200 ms); it runs in a child process by
default (``--server thread`` keeps it in-process). The spec is the quickstart's robustness
stage (rag-eval.yml: 2 distractors at the front, sample 20 with seed 7) with an ``http:`` target
and a ``judge:`` block (concurrency 16), in four configurations:

  a. source corpus, offline correctness (token F1 on the answer-bearing words, numbers required): no judge call is expected;
  b. source corpus, judge correctness (ragas answer_correctness);
  c. source generated (the judge writes the distractors), judge correctness;
  d. (b) with ``rejection: {judge: true}``: the judge classifies the answers no refusal phrase settled.

The stage is timed alone: the target's outputs come from ``gate.run.ask.collect_outputs`` (not
timed), then ``gate.run.measure.measure_judged`` runs what ``gate.run.flow.run`` runs for a spec whose only
stage is robustness (open the judge cache, ``robustness_stage``, close the cache). Each repeat
runs it twice: with an empty cache (cold) and again with the cache the first run filled (warm).
For each run it prints the wall time, the stage's ``target_calls`` per sampled case, the judge
calls the server saw (by prompt kind) per sampled case, the calls in the stage's usage, and
the correctness cache hits and misses. A last ``gate.run.flow.run`` per configuration (warm cache)
checks that the whole run reports the same metrics as the timed stage.

    python bench/bench_robustness.py [--latency 0.2] [--concurrency 16] [--repeat 2] [--server process|thread]
                                     [--target-latency-ms 0] [--configs a b c d]

Takes well under a minute on 2 cores. Prints figures and makes no pass/fail judgement on speed.
Exit status 1 if something went wrong: a run raised, a sampled case errored, the judge saw a
prompt it does not recognise or answered an error, (a) made a judge call, the stage's usage
disagreed with the server's correctness calls, a warm run missed the correctness cache or
generated a distractor again, two runs of one configuration gave different numbers, or
``gate.run.flow.run`` disagreed with the timed stage.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
if str(ROOT) not in sys.path:  # tests.support.judge_server
    sys.path.insert(0, str(ROOT))
from bench.judge_process import Judge  # noqa: E402

os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # before ragas is imported anywhere
os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] = "1"
os.environ["DEEPEVAL_DISABLE_DOTENV"] = "1"

MODEL = "gpt-4o-mini-2024-07-18"
EMBEDDINGS = "text-embedding-3-small"
OWN_KINDS = {"rag-gate/distractor": "distractor", "rag-gate/refusal": "refusal"}  # everything else is correctness

CONFIGS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    # name: (label, noise overrides, rejection overrides)
    "a": ("corpus + offline correctness", {"source": "corpus", "correctness": {"method": "offline", "threshold": 0.3}}, {}),
    "b": ("corpus + judge correctness (ragas)", {"source": "corpus", "correctness": {"method": "judge", "engine": "ragas"}}, {}),
    "c": ("generated + judge correctness (ragas)",
          {"source": "generated", "correctness": {"method": "judge", "engine": "ragas"}}, {}),
    "d": ("(b) + rejection judge", {"source": "corpus", "correctness": {"method": "judge", "engine": "ragas"}},
          {"judge": True}),
}


# -- the judge server (in a child process by default) -----------------------------------------


def _server_stats(srv: Any) -> dict[str, Any]:
    reqs = list(srv.requests)
    kinds = Counter("embeddings" if r.path.endswith("/embeddings") else (r.prompt_kind or "?") for r in reqs)
    return {"calls": len(reqs), "kinds": dict(kinds), "max_in_flight": srv.max_in_flight,
            "unknown": len(srv.unknown_prompts), "failed": sum(1 for r in reqs if r.status != 200)}


# -- the target: quickrag over HTTP -------------------------------------------------------------


@contextlib.contextmanager
def quickrag_service(folder: Path, latency_ms: float) -> Iterator[str]:
    """``python -m quickrag serve --port 0`` in ``folder``; yields its URL, stops it (by its handle) afterwards."""
    cmd = [sys.executable, "-m", "quickrag", "serve", "--host", "127.0.0.1", "--port", "0"]
    if latency_ms:
        cmd += ["--latency-ms", f"{latency_ms:g}"]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().strip() if ready else ""
        if not line.startswith("quickrag listening on http://"):
            err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
            raise RuntimeError(f"quickrag did not start: {line!r} {err.strip()[:300]}")
        yield line.rsplit(" ", 1)[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def copy_quickstart(dest: Path) -> Path:
    """The quickstart without its cache, baselines and other by-products."""
    target = dest / "quickstart"
    shutil.copytree(QUICKSTART, target, ignore=shutil.ignore_patterns(".rag-gate", "eval", ".mypy_cache", "__pycache__",
                                                                       ".pytest_cache", ".deepeval"))
    return target


def write_spec(folder: Path, name: str, rag_url: str, judge_url: str, args: argparse.Namespace) -> Path:
    """The quickstart's robustness stage (rag-eval.yml) against the HTTP service, with a judge, and config ``name``."""
    import yaml

    base = yaml.safe_load((QUICKSTART / "rag-eval.yml").read_text(encoding="utf-8"))
    robustness = json.loads(json.dumps(base["stages"]["robustness"]))
    _, noise, rejection = CONFIGS[name]
    robustness["noise"].update(json.loads(json.dumps(noise)))
    robustness["noise"]["distractors"] = 2
    robustness["noise"]["sample"] = {**robustness["noise"].get("sample", {}), "size": args.sample}
    robustness.setdefault("rejection", {}).update(rejection)
    spec = {
        "version": 1,
        "golden_set": "golden_set.jsonl",
        "target": {"http": {"url": rag_url, "concurrency": args.target_concurrency}, "k": base["target"].get("k", 10)},
        "max_error_rate": 0,
        "cache": {"path": f".rag-gate/bench-{name}.sqlite"},
        "judge": {"base_url": judge_url, "model": MODEL, "embeddings_model": EMBEDDINGS, "temperature": 0,
                  "concurrency": args.concurrency, "timeout_s": 60, "max_retries": 3},
        "stages": {"robustness": robustness},
    }
    path = folder / f"rag-eval.bench-{name}.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# -- measurements ------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    wall: float
    server: dict[str, Any]
    stage: dict[str, Any]

    @property
    def noise(self) -> dict[str, Any]:
        return self.stage.get("noise") or {}

    @property
    def sampled(self) -> int:
        return len(self.stage.get("samples") or [])

    def kind_calls(self, kind: str) -> int:
        kinds = self.server.get("kinds", {})
        if kind == "correctness":
            return sum(v for k, v in kinds.items() if k not in OWN_KINDS)
        return sum(v for k, v in kinds.items() if OWN_KINDS.get(k) == kind)

    def fingerprint(self) -> str:
        """What must not move between runs: metrics, distractors, answers, verdicts, rejection decisions."""
        rows = [{k: s.get(k) for k in ("id", "distractors", "clean_answer", "noisy_answer", "clean_correct", "noisy_correct",
                                       "metrics", "error")} for s in self.stage.get("samples") or []]
        rej = [{k: r.get(k) for k in ("id", "refused", "method")} for r in (self.stage.get("rejection") or {}).get("cases", [])]
        return json.dumps({"metrics": self.stage.get("metrics"), "rows": rows, "rejection": rej}, sort_keys=True, default=str)


@dataclasses.dataclass
class Result:
    name: str
    label: str
    cold: list[Run] = dataclasses.field(default_factory=list)
    warm: list[Run] = dataclasses.field(default_factory=list)
    run_wall: float | None = None
    run_duration: float | None = None
    collect_wall: float | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def best(self, which: str) -> Run | None:
        runs = self.cold if which == "cold" else self.warm
        return min(runs, key=lambda r: r.wall) if runs else None


class Bench:
    def __init__(self, args: argparse.Namespace, folder: Path, rag_url: str, judge: Judge) -> None:
        self.args = args
        self.folder = folder
        self.rag_url = rag_url
        self.judge = judge
        self.results: list[Result] = []
        self.errors: list[str] = []

    def error(self, text: str) -> None:
        self.errors.append(text)
        print(f"  ERROR: {text}")

    def ideal(self, calls: int) -> float:
        return calls * self.args.latency / self.args.concurrency

    def one(self, name: str) -> None:
        from gate.deadline import NO_DEADLINE
        from gate.run.ask import collect_outputs
        from gate.run.load import load
        from gate.run.measure import measure_judged
        from gate.run.options import RunOptions
        from gate.targets.factory import make_target

        label = CONFIGS[name][0]
        res = Result(name, label)
        self.results.append(res)
        path = write_spec(self.folder, name, self.rag_url, self.judge.url, self.args)
        options = RunOptions(use_cache=True)
        loaded = dataclasses.replace(load(str(path), options), deadline=NO_DEADLINE)  # the stage alone: no deadline
        spec, cases = loaded.spec, loaded.cases
        cache_file = spec.resolve(spec.data["cache"]["path"])
        with make_target(spec, cases) as target:
            t0 = time.perf_counter()
            outputs = collect_outputs(target, cases, spec.target_k)
            res.collect_wall = time.perf_counter() - t0
            print(f"  collect_outputs (not timed below): {len(cases)} cases over HTTP in {res.collect_wall:.2f} s")
            failed = [o for o in outputs.values() if o.error is not None]
            if failed:
                self.error(f"({name}) {len(failed)} target calls failed, e.g. {failed[0].error}")
            for rep in range(self.args.repeat):
                for f in Path(cache_file).parent.glob(Path(cache_file).name + "*"):  # the file, -wal, -shm
                    f.unlink()
                for which in ("cold", "warm"):
                    self.judge.reset()
                    t0 = time.perf_counter()
                    stage = measure_judged(loaded, outputs, target, options)["robustness"]
                    wall = time.perf_counter() - t0
                    run = Run(wall, self.judge.stats(), stage)
                    (res.cold if which == "cold" else res.warm).append(run)
                    self.show(f"{which} #{rep + 1}", run)
                    self.check(res, which, run)

        # the whole run, as the CLI does it (warm cache): same numbers as the timed stage?
        from gate.run.flow import run as gate_run

        self.judge.reset()
        t0 = time.perf_counter()
        report = gate_run(str(path))
        res.run_wall = time.perf_counter() - t0
        res.run_duration = report["run"]["duration_s"]
        full = Run(res.run_wall, self.judge.stats(), report["stages"]["robustness"])
        same = full.fingerprint() == res.cold[0].fingerprint()
        print(f"  gate.run.flow.run (warm cache, asks the target again): {res.run_wall:.2f} s, verdict {report['verdict']}, "
              f"stage status {full.stage.get('status')}, {full.server['calls']} judge calls, "
              f"{'same' if same else 'DIFFERENT'} metrics/answers/verdicts as the timed stage")
        if not same:
            self.error(f"({name}) gate.run.flow.run reported other numbers than the timed stage: {full.stage.get('metrics')}")
        self.summarise(res)

    def show(self, label: str, run: Run) -> None:
        n = run.sampled or 1
        noise, server = run.noise, run.server
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(server.get("kinds", {}).items())) or "none"
        print(f"  {label:<8} {run.wall:6.2f} s | sampled {run.sampled}, target calls {run.stage.get('target_calls')} "
              f"({run.stage.get('target_calls', 0) / n:.1f}/case) | judge calls {server['calls']} "
              f"({server['calls'] / n:.2f}/case; {kinds}) | stage usage {(run.stage.get('usage') or {}).get('calls', '-')} | "
              f"correctness cache hits {noise.get('cache_hits', '-')}, misses {noise.get('cache_misses', '-')} | "
              f"most in flight {server['max_in_flight']}")

    def check(self, res: Result, which: str, run: Run) -> None:
        name, stage, server = res.name, run.stage, run.server
        tag = f"({name} {which})"
        if server["unknown"] or server["failed"]:
            self.error(f"{tag} the judge saw {server['unknown']} unknown prompts and answered {server['failed']} with an error")
        errored = [s for s in stage.get("samples") or [] if s.get("error")]
        if errored:
            self.error(f"{tag} {len(errored)} sampled cases errored, e.g. {errored[0]['id']}: {errored[0]['error']}")
        if stage.get("status") == "skipped":
            self.error(f"{tag} the stage was skipped: {stage.get('reason')}")
        if name == "a" and server["calls"]:
            self.error(f"{tag} offline correctness made {server['calls']} judge calls")
        usage = (stage.get("usage") or {}).get("calls")
        if usage is not None and usage != server["calls"]:
            self.error(f"{tag} the stage's usage counts {usage} judge calls, the server saw {server['calls']}")
        if which == "warm":
            if run.noise.get("cache_misses"):
                self.error(f"{tag} {run.noise['cache_misses']} correctness cache misses on a warm cache")
            if run.kind_calls("distractor"):
                self.error(f"{tag} {run.kind_calls('distractor')} distractors generated again on a warm cache")
        ref = (res.cold or [run])[0]
        if run.fingerprint() != ref.fingerprint():
            self.error(f"{tag} not reproducible: metrics {stage.get('metrics')} vs {ref.stage.get('metrics')}")

    def summarise(self, res: Result) -> None:
        cold = res.cold[0]
        samples = cold.stage.get("samples") or []
        same = sum(1 for s in samples if s.get("clean_answer") is not None and s.get("clean_answer") == s.get("noisy_answer"))
        metrics = cold.stage.get("metrics", {})
        print("  metrics: " + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
        scores = sorted(s["metrics"]["clean_score"] for s in samples if "clean_score" in s.get("metrics", {}))
        if scores:
            mid = scores[len(scores) // 2]
            print(f"  clean correctness scores ({cold.noise.get('method')}, threshold {cold.noise.get('threshold')}): "
                  f"min {scores[0]:.2f}, median {mid:.2f}, max {scores[-1]:.2f}; "
                  f"{sum(v >= cold.noise.get('threshold', 0.5) for v in scores)} of {len(scores)} count as correct")
        misses = cold.noise.get("cache_misses")
        correctness = cold.kind_calls("correctness")
        if str(cold.noise.get("method", "")).startswith("offline"):
            res.notes.append(f"{same} of {len(samples)} cases gave the same clean and noisy answer")
        elif misses:
            res.notes.append(f"{correctness} correctness calls for {misses} judgements = {correctness / misses:.1f} per judgement; "
                             f"{same} of {len(samples)} cases gave the same clean and noisy answer: one cache key, judged "
                             f"twice on a cold run ({same * correctness // misses} calls)")
        distractors = cold.kind_calls("distractor")
        if distractors:
            res.notes.append(f"{distractors} distractor calls ({distractors / (cold.sampled or 1):.1f}/case, "
                             "k per case one after another), counted in the stage's usage")
        refusal_cold = cold.kind_calls("refusal")
        if refusal_cold or any(r.kind_calls("refusal") for r in res.warm):
            rows = (cold.stage.get("rejection") or {}).get("cases", [])
            by_judge = [r for r in rows if r.get("method") == "judge"]
            flipped = Counter(r.get("type") for r in by_judge if r.get("refused"))
            warm = min(r.kind_calls("refusal") for r in res.warm)
            res.notes.append(f"{refusal_cold} refusal classifications for {len(rows)} golden cases ({len(by_judge)} decided by the "
                             f"judge, {sum(flipped.values())} of them as refusals: "
                             f"{', '.join(f'{t} {n}' for t, n in sorted(flipped.items())) or 'none'}), "
                             f"{warm} again on a warm cache, counted in the stage's usage")
            for r in by_judge:
                if r.get("refused") and r.get("type") == "answerable":
                    print(f"  judge called an answerable case's answer a refusal: {r['id']}: {str(r.get('answer'))[:120]!r}")
        for n in res.notes:
            print(f"  note: {n}")

    def table(self) -> None:
        lat, conc = self.args.latency * 1000, self.args.concurrency
        print(f"\nsummary (best of {self.args.repeat}; judge latency {lat:.0f} ms, judge concurrency {conc}; "
              f"calls per case = per sampled case; ideal = judge calls x latency / concurrency)")
        head = (f"{'':2} {'configuration':<38} {'n':>3} {'tgt/case':>8} {'cold s':>7} {'judge':>6} {'/case':>6} "
                f"{'usage':>6} {'miss':>5} {'ideal s':>7} {'warm s':>7} {'judge':>6} {'/case':>6} {'miss':>5} {'run() s':>7}")
        print(head)
        print("-" * len(head))
        for r in self.results:
            cold, warm = r.best("cold"), r.best("warm")
            if cold is None:
                print(f"{r.name:2} {r.label:<38}  (did not run)")
                continue
            n = cold.sampled or 1
            cells = [
                f"{r.name:2}", f"{r.label:<38}", f"{cold.sampled:3d}", f"{cold.stage.get('target_calls', 0) / n:8.1f}",
                f"{cold.wall:7.2f}", f"{cold.server['calls']:6d}", f"{cold.server['calls'] / n:6.2f}",
                f"{(cold.stage.get('usage') or {}).get('calls', 0):6d}", f"{cold.noise.get('cache_misses', 0):5d}",
                f"{self.ideal(cold.server['calls']):7.2f}",
            ]
            if warm is not None:
                cells += [f"{warm.wall:7.2f}", f"{warm.server['calls']:6d}", f"{warm.server['calls'] / n:6.2f}",
                          f"{warm.noise.get('cache_misses', 0):5d}"]
            else:
                cells += [f"{'':>7}", f"{'':>6}", f"{'':>6}", f"{'':>5}"]
            cells.append(f"{r.run_wall:7.2f}" if r.run_wall is not None else f"{'':>7}")
            print(" ".join(cells))
        print("columns: n = sampled cases; tgt/case = the stage's target_calls / n; judge = calls the judge server saw "
              "(all kinds); usage = judge calls in the stage's usage (all kinds); miss = correctness cache misses; "
              "run() s = gate.run.flow.run with a warm cache (asks the target for all 40 cases first)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the judge waits before each answer")
    ap.add_argument("--concurrency", type=int, default=16, help="judge.concurrency")
    ap.add_argument("--sample", type=int, default=20, help="noise.sample.size")
    ap.add_argument("--target-concurrency", type=int, default=8, help="target.http.concurrency")
    ap.add_argument("--target-latency-ms", type=float, default=0.0, help="quickrag serve --latency-ms")
    ap.add_argument("--repeat", type=int, default=2, help="cold + warm runs per configuration (the best is reported)")
    ap.add_argument("--server", choices=("process", "thread"), default="process",
                    help="run the judge in a child process (default) or in a thread of this process")
    ap.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=sorted(CONFIGS), help="run only these")
    args = ap.parse_args()

    t_start = time.perf_counter()
    bench: Bench | None = None
    with tempfile.TemporaryDirectory(prefix="rag-gate-bench-robustness-") as tmp:
        folder = copy_quickstart(Path(tmp))
        home = os.getcwd()
        os.chdir(tmp)  # anything a library writes to ./ stays out of the repository
        try:
            with Judge(args.latency, args.server, _server_stats) as judge, quickrag_service(folder, args.target_latency_ms) as rag_url:
                bench = Bench(args, folder, rag_url, judge)
                print(f"quickstart copy {folder} | quickrag over HTTP at {rag_url} (latency {args.target_latency_ms:g} ms, "
                      f"target concurrency {args.target_concurrency}) | judge at {judge.url} ({args.server}, latency "
                      f"{args.latency * 1000:.0f} ms, concurrency {args.concurrency}) | sample {args.sample}, 2 distractors, "
                      f"repeat {args.repeat}")
                t0 = time.perf_counter()
                import ragas.metrics.collections  # noqa: F401

                import gate.judges.ragas_engine  # noqa: F401
                import gate.run.flow  # noqa: F401

                print(f"(importing ragas and the engine first, not timed below: {time.perf_counter() - t0:.2f} s)")
                for name in args.configs:
                    print(f"\n{name}. {CONFIGS[name][0]}")
                    try:
                        bench.one(name)
                    except Exception as exc:
                        traceback.print_exc()
                        bench.error(f"({name}) {type(exc).__name__}: {exc}")
                bench.table()
        finally:
            os.chdir(home)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if bench is None:
        return 1
    if bench.errors:
        print(f"{len(bench.errors)} error(s):")
        for e in bench.errors:
            print(f"  - {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
