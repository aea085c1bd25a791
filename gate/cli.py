"""The command line: ``rag-gate run | merge | show | validate | golden check | golden generate | baseline update |
history record | cache merge``.

Exit codes: 0 every gate passed, 1 a gate failed, 2 invalid input, 3 the run could not complete.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gate import __version__
from gate.core.errors import EXIT_ERROR, EXIT_PASS, RagGateError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rag-gate", description="Gate pull requests on the quality of a RAG system.")
    p.add_argument("--version", action="version", version=f"rag-gate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    spec = argparse.ArgumentParser(add_help=False)  # the one --config every command takes
    spec.add_argument("--config", default="rag-eval.yml", help="the spec file (default: rag-eval.yml)")

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

    merge = sub.add_parser("merge", parents=[spec], help="merge the parts of a sharded run into one report, and gate it")
    merge.add_argument("parts", nargs="+", metavar="PART", help="the parts (rag-gate run --shard I/N --report PART), or "
                       "folders holding them")
    merge.add_argument("--report", metavar="PATH", help="write report.json here ('-' for stdout)")
    merge.add_argument("--markdown", metavar="PATH", help="write the PR comment body (Markdown) here")
    merge.add_argument("--junit", metavar="PATH", help="write JUnit XML (one test case per gate) here")
    merge.add_argument("--html", metavar="PATH", help="write the HTML report here (see `rag-gate run --html`)")
    merge.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")

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
    rec.add_argument("--branch", help="branch the run was on (default: GITHUB_REF_NAME)")

    plan = sub.add_parser("plan", parents=[spec], help="what a run will do and spend: cases, samples, judge calls, cache, cost")
    plan.add_argument("--no-target", action="store_true", help="do not ask the target for the sampled answers (then nothing "
                      "counts as cached)")

    show = sub.add_parser("show", parents=[spec], help="one case in full: question, retrieved passages, answer, scores, "
                          "the baseline's beside them")
    show.add_argument("case", metavar="CASE_ID", help="the golden case's id")
    show.add_argument("--report", required=True, metavar="PATH", help="report.json of the run")

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

    cache = sub.add_parser("cache", help="the judge cache")
    cache_sub = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    cm = cache_sub.add_parser("merge", parents=[spec], help="fold several judge caches (one per shard) into one")
    cm.add_argument("caches", nargs="+", metavar="CACHE", help="the cache files to fold in")
    cm.add_argument("--output", metavar="PATH", help="the cache to fold them into (default: cache.path of the spec)")
    return p


def cmd_run(args: argparse.Namespace) -> int:
    from gate.app import Outputs, run_and_write
    from gate.pipeline import RunOptions

    options = RunOptions(commit=os.environ.get("GITHUB_SHA"), use_cache=not args.no_cache)
    if args.shard is not None:
        from gate.app import run_shard_and_write
        from gate.core.errors import InputError
        from gate.shards import parse_shard

        shard = parse_shard(args.shard)
        if not args.report:
            raise InputError("a shard writes its part to --report: give the path", key="--report")
        for flag, value in (("--markdown", args.markdown), ("--junit", args.junit), ("--html", args.html)):
            if value:
                raise InputError(f"a shard writes its part only; {flag} is written by `rag-gate merge`", key=flag)
        part = run_shard_and_write(args.config, shard, args.report, options, show_progress=not args.no_progress, quiet=args.quiet)
        return 3 if part["errors"] else EXIT_PASS
    report = run_and_write(args.config, Outputs(args.report, args.markdown, args.junit, args.html), options,
                           show_progress=not args.no_progress, quiet=args.quiet)
    return report["exit_code"]


def cmd_merge(args: argparse.Namespace) -> int:
    from gate.app import Outputs, merge_and_write
    from gate.pipeline import RunOptions

    report = merge_and_write(args.config, args.parts, Outputs(args.report, args.markdown, args.junit, args.html),
                             RunOptions(commit=os.environ.get("GITHUB_SHA")), quiet=args.quiet)
    return report["exit_code"]


def cmd_cache_merge(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.judges.cache import merge_caches

    out = Path(args.output) if args.output else load_spec(args.config).resolve(load_spec(args.config).data["cache"]["path"])
    added = merge_caches(out, [Path(c) for c in args.caches])
    print(f"folded {len(args.caches)} cache(s) into {out}: {added.scores} scores and {added.texts} texts added, "
          f"{added.total_scores} scores and {added.total_texts} texts in all")
    return EXIT_PASS


def parse_mix(text: str) -> dict[str, float]:
    from gate.core.errors import InputError

    mix: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = -1.0
        if not sep or not name.strip() or not 0 <= share <= 1:
            raise InputError(f"must be TYPE=SHARE pairs with shares from 0 to 1 (simple=0.4,ambiguous=0.15), got {item!r}", key="--mix")
        mix[name.strip()] = share
    if abs(sum(mix.values()) - 1) > 0.01:
        raise InputError(f"the shares must add up to 1, they add up to {sum(mix.values()):g}", key="--mix")
    return mix


def cmd_golden_check(args: argparse.Namespace) -> int:
    import json

    from gate.config.loader import load_spec
    from gate.core.goldencheck import check
    from gate.core.ranking import id_mapper
    from gate.io.files import write_text
    from gate.io.golden import load_corpus_ids, load_golden_set
    from gate.render.console import log_safe

    mix = parse_mix(args.mix) if args.mix else None
    spec = load_spec(args.config, unset_ok=True)  # nothing is asked: the target's and judge's variables may be unset
    cases = load_golden_set(spec.golden_set_path)
    corpus = load_corpus_ids(Path(args.corpus)) if args.corpus else None
    findings, counts = check(cases, spec.data["stages"], corpus=corpus, mix=mix,
                             to_id=id_mapper((spec.retrieval or {}).get("match", {})))
    if args.json:
        write_text(args.json, json.dumps({"findings": findings, "counts": counts}, indent=2, ensure_ascii=False) + "\n",
                   what="findings")
    out = sys.stderr if args.json == "-" else sys.stdout
    print(f"{spec.golden_set_path}: {counts['cases']} cases", file=out)
    for key in ("type", "question_type", "category", "tag"):
        if counts[key]:
            print(log_safe(f"  {key}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts[key].items(), key=lambda kv: -kv[1]))), file=out)
    for f in findings:
        print(log_safe(f"{f['level']:<7} {f['code']:<21} {f['message']}"), file=out)
    errors = sum(1 for f in findings if f["level"] == "error")
    warnings = sum(1 for f in findings if f["level"] == "warning")
    print(f"{errors} error(s), {warnings} warning(s), {len(findings) - errors - warnings} note(s)", file=out)
    return 1 if errors else EXIT_PASS


def cmd_golden_generate(args: argparse.Namespace) -> int:
    import json
    import os

    from gate.config.loader import load_spec
    from gate.core.errors import InputError
    from gate.core.goldencheck import DEFAULT_MIX
    from gate.core.ranking import id_mapper
    from gate.goldengen import KINDS, generate
    from gate.io.files import write_text
    from gate.io.golden import load_corpus, load_golden_set
    from gate.stages.judging import judge_settings, open_cache

    if args.n < 1:
        raise InputError(f"must be at least 1, got {args.n}", key="--n")
    mix = parse_mix(args.mix) if args.mix else DEFAULT_MIX
    unknown = sorted(set(mix) - set(KINDS))
    if unknown:
        raise InputError(f"golden generate writes {', '.join(KINDS)}; not {', '.join(unknown)}", key="--mix")
    spec = load_spec(args.config)
    settings, why_not = judge_settings(spec.data.get("judge"), os.environ, secrets=spec.secrets)
    if settings is None:
        raise InputError(f"golden generate writes with the spec's judge: {why_not}", key="judge")
    corpus = load_corpus(Path(args.corpus), texts=True)
    existing = load_golden_set(spec.golden_set_path) if spec.golden_set_path.exists() else []
    cache = open_cache(spec, True)
    try:
        outcome = generate(corpus, existing, args.n, mix, settings, cache, seed=args.seed,
                           to_doc=id_mapper((spec.retrieval or {}).get("match", {})))
    finally:
        cache.close()
    write_text(args.out, "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in outcome.cases), what="candidates")
    kinds: dict[str, int] = {}
    for c in outcome.cases:
        kinds[c["question_type"]] = kinds.get(c["question_type"], 0) + 1
    calls = int(outcome.usage.get("calls", 0))
    tokens = int(outcome.usage.get("prompt_tokens", 0)) + int(outcome.usage.get("completion_tokens", 0))
    fresh = len(outcome.cases) - outcome.cached
    per = f" ({calls / fresh:.2f} calls and {tokens / fresh:,.0f} tokens a new candidate)" if fresh > 0 and calls else ""
    print(f"wrote {len(outcome.cases)} candidate(s) to {args.out}: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    print(f"judge: {calls} call(s), {tokens:,} tokens{per}; {outcome.cached} from the cache")
    from gate.render.console import log_safe

    for why in outcome.dropped[:10]:
        print(log_safe(f"dropped: {why}"))
    if len(outcome.dropped) > 10:
        print(f"dropped: ... and {len(outcome.dropped) - 10} more")
    print("every candidate has metadata.review: pending: runs leave it out until you review it and remove the field "
          "(or set it to approved); `rag-gate golden check` lists them")
    if outcome.stopped:
        print(log_safe(f"rag-gate: stopped early: {outcome.stopped}"), file=sys.stderr)
        return 3
    short = {k: w - kinds.get(k, 0) for k, w in outcome.wanted.items() if kinds.get(k, 0) < w}
    if short:
        print("fewer than asked: " + ", ".join(f"{k} {n} short" for k, n in short.items()) + " (see dropped above)")
    return EXIT_PASS


def cmd_plan(args: argparse.Namespace) -> int:
    from gate.plan import make_plan, render_plan
    from gate.render.console import log_safe

    sys.stdout.write(log_safe(render_plan(make_plan(args.config, ask_target=not args.no_target))))
    return EXIT_PASS


def cmd_show(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.core.errors import InputError
    from gate.io.golden import load_golden_set
    from gate.io.reports import read_baseline, read_report
    from gate.render.console import log_safe
    from gate.render.show import render_case

    report = read_report(Path(args.report), allow_error=True)
    if not any(c["id"] == args.case for c in report["cases"]):
        raise InputError(f"no case {args.case!r} in this report ({report['golden_set']['n']} cases)", file=args.report)
    golden = baseline = None
    if Path(args.config).exists():  # the question, ground truth and the baseline come from the spec's files
        spec = load_spec(args.config, unset_ok=True)
        if spec.golden_set_path.exists():
            golden = next((c for c in load_golden_set(spec.golden_set_path) if c.id == args.case), None)
        baseline = read_baseline(spec.baseline_path)
    sys.stdout.write(log_safe(render_case(report, args.case, golden, baseline)))
    return EXIT_PASS


def cmd_validate(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.io.golden import load_golden_set

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
    if args.ping:
        from gate.ping import ping_judge, ping_target
        from gate.render.console import log_safe

        ok_target, said_target = ping_target(spec, cases)
        ok_judge, said_judge = ping_judge(spec)
        print(log_safe(said_target))
        print(log_safe(said_judge))
        if not (ok_target and ok_judge):
            return 3
    return EXIT_PASS


def cmd_baseline_update(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.core.records import baseline_from_report
    from gate.io.files import write_text
    from gate.io.reports import document_json, read_report
    from gate.pipeline import now_iso

    spec = load_spec(args.config)
    path = Path(args.report)
    report = read_report(path, allow_error=args.force)
    out = Path(args.output) if args.output else spec.baseline_path
    baseline = baseline_from_report(report, created_at=now_iso(), tool_version=__version__)
    write_text(out, document_json(baseline, "baseline", indent=2, sort_keys=True) + "\n", what="baseline")
    metrics = sum(len(s["metrics"]) for s in baseline["stages"].values())
    print(f"wrote {out}: {metrics} metrics from {len(baseline['stages'])} stage(s) of {path}")
    return EXIT_PASS


def cmd_history_record(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.core.records import entry_from_report
    from gate.io.history import LocalHistoryStore
    from gate.io.reports import read_report

    spec = load_spec(args.config)
    path = Path(args.report)
    report = read_report(path)
    store = LocalHistoryStore(spec.history_path, int(spec.data["history"]["max_entries"]))
    store.append(entry_from_report(report, branch=args.branch or os.environ.get("GITHUB_REF_NAME") or None))
    entries = store.read()
    for warning in store.warnings:
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: warning: {warning} (kept in the file)"), file=sys.stderr)
    print(f"recorded {path} in {spec.history_path} ({len(entries)} entries)")
    return EXIT_PASS


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "merge":
            return cmd_merge(args)
        if args.command == "cache":
            return cmd_cache_merge(args)
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "show":
            return cmd_show(args)
        if args.command == "golden":
            return cmd_golden_generate(args) if args.action == "generate" else cmd_golden_check(args)
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "history":
            return cmd_history_record(args)
        return cmd_baseline_update(args)
    except RagGateError as exc:
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: {exc.message}"), file=sys.stderr)  # a message may quote a file or a target's answer
        if exc.hint:
            print(log_safe(f"hint: {exc.hint}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rag-gate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so briefly; the traceback only on request
        if os.environ.get("RAG_GATE_DEBUG"):
            raise
        from gate.render.console import log_safe

        print(log_safe(f"rag-gate: internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        print("hint: set RAG_GATE_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
        return EXIT_ERROR
