"""``rag-gate``'s entry point (the console script and ``python -m gate``)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence

from gate.core.errors import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, RagGateError
from gate.deadline import ABANDONED


def _command(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    """The function that runs the command ``args`` names."""
    from gate.cli import commands, golden

    if args.command in ("calibrate", "label"):
        from gate.cli.calibrate import cmd_calibrate, cmd_label

        return cmd_calibrate if args.command == "calibrate" else cmd_label
    if args.command == "watch":
        from gate.cli.watch import cmd_watch

        return cmd_watch
    if args.command == "gitlab":
        from gate.cli.gitlab import cmd_gitlab

        return cmd_gitlab
    if args.command == "dashboard":
        from gate.cli.dashboard import dashboard_command

        return dashboard_command
    if args.command == "corpus":
        from gate.cli.corpus import cmd_corpus_check

        return cmd_corpus_check
    if args.command == "golden":
        actions = {"generate": golden.cmd_golden_generate, "add": golden.cmd_golden_add, "check": golden.cmd_golden_check}
        if args.action in ("import", "export"):
            from gate.cli.goldenio import cmd_golden_export, cmd_golden_import

            return cmd_golden_import if args.action == "import" else cmd_golden_export
        return actions[args.action]
    table: dict[str, Callable[[argparse.Namespace], int]] = {
        "run": commands.cmd_run, "merge": commands.cmd_merge, "cache": commands.cmd_cache_merge, "plan": commands.cmd_plan,
        "show": commands.cmd_show, "validate": commands.cmd_validate, "history": commands.cmd_history_record,
        "baseline": commands.cmd_baseline_update,
    }
    return table[args.command]


def main(argv: Sequence[str] | None = None) -> int:
    console = argv is None  # the console script (or python -m gate): this process runs one command, then ends
    if console:
        gc.disable()  # no collection while the modules load: nothing they build is garbage
    from gate.cli.parser import build_parser

    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(given[0] if given else None).parse_args(given)
    ends_after = console and args.command in ("run", "merge")  # the process ends right after: end_now
    if console and not ends_after:
        gc.enable()  # (a run keeps it off: it would pause it anyway, and the process ends after its reports)
    try:
        if ends_after:
            from gate.app import keep_until_exit

            keep_until_exit()
        code = _command(args)(args)
        if ends_after or (console and _calls_left_running()):
            end_now(code)
        return code
    except RagGateError as exc:
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: {exc.message}"), file=sys.stderr)  # a message may quote a file or a target's answer
        if exc.hint:
            print(log_safe(f"hint: {exc.hint}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rag-gate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader of stdout left (`| head`): stop quietly, as a shell's tools do
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # a bug: say so briefly; the traceback only on request
        if os.environ.get("RAG_GATE_DEBUG"):
            raise
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        print("hint: set RAG_GATE_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
        return EXIT_ERROR


def _calls_left_running() -> bool:
    """A Python target's call ran past the deadline and is still running (validate --ping): the process must end
    without waiting for it."""
    import threading

    return any(getattr(t, ABANDONED, False) for t in threading.enumerate())


def _stdout_to_devnull() -> None:
    """Nothing more reaches the pipe nobody reads: what is still buffered goes to /dev/null at the exit's flush, not
    into an "Exception ignored" line."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def end_now(code: int) -> None:
    """End the process at once with exit status ``code`` (the console script's run and merge, once every output is
    written and closed, the judge cache included): the atexit handlers run and the standard streams are flushed, but
    what the run built is not freed object by object, nor the interpreter torn down (0.1-0.2 s on 10,000 cases).
    Returns, for the process to end the usual way, when another thread is alive (other than one left to a call that
    ran past the deadline) or a stream cannot be flushed."""
    import atexit
    import threading

    if any(t is not threading.current_thread() and not getattr(t, ABANDONED, False) for t in threading.enumerate()):
        return  # (a thread left to a call of a Python target that ran past the deadline is not waited for)
    atexit._run_exitfuncs()  # logging's shutdown among them; each runs once (the list is emptied)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # a closed pipe or stream, none at all: Python's own exit as before
        return
    os._exit(code)
