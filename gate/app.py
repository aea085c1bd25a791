"""The application: run a spec and write every output it asks for, once, atomically. The command line
(gate.cli) and the GitHub Action (gate.github.action) both call ``run_and_write``."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TextIO

from gate.core.model import TargetOutput
from gate.core.report import Part, Report, Usage
from gate.io.files import write_text
from gate.io.reports import document_json, page_json, report_json
from gate.pipeline import RunOptions, Viewed, run_viewed


@dataclass(frozen=True)
class Outputs:
    """Where to write the reports (None: not written; '-': stdout)."""

    report: str | None = None
    markdown: str | None = None
    junit: str | None = None
    html: str | None = None


def write_outputs(report: Report, outputs: Outputs, view: Viewed | None = None) -> None:
    """report.json, the PR comment body, JUnit XML and the HTML report, each written atomically. The HTML report shows
    the golden cases, the baseline's answers and the passages from ``view`` (without it: what report.json holds)."""
    if outputs.report:
        write_text(outputs.report, report_json(report), what="report")
    if outputs.markdown:
        from gate.render.markdown import render_comment

        write_text(outputs.markdown, render_comment(report), what="Markdown comment")
    if outputs.junit:
        from gate.render.junit import render_junit

        write_text(outputs.junit, render_junit(report), what="JUnit XML")
    if outputs.html:
        write_text(outputs.html, html_report(report, view), what="HTML report")


def html_report(report: Report, view: Viewed | None = None) -> str:
    """The self-contained HTML report (gate.render.html) with its stylesheet and script from the package."""
    from importlib.resources import files

    from gate.render.html import Assets, ViewInputs, render_html

    assets = files("gate.render") / "assets"
    page = Assets((assets / "report.css").read_text(encoding="utf-8"), (assets / "report.js").read_text(encoding="utf-8"))
    if view is None:
        return render_html(report, ViewInputs(), page, dumps=page_json)
    return render_html(report, ViewInputs(view.cases, view.baseline, view.passages()), page, clean=view.redact.document, dumps=page_json)


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
            self._open(stage, total, f"judging {stage}", unit, f"rag-gate: judging {stage}: {total} scores to compute")

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
        name = "the target" if key == "target" else key if state.get("asks") else f"judging {key}"
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
            print(f"rag-gate: the judges took {last - first:.1f} s for {scores} score{'s' if scores != 1 else ''} ({stages})"
                  + (f": {spend(meters, whole=True)}" if meters else ""), file=self.out, flush=True)


def spend(usages: list[Usage], whole: bool = False) -> str:
    """Judge calls, tokens and (with judge.prices) cost so far, summed over the stages' clients."""
    calls = sum(u.get("calls", 0) for u in usages)
    tokens = sum(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) + u.get("embedding_tokens", 0) for u in usages)
    costs = [u["cost"] for u in usages if u.get("cost") is not None]
    text = f"{calls} judge call{'s' if calls != 1 else ''}, {tokens:,} tokens"
    if costs:
        text += f", ${sum(c for c in costs if c is not None):.4f}"
    elif whole:
        text += " (no judge.prices: no cost)"
    return text


def progress(enabled: bool, stream: TextIO | None = None) -> Progress:
    """The run's progress reporter (a no-op when not ``enabled``)."""
    return Progress(enabled, stream)


def run_and_write(config: str, outputs: Outputs, options: RunOptions, *, show_progress: bool = True, quiet: bool = False) -> Report:
    """Run the spec, write the outputs, print the console report (stderr when report.json goes to stdout)."""
    shown = progress(show_progress and not quiet)
    try:
        view = run_viewed(config, replace(options, on_start=shown.on_start, on_done=shown.on_done, judge_progress=shown))
    finally:
        shown.close()
    return written(view, outputs, quiet)


def written(view: Viewed, outputs: Outputs, quiet: bool) -> Report:
    """Write the outputs and print the console report (stderr when report.json goes to stdout)."""
    from gate.render.console import render_console

    report = view.report
    write_outputs(report, outputs, view)
    text = render_console(report)
    if quiet:
        text = text.splitlines()[-1] + "\n"
    (sys.stderr if outputs.report == "-" else sys.stdout).write(text)
    return report


def run_shard_and_write(config: str, shard: tuple[int, int], part_path: str, options: RunOptions, *,
                        show_progress: bool = True, quiet: bool = False) -> Part:
    """Run one shard, write its part (atomically), say what it holds; no gate, no comment."""
    from gate.render.console import log_safe
    from gate.shards import run_shard

    shown = progress(show_progress and not quiet)
    try:
        part = run_shard(config, shard, replace(options, on_start=shown.on_start, on_done=shown.on_done, judge_progress=shown))
    finally:
        shown.close()
    write_text(part_path, document_json(part, "part", compact=True, fast=True) + "\n", what="part")
    out = sys.stderr if part_path == "-" else sys.stdout
    index, of = shard
    judged = ", ".join(f"{name} {len(stage['samples'])} judged" for name, stage in part["stages"].items() if not stage.get("skipped"))
    errors = sum(1 for o in part["outputs"] if o["error"] is not None)
    print(f"rag-gate: shard {index} of {of}: {len(part['outputs'])} cases asked ({errors} errored)"
          f"{'; ' + judged if judged else ''}; part written to {part_path}", file=out)
    for e in part["errors"]:
        print(log_safe(f"rag-gate: shard incomplete: {e}"), file=out)
    if not quiet:
        print("rag-gate: no gate runs on a shard: `rag-gate merge` gates the parts together", file=out)
    return part


def merge_and_write(config: str, parts: list[str], outputs: Outputs, options: RunOptions, *, quiet: bool = False) -> Report:
    """Merge the parts into one report, write the outputs, print the console report (as ``run_and_write``)."""
    from gate.shards import merge_viewed

    return written(merge_viewed(config, parts, options), outputs, quiet)
