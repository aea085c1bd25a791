"""False alarms and detection of judge-metric gates: the fresh-sample rules, the old rule (stored scores) and the new rule
(same-run pairs), the last two through rag-gate's real generation stage, cache and gates.

A simulated world: N cases with a true faithfulness each (~ Beta(7, 1.05)); a simulated judge engine (the Engine
protocol of gate.judges, named "ragas" so that engine_metrics gives it "faithfulness") scores an answer text from the
world's noise model. Answer texts carry the case and a version ("answer 12 v3"), so a reworded or changed answer is a
changed judge input, and an unchanged one is a cache hit. Each trial: 7 default-branch runs, one a week, each a real
``generation_stage`` on a real SQLite ``JudgeCache`` (an unchanged answer reuses the score of the first run that judged
it), recorded with gate.core.records (history entries; the baseline is the last run's); then the pull request's run,
once per rule on a copy of that cache:

  seed R1 / R2  the fresh-sample rules: a new random sample of 40 cases judged afresh every run; alarm when the PR's mean is
                more than 0.03 below the last run's (R1, like max_drop) or the mean of the last 7 runs' (R2, like trend).
  old rule      references that kept no answers (as an older rag-gate wrote them: pairing method "stored scores"):
                decide_gates compares this run's per-case scores with the baseline's stored scores (max_drop) or the
                window's per-case means (trend) in a paired bootstrap; method "paired bootstrap".
  new rule      gate.run.measure.paired_runs on the full documents (the baseline; the oldest entry of the window):
                the stage pairs every case, unchanged answers give a delta of exactly 0, changed ones have the
                reference's answer judged again in this run; method "same-run pairs".

Gates: faithfulness {max_drop: 0.03, trend: {window: 7, max_drop: 0.03}} (confidence 0.99, min_pairs 10); world 8
adds case_drop 0.5. Both checks of one decision are read apart: "max_drop" (vs the baseline) and "trend".

Worlds (noise models; sigma = the per-call judge noise, --sigma):
  1   independent judge noise per call, N(0, sigma)
  2   + a per-case persistent bias N(0, 0.05), the same in every run
  3   claim fractions: each answer has 2-6 claims; each call finds each claim supported with probability = the truth
  4   + a run-level offset N(0, 0.02) shared by every call of one run
  5a  a drifting judge: 0.01 harsher every week (the run w weeks ago was judged 0.01*w more leniently than today)
  5b  the other way: 0.01 more lenient every week (offset -0.01*w for the run w weeks ago)
  6a  a stochastic generator: every answer reworded in every run (same truth), sigma
  6b  the same at sigma 0.10
  7   the PR adds 5 cases to the golden set (truth ~ Beta(3, 2)); 155 cases, so the sample of 150 moves too
  8   the PR changes only 3 answers; in the detection scenario one of them loses 0.6 (case_drop 0.5)
  8c  world 8 under the claim-fraction noise of world 3
Scenarios: "same" (the PR's answers are the base's: false alarm), "reworded" (every answer reworded, same quality:
false alarm), "-0.05 all" (every answer reworded and 0.05 worse), "-0.15 on 1/3" (a third of the answers 0.15 worse,
the rest unchanged); world 8: "3 reworded" (false alarm) and "3 changed, one -0.6".
When the new rule misses the goal (<= 1 % false alarms, >= 95 % detection of -0.05 on every case; world 8: of the
-0.6 answer) at the default setting (150 cases, every case judged), the settings of FIXES are measured too, new rule
only: more cases, a lower case_drop, or each side judged 2 or 4 times. Judging each side several times is not an
option of rag-gate: the simulated engine then returns the mean of that many calls (each counted), labelled
"hypothetical". Judge calls are the simulated engine's calls during the PR run only.

The default-branch runs pass no references (paired_runs) to the stage: in these worlds what they would re-judge
changes no stored score and no PR decision, and it would only cost time.

    python bench/bench_verdict_trust.py [--trials 300] [--quick] [--sigma 0.05] [--worlds 1 3 5] [--jobs 2] [--no-fixes]
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gate.config.loader import filled
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.records import baseline_from_report, entry_from_report
from gate.core.settings import GenerationSettings, MatchSettings, StageSettings
from gate.core.verdict import CompareWith, decide_gates
from gate.deadline import NO_DEADLINE
from gate.judges import JudgeInput, JudgeSettings, resolve_judge
from gate.judges.cache import JudgeCache
from gate.run.load import Loaded
from gate.run.measure import paired_runs
from gate.stages.context import StageContext
from gate.stages.generation import generation_stage

JUDGE = {"base_url": "http://127.0.0.1:9/v1", "model": "sim-2024-01-01"}  # resolve_judge needs both; no call leaves the process
WINDOW = 7  # history runs, one a week; the trend window
SEED_SAMPLE = 40  # a fresh random sample per run
THRESHOLD = 0.03
FA_GOAL, DET_GOAL = 0.01, 0.95

STANDARD = ("same", "reworded", "-0.05 all", "-0.15 on 1/3")
FEW = ("3 reworded", "3 changed, one -0.6")
DETECTION = {"-0.05 all", "-0.15 on 1/3", "3 changed, one -0.6"}
GOAL_SCENARIO = "-0.05 all"


@dataclass(frozen=True)
class World:
    key: str
    title: str
    claims: bool = False  # claim-fraction scores instead of truth + Gaussian noise
    case_bias: float = 0.0  # sd of a per-case offset, the same in every run
    run_offset: float = 0.0  # sd of an offset shared by every call of one run
    drift: float = 0.0  # change of the judge's offset per week (-0.01: 0.01 harsher every week)
    reword_every_run: bool = False  # a stochastic generator
    sigma: float | None = None  # per-call noise; None: --sigma
    added: int = 0  # cases the PR adds to the golden set
    case_drop: float | None = None
    scenarios: tuple[str, ...] = STANDARD


WORLDS = [
    World("1", "independent judge noise per call"),
    World("2", "per-case persistent judge bias N(0, 0.05) + per-call noise", case_bias=0.05),
    World("3", "claim fractions (2-6 claims, each supported with p = truth); no Gaussian noise", claims=True),
    World("4", "run-level offset N(0, 0.02) shared by every call of a run + per-call noise", run_offset=0.02),
    World("5a", "judge drifts 0.01 harsher every week (run w weeks ago judged +0.01*w) + per-call noise", drift=-0.01),
    World("5b", "judge drifts 0.01 more lenient every week (run w weeks ago judged -0.01*w) + per-call noise", drift=0.01),
    World("6a", "stochastic generator: every answer reworded every run, same truth", reword_every_run=True,
          scenarios=("same", "-0.05 all", "-0.15 on 1/3")),
    World("6b", "stochastic generator: every answer reworded every run, same truth", reword_every_run=True, sigma=0.10,
          scenarios=("same", "-0.05 all", "-0.15 on 1/3")),
    World("7", "the PR adds 5 cases to the golden set (truth ~ Beta(3, 2)) + per-call noise", added=5),
    World("8", "the PR changes 3 answers; one of them -0.6 in the detection scenario (case_drop 0.5)", case_drop=0.5, scenarios=FEW),
    World("8c", "world 8 under claim-fraction noise (case_drop 0.5)", claims=True, case_drop=0.5, scenarios=FEW),
]


@dataclass(frozen=True)
class Setting:
    """How rag-gate is set up: cases in the golden set (all judged), judgings averaged per score (1: rag-gate as it
    is; 2: hypothetical), the gate's confidence."""

    cases: int = 150
    repeats: int = 1
    confidence: float = 0.99
    case_drop: float | None = None  # None: the world's
    label: str = "default"


