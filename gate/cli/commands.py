"""The commands that run, merge, show, validate and record: each reads its arguments and calls the layer that does
the work (gate.app, gate.run, gate.io); what they print names files and counts, and quotes nothing unescaped."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gate import __version__
from gate.core.errors import EXIT_ERROR, EXIT_PASS, InputError
from gate.core.model import GoldenCase
from gate.core.report import Report, StoredRun

if TYPE_CHECKING:
    from gate.config.spec import Spec


def cmd_run(args: argparse.Namespace) -> int:
    from gate.app import Destinations, run_and_write
    from gate.run.options import RunOptions

    options = RunOptions(commit=os.environ.get("GITHUB_SHA"), use_cache=not args.no_cache, corpus=args.corpus)
    if args.shard is not None:
        from gate.app import run_shard_and_write
        from gate.run.shards import parse_shard

        shard = parse_shard(args.shard)
        if args.write_paraphrases:
            raise InputError("--write-paraphrases needs the whole run's rewrites: not with --shard", key="--write-paraphrases")
        if not args.report:
            raise InputError("a shard writes its part to --report: give the path", key="--report")
        for flag, value in (("--markdown", args.markdown), ("--junit", args.junit), ("--html", args.html)):
            if value:
                raise InputError(f"a shard writes its part only; {flag} is written by `rag-gate merge`", key=flag)
        part = run_shard_and_write(args.config, shard, args.report, options, show_progress=not args.no_progress, quiet=args.quiet)
        return EXIT_ERROR if part["errors"] else EXIT_PASS
    report = run_and_write(args.config, Destinations(args.report, args.markdown, args.junit, args.html), options,
                           show_progress=not args.no_progress, quiet=args.quiet)
    if args.write_paraphrases:
        _write_paraphrases(report, args.write_paraphrases)
    return report["exit_code"]


def _write_paraphrases(report: Report, path: str) -> None:
    """The rewrites the run's paraphrase test used, one {id, paraphrases} line per case (gate.core.paraphrase)."""
    from gate.core.paraphrase import review_lines
    from gate.io.files import write_text

    stage = report["stages"].get("robustness")
    info = None if stage is None else stage.get("paraphrase")
    if info is None:
        print("rag-gate: --write-paraphrases: this run has no paraphrase test's rewrites (stages.robustness.paraphrase); "
              f"{path} not written", file=sys.stderr)
        return
    write_text(Path(path), review_lines(info))


def cmd_merge(args: argparse.Namespace) -> int:
    from gate.app import Destinations, merge_and_write
    from gate.run.options import RunOptions

    report = merge_and_write(args.config, args.parts, Destinations(args.report, args.markdown, args.junit, args.html),
                             RunOptions(commit=os.environ.get("GITHUB_SHA"), corpus=args.corpus), quiet=args.quiet)
    return report["exit_code"]


