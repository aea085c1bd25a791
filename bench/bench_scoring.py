"""How long rag-gate takes to score a large results file, and where the time goes.

Generates (in a temporary folder) a golden set of 10,000 cases, a results file with 20
retrieved passages per case (~200-character texts, scores), a baseline made from a slightly
different earlier run, and a spec with seven retrieval metrics and a few gates. Then:

  1. in-process: gate.run.flow.run(spec) + rendering (Markdown comment, JUnit XML, console) +
     json.dumps of the report, best of --repeat (default 5);
  2. the same work split into steps (spec, golden set, baseline, results file, scoring,
     gates/report, each renderer, JSON), each the best of --repeat;
  3. start-up: `python -m gate --version` and `python -c "import gate.run.flow"` against
     `python -c pass`, best of --repeat, plus the largest imports from `-X importtime`;
  4. the whole CLI run in a subprocess (what a CI job pays);
  5. that the LLM-judge libraries (ragas, deepeval) were never imported.

    python bench/bench_scoring.py [--cases 10000] [--docs 20] [--repeat 5] [--profile]

Exit status 1 if ragas/deepeval got imported or if the in-process work is not under 1 s.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

METRICS = ["hit_rate@5", "mrr", "recall@10", "precision@5", "ndcg@10", "map", "context_recall@5"]
GATES = {
    "hit_rate@5": {"min": 0.5, "max_drop": 0.02},
    "mrr": {"min": 0.3},
    "ndcg@10": {"max_drop": "3%"},
    "context_recall@5": {"max_drop": 0.03},
    "p95_latency_ms": {"max": 2000},
}
WORDS = ("library loan renewal card branch fee digital catalogue reserve return overdue member "
         "account holiday opening hours printing study room wifi accessibility children events").split()


def _text(rng: random.Random, n_chars: int = 200) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def generate(folder: Path, n_cases: int, n_docs: int, seed: int = 7) -> tuple[Path, Path]:
    """Golden set, results, an earlier run's results (for the baseline), two specs. Returns (spec, base_spec)."""
    rng = random.Random(seed)
    n_corpus = max(1000, n_cases * 3)
    golden, results, earlier = [], [], []
    for i in range(n_cases):
        n_rel = rng.choice((1, 1, 2, 3))
        rel = rng.sample(range(n_corpus), n_rel)
        relevant: Any = [f"doc{r}#chunk_{r % 5}" for r in rel]
        if i % 4 == 0:  # a quarter with graded relevance
            relevant = {d: rng.randint(1, 3) for d in relevant}
        golden.append({
            "id": f"case-{i:05d}",
            "question": f"Question {i}: {_text(rng, 60)}?",
            "ground_truth": _text(rng, 80),
            "relevant_doc_ids": relevant,
            "category": rng.choice(("lending", "accounts", "services", "events")),
            "tags": rng.sample(["faq", "badcase", "long", "multi-hop"], rng.randint(0, 2)),
        })
        for rows, shift in ((results, 0), (earlier, 1)):
            ids = [f"doc{rng.randrange(n_corpus)}#chunk_{rng.randrange(5)}" for _ in range(n_docs)]
            for r in rel:  # put the relevant passages somewhere in (or just outside) the list
                pos = rng.randrange(n_docs + 4)
                if pos < n_docs:
                    ids[max(0, pos - shift)] = f"doc{r}#chunk_{r % 5}"
            rows.append({
                "id": f"case-{i:05d}",
                "retrieved": [{"id": d, "text": _text(rng), "score": round(1 - j / n_docs, 4)} for j, d in enumerate(ids)],
                "answer": _text(rng, 150),
                "latency_ms": round(rng.uniform(80, 900), 1),
            })
    for name, rows in (("golden_set.jsonl", golden), ("results.jsonl", results), ("results_earlier.jsonl", earlier)):
        with (folder / name).open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")

    def spec(results_file: str) -> dict[str, Any]:
        return {
            "version": 1,
            "golden_set": "golden_set.jsonl",
            "target": {"results": results_file},
            "max_error_rate": 0,
            "baseline": {"path": "baseline.json"},
            "stages": {"retrieval": {"metrics": METRICS, "match": {"level": "exact"}, "gates": GATES}},
        }

    (folder / "rag-eval.yml").write_text(yaml.safe_dump(spec("results.jsonl"), sort_keys=False), encoding="utf-8")
    (folder / "rag-eval-earlier.yml").write_text(yaml.safe_dump(spec("results_earlier.jsonl"), sort_keys=False), encoding="utf-8")
    return folder / "rag-eval.yml", folder / "rag-eval-earlier.yml"


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def render_all(report: dict[str, Any]) -> tuple[str, str, str, str]:
    from gate.io.reports import report_json
    from gate.render.console import render_console
    from gate.render.junit import render_junit
    from gate.render.markdown import render_comment

    return render_comment(report), render_junit(report), render_console(report), report_json(report)


