"""What the answer checks cost: a retrieval-only run against the same run with every case's expected keywords and
the answer checks scored (no model).

Generates (in a temporary folder, as bench_scoring.py does) 10,000 cases with a results file of 20 passages and an
answer per case; every case gets three expected keywords (one of them two words) and the spec's checks
(must_contain, must_not_contain, regex, max_words, max_chars) apply to every answer, a tenth of the cases add a
check of their own. Then, best of --repeat each:

  1. the retrieval-only run in-process (gate.run.flow.run, the report built);
  2. the same run with the generation stage holding only the answer checks (1 and 2 interleaved);
  3. the answer checks alone (gate.stages.answers.answer_checks over the outputs).

Prints the CPU seconds of each and what the checks add (2 - 1): the difference of the best runs (a run is never faster
than its work, only slower when the machine is busy, so the best of each side is the least disturbed figure), and the
median and range of the pairs' differences (the runs go in pairs, without checks then with them, so both runs of a
pair see the same machine). Exit status 1 when the difference of the best runs is more than --budget seconds
(default 0.3) or when an LLM-judge library was imported.

    python bench/bench_answers.py [--cases 10000] [--repeat 7] [--budget 0.3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from bench_scoring import WORDS, _text, generate  # run as a script, bench/ is on sys.path


def timed(fn: Callable[[], Any]) -> float:
    """CPU seconds ``fn`` takes (the process's: a neighbour on a shared machine moves wall time, much less this), what
    it returns dropped before the clock stops."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def with_checks(folder: Path, spec_path: Path, seed: int = 11) -> Path:
    """The golden set with keywords (and a tenth with checks of their own), and a spec that gates the answer checks."""
    rng = random.Random(seed)
    golden = folder / "golden_set.jsonl"
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines() if line]
    answers = {json.loads(line)["id"]: json.loads(line)["answer"] for line in (folder / "results.jsonl").read_text().splitlines() if line}
    for i, row in enumerate(rows):
        words = answers[row["id"]].split()
        start = rng.randrange(max(1, len(words) - 2))
        row["expected_keywords"] = [" ".join(words[start:start + 2]), rng.choice(WORDS), _text(rng, 12).split()[0]]
        if i % 10 == 0:
            row["checks"] = {"must_contain": [words[0]], "max_words": 40}
    (folder / "golden_checked.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    spec["golden_set"] = "golden_checked.jsonl"
    spec["stages"]["generation"] = {
        "metrics": [],
        "checks": {"must_contain": [], "must_not_contain": ["as an ai", "contact support"], "regex": r"\w+", "max_words": 200,
                   "max_chars": 2000},
        "gates": {"keyword_coverage": {"min": 0.1}, "check_pass_rate": {"min": 0.5}},
    }
    out = folder / "rag-eval-checks.yml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return out


def run_once(spec: Path) -> dict[str, Any]:
    from gate.run.flow import run
    from gate.run.options import RunOptions

    return run(str(spec), RunOptions(now=lambda: "2026-12-01T00:00:00+00:00"))  # type: ignore[return-value]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--budget", type=float, default=0.3, help="most seconds the answer checks may add (default 0.3)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec, _ = generate(folder, args.cases, 20)
        checked = with_checks(folder, spec)
        plain, checks = [], []
        for _ in range(args.repeat):  # in pairs, no report kept alive across runs: both runs of a pair see the same machine
            plain.append(timed(lambda: run_once(spec)))
            checks.append(timed(lambda: run_once(checked)))
        added_each = sorted(c - p for p, c in zip(plain, checks, strict=True))
        plain_s, checks_s = min(plain), min(checks)
        gen = run_once(checked)["stages"]["generation"]
        assert gen["checks"]["keywords"] == args.cases, gen.get("checks", {}).get("keywords")

        from gate.config.loader import load_spec
        from gate.io.golden import load_golden_set
        from gate.run.ask import collect_outputs
        from gate.stages.answers import answer_checks
        from gate.targets.factory import make_target

        loaded = load_spec(checked)
        cases = load_golden_set(loaded.golden_set_path)
        with make_target(loaded, cases) as target:
            outputs = collect_outputs(target, cases, loaded.target_k)
        settings = loaded.stages.generation
        assert settings is not None
        alone_s = min(timed(lambda: answer_checks(settings.checks, cases, outputs, loaded.golden_set_path.parent))
                      for _ in range(args.repeat))
    judged = sorted(m for m in ("ragas", "deepeval") if m in sys.modules)
    added = checks_s - plain_s
    print(f"{args.cases:,} cases, CPU seconds, {args.repeat} pairs of runs")
    print(f"  retrieval-only run (best)                  {plain_s:7.3f} s")
    print(f"  the same run with keywords and checks      {checks_s:7.3f} s")
    print(f"  the answer checks alone                    {alone_s:7.3f} s")
    print(f"  added by the answer checks (best - best)   {added:7.3f} s (budget {args.budget} s)")
    print(f"  the pairs' differences                     median {statistics.median(added_each):.3f} s, from "
          f"{added_each[0]:.3f} to {added_each[-1]:.3f}")
    print(f"  keyword_coverage {gen['metrics']['keyword_coverage']:.4f}, check_pass_rate {gen['metrics']['check_pass_rate']:.4f}, "
          f"{len(gen['checks']['cases'])} cases with a finding")
    print(f"  LLM-judge libraries imported: {', '.join(judged) or 'none'}")
    return 1 if judged or added > args.budget else 0


if __name__ == "__main__":
    raise SystemExit(main())
