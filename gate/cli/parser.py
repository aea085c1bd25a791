"""The command line's arguments: one sub-command per job, each taking the spec with --config."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gate import __version__

Commands = Any  # argparse's sub-parsers action (its class is private)


def terminal_columns() -> int:
    """The terminal's width as shutil.get_terminal_size reads it (COLUMNS, else standard output's terminal, else 80),
    without importing shutil, and the compression modules it imports, for a run that formats no help."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, as wide as it makes itself (the terminal's width less 2)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """argparse's parser with that formatter (argparse makes one for every argument added); its sub-parsers too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser(first: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. ``first``: the first argument, when the parser reads one command line: "run" or
    "merge" builds those two sub-commands alone (a run starts milliseconds sooner; what it parses, its help and
    its errors are the same); anything else, or None, builds every sub-command."""
    p = _Parser(prog="rag-gate", description="Gate pull requests on the quality of a RAG system.")
    p.add_argument("--version", action="version", version=f"rag-gate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    spec = _Parser(add_help=False)  # the one --config every command takes
    spec.add_argument("--config", default="rag-eval.yml", help="the spec file (default: rag-eval.yml)")
    _run_and_merge(sub, spec)
    if first in ("run", "merge"):
        return p
    from gate.cli.calibrate import add_parsers as add_calibration_parsers  # (not imported for a run: see ``first``)
    from gate.cli.dashboard import add_parser as add_dashboard_parser
    from gate.cli.gitlab import add_parser as add_gitlab_parser
    from gate.cli.watch import add_parser as add_watch_parser

    _validate_baseline_history(sub, spec)
    _plan_and_show(sub, spec)
    _golden_and_cache(sub, spec)
    add_dashboard_parser(sub)
    add_watch_parser(sub, spec)
    add_gitlab_parser(sub)
    add_calibration_parsers(sub)
    return p


def _run_and_merge(sub: Commands, spec: argparse.ArgumentParser) -> None:
    run = sub.add_parser("run", parents=[spec], help="ask the target, compute the metrics, apply the gates, write the reports")
    run.add_argument("--report", metavar="PATH", help="write report.json here ('-' for stdout)")
    run.add_argument("--markdown", metavar="PATH", help="write the PR comment body (Markdown) here")
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML (one test case per gate) here")
    run.add_argument("--html", metavar="PATH", help="write the HTML report here: one self-contained file with every case, "
                     "filters and each case's passages, answer diff and scores")
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    run.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    run.add_argument("--no-cache", action="store_true", help="judge every case again, ignoring and not writing the judge cache")
    run.add_argument("--shard", metavar="I/N", help="run only shard I of N (a stable split by case id) and write its part to "
                     "--report; `rag-gate merge` gates the parts together")
    run.add_argument("--corpus", metavar="FILE", help="the corpus (JSONL, one {id, text} a line): a relevant id no run "
                     "retrieved is diagnosed corpus_missing when the corpus lacks it, not_retrieved when it holds it")
    run.add_argument("--write-paraphrases", metavar="FILE", help="write the paraphrase test's rewrites here (JSONL, one "
                     "{id, paraphrases} a line) to review and merge into the golden set")

    merge = sub.add_parser("merge", parents=[spec], help="merge the parts of a sharded run into one report, and gate it")
    merge.add_argument("parts", nargs="+", metavar="PART", help="the parts (rag-gate run --shard I/N --report PART), or "
                       "folders holding them")
    merge.add_argument("--report", metavar="PATH", help="write report.json here ('-' for stdout)")
    merge.add_argument("--markdown", metavar="PATH", help="write the PR comment body (Markdown) here")
    merge.add_argument("--junit", metavar="PATH", help="write JUnit XML (one test case per gate) here")
    merge.add_argument("--html", metavar="PATH", help="write the HTML report here (see `rag-gate run --html`)")
    merge.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    merge.add_argument("--corpus", metavar="FILE", help="the corpus (see `rag-gate run --corpus`)")


def _validate_baseline_history(sub: Commands, spec: argparse.ArgumentParser) -> None:
    val = sub.add_parser("validate", parents=[spec], help="check the spec and the golden set without running anything")
    val.add_argument("--ping", action="store_true", help="also ask the target one question and the judge one tiny call, "
                     "and say whether each answered and how fast (exit 3 when one did not)")

    base = sub.add_parser("baseline", help="manage the baseline file")
    base_sub = base.add_subparsers(dest="action", required=True, metavar="ACTION")
    upd = base_sub.add_parser("update", parents=[spec], help="write the baseline from a report")
    upd.add_argument("--report", required=True, metavar="PATH", help="report.json of the run to take as the baseline")
    upd.add_argument("--output", metavar="PATH", help="where to write it (default: baseline.path of the spec)")
    upd.add_argument("--force", action="store_true", help="accept a report whose verdict is 'error'")

    hist = sub.add_parser("history", help="the history of default-branch runs (for trend gates)")
    hist_sub = hist.add_subparsers(dest="action", required=True, metavar="ACTION")
    rec = hist_sub.add_parser("record", parents=[spec], help="append a run's report to the history file")
    rec.add_argument("--report", required=True, metavar="PATH", help="report.json of a default-branch run")
    rec.add_argument("--branch", help="branch the run was on (default: GITHUB_REF_NAME, "
                     "CI_COMMIT_BRANCH, BRANCH_NAME, BUILDKITE_BRANCH or CIRCLE_BRANCH, the first that is set)")


def _plan_and_show(sub: Commands, spec: argparse.ArgumentParser) -> None:
    plan = sub.add_parser("plan", parents=[spec], help="what a run will do and spend: cases, samples, judge calls, cache, cost")
    plan.add_argument("--no-target", action="store_true", help="do not ask the target for the sampled answers (then nothing "
                      "counts as cached)")

    # its own --config (not the shared one: setting a default on a parent's action would change every command's)
    show = sub.add_parser("show", help="one case in full: question, retrieved passages, answer, scores, the baseline's beside them")
    show.add_argument("--config", default=None, help="the spec the report was made from (default: the report's own run.config)")
    show.add_argument("case", metavar="CASE_ID", help="the golden case's id")
    show.add_argument("--report", required=True, metavar="PATH", help="report.json of the run")


def _golden_and_cache(sub: Commands, spec: argparse.ArgumentParser) -> None:
    from gate.cli.golden import add_parser as add_golden_add_parser
    from gate.cli.goldenio import add_parsers as add_golden_io_parsers

    golden = sub.add_parser("golden", help="the golden set")
    golden_sub = golden.add_subparsers(dest="action", required=True, metavar="ACTION")
    gc = golden_sub.add_parser("check", parents=[spec], help="find duplicates, unknown ids, a lopsided mix, stale cases")
    gc.add_argument("--corpus", metavar="FILE", help="the corpus (JSONL, one {id, text} a line): relevant ids it lacks, "
                    "documents no case covers")
    gc.add_argument("--json", metavar="OUT", help="write the findings as JSON here ('-' for stdout)")
    gc.add_argument("--mix", metavar="TYPE=SHARE,...", help="the target question-type mix (default: simple=0.4,"
                    "multi_context=0.25,ambiguous=0.15,out_of_scope=0.1,adversarial=0.1)")

    gg = golden_sub.add_parser("generate", parents=[spec], help="write candidate cases from a corpus with the spec's judge")
    gg.add_argument("--corpus", metavar="FILE", required=True, help="the corpus (JSONL, one {id, text, metadata} a line)")
    gg.add_argument("--n", type=int, required=True, metavar="N", help="how many candidates")
    gg.add_argument("--mix", metavar="TYPE=SHARE,...", help="the kinds to write (default: simple=0.4,multi_context=0.25,"
                    "ambiguous=0.15,out_of_scope=0.1,adversarial=0.1)")
    gg.add_argument("--seed", type=int, default=0, help="which passages each candidate is made from (default 0)")
    gg.add_argument("--out", metavar="FILE", required=True, help="where to write the candidates (JSONL; review them, then "
                    "append them to the golden set)")
    add_golden_add_parser(golden_sub)
    add_golden_io_parsers(golden_sub)

    corpus = sub.add_parser("corpus", help="the corpus")
    corpus_sub = corpus.add_subparsers(dest="action", required=True, metavar="ACTION")
    cc = corpus_sub.add_parser("check", help="find chunks cut at a bad place (JSON, code, a table, a heading), empty, "
                               "duplicate or oversized chunks")
    cc.add_argument("--corpus", metavar="FILE", required=True, help="the corpus (JSONL, one {id, text} a line)")
    cc.add_argument("--json", metavar="OUT", help="write the findings as JSON here ('-' for stdout)")
    cc.add_argument("--max-tokens", type=int, metavar="N", help="a chunk of more tokens than N is oversized (default: no limit)")

    cache = sub.add_parser("cache", help="the judge cache")
    cache_sub = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    cm = cache_sub.add_parser("merge", parents=[spec], help="fold several judge caches (one per shard) into one")
    cm.add_argument("caches", nargs="+", metavar="CACHE", help="the cache files to fold in")
    cm.add_argument("--output", metavar="PATH", help="the cache to fold them into (default: cache.path of the spec)")