# settings to try when a world misses the goal at the default one (the first that meets it is enough to read)
TWICE = "each side judged twice (hypothetical)"
FIXES = {
    "3": [Setting(450, label="450 cases"), Setting(600, label="600 cases"), Setting(150, 2, label=f"150 cases, {TWICE}"),
          Setting(150, 4, label="150 cases, each side judged 4 times (hypothetical)")],
    "6b": [Setting(200, label="200 cases"), Setting(150, 2, label=f"150 cases, {TWICE}")],
    "8": [Setting(case_drop=0.4, label="case_drop 0.4")],
    "8c": [Setting(case_drop=0.4, label="case_drop 0.4"), Setting(repeats=2, case_drop=0.4, label=f"case_drop 0.4, {TWICE}"),
           Setting(repeats=4, label="case_drop 0.5, each side judged 4 times (hypothetical)")],
}


# ------------------------------------------------------------------------------------------ the simulated judge


@dataclass(frozen=True)
class Answer:
    case: int
    truth: float
    claims: int


@dataclass
class Truths:
    """One trial's world: every answer text written so far, and the per-case judge bias."""

    bias: list[float]
    answers: dict[str, Answer] = field(default_factory=dict)

    def write(self, rng: random.Random, case: int, version: str, truth: float) -> str:
        text = f"answer {case} v{version}"
        if text not in self.answers:
            self.answers[text] = Answer(case, min(1.0, max(0.0, truth)), rng.randint(2, 6))
        return text


