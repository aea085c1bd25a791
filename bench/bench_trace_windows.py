"""False alarms and detection of the traces-window gates under a drifting judge: the anchored rule (judge drift cancelled on
re-judged anchor traces), the same code on the stored scores (anchor 0), and a plain mean-drop alert, all on simulated
weekly windows of a stable RAG system.

A simulated world, one per trial (seeded): every week a window of 300 sampled production traces, new questions each
week. A trace's true faithfulness ~ Beta(12, 3) (mean 0.80, sd 0.10, skewed left: most answers largely grounded, a tail
of poorly grounded ones, bounded in [0, 1]; what a RAG in production that mostly works looks like), the same
distribution every week (a stable system). The judge stand-in scores a trace in week w as
clip(true + N(0, 0.02) - drift * w, 0, 1) (``--judge-sd``: the spread of a temperature-0 judge scoring the same
answer again, what the self-check measures): fresh noise at every judging, and a judge that grows 0.01 harsher every
week (``--drift``; a second judge with drift 0 is run on the same draws). The week's scores are kept as the run keeps
them: a real HistoryEntry (``gate.core.records.entry_from_report`` on the week's stage, so ``window_deltas`` are
written from ``windows.previous`` as rag-gate writes them), each trace with its question, answer and passage in the
entry's texts.

Each week (--weeks, default 8) goes through rag-gate's own code, for two rules:

  anchored      ``gate.stages.windows.stored_window`` on the earlier entries (anchor 40, the anchor traces drawn by
                ``anchor_ids`` as a run draws them), ``WindowRefs`` "previous" and "trend:4" as
                ``gate.run.measure.window_refs`` builds them (min_sample 30), the anchors' today-scores = the same
                traces' true values judged again with this week's judge (new noise, this week's drift), once per
                window however many references read it; ``window_records`` builds the stage's ``windows``; the
                ``StageMeasurement`` (metrics, per-case samples, not_evaluated, warnings, windows) goes with the
                history to ``gate.core.verdict.decide_gates`` with the gate
                faithfulness {max_drop: 0.03, trend: {window: 4, max_drop: 0.03}, consecutive_decline: 3}
                (confidence 0.99: a relative check fails when the drop is above 0.03 AND significant).
  stored        the same code with anchor 0: no drift cancelled, the windows' scores compared as they were stored.
  mean-drop     no rag-gate code: the plainest aggregate alert of a tracing dashboard, no test. max_drop: the window's
                mean more than 0.03 below the previous window's mean; the analogues of the other checks: trend = more
                than 0.03 below the mean of the last 4 windows' means, consecutive_decline = the mean fell in each of
                the last 3 windows.

Experiments, on the same draws (common random numbers):

  false alarm   the stable system; a trial counts a false alarm for a check when the check fails in any week from
                the first one with a full trend window (weeks 4..7 of 0..7, four gated weeks a trial); the per-week
                rate (fails / gated weeks) is printed beside it.
  detection     the same, but the traces of the last week are 0.05 worse (true - 0.05): detection = the check fails
                in that week.

Both with the drifting judge and with a judge that does not drift (what the anchor costs when there is no drift to
cancel). Printed: the parameters, the truth distribution's quantiles, the table (rule x check), each rule's mean
week-on-week delta and its standard error, and for consecutive_decline the correlation of successive judge-corrected
deltas and the rate "fell in each of 3 windows" it implies for pure noise (1/8 for independent ones), and the wall time.

    python bench/bench_trace_windows.py [--trials 200] [--seed 7] [--weeks 8] [--drift 0.01] [--judge-sd 0.02] [--jobs N]

About a quarter of a second a trial on one core (--jobs: worker processes, default one a core). Exit status 1 when
the anchored rule misses its goal with the drifting judge: false alarms (any check) in more than 0.5 % of the gated
weekly runs, or max_drop detecting the 0.05 drop in fewer than 95 % of trials. Whether any of the trials had a false
alarm at all is printed beside it.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from gate.core.records import entry_from_report
from gate.core.report import HistoryEntry, StageMeasurement
from gate.core.verdict import CompareWith, decide_gates
from gate.core.windows import anchor_ids
from gate.stages.windows import StoredWindow, WindowRefs, stored_window, window_records

METRIC = "faithfulness"
LIMIT = 0.03
TREND = 4
RUNS = 3
GATES = {METRIC: {"max_drop": LIMIT, "trend": {"window": TREND, "max_drop": LIMIT}, "consecutive_decline": RUNS}}
CHECKS = ("max_drop", "trend", "consecutive_decline")
TRUTH = (12.0, 3.0)  # Beta(a, b): mean a / (a + b) = 0.8, sd sqrt(ab / ((a + b)^2 (a + b + 1))) = 0.1
JUDGE_SD = 0.02  # --judge-sd: a temperature-0 judge scoring the same answer again (the self-check measures this figure)
TRACES, ANCHOR, MIN_SAMPLE = 300, 40, 30
ANCHOR_SEED = 7  # target.traces.sample.seed: which traces of a window are its anchor
DROP = 0.05
FA_GOAL, DET_GOAL = 0.0, 0.95
WEEK_GOAL = 0.005  # false alarms of the anchored rule, per weekly run of a stable system under a drifting judge
RULES = (("anchored", f"anchored (anchor {ANCHOR})"), ("stored", "stored scores (anchor 0)"), ("raw", "raw mean-drop, no test"))
START = datetime(2025, 1, 6, 6, 0, tzinfo=UTC)


def clip(x: float) -> float:
    return min(1.0, max(0.0, x))


@dataclass(frozen=True)
class Week:
    """One window's traces: ids, true values, the judging noise of their first score."""

    created_at: str
    ids: list[str]
    truth: list[float]
    noise: list[float]


