"""``rag-gate watch``: the scheduled run for a CI without rag-gate's GitHub integration (cron, GitLab schedules,
Jenkins): the spec run against the deployed system, gated against the approved baseline and the history, what changed
since the last passing scheduled run listed, the run recorded in the history as a scheduled one, and, when it fails,
the alert (the watch issue's body, Markdown) written to a file for the CI to send on."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gate.core.errors import EXIT_ERROR, InputError, RagGateError

KINDS = ("schedule", "dispatch", "deployment", "push")


def add_parser(sub: Any, spec: argparse.ArgumentParser) -> None:
    w = sub.add_parser("watch", parents=[spec], help="a scheduled run: gate, list what changed since the last passing "
                       "scheduled run, record it in the history, write the alert when it fails")
    w.add_argument("--report", metavar="PATH", help="write report.json here")
    w.add_argument("--markdown", metavar="PATH", help="write the report as Markdown here")
    w.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    w.add_argument("--html", metavar="PATH", help="write the HTML report here")
    w.add_argument("--alert", metavar="PATH", help="when the run fails, write the alert (Markdown: what changed, then the "
                   "report) here; when it passes, remove an alert left by an earlier run")
    w.add_argument("--kind", default="schedule", choices=KINDS, help="how the run came, recorded in the history "
                   "(default schedule; deployment for a run after a deploy or an index rebuild)")
    w.add_argument("--no-record", action="store_true", help="do not append the run to the history file")
    w.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    w.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")


def cmd_watch(args: argparse.Namespace) -> int:
    from gate.app import Destinations, run_and_write
    from gate.core.records import entry_from_report, last_passing
    from gate.run.options import RunOptions

    alert = Path(args.alert) if args.alert else None
    if alert is not None and alert.is_dir():
        raise InputError("is a folder: give the alert file's path", file=str(alert), key="--alert")
    options = RunOptions(commit=os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA"), kind=args.kind,
                         changes_from=last_passing(args.kind))
    try:
        report = run_and_write(args.config, Destinations(args.report, args.markdown, args.junit, args.html), options,
                               show_progress=not args.no_progress, quiet=args.quiet)
    except RagGateError as exc:
        if alert is not None and exc.exit_code == EXIT_ERROR:  # the service or the judge down: what a watch is for
            _unfinished(alert, args.config, exc)
        raise
    if not args.no_record and report["verdict"] != "error":
        from gate.config.loader import load_spec
        from gate.io.history import LocalHistoryStore

        spec = load_spec(args.config)
        LocalHistoryStore(spec.history_path, int(spec.data["history"]["max_entries"])).append(
            entry_from_report(report, branch=os.environ.get("GITHUB_REF_NAME") or os.environ.get("CI_COMMIT_BRANCH") or None))
        if not args.quiet:
            print(f"recorded in {spec.history_path} as a {args.kind} run")
    if alert is not None:
        _alert(alert, report, args.quiet)
    return report["exit_code"]


def _unfinished(path: Path, config: str, exc: RagGateError) -> None:
    from gate.config.loader import load_spec
    from gate.io.files import write_text
    from gate.render.watch import unfinished_issue

    watch_id = str(load_spec(config, unset_ok=True).data["report"]["comment_id"])
    write_text(path, unfinished_issue(watch_id, exc.message, exc.hint, None), what="alert")
    print(f"the run could not complete: alert written to {path}", file=sys.stderr)


def _alert(path: Path, report: Any, quiet: bool) -> None:
    from gate.io.files import write_text
    from gate.render.watch import render_issue

    if report["verdict"] == "pass":
        if path.is_file():
            path.unlink()
            if not quiet:
                print(f"passed: the alert {path} of an earlier run was removed")
        return
    write_text(path, render_issue(report, report["run"]["comment_id"]), what="alert")
    if not quiet:
        print(f"alert written to {path}")