class RunJudge:
    """The judge of one run: the world's noise model, the run's offset, its own random stream, a call counter."""

    def __init__(self, world: World, sigma: float, truths: Truths, offset: float, seed: int, repeats: int) -> None:
        self.world, self.sigma, self.truths, self.offset, self.repeats = world, sigma, truths, offset, repeats
        self.rng = random.Random(seed)
        self.calls = 0

    def once(self, answer: Answer) -> float:
        self.calls += 1
        p = answer.truth + self.truths.bias[answer.case] + self.offset
        if self.world.claims:
            p = min(1.0, max(0.0, p))
            return sum(self.rng.random() < p for _ in range(answer.claims)) / answer.claims
        return min(1.0, max(0.0, p + self.rng.gauss(0.0, self.sigma)))

    def score(self, text: str) -> float:
        answer = self.truths.answers[text]
        return math.fsum(self.once(answer) for _ in range(self.repeats)) / self.repeats

    def factory(self, names: set[str], settings: Any, criteria: dict[str, str], cache: Any = None) -> tuple[dict[str, Any], None]:
        """An engine factory for the stage's context (StageContext.engines): the simulated engine under every name asked
        for, no client."""
        return {name: SimEngine(name, self) for name in names}, None


class SimEngine:
    """gate.judges.Engine: a judge that reads only the answer text and returns the world's score for it."""

    version = "sim-1"  # the provider drifts behind an unchanged model name: the cache keys do not change

    def __init__(self, name: str, judge: RunJudge) -> None:
        self.name, self.judge = name, judge

    def metrics(self) -> set[str]:
        return {"faithfulness"}

    def needs(self, metric: str) -> set[str]:
        return {"contexts"}

    def prompt_fingerprint(self, metric: str) -> str:
        return "sim-faithfulness-v1"

    async def score(self, metric: str, item: JudgeInput) -> float:
        return self.judge.score(item.answer)

    async def aclose(self) -> None:
        return None


# ------------------------------------------------------------------------------------------ one trial


class _Spec:
    """What gate.run.measure.paired_runs reads of a spec (through gate.run.load.Loaded): the stages' gates and
    history.max_entries."""

    def __init__(self, settings: GenerationSettings) -> None:
        match = MatchSettings.read(filled("$defs/retrieval_stage/properties/match", {}))
        self.stages = StageSettings(retrieval=None, generation=settings, robustness=None, match=match)
        self.data = {"history": filled("properties/history", {})}


def judge_settings() -> JudgeSettings:
    settings, why_not = resolve_judge(filled("properties/judge", JUDGE), {})
    assert settings is not None, why_not
    return settings


def stage_of(settings: GenerationSettings, cases: list[GoldenCase], outputs: dict[str, TargetOutput], cache: JudgeCache,
             judge: RunJudge, paired: Any = ()) -> dict[str, Any]:
    """A real generation_stage with the simulated engine (through the context's engine factory)."""
    ctx = StageContext(cases, outputs, cache, judge=judge_settings(), engines=judge.factory)
    return dict(generation_stage(settings, ctx, paired))