def steps(spec_path: Path, repeat: int) -> list[tuple[str, float]]:
    """The run split into its steps, each timed (best of ``repeat``)."""
    from gate.config.loader import load_spec
    from gate.io.golden import load_golden_set
    from gate.io.reports import read_baseline
    from gate.render.console import render_console
    from gate.render.junit import render_junit
    from gate.render.markdown import render_comment
    from gate.run.ask import collect_outputs
    from gate.run.context import RunFacts
    from gate.run.evaluate import evaluate
    from gate.targets.factory import make_target

    out: list[tuple[str, float]] = []
    t, spec = best_of(repeat, lambda: load_spec(spec_path))
    out.append(("load + validate spec", t))
    t, cases = best_of(repeat, lambda: load_golden_set(spec.golden_set_path))
    out.append((f"load golden set ({len(cases)} cases)", t))
    t, baseline = best_of(repeat, lambda: read_baseline(spec.baseline_path))
    out.append(("load baseline", t))
    t, target = best_of(repeat, lambda: make_target(spec, cases))
    out.append(("load results file", t))
    with target:
        t, outputs = best_of(repeat, lambda: collect_outputs(target, cases, spec.target_k))
    out.append(("collect outputs (ask target)", t))
    from gate.stages.retrieval import retrieval_stage

    settings = spec.stages.retrieval
    assert settings is not None
    t, _ = best_of(repeat, lambda: retrieval_stage(settings, cases, outputs))
    out.append(("  of which: score retrieval metrics", t))
    context = RunFacts(created_at="2026-01-01T00:00:00+00:00", baseline=baseline, target_kind=target.kind)
    t, report = best_of(repeat, lambda: evaluate(spec, cases, outputs, context))
    out.append(("evaluate (scores, breakdowns, gates, worse cases)", t))
    t, _ = best_of(repeat, lambda: render_comment(report))
    out.append(("render Markdown comment", t))
    t, _ = best_of(repeat, lambda: render_junit(report))
    out.append(("render JUnit XML", t))
    t, _ = best_of(repeat, lambda: render_console(report))
    out.append(("render console", t))
    from gate.io.reports import report_json

    t, text = best_of(repeat, lambda: report_json(report))
    out.append((f"report.json text ({len(text) / 1e6:.1f} MB)", t))
    return out


def wall(cmd: list[str], repeat: int, cwd: Path | None = None) -> float:
    def once() -> None:
        subprocess.run(cmd, cwd=cwd, check=False, capture_output=True)
    return best_of(repeat, once)[0]


def import_times(module: str, top: int = 8) -> tuple[float, list[tuple[float, str]]]:
    """Total (s) and the largest cumulative imports (s, name) of ``import module``, from -X importtime."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)", line)
        if m:  # one space before a top-level import, two more per level of nesting
            rows.append((int(m.group(2)) / 1e6, (len(m.group(3)) - 1) // 2 + 1, m.group(4)))
    total = sum(cum for cum, depth, _ in rows if depth == 1)
    # the biggest imports down to three levels deep (gate.run.flow > gate.run.context > gate.run.load), where a fix would go
    largest = sorted(((cum, ("  " * (depth - 1)) + name) for cum, depth, name in rows if depth <= 3), reverse=True)[:top]
    return total, largest


def size_args(description: str, profile_help: str) -> argparse.Namespace:
    """--cases, --docs, --repeat and --profile: the options of this benchmark and of bench_vs_trec.py."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help=profile_help)
    return ap.parse_args()


