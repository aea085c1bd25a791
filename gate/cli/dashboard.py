"""``rag-gate dashboard``: the history file drawn as one self-contained HTML page of quality over time
(gate.render.dashboard), from a local file (``--history``) or from a branch of the local repository
(``--from-branch``, as ``git show BRANCH:PATH`` prints it).

    rag-gate dashboard --history eval/history.jsonl [--config rag-eval.yml] --out dashboard.html
    rag-gate dashboard --from-branch rag-gate-history [--history-path rag-gate/history.jsonl] --out dashboard.html

With ``--config``, one chart per gated metric of the spec, its ``min``/``max`` and the baseline's value drawn as
lines; without, one chart per metric the history holds. Exit 0 when the page is written, 2 when an input is
invalid (a missing, unreadable or empty history, a spec that does not load, a branch or path git does not have).
``python -m gate.cli.dashboard`` runs it on its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.core.errors import EXIT_PASS, InputError, RagGateError

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping

    from gate.render.dashboard import ChartSpec
    from gate.render.html import Assets

DEFAULT_HISTORY_PATH = "rag-gate/history.jsonl"  # where the action keeps the history on its branch
GIT_TIMEOUT_S = 60


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``dashboard`` sub-command to ``sub`` (an argparse sub-parsers action); returns its parser."""
    p = sub.add_parser("dashboard", help="draw the history as one HTML page of quality over time (charts and a table of runs)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--history", metavar="FILE", help="the history file (JSONL, one run a line: rag-gate history record)")
    source.add_argument("--from-branch", metavar="BRANCH", help="read the history from this branch of the git repository in "
                        "the current folder (git show BRANCH:PATH; origin/BRANCH when there is no local branch)")
    p.add_argument("--history-path", metavar="PATH", default=DEFAULT_HISTORY_PATH,
                   help=f"with --from-branch: the history file's path on the branch (default: {DEFAULT_HISTORY_PATH})")
    p.add_argument("--config", metavar="SPEC", default=None, help="the spec: one chart per gated metric, with its min/max "
                   "and the baseline (default: one chart per metric of the history)")
    p.add_argument("--out", metavar="FILE", required=True, help="where to write the page")
    p.add_argument("--title", default="rag-gate dashboard", help="the page's title (default: rag-gate dashboard)")
    return p


def dashboard_command(args: argparse.Namespace) -> int:
    """Run ``rag-gate dashboard``. An error is printed as the CLI prints it (the message naming the file and line or
    key, the hint, no traceback) and its exit code returned, so the command also runs on its own."""
    from gate.render.console import log_safe

    try:
        return _dashboard(args)
    except RagGateError as exc:
        print(log_safe(f"rag-gate: {exc.message}"), file=sys.stderr)  # a message may quote the history's text
        if exc.hint:
            print(log_safe(f"hint: {exc.hint}"), file=sys.stderr)
        return exc.exit_code


def _dashboard(args: argparse.Namespace) -> int:
    from gate.io.files import write_text
    from gate.io.reports import parse_history
    from gate.render.console import log_safe
    from gate.render.dashboard import dashboard_data, render_page

    text, where = _history_text(args)
    if not text.strip():
        raise InputError("the history is empty: no run to draw", file=where,
                         hint="record default-branch runs with `rag-gate history record` first")
    warnings: list[str] = []
    entries = parse_history(text, where, warnings)
    for warning in warnings:
        print(log_safe(f"rag-gate: warning: {warning}"), file=sys.stderr)
    if not entries:
        lines = sum(1 for line in text.splitlines() if line.strip())
        raise InputError(f"none of its {lines} line{'s' if lines != 1 else ''} is a readable history entry: no run to draw", file=where)
    gated, baseline, notes = charts_from_spec(args.config)
    for note in notes:
        print(log_safe(f"rag-gate: warning: {note}"), file=sys.stderr)
    data = dashboard_data(entries, gated, baseline, title=args.title, notes=[*warnings, *notes])
    write_text(args.out, render_page(data, page_assets()), what="dashboard")
    runs, charts = len(data["runs"]), len(data["charts"])
    print(f"wrote {args.out}: {runs} run{'s' if runs != 1 else ''}, {charts} chart{'s' if charts != 1 else ''}",
          file=sys.stderr if str(args.out) == "-" else sys.stdout)
    return EXIT_PASS