def golden(n: int) -> list[GoldenCase]:
    return [GoldenCase(id=f"c{i:03d}", question=f"q{i}", line=i + 1, ground_truth=f"t{i}") for i in range(n)]


def outputs_of(answers: Mapping[int, str]) -> dict[str, TargetOutput]:
    return {f"c{i:03d}": TargetOutput(case_id=f"c{i:03d}", retrieved=[RetrievedDoc(f"d{i}", text=f"passage {i}")], answer=text,
                                      contexts=[f"passage {i}"]) for i, text in answers.items()}


def report_of(stage: Mapping[str, Any], week: int) -> dict[str, Any]:
    """A report-like document for gate.core.records (as `rag-gate baseline update` and the history append see one)."""
    when = (datetime(2026, 3, 1, tzinfo=UTC) - timedelta(weeks=week)).isoformat()
    return {"run": {"created_at": when, "commit": f"{week:040x}"}, "verdict": "pass",
            "fingerprints": {}, "stages": {"generation": {**stage, "status": "pass", "gates": []}}, "texts": stage["texts"]}


def stripped(doc: dict[str, Any]) -> dict[str, Any]:
    """A document as an older rag-gate wrote it: per-case scores, no answers."""
    doc = copy.deepcopy(doc)
    doc.pop("texts", None)
    for s in doc["stages"]["generation"].get("samples", []):
        s.pop("output", None)
    return doc


def checks_of(decision: Any) -> dict[str, tuple[str, str]]:
    return {c.kind: (c.status, c.method) for c in decision.checks}