@dataclass(frozen=True)
class Draws:
    """One trial's random draws, shared by every scenario and rule: the weeks, and the noise of each anchor trace judged
    again in week w (``rejudge[w][(window created_at, trace id)]``)."""

    weeks: list[Week]
    rejudge: list[dict[tuple[str, str], float]]


def draw(rng: random.Random, weeks: int, trial: int, judge_sd: float = JUDGE_SD) -> Draws:
    out: list[Week] = []
    rejudge: list[dict[tuple[str, str], float]] = []
    for w in range(weeks):
        when = (START + timedelta(weeks=w)).isoformat().replace("+00:00", "Z")
        ids = [f"t{trial}-w{w}-{i:03d}" for i in range(TRACES)]
        out.append(Week(when, ids, [rng.betavariate(*TRUTH) for _ in ids], [rng.gauss(0.0, judge_sd) for _ in ids]))
        again: dict[tuple[str, str], float] = {}
        for earlier in out[max(0, w - TREND):w]:  # the windows this week's references read, their anchors judged again
            for i in anchor_ids(sorted(earlier.ids), ANCHOR, ANCHOR_SEED):
                again[(earlier.created_at, i)] = rng.gauss(0.0, judge_sd)
        rejudge.append(again)
    return Draws(out, rejudge)


@dataclass(frozen=True)
class Scenario:
    key: str
    drift: float  # per week, the judge's harshening
    drop: float  # the true drop of the last week's traces


@dataclass
class Outcome:
    """One rule in one scenario of one trial: week -> check -> status, and the judge-corrected deltas vs the previous
    window (with their standard errors)."""

    statuses: list[dict[str, str]] = field(default_factory=list)
    deltas: list[float | None] = field(default_factory=list)
    ses: list[float | None] = field(default_factory=list)


def truth_of(week: Week, index: int, scenario: Scenario, last: int, w: int) -> float:
    return week.truth[index] - (scenario.drop if w == last else 0.0)


