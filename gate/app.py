"""The application: run a spec and write every output it asks for, once, atomically. The command line
(gate.cli) and the GitHub Action (gate.github.action) both call ``run_and_write``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from gate.core.report import Part, Report
from gate.io.files import PiecesWriter, write_text
from gate.io.reports import document_json, page_json, report_bytes, report_pieces
from gate.progress import progress
from gate.run.flow import Viewed, run_viewed
from gate.run.options import RunOptions

# What the runs built, kept alive until the process ends when the command line ends it right after the run
# (gate.cli.main.end_now): freeing 200,000 passages and the report one object at a time would only delay the exit.
_kept: list[object] | None = None


def keep_until_exit() -> None:
    """Keep each run's report and what it was built from until the process ends (see ``_kept``)."""
    global _kept
    _kept = []


@dataclass(frozen=True)
class Destinations:
    """Where to write the reports (None: not written; '-': stdout)."""

    report: str | None = None
    markdown: str | None = None
    junit: str | None = None
    html: str | None = None


def write_reports(report: Report, to: Destinations, view: Viewed | None = None) -> None:
    """report.json, the PR comment body, JUnit XML and the HTML report, each written atomically. The HTML report shows
    the golden cases, the baseline's answers and the passages from ``view`` (without it: what report.json holds)."""
    wrote = _write_behind(to.report, report) if to.report else None
    comment, junit = None, None
    try:
        if to.markdown:
            from gate.render.markdown import render_comment

            comment = render_comment(report)
        if to.junit:
            from gate.render.junit import render_junit

            junit = render_junit(report)
    finally:
        if wrote is not None:
            wrote()  # report.json first, as before: if it cannot be written, nothing else is
    if comment is not None and to.markdown:
        write_text(to.markdown, comment, what="Markdown comment")
    if junit is not None and to.junit:
        write_text(to.junit, junit, what="JUnit XML")
    if to.html:
        write_text(to.html, html_report(report, view), what="HTML report")


def _write_behind(path: str, report: Report) -> Callable[[], None]:
    """report.json written in a thread (a write does not hold the GIL: 9 MB for 10,000 cases), piece by piece as it
    is encoded (gate.io.reports.report_pieces), and finished while the comment and the JUnit XML are rendered; the
    function returned waits for it, puts it in place, and raises what writing it raised. To standard output ('-'):
    written at once, before the others."""
    if path == "-":
        write_text(path, report_bytes(report), what="report")
        return lambda: None
    out = PiecesWriter(path, what="report")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)  # the writing thread takes the GIL between two pieces, not 5 ms later
    try:
        for piece in report_pieces(report):
            out.write(piece)
    except BaseException:
        out.abort()
        raise
    finally:
        sys.setswitchinterval(interval)
    out.finish()  # put in place by the thread while the comment and the JUnit XML are rendered
    return out.close


def html_report(report: Report, view: Viewed | None = None) -> str:
    """The self-contained HTML report (gate.render.html) with its stylesheet and script from the package."""
    from importlib.resources import files

    from gate.render.html import Assets, ViewInputs, render_html

    assets = files("gate.render") / "assets"
    page = Assets((assets / "report.css").read_text(encoding="utf-8"), (assets / "report.js").read_text(encoding="utf-8"))
    if view is None:
        return render_html(report, ViewInputs(), page, dumps=page_json)
    return render_html(report, ViewInputs(view.cases, view.baseline, view.passages()), page, clean=view.redact.document, dumps=page_json)


def run_and_write(config: str, to: Destinations, options: RunOptions, *, show_progress: bool = True, quiet: bool = False) -> Report:
    """Run the spec, write the reports, print the console report (stderr when report.json goes to stdout)."""
    shown = progress(show_progress and not quiet)
    try:
        view = run_viewed(config, replace(options, progress=shown))
    finally:
        shown.close()
    return written(view, to, quiet)


def written(view: Viewed, to: Destinations, quiet: bool) -> Report:
    """Write the reports and print the console report (stderr when report.json goes to stdout)."""
    from gate.render.console import render_console

    report = view.report
    if _kept is not None:
        _kept.append(view)
    write_reports(report, to, view)
    text = render_console(report, to.report)  # names the report.json it wrote, for `rag-gate show`
    if quiet:
        text = text.splitlines()[-1] + "\n"
    (sys.stderr if to.report == "-" else sys.stdout).write(text)
    return report


def run_shard_and_write(config: str, shard: tuple[int, int], part_path: str, options: RunOptions, *,
                        show_progress: bool = True, quiet: bool = False) -> Part:
    """Run one shard, write its part (atomically), say what it holds; no gate, no comment."""
    from gate.render.console import log_safe
    from gate.run.shards import run_shard

    shown = progress(show_progress and not quiet)
    try:
        part = run_shard(config, shard, replace(options, progress=shown))
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


def merge_and_write(config: str, parts: list[str], to: Destinations, options: RunOptions, *, quiet: bool = False) -> Report:
    """Merge the parts into one report, write the reports, print the console report (as ``run_and_write``)."""
    from gate.run.merge import merge_viewed

    return written(merge_viewed(config, parts, options), to, quiet)