def main() -> int:
    args = size_args(__doc__.split("\n\n")[0], "also print the top functions of one run (cProfile)")

    with tempfile.TemporaryDirectory(prefix="rag-gate-bench-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        spec, base_spec = generate(folder, args.cases, args.docs)
        size = (folder / "results.jsonl").stat().st_size
        print(f"generated {args.cases} cases x {args.docs} passages in {time.perf_counter() - t0:.1f} s "
              f"(results.jsonl {size / 1e6:.1f} MB) in {folder}")

        t_import0 = time.perf_counter()
        from gate.core.records import baseline_from_report
        from gate.run.flow import run
        t_import = time.perf_counter() - t_import0

        # the baseline: an earlier run over slightly different results, so worse_cases has work to do
        earlier = run(str(base_spec))
        baseline = baseline_from_report(earlier, created_at=earlier["run"]["created_at"], tool_version=earlier["tool"]["version"])
        (folder / "baseline.json").write_text(json.dumps(baseline), encoding="utf-8")

        def work() -> tuple[dict[str, Any], tuple[str, str, str, str]]:
            report = run(str(spec))
            return report, render_all(report)

        t_total, (report, rendered) = best_of(args.repeat, work)
        stage = report["stages"]["retrieval"]
        print()
        print(f"in-process: run + render + json.dumps, best of {args.repeat}: {t_total:.3f} s "
              f"({args.cases / t_total:,.0f} cases/s)")
        print(f"  verdict {report['verdict']}, n={stage['n']}, {len(stage['worse_cases'])} cases worse than the baseline, "
              f"gates: " + ", ".join(f"{g['metric']}={g['status']}" for g in stage["gates"]))
        print("  metrics: " + ", ".join(f"{m}={v:.4f}" for m, v in stage["metrics"].items() if m in METRICS))
        print(f"  outputs: comment {len(rendered[0]) / 1e3:.1f} kB, junit {len(rendered[1]) / 1e3:.1f} kB, "
              f"console {len(rendered[2]) / 1e3:.1f} kB, report.json {len(rendered[3]) / 1e6:.1f} MB")
        print(f"  (first import of gate.run.flow in this process: {t_import:.3f} s, not included)")

        print()
        print(f"breakdown (each step best of {args.repeat}):")
        parts = steps(spec, args.repeat)
        width = max(len(name) for name, _ in parts)
        for name, t in parts:
            print(f"  {name:<{width}}  {t:7.3f} s")
        print(f"  {'sum of the top-level steps':<{width}}  {sum(t for n, t in parts if not n.startswith(' ')):7.3f} s")

        # what-if figures for the two largest avoidable costs (nothing in gate/ is changed)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            t_nogc, _ = best_of(args.repeat, work)
        finally:
            if gc_was:
                gc.enable()
        t_compact, _ = best_of(args.repeat, lambda: json.dumps(report, ensure_ascii=False))
        t_indent, _ = best_of(args.repeat, lambda: json.dumps(report, indent=2, ensure_ascii=False))
        print()
        print("what-if (for context):")
        print(f"  the same work with the cyclic GC disabled: {t_nogc:.3f} s "
              f"(GC costs {t_total - t_nogc:.3f} s: millions of parsed-JSON objects are live)")
        print(f"  json.dumps(report) without indent (C encoder): {t_compact:.3f} s vs indent=2 (pure-Python encoder): {t_indent:.3f} s")

        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            work()
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
            print()
            print("cProfile, one run + render, top 15 by own time:")
            print("\n".join("  " + line for line in buf.getvalue().splitlines() if line.strip())[:6000])

        heavy = sorted(m for m in ("ragas", "deepeval", "openai", "langchain", "numpy", "pandas", "requests", "tqdm")
                       if m in sys.modules)
        judge_loaded = [m for m in ("ragas", "deepeval") if m in sys.modules]
        print()
        print(f"ragas in sys.modules: {'ragas' in sys.modules}; deepeval in sys.modules: {'deepeval' in sys.modules}")
        print(f"other heavy modules loaded in this process: {', '.join(heavy) or 'none'}")

        print()
        print(f"start-up (subprocess wall time, best of {args.repeat}):")
        py = wall([sys.executable, "-c", "pass"], args.repeat)
        ver = wall([sys.executable, "-m", "gate", "--version"], args.repeat)
        imp = wall([sys.executable, "-c", "import gate.run.flow, gate.render.markdown, gate.render.junit, gate.render.console"], args.repeat)
        print(f"  python -c pass                  {py:6.3f} s")
        print(f"  python -m gate --version        {ver:6.3f} s  (+{ver - py:.3f} s over bare Python)")
        print(f"  python -c 'import gate.run.flow ...' {imp:6.3f} s  (+{imp - py:.3f} s: what a real run imports)")
        for module in ("gate.cli.main", "gate.run.flow"):
            total, largest = import_times(module)
            print(f"  -X importtime 'import {module}': {total:.3f} s; largest:")
            for cum, name in largest:
                print(f"      {cum:6.3f} s  {name}")

        cli = [sys.executable, "-m", "gate", "run", "--config", str(spec), "--report", str(folder / "report.json"),
               "--markdown", str(folder / "comment.md"), "--junit", str(folder / "junit.xml"), "--no-progress", "--quiet"]
        t_cli = wall(cli, max(1, args.repeat // 2 + 1))
        print()
        print(f"whole CLI run (subprocess, writes report.json/comment.md/junit.xml): {t_cli:.3f} s, "
              f"{t_cli - py:.3f} s beyond bare Python start-up ({args.cases / t_cli:,.0f} cases/s)")

        ok = True
        if judge_loaded:
            print(f"FAIL: {', '.join(judge_loaded)} imported by a retrieval-only run")
            ok = False
        if t_total >= 1.0:
            print(f"NOTE: the in-process work took {t_total:.3f} s, not under the 1 s target; see the breakdown")
            ok = False
        else:
            print(f"OK: in-process work {t_total:.3f} s (< 1 s); ragas/deepeval not imported")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
