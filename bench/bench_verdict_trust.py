"""False alarms and detection of judge-metric gates: the seed's rule vs rag-gate's real gate code.

A simulated world (N cases with true faithfulness ~ Beta(7, 1.05);
a judge call returns the truth plus Gaussian noise, clipped to [0, 1]) and decides every
trial twice:

  seed rule   a new random sample of S cases per run; alarm if the mean drops more than
              0.03 below the last default-branch run (R1) or below the mean of the last 7 (R2).
  rag-gate    the real code: a fixed sample (gate.core.sampling.select_sample, same seed every run),
              the real judge cache (gate.judges.cache.JudgeCache on a SQLite file: an output
              that did not change is not judged again), the history window of 7 default-branch
              entries with per-case scores, and the real trend gate
              (gate.core.verdict.decide_gates with {trend: {window: 7, max_drop: 0.03}}), which runs
              the paired bootstrap when per-case scores exist.

Scenarios: no change (false alarms), a 5-point drop on every case, a 15-point drop on a third
of the cases; and "stochastic generator": nothing regressed but every answer text changed,
so every case is judged again (the worst case for the cache).

    python bench/bench_verdict_trust.py [--trials 200] [--sigma 0.05 0.10]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

from gate.core.model import GoldenCase
from gate.core.sampling import select_sample
from gate.core.verdict import StageReferences, decide_gates
from gate.judges import JudgeInput
from gate.judges.cache import JudgeCache

GATE = {"faithfulness": {"trend": {"window": 7, "max_drop": 0.03}}}


def truth(rng: random.Random) -> float:
    return min(1.0, max(0.0, rng.betavariate(7, 1.05)))


def judge(rng: random.Random, f: float, sigma: float) -> float:
    return min(1.0, max(0.0, f + rng.gauss(0, sigma)))


def seed_rule(rng: random.Random, f: list[float], g: list[float], n_sample: int, sigma: float, window: int) -> bool:
    hist = [statistics.fmean(judge(rng, f[i], sigma) for i in rng.sample(range(len(f)), n_sample)) for _ in range(7)]
    head = statistics.fmean(judge(rng, g[i], sigma) for i in rng.sample(range(len(g)), n_sample))
    base = hist[-1] if window == 1 else statistics.fmean(hist)
    return base - head > 0.03


class RagGate:
    """rag-gate's side of a trial: real sampling, real cache, real trend gate."""

    def __init__(self, folder: Path, n_cases: int, n_sample: int | str) -> None:
        self.cases = [GoldenCase(id=f"c{i:03d}", question=f"q{i}", line=i + 1) for i in range(n_cases)]
        self.sample = select_sample(self.cases, n_sample, seed=7)
        self.folder = folder
        self.trial = 0
        self.judge_calls = 0

    def scores(self, cache: JudgeCache, rng: random.Random, truth_of: list[float], version: dict[int, int], sigma: float) -> dict[str, float]:
        """One run: judge each sampled case unless its (unchanged) output is in the cache."""
        out = {}
        for case in self.sample:
            i = int(case.id[1:])
            item = JudgeInput(question=case.question, answer=f"answer {i} v{version.get(i, 0)}")
            key = cache.key("sim", "1", "faithfulness", "judge-2024-01-01", 0.0, "prompt", item)
            hit = cache.get(key)
            if hit is None:
                hit = judge(rng, truth_of[i], sigma)
                self.judge_calls += 1
                cache.put(key, hit, {})
            out[case.id] = hit
        return out

    def alarm(self, rng: random.Random, f: list[float], g: list[float], changed: set[int], sigma: float, all_change: bool) -> bool:
        self.trial += 1
        cache = JudgeCache(self.folder / f"cache-{self.trial}.sqlite")
        history = []
        for run in range(7):  # default-branch runs; a stochastic generator changes every answer every run
            version = {i: run for i in range(len(f))} if all_change else {}
            s = self.scores(cache, rng, f, version, sigma)
            history.append({"stages": {"generation": {"metrics": {"faithfulness": statistics.fmean(s.values())}, "samples": [
                {"id": cid, "metrics": {"faithfulness": v}} for cid, v in s.items()]}}})
        version = {i: 100 for i in range(len(f))} if all_change else {i: 1 for i in changed}
        head = self.scores(cache, rng, g, version, sigma)
        stage = {"metrics": {"faithfulness": statistics.fmean(head.values())}, "not_evaluated": {}, "warnings": [],
                 "samples": [{"id": cid, "metrics": {"faithfulness": v}} for cid, v in head.items()]}
        cache.close()
        decision = decide_gates("generation", stage, GATE, StageReferences(history=history))[0]
        return decision.status == "fail"


def rates(args: argparse.Namespace, sigma: float, folder: Path) -> dict[str, dict[str, float]]:
    scenarios = {"no change": (0.0, 0.0, False), "-0.05 on all": (0.05, 1.0, False), "-0.15 on 1/3": (0.15, 1 / 3, False),
                 "no change, all re-judged": (0.0, 0.0, True)}
    rules = {"seed R1 (random 40, vs last run)": None, "seed R2 (random 40, vs 7-run mean)": None,
             "rag-gate (fixed 40 + cache + paired)": RagGate(folder, args.cases, 40),
             "rag-gate (all 150 + cache + paired)": RagGate(folder, args.cases, "all")}
    out: dict[str, dict[str, float]] = {r: {} for r in rules}
    for scen, (delta, share, all_change) in scenarios.items():
        for rule, gate in rules.items():
            rng = random.Random(zlib.crc32(f"{scen}|{rule}|{sigma}".encode()))
            alarms = 0
            for _ in range(args.trials):
                f = [truth(rng) for _ in range(args.cases)]
                changed = set(rng.sample(range(args.cases), int(share * args.cases))) if delta > 0 else set()
                g = [max(0.0, x - delta) if i in changed else x for i, x in enumerate(f)]
                if gate is None:  # the seed rule judges a fresh random sample every run: changed text or not
                    alarms += seed_rule(rng, f, g, 40, sigma, 1 if "R1" in rule else 7)
                else:
                    alarms += gate.alarm(rng, f, g, changed, sigma, all_change)
            out[rule][scen] = alarms / args.trials
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--cases", type=int, default=150)
    ap.add_argument("--sigma", type=float, nargs="+", default=[0.05, 0.10])
    args = ap.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rag-gate-trust-") as tmp:
        for sigma in args.sigma:
            table = rates(args, sigma, Path(tmp))
            print(f"\njudge noise sigma={sigma}; N={args.cases} cases; {args.trials} trials per cell; gate max_drop 0.03, window 7")
            scen = list(next(iter(table.values())))
            print(f"{'rule':40}" + "".join(f"{s:>26}" for s in scen))
            print(f"{'':40}" + "".join(f"{'(false alarm)' if 'no change' in s else '(detection)':>26}" for s in scen))
            for rule, row in table.items():
                print(f"{rule:40}" + "".join(f"{row[s]:>26.3f}" for s in scen))
            sys.stdout.flush()
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