def run_rule(draws: Draws, scenario: Scenario, anchor: int) -> Outcome:
    """Every week of one trial through stored_window -> window_records -> decide_gates, its entry through
    entry_from_report."""
    entries: list[HistoryEntry] = []
    stored: list[StoredWindow] = []
    truths: dict[tuple[str, str], float] = {}  # (created_at, trace id) -> true value, for the anchors judged again
    last = len(draws.weeks) - 1
    outcome = Outcome()
    for w, week in enumerate(draws.weeks):
        per_case: dict[str, dict[str, float]] = {}
        texts: dict[str, str] = {}
        samples: list[dict[str, Any]] = []
        for i, trace in enumerate(week.ids):
            true = truth_of(week, i, scenario, last, w)
            truths[(week.created_at, trace)] = true
            score = clip(true + week.noise[i] - scenario.drift * w)
            per_case[trace] = {METRIC: score}
            q, a, c = f"q:{trace}", f"a:{trace}", f"c:{trace}"
            texts.update({q: f"question of {trace}", a: f"answer of {trace}", c: f"passage of {trace}"})
            samples.append({"id": trace, "metrics": {METRIC: score}, "output": {"question": q, "answer": a, "contexts": [c]}})
        refs: list[WindowRefs] = []
        if stored:  # as gate.run.measure.window_refs builds them
            previous = stored[-1]
            refs.append(WindowRefs("previous", "the previous " + previous.label[4:], [previous], anchor, MIN_SAMPLE))
            windows = stored[-TREND:]
            label = f"the mean of the last {len(windows)} window{'s' if len(windows) != 1 else ''}"
            refs.append(WindowRefs(f"trend:{TREND}", label, windows, anchor, MIN_SAMPLE))
        now: dict[tuple[str, str, str], float] = {}
        for window in {x.created_at: x for ref in refs for x in ref.windows}.values():  # each window's anchors once
            for trace in window.anchors:
                noise = draws.rejudge[w][(window.created_at, trace)]
                now[(window.created_at, trace, METRIC)] = clip(truths[(window.created_at, trace)] + noise - scenario.drift * w)
        values = [s[METRIC] for s in per_case.values()]
        measured: StageMeasurement = {"metrics": {METRIC: math.fsum(values) / len(values)}, "samples": samples,  # type: ignore[typeddict-item]
                                      "not_evaluated": {}, "warnings": [],
                                      "windows": window_records(refs, per_case, [METRIC], now, len(now))}
        decisions = decide_gates("generation", measured, GATES, CompareWith(history=list(entries)))
        outcome.statuses.append({c.kind: c.status for d in decisions for c in d.checks})
        prev = measured["windows"].get("previous")
        wm = prev["metrics"][METRIC] if prev else None
        outcome.deltas.append(wm["delta"] if wm and "insufficient" not in wm else None)
        outcome.ses.append(wm["se"] if wm and "insufficient" not in wm else None)
        stage = {**measured, "status": "pass", "gates": []}
        report = {"stages": {"generation": stage}, "run": {"created_at": week.created_at, "commit": None}, "verdict": "pass",
                  "fingerprints": {"golden_set": "traces"}, "texts": texts}
        entry = entry_from_report(report)  # type: ignore[arg-type]
        kept = stored_window(entry, entry.get("texts", {}), anchor, ANCHOR_SEED)
        assert kept is not None and len(kept.anchors) == min(anchor, TRACES)
        entries.append(entry)
        stored.append(kept)
    return outcome


def run_raw(draws: Draws, scenario: Scenario) -> Outcome:
    """The plain mean-drop alert (no rag-gate code, no test) and its analogues of trend and consecutive_decline."""
    last = len(draws.weeks) - 1
    means: list[float] = []
    outcome = Outcome()
    for w, week in enumerate(draws.weeks):
        values = [clip(truth_of(week, i, scenario, last, w) + week.noise[i] - scenario.drift * w) for i in range(len(week.ids))]
        m = math.fsum(values) / len(values)
        status: dict[str, str] = {}
        status["max_drop"] = ("fail" if m < means[-1] - LIMIT else "pass") if means else "skipped"
        status["trend"] = ("fail" if m < statistics.fmean(means[-TREND:]) - LIMIT else "pass") if means else "skipped"
        path = [*means[-RUNS:], m]
        status["consecutive_decline"] = (("fail" if all(b < a for a, b in zip(path, path[1:], strict=False)) else "pass")
                                         if len(path) == RUNS + 1 else "skipped")
        outcome.statuses.append(status)
        outcome.deltas.append(m - means[-1] if means else None)
        outcome.ses.append(None)
        means.append(m)
    return outcome


SCENARIOS = {"fa drift": (True, 0.0), "det drift": (True, DROP), "fa steady": (False, 0.0), "det steady": (False, DROP)}


def trial(seed: int, index: int, *, weeks: int, drift: float, judge_sd: float = JUDGE_SD) -> dict[str, dict[str, Outcome]]:
    """scenario -> rule -> outcome, all on one trial's draws (the judge drifting or not, the last week's drop or not)."""
    draws = draw(random.Random(seed * 1_000_003 + index), weeks, index, judge_sd)
    out: dict[str, dict[str, Outcome]] = {}
    for key, (drifts, drop) in SCENARIOS.items():
        scenario = Scenario(key, drift if drifts else 0.0, drop)
        out[key] = {"anchored": run_rule(draws, scenario, ANCHOR), "stored": run_rule(draws, scenario, 0), "raw": run_raw(draws, scenario)}
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def failed(status: Mapping[str, str], check: str) -> bool:
    return any(v == "fail" for v in status.values()) if check == "any" else status.get(check) == "fail"


