"""The application: run a spec and write every output it asks for, once, atomically. The command line
(gate.cli) and the GitHub Action (gate.github.action) both call ``run_and_write``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
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


def progress(enabled: bool, stream: TextIO | None = None) -> tuple[Callable[[int, str], None] | None,
                                                                  Callable[[TargetOutput], None] | None, Callable[[], None]]:
    """(on_start, on_done, close) callbacks: a progress bar on a terminal, two plain lines in CI logs."""
    if not enabled:
        return None, None, lambda: None
    out = stream or sys.stderr
    state: dict[str, Any] = {"done": 0, "errors": 0, "total": 0}
    tty = out.isatty()

    def on_start(total: int, kind: str) -> None:
        state["start"] = time.perf_counter()
        state["total"] = total
        if tty:
            from tqdm import tqdm

            state["bar"] = tqdm(total=total, desc=f"asking the {kind} target", unit="case", file=out, leave=False, dynamic_ncols=True)
        else:
            print(f"rag-gate: asking the {kind} target for {total} cases", file=out, flush=True)

    def on_done(result: TargetOutput) -> None:
        state["done"] += 1
        state["errors"] += result.error is not None
        state["last"] = time.perf_counter()  # the target's time ends with its last answer (judging comes after)
        if "bar" in state:
            state["bar"].update(1)

    def close() -> None:
        if "bar" in state:
            state["bar"].close()
        if "start" in state:
            took = state.get("last", state["start"]) - state["start"]
            done, errors = state["done"], state["errors"]
            print(f"rag-gate: the target took {took:.1f} s for {done} case{'s' if done != 1 else ''}: {done - errors} answered, "
                  f"{errors} errored", file=out, flush=True)

    return on_start, on_done, close


def run_and_write(config: str, outputs: Outputs, options: RunOptions, *, show_progress: bool = True, quiet: bool = False) -> Report:
    """Run the spec, write the outputs, print the console report (stderr when report.json goes to stdout)."""
    on_start, on_done, close = progress(show_progress and not quiet)
    try:
        report = run(config, replace(options, on_start=on_start, on_done=on_done))
    finally:
        close()
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

    on_start, on_done, close = progress(show_progress and not quiet)
    try:
        part = run_shard(config, shard, replace(options, on_start=on_start, on_done=on_done))
    finally:
        close()
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
