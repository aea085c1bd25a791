"""The application: run a spec and write every output it asks for, once, atomically. The command line
(gate.cli) and the GitHub Action (gate.github.action) both call ``run_and_write``."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Any, TextIO

from gate.core.model import TargetOutput
from gate.core.report import Part, Report
from gate.io.files import write_text
from gate.io.reports import document_json, report_json
from gate.pipeline import RunOptions, run


@dataclass(frozen=True)
class Outputs:
    """Where to write the reports (None: not written; '-': stdout)."""

    report: str | None = None
    markdown: str | None = None
    junit: str | None = None


def write_outputs(report: Report, outputs: Outputs) -> None:
    """report.json, the PR comment body and JUnit XML, each written atomically."""
    if outputs.report:
        write_text(outputs.report, report_json(report), what="report")
    if outputs.markdown:
        from gate.render.markdown import render_comment

        write_text(outputs.markdown, render_comment(report), what="Markdown comment")
    if outputs.junit:
        from gate.render.junit import render_junit

        write_text(outputs.junit, render_junit(report), what="JUnit XML")


class Progress:
    """What a run says while it works, on stderr: a bar for the target's calls and one per judge stage's scores (count,
    rate, time left) on a terminal; in CI logs a line when each starts and one every ``every`` seconds. Closing, the
    time the target took and the time the judges took, each on its own line."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, every: float = 10.0) -> None:
        self.enabled = enabled
        self.out = stream or sys.stderr
        self.tty = self.out.isatty()
        self.every = every
        self.target: dict[str, Any] = {"done": 0, "errors": 0}
        self.judge: dict[str, dict[str, Any]] = {}
        self.bars: dict[str, Any] = {}

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

    # -- the judges (gate.stages.judging.JudgeProgress)
    def start(self, stage: str, total: int) -> None:
        if total <= 0:
            return
        now = time.perf_counter()
        self.judge[stage] = {"start": now, "total": total, "done": 0, "last": now, "said": now}
        self._open(stage, total, f"judging {stage}", "score", f"rag-gate: judging {stage}: {total} scores to compute")

    def done(self, stage: str) -> None:
        state = self.judge.get(stage)
        if state is None:
            return
        state["done"] += 1
        state["last"] = time.perf_counter()
        self._tick(stage, state["done"], state["total"], state["start"], "scores")

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
        name = "the target" if key == "target" else f"judging {key}"
        print(f"rag-gate: {name}: {done} of {total} {what} ({rate:.1f}/s{left})", file=self.out, flush=True)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        if not self.enabled:
            return
        if "start" in self.target:
            took = self.target.get("last", self.target["start"]) - self.target["start"]
            done, errors = self.target["done"], self.target["errors"]
            print(f"rag-gate: the target took {took:.1f} s for {done} case{'s' if done != 1 else ''}: {done - errors} answered, "
                  f"{errors} errored", file=self.out, flush=True)
        if self.judge:
            first = min(s["start"] for s in self.judge.values())
            last = max(s["last"] for s in self.judge.values())
            scores = sum(s["done"] for s in self.judge.values())
            stages = ", ".join(f"{name} {s['done']}" for name, s in self.judge.items())
            print(f"rag-gate: the judges took {last - first:.1f} s for {scores} score{'s' if scores != 1 else ''} ({stages})",
                  file=self.out, flush=True)


def progress(enabled: bool, stream: TextIO | None = None) -> Progress:
    """The run's progress reporter (a no-op when not ``enabled``)."""
    return Progress(enabled, stream)


def run_and_write(config: str, outputs: Outputs, options: RunOptions, *, show_progress: bool = True, quiet: bool = False) -> Report:
    """Run the spec, write the outputs, print the console report (stderr when report.json goes to stdout)."""
    shown = progress(show_progress and not quiet)
    try:
        report = run(config, replace(options, on_start=shown.on_start, on_done=shown.on_done, judge_progress=shown))
    finally:
        shown.close()
    return written(report, outputs, quiet)


def written(report: Report, outputs: Outputs, quiet: bool) -> Report:
    """Write the outputs and print the console report (stderr when report.json goes to stdout)."""
    from gate.render.console import render_console

    write_outputs(report, outputs)
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
    from gate.shards import merge

    return written(merge(config, parts, options), outputs, quiet)
