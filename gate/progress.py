"""What a run says while it works, on stderr: a bar per phase on a terminal, a line every few seconds in CI logs,
and a closing line each for the target's time and the judges' (counts, times, calls, tokens and cost: never an
answer, a question or an id)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from gate.core.model import TargetOutput
from gate.core.report import Usage
from gate.core.usage import sum_usage, tokens


class Progress:
    """What a run says while it works, on stderr: a bar for the target's calls, one for the noise test's answers (the
    robustness stage asking the target again) and one per judge stage's scores (count, rate, time left, and the judge
    calls, tokens and cost so far) on a terminal; in CI logs a line when each starts and one every ``every`` seconds.
    Closing, the time the target took (the noise test's answers included) and the time the judges took (with their
    calls, tokens and cost), each on its own line."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, every: float = 10.0) -> None:
        self.enabled = enabled
        self.out = stream or sys.stderr
        self.tty = self.out.isatty()
        self.every = every
        self.target: dict[str, Any] = {"done": 0, "errors": 0}
        self.judge: dict[str, dict[str, Any]] = {}
        self.bars: dict[str, Any] = {}
        self.lock = threading.Lock()

    # -- the target (RunOptions.on_start / on_done)
    def on_start(self, total: int, kind: str) -> None:
        self.target.update(start=time.perf_counter(), total=total)
        self._open("target", total, f"asking the {kind} target", "case",
                   f"rag-gate: asking the {kind} target for {total} cases")

    def on_done(self, result: TargetOutput) -> None:
        self.target["done"] += 1
        self.target["errors"] += result.error is not None
        self.target["last"] = time.perf_counter()  # the target's time ends with its last answer (judging comes after)
        self._tick("target", self.target["done"], self.target.get("total", 0), self.target["start"], "cases answered")

    def on_all(self, results: list[TargetOutput]) -> None:
        """Every case answered at once (a results file): as ``on_done`` for each, with one tick."""
        if not results:
            return
        self.target["done"] += len(results)
        self.target["errors"] += sum(1 for r in results if r.error is not None)
        self.target["last"] = time.perf_counter()
        if "target" in self.bars:
            self.bars["target"].update(len(results))
            return
        self._tick("target", self.target["done"], self.target.get("total", 0), self.target["start"], "cases answered")

    # -- the judges, and the noise test asking the target again (gate.stages.judging.JudgeProgress)
    def start(self, stage: str, total: int, usage: Callable[[], Usage] | None = None, unit: str = "score") -> None:
        if total <= 0:
            return
        now = time.perf_counter()
        asks = unit == "answer"
        self.judge[stage] = {"start": now, "total": total, "done": 0, "last": now, "said": now, "usage": usage, "asks": asks}
        if asks:
            self._open(stage, total, f"{stage}: asking the target", unit,
                       f"rag-gate: {stage}: asking the target for {total} answers from given passages")
        else:
            verb = "judging" if usage is not None else "scoring"  # no judge client: the metrics that need no model
            self.judge[stage]["verb"] = verb
            self._open(stage, total, f"{verb} {stage}", unit, f"rag-gate: {verb} {stage}: {total} scores to compute"
                       + ("" if usage is not None else " with the metrics that need no model"))

    def done(self, stage: str) -> None:
        state = self.judge.get(stage)
        if state is None:
            return
        with self.lock:  # the noise test's answers come from a pool of threads
            state["done"] += 1
            state["last"] = time.perf_counter()
            if stage in self.bars and state["usage"] is not None:
                self.bars[stage].set_postfix_str(spend([state["usage"]()]), refresh=False)  # drawn with the bar's next update
            self._tick(stage, state["done"], state["total"], state["start"], "answers" if state["asks"] else "scores")

    def _open(self, key: str, total: int, desc: str, unit: str, line: str) -> None:
        if not self.enabled:
            return
        if self.tty:
            from tqdm import tqdm

            self.bars[key] = tqdm(total=total, desc=desc, unit=unit, file=self.out, leave=False, dynamic_ncols=True)
        else:
            print(line, file=self.out, flush=True)
            (self.judge.get(key) or self.target)["said"] = time.perf_counter()

    def _tick(self, key: str, done: int, total: int, started: float, what: str) -> None:
        if not self.enabled:
            return
        if key in self.bars:
            self.bars[key].update(1)
            return
        state = self.judge.get(key) or self.target
        now = time.perf_counter()
        if now - state.get("said", started) < self.every or done >= total:
            return
        state["said"] = now
        rate = done / (now - started) if now > started else 0.0
        left = f", about {(total - done) / rate:.0f} s left" if rate else ""
        name = "the target" if key == "target" else key if state.get("asks") else f"{state.get('verb', 'judging')} {key}"
        meter = state.get("usage")
        spent = f"; {spend([meter()])}" if meter is not None else ""
        print(f"rag-gate: {name}: {done} of {total} {what} ({rate:.1f}/s{left}){spent}", file=self.out, flush=True)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        if not self.enabled:
            return
        asked = [s for s in self.judge.values() if s["asks"]]
        judged = {name: s for name, s in self.judge.items() if not s["asks"]}
        if "start" in self.target:
            took = self.target.get("last", self.target["start"]) - self.target["start"]
            more = sum(s["last"] - s["start"] for s in asked)
            done, errors = self.target["done"], self.target["errors"]
            answers = sum(s["done"] for s in asked)
            print(f"rag-gate: the target took {took + more:.1f} s for {done} case{'s' if done != 1 else ''}: {done - errors} answered, "
                  f"{errors} errored" + (f"; and {answers} answers from given passages for the noise test ({more:.1f} s of it)"
                                         if asked else ""), file=self.out, flush=True)
        if judged:
            first = min(s["start"] for s in judged.values())
            last = max(s["last"] for s in judged.values())
            scores = sum(s["done"] for s in judged.values())
            stages = ", ".join(f"{name} {s['done']}" for name, s in judged.items())
            meters = [s["usage"]() for s in judged.values() if s["usage"] is not None]
            who = "the judges" if meters else "the metrics that need no model"
            print(f"rag-gate: {who} took {last - first:.1f} s for {scores} score{'s' if scores != 1 else ''} ({stages})"
                  + (f": {spend(meters, whole=True)}" if meters else ""), file=self.out, flush=True)


def spend(usages: list[Usage], whole: bool = False) -> str:
    """Judge calls, tokens and (with judge.prices) cost so far, summed over the stages' clients."""
    total = sum_usage(usages)
    calls = int(total.get("calls", 0))
    text = f"{calls} judge call{'s' if calls != 1 else ''}, {tokens(total):,} tokens"
    if total.get("cost") is not None:
        text += f", ${total['cost']:.4f}"
    elif whole:
        text += " (no judge.prices: no cost)"
    return text


def progress(enabled: bool, stream: TextIO | None = None) -> Progress:
    """The run's progress reporter (a no-op when not ``enabled``)."""
    return Progress(enabled, stream)
