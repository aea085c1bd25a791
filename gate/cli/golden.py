"""``rag-gate golden check``, ``golden generate`` and ``golden add``: the golden set's health, and candidate cases for it
(written by the judge from a corpus, or taken from the production traces a traces run judged)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.core.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, InputError

if TYPE_CHECKING:
    from gate.cli.generate import Outcome
    from gate.core.candidates import Choice, ScoredTrace
    from gate.core.model import GoldenCase

SHOWN_DROPPED = 20  # near-duplicates golden add names one by one


def parse_mix(text: str, kinds: Collection[str] | None = None) -> dict[str, float]:
    """``--mix`` ("simple=0.4,ambiguous=0.6") as shares that add up to 1; ``kinds``: the only names allowed. InputError
    naming --mix and what it received otherwise."""
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
    unknown = sorted(set(mix) - set(kinds)) if kinds is not None else []
    if unknown:
        raise InputError(f"golden generate writes {', '.join(kinds or ())}; not {', '.join(unknown)}", key="--mix")
    return mix


def cmd_golden_check(args: argparse.Namespace) -> int:
    from gate.config.loader import load_spec
    from gate.core.corpuscheck import LEVELS, check_corpus
    from gate.core.goldencheck import check
    from gate.io.files import write_text
    from gate.io.golden import load_corpus, load_golden_set
    from gate.render.console import log_safe

    mix = parse_mix(args.mix) if args.mix else None
    spec = load_spec(args.config, unset_ok=True)  # nothing is asked: the target's and judge's variables may be unset
    cases = load_golden_set(spec.golden_set_path)
    chunks = load_corpus(Path(args.corpus)) if args.corpus else None
    findings, counts = check(cases, spec.stages, corpus=[i for i, _ in chunks] if chunks is not None else None, mix=mix)
    if chunks is not None:  # the corpus's own findings: chunks cut at a bad place, empty or duplicate ones
        findings = sorted([*findings, *check_corpus(chunks)], key=lambda f: LEVELS.index(f["level"]))  # type: ignore[list-item]
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
    return EXIT_FAIL if errors else EXIT_PASS


def cmd_golden_generate(args: argparse.Namespace) -> int:
    from gate.cli.generate import KINDS, Request, generate
    from gate.config.loader import load_spec
    from gate.core.goldencheck import DEFAULT_MIX
    from gate.io.files import write_text
    from gate.io.golden import load_corpus, load_golden_set
    from gate.judges import resolve_judge
    from gate.stages.judging import open_cache

    if args.n < 1:
        raise InputError(f"must be at least 1, got {args.n}", key="--n")
    mix = parse_mix(args.mix, KINDS) if args.mix else DEFAULT_MIX
    spec = load_spec(args.config)
    settings, why_not = resolve_judge(spec.judge, os.environ, secrets=spec.secrets)
    if settings is None:
        raise InputError(f"golden generate writes with the spec's judge: {why_not}", key="judge")
    corpus = load_corpus(Path(args.corpus), texts=True)
    existing = load_golden_set(spec.golden_set_path) if spec.golden_set_path.exists() else []
    cache = open_cache(spec, True)
    try:
        outcome = generate(corpus, existing, Request(args.n, mix, args.seed, spec.stages.match.to_id()), settings, cache)
    finally:
        cache.close()
    write_text(args.out, "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in outcome.cases), what="candidates")
    return said(args.out, outcome)


def said(out: str, outcome: Outcome) -> int:
    """What golden generate wrote, dropped and spent, on the console; the exit code."""
    from gate.render.console import log_safe

    kinds: dict[str, int] = {}
    for c in outcome.cases:
        kinds[c["question_type"]] = kinds.get(c["question_type"], 0) + 1
    usage = outcome.usage
    calls = int(usage.get("calls", 0))
    tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    fresh = len(outcome.cases) - outcome.cached
    per = f" ({calls / fresh:.2f} calls and {tokens / fresh:,.0f} tokens a new candidate)" if fresh > 0 and calls else ""
    print(f"wrote {len(outcome.cases)} candidate(s) to {out}: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    print(f"judge: {calls} call(s), {tokens:,} tokens{per}; {outcome.cached} from the cache")
    for why in outcome.dropped[:10]:
        print(log_safe(f"dropped: {why}"))
    if len(outcome.dropped) > 10:
        print(f"dropped: ... and {len(outcome.dropped) - 10} more")
    print("every candidate has metadata.review: pending: runs leave it out until you review it and remove the field "
          "(or set it to approved); `rag-gate golden check` lists them")
    if outcome.stopped:
        print(log_safe(f"rag-gate: stopped early: {outcome.stopped}"), file=sys.stderr)
        return EXIT_ERROR
    short = {k: w - kinds.get(k, 0) for k, w in outcome.wanted.items() if kinds.get(k, 0) < w}
    if short:
        print("fewer than asked: " + ", ".join(f"{k} {n} short" for k, n in short.items()) + " (see dropped above)")
    return EXIT_PASS


def add_parser(golden_sub: Any) -> None:
    """``rag-gate golden add``'s arguments (``golden_sub``: the golden command's sub-parsers)."""
    ga = golden_sub.add_parser("add", help="write candidate cases from a traces run's report: the worst-scored and the "
                               "negatively rated production traces")
    ga.add_argument("--from-report", required=True, metavar="PATH", help="report.json of a traces run")
    ga.add_argument("--worst", type=int, metavar="N", help="the N lowest-scored traces (the mean of their judged metrics, "
                    "or --metric alone; ties by id)")
    ga.add_argument("--feedback", choices=["negative"], help="negative: every negatively rated trace too (alone: only them)")
    ga.add_argument("--out", required=True, metavar="FILE", help="where to write the candidates (JSONL; review them, then "
                    "append them to the golden set)")
    ga.add_argument("--metric", metavar="M", help="score the traces by this generation metric alone")
    against = ga.add_mutually_exclusive_group()
    against.add_argument("--config", metavar="SPEC", help="leave out near-duplicates of the cases of this spec's golden_set")
    against.add_argument("--golden", metavar="FILE", help="leave out near-duplicates of the cases of this golden set")


def cmd_golden_add(args: argparse.Namespace) -> int:
    from gate.core.candidates import choose, metric_names, traces_of
    from gate.io.files import write_text
    from gate.io.reports import read_report

    if args.worst is not None and args.worst < 1:
        raise InputError(f"must be at least 1, got {args.worst}", key="--worst")
    if args.worst is None and args.feedback is None:
        raise InputError("say which traces to add: --worst N (the N lowest-scored), --feedback negative (the negatively "
                         "rated ones), or both", key="golden add")
    path = Path(args.from_report)
    report = read_report(path, allow_error=True)
    if "traces" not in report:
        raise InputError(f"{path} has no traces section: golden add reads a traces run's report",
                         hint="write one with `rag-gate run --report PATH` and a spec whose target is traces")
    stage = report["stages"].get("generation")
    samples = stage.get("samples", []) if stage is not None else []
    names = metric_names(samples)
    if args.metric is not None and args.metric not in names:
        raise InputError(f"no trace of {path} has a score for {args.metric!r} (its generation metrics: "
                         f"{', '.join(names) or 'none'})", key="--metric")
    existing, note = _existing(args)
    traces = traces_of(report, args.metric)
    choice = choose(traces, existing, args.worst, args.feedback == "negative", report["run"]["created_at"])
    write_text(args.out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in choice.rows), what="candidates")
    _added(args, traces, choice, note)
    return EXIT_PASS


def _existing(args: argparse.Namespace) -> tuple[list[GoldenCase], str]:
    """The cases candidates must not nearly duplicate (--golden, or the golden_set of --config; else none), and a
    sentence saying what they were compared with."""
    from gate.io.golden import load_golden_set

    if args.golden:
        cases = load_golden_set(Path(args.golden))
        return cases, f"compared with the {len(cases)} case(s) of {args.golden}"
    if not args.config:
        return [], "no golden set given (--golden or --config): near-duplicates of existing cases were not looked for"
    from gate.config.loader import load_spec

    spec = load_spec(args.config, unset_ok=True)  # nothing is asked: the target's and judge's variables may be unset
    if "golden_set" not in spec.data:
        return [], f"{args.config} names no golden_set: near-duplicates of existing cases were not looked for"
    path = spec.golden_set_path
    if not path.exists():
        return [], f"{path} (the golden set of {args.config}) does not exist yet: no existing case to compare with"
    cases = load_golden_set(path)
    return cases, f"compared with the {len(cases)} case(s) of {path} (the golden set of {args.config})"


def _added(args: argparse.Namespace, traces: Sequence[ScoredTrace], choice: Choice, note: str) -> None:
    """What golden add picked, wrote and dropped, on the console (stderr when the candidates went to stdout)."""
    from gate.render.console import log_safe

    out = sys.stderr if args.out == "-" else sys.stdout
    by = sorted({m for t in traces for m in t.scores})
    picked = []
    if args.worst is not None:
        picked.append(f"the {choice.worst} worst-scored (score: {'mean of ' if len(by) > 1 else ''}{', '.join(by) or 'none'})")
    if args.feedback == "negative":
        picked.append(f"{choice.negative} {'more ' if args.worst is not None else ''}negatively rated")
    print(log_safe(f"wrote {len(choice.rows)} candidate(s) to {args.out} from {len(traces)} sampled trace(s) of "
                   f"{args.from_report}: picked {' and '.join(picked)}; {len(choice.dropped)} dropped as near-duplicates"),
          file=out)
    for d in choice.dropped[:SHOWN_DROPPED]:
        of = f"the golden set's case {d.like}" if d.existing else f"candidate {d.like}, scored lower"
        print(log_safe(f"dropped: trace {d.trace_id} {json.dumps(d.question[:80], ensure_ascii=False)}: near-duplicate of "
                       f"{of} ({d.ratio:.0%} of their words alike)"), file=out)
    if len(choice.dropped) > SHOWN_DROPPED:
        print(f"dropped: ... and {len(choice.dropped) - SHOWN_DROPPED} more", file=out)
    if args.worst is not None and choice.worst < args.worst:
        scored = f"a score for {args.metric}" if args.metric else "a judged score"
        print(f"fewer than {args.worst} worst: {choice.scored} of the {len(traces)} sampled traces have {scored} "
              "(one with none is never among the worst)", file=out)
    print(log_safe(f"note: {note}"), file=out)
    print("every candidate has metadata.review: pending: runs leave it out until a reviewer gives it its relevant_doc_ids "
          "(metadata.suggested_relevant_ids: what production retrieved) and ground_truth, and removes the field (or sets "
          "it to approved); `rag-gate golden check` lists them", file=out)
