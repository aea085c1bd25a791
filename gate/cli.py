"""The command line: ``rag-gate run | validate | baseline update``.

Exit codes: 0 every gate passed, 1 a gate failed, 2 invalid input, 3 the run could not complete.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gate import __version__
from gate.errors import EXIT_ERROR, EXIT_INPUT, EXIT_PASS, InputError, RagGateError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rag-gate", description="Gate pull requests on the quality of a RAG system.")
    p.add_argument("--version", action="version", version=f"rag-gate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="ask the target, compute the metrics, apply the gates, write the reports")
    run.add_argument("--config", default="rag-eval.yml", help="the spec file (default: rag-eval.yml)")
    run.add_argument("--report", metavar="PATH", help="write report.json here ('-' for stdout)")
    run.add_argument("--markdown", metavar="PATH", help="write the PR comment body (Markdown) here")
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML (one test case per gate) here")
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    run.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    run.add_argument("--no-cache", action="store_true", help="judge every case again, ignoring and not writing the judge cache")

    val = sub.add_parser("validate", help="check the spec and the golden set without running anything")
    val.add_argument("--config", default="rag-eval.yml", help="the spec file (default: rag-eval.yml)")

    base = sub.add_parser("baseline", help="manage the baseline file")
    base_sub = base.add_subparsers(dest="action", required=True, metavar="ACTION")
    upd = base_sub.add_parser("update", help="write the baseline from a report")
    upd.add_argument("--config", default="rag-eval.yml", help="the spec file (default: rag-eval.yml)")
    upd.add_argument("--report", required=True, metavar="PATH", help="report.json of the run to take as the baseline")
    upd.add_argument("--output", metavar="PATH", help="where to write it (default: baseline.path of the spec)")
    upd.add_argument("--force", action="store_true", help="accept a report whose verdict is 'error'")

    hist = sub.add_parser("history", help="the history of default-branch runs (for trend gates)")
    hist_sub = hist.add_subparsers(dest="action", required=True, metavar="ACTION")
    rec = hist_sub.add_parser("record", help="append a run's report to the history file")
    rec.add_argument("--config", default="rag-eval.yml", help="the spec file (default: rag-eval.yml)")
    rec.add_argument("--report", required=True, metavar="PATH", help="report.json of a default-branch run")
    rec.add_argument("--branch", help="branch the run was on (default: GITHUB_REF_NAME)")
    return p


def _progress(enabled: bool) -> tuple[Any, Any, Any]:
    """(on_start, on_done, close) callbacks: a progress bar on a terminal, two plain lines in CI logs."""
    if not enabled:
        return None, None, lambda: None
    state: dict[str, Any] = {"done": 0, "errors": 0}
    tty = sys.stderr.isatty()

    def on_start(total: int, kind: str) -> None:
        state["start"] = time.perf_counter()
        if tty:
            from tqdm import tqdm

            state["bar"] = tqdm(total=total, desc=f"asking the {kind} target", unit="case", file=sys.stderr,
                                leave=False, dynamic_ncols=True)
        else:
            print(f"rag-gate: asking the {kind} target for {total} cases", file=sys.stderr, flush=True)

    def on_done(out: Any) -> None:
        state["done"] += 1
        state["errors"] += out.error is not None
        if "bar" in state:
            state["bar"].update(1)

    def close() -> None:
        if "bar" in state:
            state["bar"].close()
        if "start" in state:
            took = time.perf_counter() - state["start"]
            print(f"rag-gate: {state['done']} cases answered in {took:.1f} s, {state['errors']} errored",
                  file=sys.stderr, flush=True)

    return on_start, on_done, close


def report_json(report: dict[str, Any]) -> str:
    """report.json text: indented for a golden set of usual size, compact above 1,000 cases
    (json's indenting encoder is pure Python, four times slower than the compact C one)."""
    indent = 2 if len(report.get("cases", [])) <= 1000 else None
    return json.dumps(report, indent=indent, ensure_ascii=False) + "\n"


def cmd_run(args: argparse.Namespace, **run_options: Any) -> tuple[int, dict[str, Any]]:
    """Run and write every report the arguments ask for; (exit code, report). ``run_options`` go to gate.run.run."""
    from gate.output import write_text
    from gate.render.console import render_console
    from gate.run import run

    on_start, on_done, close = _progress(not args.no_progress and not args.quiet)
    try:
        report = run(args.config, on_start=on_start, on_done=on_done, use_cache=not args.no_cache, **run_options)
    finally:
        close()
    if args.report:
        write_text(args.report, report_json(report), what="report")
    if args.markdown:
        from gate.render.markdown import render_comment

        write_text(args.markdown, render_comment(report), what="Markdown comment")
    if args.junit:
        from gate.render.junit import render_junit

        write_text(args.junit, render_junit(report), what="JUnit XML")
    text = render_console(report)
    if args.quiet:
        text = text.splitlines()[-1] + "\n"
    (sys.stderr if args.report == "-" else sys.stdout).write(text)
    return int(report["exit_code"]), report


def cmd_validate(args: argparse.Namespace) -> int:
    from gate.golden import load_golden_set
    from gate.spec import load_spec

    spec = load_spec(args.config)
    cases = load_golden_set(spec.golden_set_path)
    by_type: dict[str, int] = {}
    for c in cases:
        by_type[c.type] = by_type.get(c.type, 0) + 1
    kinds = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
    print(f"{spec.path}: valid")
    print(f"{spec.golden_set_path}: {len(cases)} cases ({kinds})")
    if "results" in spec.target:
        path = spec.resolve(spec.target["results"])
        if path.exists():
            from gate.targets.results import ResultsFileTarget

            target = ResultsFileTarget(path, cases)
            missing = sum(1 for c in cases if c.id not in target.outputs)
            print(f"{path}: {len(target.outputs)} lines match golden cases, {missing} cases have no line"
                  + (f", {len(target.unmatched)} lines match no case" if target.unmatched else ""))
        else:
            print(f"{path}: not there yet (it is read when `rag-gate run` starts)")
    return EXIT_PASS


def _read_report(path: Path, *, allow_error: bool) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("report not found", file=str(path), hint="write one with `rag-gate run --report PATH`") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno) from None
    if not isinstance(report, dict) or not isinstance(report.get("stages"), dict) or "verdict" not in report:
        raise InputError("not a rag-gate report (needs 'verdict' and 'stages')", file=str(path))
    if report["verdict"] == "error" and not allow_error:
        raise InputError("the report's verdict is 'error' (the run did not complete); refusing to record it",
                         file=str(path), key="verdict", hint="fix the run, or pass --force")
    return report