def cmd_cache_merge(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.judges.cache_merge import merge_caches

    out = Path(args.output) if args.output else (spec := load_spec(args.config)).resolve(spec.data["cache"]["path"])
    added = merge_caches(out, [Path(c) for c in args.caches])
    print(f"folded {len(args.caches)} cache(s) into {out}: {added.scores} scores and {added.texts} texts added, "
          f"{added.total_scores} scores and {added.total_texts} texts in all")
    return EXIT_PASS


def cmd_plan(args: argparse.Namespace) -> int:
    from gate.render.console import log_safe
    from gate.run.plan import make_plan, render_plan

    sys.stdout.write(log_safe(render_plan(make_plan(args.config, ask_target=not args.no_target))))
    return EXIT_PASS


def cmd_show(args: argparse.Namespace) -> int:
    from gate.io.reports import read_report
    from gate.render.console import log_safe
    from gate.render.show import render_case

    report = read_report(Path(args.report), allow_error=True)
    if not any(c["id"] == args.case for c in report["cases"]):
        raise InputError(f"no case {args.case!r} in this report ({report['golden_set']['n']} cases)", file=args.report)
    traced = next((t for t in report.get("traces", {}).get("cases", []) if t["id"] == args.case), None)
    golden: GoldenCase | None
    notes: list[str]
    if traced is not None:  # a traces run: the question is the trace's, kept in the report; there is no baseline
        golden, baseline, notes = GoldenCase(traced["id"], traced["question"], traced["line"]), None, []
    else:
        golden, baseline, notes = _case_sources(args.case, args.config, report)
    sys.stdout.write(log_safe(render_case(report, args.case, golden, baseline)))
    for note in notes:
        print(log_safe(note), file=sys.stderr)
    return EXIT_PASS


def _case_sources(case_id: str, given: str | None, report: Report) -> tuple[GoldenCase | None, StoredRun | None, list[str]]:
    """The golden case (its question and ground truth) and the baseline from the spec ``given`` (--config), else from
    the spec the report was made from (its run.config); a note for each thing that could not be found, or that is not
    what the report was made from (the golden set's fingerprint differs). An unreadable spec that was not named is a
    note, not an error."""
    from gate.config.loader import load_spec
    from gate.core.cases import fingerprint
    from gate.io.golden import load_golden_set
    from gate.io.reports import read_baseline

    config = given or report["run"]["config"]
    hint = "pass --config with the spec the report was made from"
    if not Path(config).is_file():
        return None, None, [f"note: the spec {config} is not here, so the question, ground truth and baseline are not shown: {hint}"]
    try:
        spec = load_spec(config, unset_ok=True)
        cases = load_golden_set(spec.golden_set_path) if spec.golden_set_path.is_file() else []
    except InputError as exc:
        if given:
            raise
        return None, None, [f"note: the spec {config} could not be read ({exc.message}): {hint}"]
    notes = []
    if cases and fingerprint(cases) != report["fingerprints"].get("golden_set"):
        notes.append(f"note: {spec.golden_set_path} is not the golden set this report was made from (its fingerprint differs): "
                     "the question shown may have changed since")
    golden = next((c for c in cases if c.id == case_id), None)
    if golden is None:
        notes.append(f"note: {case_id} is not in {spec.golden_set_path} (the golden set of {config}): its question and ground "
                     f"truth are not shown; {hint}")
    return golden, read_baseline(spec.baseline_path), notes


def cmd_validate(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.io.golden import load_golden_set

    spec = load_spec(args.config)
    if spec.traces is not None:
        return validate_traces(spec, args.ping)
    cases = load_golden_set(spec.golden_set_path)
    by_type: dict[str, int] = {}
    for c in cases:
        by_type[c.type] = by_type.get(c.type, 0) + 1
    kinds = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
    print(f"{spec.path}: valid")
    print(f"{spec.golden_set_path}: {len(cases)} cases ({kinds})")
    if spec.results_file is not None:
        path, id_key = spec.results_file
        if path.exists():
            from gate.targets.results import near_key, read_results

            results = read_results(path, cases, id_key=id_key)
            missing = [c.id for c in cases if c.id not in results.outputs]
            near = [(c, *results.near[near_key(c)]) for c in missing if near_key(c) in results.near]
            print(f"{path}: {len(results.outputs)} lines match golden cases, {len(missing)} cases have no line"
                  + (f", {len(results.unmatched)} lines match no case" if results.unmatched else "")
                  + (f"; {len(near)} of those lines have an id that differs from a case's only in spaces or case (first: "
                     f"line {near[0][1]} has {near[0][2]!r}, the case is {near[0][0]!r}): fix them" if near else ""))
        else:
            print(f"{path}: not there yet (it is read when `rag-gate run` starts)")
    if args.ping:
        from gate.cli.ping import ping_judge, ping_target
        from gate.render.console import log_safe

        ok_target, said_target = ping_target(spec, cases)
        ok_judge, said_judge = ping_judge(spec)
        print(log_safe(said_target))
        print(log_safe(said_judge))
        if not (ok_target and ok_judge):
            return EXIT_ERROR
    return EXIT_PASS


def validate_traces(spec: Spec, ping: bool) -> int:
    """``validate`` of a traces spec: the trace file read (every unreadable trace named), the window's sample drawn;
    with ``--ping`` the judge asked once (the traces target asks nothing)."""
    from gate.render.console import log_safe
    from gate.run.options import now_iso
    from gate.run.traces import read_window

    read = read_window(spec, now_iso())
    t = read.info
    print(f"{spec.path}: valid")
    print(log_safe(f"{t['path']}: {t['read']} traces read ({t['format']}), {t['unreadable']} unreadable; {t['in_window']} in the "
                   f"window, {t['sampled']} sampled"))
    for p in t["problems"]:
        print(log_safe(f"  line {p['line']}{' (' + p['id'] + ')' if p['id'] else ''}: {p['reason']}"))
    if t["unreadable"] > len(t["problems"]):
        print(f"  ... {t['unreadable'] - len(t['problems'])} more")
    if ping:
        from gate.cli.ping import ping_judge

        ok, said = ping_judge(spec)
        print(log_safe(said))
        if not ok:
            return EXIT_ERROR
    return EXIT_PASS


def cmd_baseline_update(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.core.records import baseline_from_report
    from gate.io.files import write_text
    from gate.io.reports import document_json, read_report
    from gate.run.options import now_iso

    spec = load_spec(args.config)
    path = Path(args.report)
    report = read_report(path, allow_error=args.force)
    out = Path(args.output) if args.output else spec.baseline_path
    baseline = baseline_from_report(report, created_at=now_iso(), tool_version=__version__)
    write_text(out, document_json(baseline, "baseline", indent=2, sort_keys=True) + "\n", what="baseline")
    metrics = sum(len(s["metrics"]) for s in baseline["stages"].values())
    print(f"wrote {out}: {metrics} metrics from {len(baseline['stages'])} stage(s) of {path}")
    return EXIT_PASS


# where CI services give the branch a job runs on: GitHub Actions, GitLab CI, Jenkins, Buildkite, CircleCI
BRANCH_VARIABLES = ("GITHUB_REF_NAME", "CI_COMMIT_BRANCH", "BRANCH_NAME", "BUILDKITE_BRANCH", "CIRCLE_BRANCH")


def cmd_history_record(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.core.records import entry_from_report
    from gate.io.history import LocalHistoryStore
    from gate.io.reports import read_report

    spec = load_spec(args.config)
    path = Path(args.report)
    report = read_report(path)
    store = LocalHistoryStore(spec.history_path, int(spec.data["history"]["max_entries"]))
    branch = args.branch or next((os.environ[v] for v in BRANCH_VARIABLES if os.environ.get(v)), None)
    store.append(entry_from_report(report, branch=branch))
    entries = store.read()
    from gate.render.console import log_safe

    if branch is None:
        print(f"rag-gate: note: the entry has no branch (give --branch; none of {', '.join(BRANCH_VARIABLES)} is set): "
              "the dashboard shows it with none", file=sys.stderr)

    for warning in store.warnings:
        print(log_safe(f"rag-gate: warning: {warning} (kept in the file)"), file=sys.stderr)
    print(f"recorded {path} in {spec.history_path} ({len(entries)} entries)")
    return EXIT_PASS
