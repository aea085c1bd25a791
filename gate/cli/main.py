"""``rag-gate``'s entry point (the console script and ``python -m gate``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from gate.core.errors import EXIT_ERROR, EXIT_INTERRUPTED, RagGateError


def _command(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    """The function that runs the command ``args`` names."""
    from gate.cli import commands, golden

    if args.command in ("calibrate", "label"):
        from gate.cli.calibrate import cmd_calibrate, cmd_label

        return cmd_calibrate if args.command == "calibrate" else cmd_label
    if args.command == "watch":
        from gate.cli.watch import cmd_watch

        return cmd_watch
    if args.command == "dashboard":
        from gate.cli.dashboard import dashboard_command

        return dashboard_command
    if args.command == "corpus":
        from gate.cli.corpus import cmd_corpus_check

        return cmd_corpus_check
    if args.command == "golden":
        actions = {"generate": golden.cmd_golden_generate, "add": golden.cmd_golden_add, "check": golden.cmd_golden_check}
        return actions[args.action]
    table: dict[str, Callable[[argparse.Namespace], int]] = {
        "run": commands.cmd_run, "merge": commands.cmd_merge, "cache": commands.cmd_cache_merge, "plan": commands.cmd_plan,
        "show": commands.cmd_show, "validate": commands.cmd_validate, "history": commands.cmd_history_record,
        "baseline": commands.cmd_baseline_update,
    }
    return table[args.command]


def main(argv: Sequence[str] | None = None) -> int:
    from gate.cli.parser import build_parser

    args = build_parser().parse_args(argv)
    try:
        return _command(args)(args)
    except RagGateError as exc:
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: {exc.message}"), file=sys.stderr)  # a message may quote a file or a target's answer
        if exc.hint:
            print(log_safe(f"hint: {exc.hint}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rag-gate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so briefly; the traceback only on request
        if os.environ.get("RAG_GATE_DEBUG"):
            raise
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        print("hint: set RAG_GATE_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
        return EXIT_ERROR