def rates(results: Sequence[dict[str, dict[str, Outcome]]], scenario: str, rule: str, check: str,
          gated: range) -> tuple[float, float, int]:
    """(share of trials with a fail in a gated week, share of gated weeks failed, gated weeks skipped)."""
    trials = weeks = skipped = 0
    for r in results:
        statuses = r[scenario][rule].statuses
        hits = [failed(statuses[w], check) for w in gated]
        trials += any(hits)
        weeks += sum(hits)
        skipped += sum(statuses[w].get(check) == "skipped" for w in gated) if check != "any" else 0
    return trials / len(results), weeks / (len(results) * len(gated)), skipped


def corr(xs: Sequence[float], ys: Sequence[float]) -> float:
    return statistics.correlation(xs, ys) if len(xs) > 2 else float("nan")


def decline_reading(results: Sequence[dict[str, dict[str, Outcome]]], scenario: str, rule: str) -> str:
    """How often one judge-corrected delta is a fall, the correlation of successive deltas, and (for deltas centred on
    0) the rate of "fell in each of the last 3 windows" that implies for normal noise: the orthant probability
    1/8 + (asin r12 + asin r23 + asin r13) / (4 pi)."""
    lag1: tuple[list[float], list[float]] = ([], [])
    lag2: tuple[list[float], list[float]] = ([], [])
    deltas = [d for r in results for d in r[scenario][rule].deltas if d is not None]
    for r in results:
        d = r[scenario][rule].deltas
        for w in range(2, len(d)):
            a, b, c = d[w - 2], d[w - 1], d[w]
            if a is not None and b is not None and c is not None:
                lag1[0].append(b)
                lag1[1].append(c)
                lag2[0].append(a)
                lag2[1].append(c)
    r1, r2 = corr(*lag1), corr(*lag2)
    falls = sum(d < 0 for d in deltas) / len(deltas)
    text = f"one delta a fall in {pct(falls)} of weeks; corr(delta_w, delta_w-1) {r1:+.2f}, corr(delta_w, delta_w-2) {r2:+.2f}"
    if abs(statistics.fmean(deltas)) < 0.1 * statistics.stdev(deltas):
        implied = 1 / 8 + (2 * math.asin(r1) + math.asin(r2)) / (4 * math.pi)
        text += f"; for zero-mean normal deltas so correlated, P(3 falls in a row) = {pct(implied)}"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--weeks", type=int, default=8, help=f"windows a trial (at least {TREND + 1}: the trend needs {TREND} earlier)")
    ap.add_argument("--drift", type=float, default=0.01, help="how much harsher the judge grows each week")
    ap.add_argument("--judge-sd", type=float, default=JUDGE_SD, help="sd of the judge's noise on one judging")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    args = ap.parse_args()
    if args.weeks < TREND + 1:
        ap.error(f"--weeks must be at least {TREND + 1}")
    started = time.perf_counter()
    a, b = TRUTH
    rng = random.Random(args.seed)
    sample = sorted(rng.betavariate(a, b) for _ in range(100_000))
    q = {p: sample[int(p / 100 * (len(sample) - 1))] for p in (1, 5, 25, 50, 75, 95, 99)}
    gated = range(TREND, args.weeks)
    print(f"true per-trace faithfulness ~ Beta({a:g}, {b:g}): mean {a / (a + b):.2f}, sd {math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))):.2f}, "
          + ", ".join(f"p{p} {v:.2f}" for p, v in q.items()) + " (the same every week: a stable system)")
    print(f"judge: clip(true + N(0, {args.judge_sd:g}) - {args.drift:g} * week, 0, 1), new noise every judging; a second judge with drift 0")
    print(f"{TRACES} traces a window, anchor {ANCHOR}, min_sample {MIN_SAMPLE}; {args.weeks} weekly windows a trial, gated weeks "
          f"{gated.start}..{gated.stop - 1} ({len(gated)}: a full trend window); {args.trials} trials, seed {args.seed}")
    print(f"gate: {GATES[METRIC]} (confidence 0.99); detection: the last week's traces {DROP} worse, the check failing in that week")

    work = partial(trial, args.seed, weeks=args.weeks, drift=args.drift, judge_sd=args.judge_sd)
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(work, range(args.trials), chunksize=max(1, args.trials // (4 * args.jobs))))
    else:
        results = [work(i) for i in range(args.trials)]
    simulated = time.perf_counter() - started
    last = range(args.weeks - 1, args.weeks)

    head = ("false alarm drift", "per week", "detect drift", "false alarm steady", "per week", "detect steady")
    widths = (18, 9, 13, 19, 9, 14)
    print(f"\n{'rule':26}{'check':21}" + "".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    table: dict[tuple[str, str], dict[str, float]] = {}
    skips = 0
    for rule, label in RULES:
        for check in (*CHECKS, "any"):
            fa_d, fa_dw, s1 = rates(results, "fa drift", rule, check, gated)
            det_d, _, s2 = rates(results, "det drift", rule, check, last)
            fa_s, fa_sw, s3 = rates(results, "fa steady", rule, check, gated)
            det_s, _, s4 = rates(results, "det steady", rule, check, last)
            skips += s1 + s2 + s3 + s4
            table[(rule, check)] = {"fa": fa_d, "det": det_d}
            cells = (pct(fa_d), pct(fa_dw), pct(det_d), pct(fa_s), pct(fa_sw), pct(det_s))
            print(f"{label:26}{check:21}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)))
        print()
    if skips:
        print(f"NOTE: {skips} gated check-weeks were skipped (insufficient evidence)")
    print("false alarm: share of trials with the check failing in any gated week; per week: share of gated weeks failed")

    print("\nweek-on-week delta vs the previous window, stable system (mean, sd across weeks; mean se the record reports):")
    for scenario, judge in (("fa drift", f"drift {args.drift:g}/week"), ("fa steady", "no drift")):
        for rule, label in RULES:
            ds = [d for r in results for d in r[scenario][rule].deltas[1:] if d is not None]
            ses = [s for r in results for s in r[scenario][rule].ses[1:] if s is not None]
            se = f", se {statistics.fmean(ses):.4f}" if ses else ""
            print(f"  {judge:16} {label:26} mean {statistics.fmean(ds):+.4f}, sd {statistics.stdev(ds):.4f}{se}")
    print(f"\nconsecutive_decline {RUNS}, stable system, drifting judge (pure noise would fall 3 times in a row 1/8 = 12.5% of weeks "
          "if successive deltas were independent):")
    for rule, label in RULES[:2]:
        fa, per_week, _ = rates(results, "fa drift", rule, "consecutive_decline", gated)
        print(f"  {label:26} fires on {pct(per_week)} of gated weeks, {pct(fa)} of trials")
        print(f"  {'':26} {decline_reading(results, 'fa drift', rule)}")
    without = 0
    for r in results:
        statuses = r["fa drift"]["anchored"].statuses
        without += any(any(statuses[w].get(c) == "fail" for c in ("max_drop", "trend")) for w in gated)
    print(f"  anchored, max_drop or trend only (without consecutive_decline): {pct(without / len(results))} of trials")

    elapsed = time.perf_counter() - started
    print(f"\nwall time {elapsed:.1f} s ({simulated:.1f} s simulating {args.trials} trials x {len(SCENARIOS)} scenarios x "
          f"{args.weeks} weeks x 3 rules)")
    fa_any, det = table[("anchored", "any")]["fa"], table[("anchored", "max_drop")]["det"]
    per_week = rates(results, "fa drift", "anchored", "any", gated)[1]
    ok = per_week <= WEEK_GOAL and det >= DET_GOAL
    print(f"goal (drifting judge, anchored): false alarms {pct(per_week)} of weekly runs (goal <= {pct(WEEK_GOAL)}), max_drop "
          f"detection {pct(det)} (goal >= {pct(DET_GOAL)}): {'met' if ok else 'MISSED'}")
    print(f"  not met: no false alarm in any of {args.trials} trials of {len(gated)} gated weeks each ({pct(fa_any)} of trials had one): "
          "with 300 traces and 40 anchors the change's standard error is about 0.01, so a 0.03 limit is 3 standard errors "
          "from no change (0.1-0.3 % of weekly runs), and a wider margin would miss more real drops of 0.05" if fa_any > FA_GOAL else
          f"  and no false alarm in any of {args.trials} trials of {len(gated)} gated weeks each")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