def cmd_baseline_update(args: argparse.Namespace) -> int:
    from gate.baseline import baseline_from_report
    from gate.output import write_text
    from gate.spec import load_spec

    spec = load_spec(args.config)
    path = Path(args.report)
    report = _read_report(path, allow_error=args.force)
    out = Path(args.output) if args.output else spec.baseline_path
    baseline = baseline_from_report(report)
    write_text(out, json.dumps(baseline, indent=2, ensure_ascii=False, sort_keys=True) + "\n", what="baseline")
    metrics = sum(len(s["metrics"]) for s in baseline["stages"].values())
    print(f"wrote {out}: {metrics} metrics from {len(baseline['stages'])} stage(s) of {path}")
    return EXIT_PASS


def cmd_history_record(args: argparse.Namespace) -> int:
    from gate.history import LocalHistoryStore, current_branch, entry_from_report
    from gate.spec import load_spec

    spec = load_spec(args.config)
    path = Path(args.report)
    report = _read_report(path, allow_error=False)
    store = LocalHistoryStore(spec.history_path, int(spec.data["history"]["max_entries"]))
    entry = entry_from_report(report, branch=args.branch or current_branch())
    store.append(entry)
    entries = store.read()
    for warning in store.warnings:
        print(f"rag-gate: warning: {warning} (kept in the file)", file=sys.stderr)
    print(f"recorded {path} in {spec.history_path} ({len(entries)} entries)")
    return EXIT_PASS


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)[0]
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "history":
            return cmd_history_record(args)
        return cmd_baseline_update(args)
    except RagGateError as exc:
        print(f"rag-gate: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rag-gate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so briefly; the traceback only on request
        if os.environ.get("RAG_GATE_DEBUG"):
            raise
        print(f"rag-gate: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: set RAG_GATE_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
        return EXIT_ERROR


__all__ = ["main", "EXIT_INPUT"]