def pr_answers(scenario: str, rng: random.Random, truths: Truths, truth: list[float], base: Mapping[int, str],
               reword: bool) -> dict[int, str]:
    """The PR's answers: the base's, with a new version where the scenario (or a stochastic generator) rewrites one.
    The version names the change, so one text always has one truth."""
    n = len(truth)

    def write(i: int, delta: float) -> str:
        return truths.write(rng, i, f"pr{-delta:+g}", truth[i] - delta)

    out = {i: write(i, 0.0) for i in range(n)} if reword or scenario == "reworded" else dict(base)
    if scenario == "-0.05 all":
        out = {i: write(i, 0.05) for i in range(n)}
    elif scenario == "-0.15 on 1/3":
        for i in rng.sample(range(n), n // 3):
            out[i] = write(i, 0.15)
    elif scenario in FEW:
        first = rng.choice([i for i in range(n) if truth[i] >= 0.65])  # a case that can lose 0.6
        for j, i in enumerate([first, *rng.sample([i for i in range(n) if i != first], 2)]):
            out[i] = write(i, 0.6 if j == 0 and scenario == "3 changed, one -0.6" else 0.0)
    return out


def trial(world: World, setting: Setting, sigma: float, index: int, folder: str,
          rules: tuple[str, ...] = ("old", "new")) -> dict[str, dict[str, Any]]:
    """One trial of a world: a shared history, then every scenario's PR under each rule. Scenario -> outcome."""
    seed = zlib.crc32(f"{world.key}|{setting}|{sigma}|{index}".encode())
    rng = random.Random(seed)
    n = setting.cases
    truth = [rng.betavariate(7, 1.05) for _ in range(n)]
    truths = Truths([rng.gauss(0.0, world.case_bias) if world.case_bias else 0.0 for _ in range(n + world.added)])
    extra = [rng.betavariate(3, 2) for _ in range(world.added)]
    gates: dict[str, Any] = {"max_drop": THRESHOLD, "trend": {"window": WINDOW, "max_drop": THRESHOLD}, "confidence": setting.confidence}
    case_drop = setting.case_drop if setting.case_drop is not None else world.case_drop
    if case_drop is not None:
        gates["case_drop"] = case_drop
    cfg = {"metrics": ["faithfulness"], "gates": {"faithfulness": gates}, "sample": {"size": max(150, n)}}
    settings = GenerationSettings.read(filled("$defs/generation_stage", cfg))
    run_offsets = [rng.gauss(0.0, world.run_offset) if world.run_offset else 0.0 for _ in range(WINDOW + 1)]

    def judge_of(weeks_ago: int, stream: str) -> RunJudge:
        offset = run_offsets[WINDOW - weeks_ago] - world.drift * weeks_ago  # drift: offset(now) - offset(then) = drift * weeks
        return RunJudge(world, sigma, truths, offset, zlib.crc32(f"{seed}|{weeks_ago}|{stream}".encode()), setting.repeats)

    # the default branch: 7 weekly runs, real stage, real cache
    cases = golden(n)
    path = Path(folder) / f"cache-{world.key}-{seed}.sqlite"
    cache = JudgeCache(path)
    entries: list[dict[str, Any]] = []
    base: dict[int, str] = {}
    baseline: dict[str, Any] = {}
    for run in range(WINDOW):
        weeks_ago = WINDOW - run
        version = str(run) if world.reword_every_run else "0"
        base = {i: truths.write(rng, i, version, truth[i]) for i in range(n)}
        stage = stage_of(settings, cases, outputs_of(base), cache, judge_of(weeks_ago, "stage"))
        report = report_of(stage, weeks_ago)
        entries.append(entry_from_report(report))  # type: ignore[arg-type]
        if run == WINDOW - 1:  # the base commit's run: the baseline the PR is compared with
            baseline = dict(baseline_from_report(report, created_at=report["run"]["created_at"], tool_version="sim"))  # type: ignore[arg-type]
    cache.close()

    # the fresh-sample rules: a fresh random sample of 40, judged afresh, every run (same world, same answers)
    seed_judges = [judge_of(WINDOW - run, "seed") for run in range(WINDOW)]
    seed_hist = []
    for run, j in enumerate(seed_judges):
        version = str(run) if world.reword_every_run else "0"
        seed_hist.append(statistics.fmean(j.score(truths.write(rng, i, version, truth[i])) for i in rng.sample(range(n), SEED_SAMPLE)))

    docs = {"old": (stripped(baseline), [stripped(e) for e in entries]), "new": (baseline, entries)}
    docs = {rule: docs[rule] for rule in rules}
    pr_cases = golden(n + world.added)
    out: dict[str, dict[str, Any]] = {}
    for scenario in world.scenarios:
        srng = random.Random(zlib.crc32(f"{seed}|{scenario}".encode()))
        answers = pr_answers(scenario, srng, truths, truth, base, world.reword_every_run)
        for k, t in enumerate(extra):
            answers[n + k] = truths.write(srng, n + k, "new", t)
        outputs = outputs_of(answers)
        result: dict[str, Any] = {}
        # seed rules
        sj = judge_of(0, f"seed|{scenario}")
        head = statistics.fmean(sj.score(answers[i]) for i in srng.sample(range(len(answers)), SEED_SAMPLE))
        result["seed R1"] = {"fail": seed_hist[-1] - head > THRESHOLD + 1e-9, "calls": sj.calls}
        result["seed R2"] = {"fail": statistics.fmean(seed_hist) - head > THRESHOLD + 1e-9, "calls": sj.calls}
        for rule, (base_doc, hist_docs) in docs.items():
            pr_path = path.with_name(f"{path.stem}-{rule}.sqlite")
            shutil.copyfile(path, pr_path)
            loaded = Loaded(spec=_Spec(settings), cases=pr_cases, store=None, entries=hist_docs, baseline=base_doc,  # type: ignore[arg-type]
                            source="the base commit's entry", deadline=NO_DEADLINE)
            refs = paired_runs(loaded)
            judge = judge_of(0, f"pr|{scenario}|{rule}")
            with JudgeCache(pr_path) as pr_cache:
                stage = stage_of(settings, pr_cases, outputs, pr_cache, judge, refs)
            pr_path.unlink()
            decision = decide_gates("generation", stage, cfg["gates"], CompareWith(baseline=base_doc["stages"]["generation"],
                                                                                     history=hist_docs))[0]  # type: ignore[arg-type]
            checks = checks_of(decision)
            pairing = stage.get("pairing", {})
            main = stage["usage"]["cache_misses"]
            calls = {"both": judge.calls,
                     "max_drop": (main + pairing.get("baseline", {}).get("judgings", 0)) * setting.repeats,
                     "trend": (main + pairing.get(f"trend:{WINDOW}", {}).get("judgings", 0)) * setting.repeats}
            for kind in ("max_drop", "trend", "case_drop"):
                if kind in checks:
                    status, method = checks[kind]
                    result[f"{rule} {kind}"] = {"fail": status == "fail", "skip": status == "skipped", "error": status == "error",
                                                "method": method or status, "calls": calls.get(kind, calls["both"])}
            result[f"{rule} calls"] = calls
        out[scenario] = result
    path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return out


def trials(args: tuple[World, Setting, float, list[int], str, tuple[str, ...]]) -> list[dict[str, dict[str, Any]]]:
    world, setting, sigma, indices, folder, rules = args
    return [trial(world, setting, sigma, i, folder, rules) for i in indices]


# ------------------------------------------------------------------------------------------ tables


ROWS = [
    ("seed R1", "seed R1: random 40/run, mean vs last run (~max_drop)"),
    ("seed R2", "seed R2: random 40/run, mean vs 7-run mean (~trend)"),
    ("old max_drop", "old  max_drop vs baseline, stored scores"),
    ("old trend", "old  trend 7 vs window's stored per-case means"),
    ("new max_drop", "new  max_drop vs baseline, same-run pairs"),
    ("new trend", "new  trend 7 vs oldest of window, same-run pairs"),
    ("new case_drop", "new  case_drop vs baseline, same-run pairs"),
    ("old case_drop", "old  case_drop (needs kept answers)"),
]
W_LABEL, W_CELL = 52, 21


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def summarise(world: World, setting: Setting, results: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """scenario -> row -> {rate, skip, methods, calls}."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario in world.scenarios:
        rows: dict[str, dict[str, Any]] = {}
        per = [r[scenario] for r in results]
        for key, _ in ROWS:
            got = [p[key] for p in per if key in p]
            if not got:
                continue
            rows[key] = {"rate": statistics.fmean(g["fail"] for g in got), "skip": statistics.fmean(g.get("skip", False) for g in got),
                         "error": statistics.fmean(g.get("error", False) for g in got),
                         "methods": sorted({g["method"] for g in got if "method" in g}), "calls": statistics.fmean(g["calls"] for g in got)}
        for rule in ("old", "new"):
            calls = [p[f"{rule} calls"] for p in per if f"{rule} calls" in p]
            if not calls:
                continue
            rows[f"{rule} calls"] = {k: statistics.fmean(c[k] for c in calls) for k in ("both", "max_drop", "trend")}
        table[scenario] = rows
    return table


def rates(world: World, table: Mapping[str, Mapping[str, Mapping[str, Any]]], key: str) -> tuple[float, float | None]:
    """(worst false-alarm rate over the no-change scenarios, detection rate of -0.05 on every case; None: not run)."""
    fa = max((table[s][key]["rate"] for s in world.scenarios if s not in DETECTION and key in table[s]), default=0.0)
    det = table[GOAL_SCENARIO][key]["rate"] if GOAL_SCENARIO in table and key in table[GOAL_SCENARIO] else None
    return fa, det


def goal(world: World, table: Mapping[str, Mapping[str, Mapping[str, Any]]], key: str) -> tuple[bool, str]:
    """Whether a row meets <= 1 % false alarms in every no-change scenario and >= 95 % detection of -0.05 on every case."""
    fa, det = rates(world, table, key)
    if det is None:
        return fa <= FA_GOAL + 1e-12, f"worst false alarms {pct(fa)}"
    ok = fa <= FA_GOAL + 1e-12 and det >= DET_GOAL - 1e-12
    return ok, f"{'meets' if ok else 'MISSES'} the goal (worst false alarms {pct(fa)}, detection of {GOAL_SCENARIO} {pct(det)})"


def print_table(world: World, setting: Setting, sigma: float, trials_n: int, table: Mapping[str, Any], seed_rows: bool = True) -> None:
    noise = "claim-fraction noise" if world.claims else f"sigma={sigma:g} per call"
    print(f"\nworld {world.key}: {world.title}; {noise}; {setting.cases} cases"
          f"{f' (+{world.added} in the PR)' if world.added else ''}; setting: {setting.label}; {trials_n} trials")
    scen = list(world.scenarios)
    print(f"{'rule / gate  (alarm rate)':{W_LABEL}}" + "".join(f"{s:>{W_CELL}}" for s in scen) + "   method")
    print(f"{'':{W_LABEL}}" + "".join(f"{'(detection)' if s in DETECTION else '(false alarm)':>{W_CELL}}" for s in scen))
    for key, label in ROWS:
        if not seed_rows and key.startswith("seed"):
            continue
        if key not in table[scen[0]]:
            continue
        cells = []
        for s in scen:
            row = table[s][key]
            cell = pct(row["rate"])
            if row["skip"] > 0:
                cell += f" sk{100 * row['skip']:.0f}%"
            if row["error"] > 0:
                cell += f" er{100 * row['error']:.0f}%"
            cells.append(cell)
        methods = sorted({m for s in scen for m in table[s][key]["methods"]})
        print(f"{label:{W_LABEL}}" + "".join(f"{c:>{W_CELL}}" for c in cells) + ("   " + ", ".join(methods) if methods else ""))
    print("judge calls per PR run (mean)")
    if seed_rows:
        print(f"{'  seed (either rule)':{W_LABEL}}" + "".join(f"{table[s]['seed R1']['calls']:>{W_CELL}.0f}" for s in scen))
    if "old calls" in table[scen[0]]:
        print(f"{'  old (both gates)':{W_LABEL}}" + "".join(f"{table[s]['old calls']['both']:>{W_CELL}.0f}" for s in scen))
    print(f"{'  new, both gates (max_drop only / trend only)':{W_LABEL}}"
          + "".join(f"{'{:.0f} ({:.0f}/{:.0f})'.format(*(table[s]['new calls'][k] for k in ('both', 'max_drop', 'trend'))):>{W_CELL}}"
                    for s in scen))
    for key in ("new max_drop", "new trend", "new case_drop", "old max_drop", "old trend"):
        if key not in table[scen[0]]:
            continue
        if key == "new case_drop":
            print(f"{key:14} caught the -0.6 answer in {pct(table[FEW[1]][key]['rate'])} of PRs, false alarms {pct(table[FEW[0]][key]['rate'])}")
        else:
            print(f"{key:14} {goal(world, table, key)[1]}")
    sys.stdout.flush()


def meets(world: World, table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bool:
    """Whether the new rule meets the goal in this world (world 8: case_drop on the one -0.6 answer)."""
    if world.case_drop is not None:
        fa, det = table[FEW[0]]["new case_drop"]["rate"], table[FEW[1]]["new case_drop"]["rate"]
        return fa <= FA_GOAL + 1e-12 and det >= DET_GOAL - 1e-12
    return all(goal(world, table, k)[0] for k in ("new max_drop", "new trend"))


def print_summary(rows: list[tuple[World, Setting, float, Mapping[str, Any]]], n_trials: int) -> None:
    """One line per world and setting: worst false alarms / detection of -0.05 on every case, per rule and gate, and the
    new rule's judge calls for that PR (world 8: the case_drop check on the -0.6 answer)."""
    keys = ["seed R1", "seed R2", "old max_drop", "old trend", "new max_drop", "new trend"]
    print(f"\nsummary ({n_trials} trials per cell): worst false-alarm rate / detection rate of -0.05 on every case "
          "(world 8: of the one -0.6 answer, by case_drop for the new rule); * = meets <= 1 % / >= 95 %")
    print(f"{'world':6}{'sigma':>7}  {'setting':44}" + "".join(f"{k:>15}" for k in keys) + f"{'new calls':>11}")
    for world, setting, sigma, table in rows:
        cells = []
        for key in keys:
            if key not in table[world.scenarios[0]] or (setting.label != "default" and not key.startswith("new")):
                cells.append("-")
                continue
            fa, det = rates(world, table, key)
            if det is None:  # world 8
                det_key = "new case_drop" if key.startswith("new") else key
                det = table[FEW[1]][det_key]["rate"]
            ok = fa <= FA_GOAL + 1e-12 and det >= DET_GOAL - 1e-12
            cells.append(f"{100 * fa:.1f}/{100 * det:.1f}{'*' if ok else ' '}")
        scen = GOAL_SCENARIO if GOAL_SCENARIO in table else FEW[1]
        sig = "claims" if world.claims else f"{sigma:g}"
        print(f"{world.key:6}{sig:>7}  {setting.label[:44]:44}" + "".join(f"{c:>15}" for c in cells)
              + f"{table[scen]['new calls']['both']:>11.0f}")


def run_world(world: World, setting: Setting, sigma: float, n_trials: int, jobs: int, folder: str, pool: Any,
              rules: tuple[str, ...] = ("old", "new")) -> dict[str, Any]:
    chunks = max(1, min(n_trials, jobs * 4))
    parts = [list(range(n_trials))[k::chunks] for k in range(chunks)]
    work = [(world, setting, sigma, p, folder, rules) for p in parts if p]
    results = [r for chunk in (pool.map(trials, work) if pool else map(trials, work)) for r in chunk]
    return summarise(world, setting, results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=None, help="trials per cell (default 300; 40 with --quick)")
    ap.add_argument("--quick", action="store_true", help="40 trials per cell, fix settings at 40 trials too")
    ap.add_argument("--sigma", type=float, nargs="+", default=[0.05], help="per-call judge noise (worlds 6b and 3 have their own)")
    ap.add_argument("--worlds", nargs="+", default=None, help="world keys or prefixes: 1 2 3 4 5a 5b 6a 6b 7 8 (5 = 5a and 5b)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--no-fixes", action="store_true", help="skip the settings tried for worlds that miss the goal")
    args = ap.parse_args()
    n_trials = args.trials or (40 if args.quick else 300)
    worlds = [w for w in WORLDS if not args.worlds or any(w.key.startswith(k) for k in args.worlds)]
    started = time.perf_counter()
    shm = Path("/dev/shm")
    tmp_root = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    print(f"gates: faithfulness max_drop {THRESHOLD} (vs the baseline = the last default-branch run) and trend "
          f"{{window: {WINDOW}, max_drop: {THRESHOLD}}}, confidence 0.99, min_pairs 10; goal: <= {pct(FA_GOAL)} false alarms, "
          f">= {pct(DET_GOAL)} detection of -0.05 on every case. 'skNN%': share of PRs where the check was skipped "
          "(insufficient evidence).")
    summary: list[tuple[World, Setting, float, Mapping[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="rag-gate-trust-", dir=tmp_root) as folder:
        pool = ProcessPoolExecutor(max_workers=args.jobs) if args.jobs > 1 else None
        try:
            for world in worlds:
                sigmas = [world.sigma] if world.sigma is not None else ([args.sigma[0]] if world.claims else args.sigma)
                for sigma in sigmas:
                    t0 = time.perf_counter()
                    table = run_world(world, Setting(), sigma, n_trials, args.jobs, folder, pool)
                    print_table(world, Setting(), sigma, n_trials, table)
                    print(f"({time.perf_counter() - t0:.0f} s)")
                    summary.append((world, Setting(), sigma, table))
                    if not meets(world, table) and not args.no_fixes:
                        for fix in FIXES.get(world.key, []):
                            t0 = time.perf_counter()
                            fixed = run_world(world, fix, sigma, n_trials, args.jobs, folder, pool, rules=("new",))
                            print_table(world, fix, sigma, n_trials, fixed, seed_rows=False)
                            print(f"({time.perf_counter() - t0:.0f} s)")
                            summary.append((world, fix, sigma, fixed))
        finally:
            if pool:
                pool.shutdown()
    print_summary(summary, n_trials)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