def _history_text(args: argparse.Namespace) -> tuple[str, str]:
    """The history file's text, and how to name it in messages (the file, or BRANCH:PATH)."""
    if args.from_branch is not None:
        return _from_git(args.from_branch, args.history_path)
    path = Path(args.history)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise InputError("history file not found", file=str(path), key="--history",
                         hint="record runs with `rag-gate history record`, or pass --from-branch BRANCH") from None
    except IsADirectoryError:
        raise InputError("is a folder, not a history file", file=str(path), key="--history") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"the history is not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read the history: {exc.strerror}", file=str(path)) from None


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    import subprocess  # here: every command's parser imports this module

    try:
        return subprocess.run(["git", *args], capture_output=True, stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise InputError("git is not installed (needed to read the history from a branch)", key="--from-branch",
                         hint="pass --history FILE instead") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"git did not answer in {GIT_TIMEOUT_S} s", key="--from-branch") from None


def _said(proc: subprocess.CompletedProcess[bytes]) -> str:
    """What git said on stderr, its first line, without "fatal: "."""
    lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return (lines[0].removeprefix("fatal: ") if lines else f"git exited with {proc.returncode}")[:300]


def _from_git(branch: str, path: str) -> tuple[str, str]:
    """The history at ``path`` on ``branch`` of the repository in the current folder (else on ``origin/branch``)."""
    if not branch or branch.startswith("-") or any(c in branch for c in ": \t\n"):
        raise InputError(f"not a branch name: {branch!r}", key="--from-branch")
    path = path.strip("/")
    if not path or path.startswith("-"):
        raise InputError(f"not a path in the repository: {path!r}", key="--history-path")
    probe = _git("rev-parse", "--git-dir")
    if probe.returncode != 0:
        raise InputError(f"{Path.cwd()} is not in a git repository ({_said(probe)})", key="--from-branch",
                         hint="run it in a clone of the repository, or pass --history FILE")
    ref = next((r for r in (branch, f"origin/{branch}") if _git("rev-parse", "--verify", "--quiet", f"{r}^{{commit}}").returncode == 0), None)
    if ref is None:
        raise InputError(f"no branch {branch!r} in the repository (nor origin/{branch})", key="--from-branch",
                         hint=f"fetch it first: git fetch origin {branch}")
    where = f"{ref}:{path}"
    shown = _git("--no-pager", "show", "--no-textconv", where)
    if shown.returncode != 0:
        raise InputError(f"no file {path} on branch {ref} ({_said(shown)})", file=where, key="--history-path",
                         hint="the history's path on the branch: pass --history-path PATH")
    try:
        return shown.stdout.decode("utf-8"), where
    except UnicodeDecodeError as exc:
        raise InputError(f"the history is not UTF-8 text (byte {exc.start})", file=where) from None


def charts_from_spec(config: str | None) -> tuple[list[ChartSpec] | None, Mapping[str, Any] | None, list[str]]:
    """The charts of the spec's gated metrics (None without a spec, or when it gates nothing), its baseline (None if
    it has none or it cannot be read), and the notes to print."""
    if config is None:
        return None, None, []
    from gate.config.loader import load_spec
    from gate.io.reports import read_baseline
    from gate.render import STAGE_ORDER
    from gate.render.dashboard import ChartSpec

    baseline: Mapping[str, Any] | None
    spec = load_spec(config, unset_ok=True)  # only the gates and the baseline's path are read: no variable needs to be set
    gated = [ChartSpec.from_gate(stage, metric, gate) for stage in STAGE_ORDER for metric, gate in spec.stages.gates(stage).items()]
    notes = [] if gated else [f"{config} gates no metric: one chart per metric of the history"]
    try:
        baseline = read_baseline(spec.baseline_path)
    except InputError as exc:
        baseline = None
        notes.append(f"{exc.message}; drawn without the baseline")
    return gated or None, baseline, notes


def page_assets() -> Assets:
    """The page's stylesheet and script, from the package (gate/render/assets)."""
    from importlib.resources import files

    from gate.render.html import Assets

    assets = files("gate.render") / "assets"
    return Assets((assets / "dashboard.css").read_text(encoding="utf-8"), (assets / "dashboard.js").read_text(encoding="utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gate.cli.dashboard ARGS``: the command on its own, with the same arguments."""
    parser = argparse.ArgumentParser(prog="rag-gate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return dashboard_command(parser.parse_args(["dashboard", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
