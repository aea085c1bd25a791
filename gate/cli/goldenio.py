"""``rag-gate golden import`` and ``golden export``: the golden set from, and to, the datasets teams already hold
(RAGAS and DeepEval datasets, TREC topics and qrels, a spreadsheet). Plain JSON and CSV: neither engine is imported."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.core.errors import EXIT_PASS, InputError, InputErrors

if TYPE_CHECKING:
    from gate.core.goldenformats import Imported, Row

SHOWN_DROPPED = 200  # dropped rows said one by one; beyond it a count (a file whose every row is wrong says it sooner)


def add_parsers(golden_sub: Any) -> None:
    """``golden import``'s and ``golden export``'s arguments (``golden_sub``: the golden command's sub-parsers)."""
    gi = golden_sub.add_parser("import", help="write a golden set from a RAGAS or DeepEval dataset, TREC topics and qrels, "
                               "or a CSV")
    gi.add_argument("--format", required=True, choices=("ragas", "deepeval", "trec", "csv"), help="what the input is")
    gi.add_argument("--in", dest="inputs", action="append", metavar="PATH", help="the input file (ragas, deepeval, csv: "
                    "JSONL, a JSON list, or CSV by its .csv name); repeat it to join several")
    gi.add_argument("--topics", metavar="PATH", help="trec: the topics (<top> blocks, <topic number=...>, or qid<TAB>text lines)")
    gi.add_argument("--qrels", metavar="PATH", help="trec: the qrels (qid iteration docid grade a line)")
    gi.add_argument("--query-field", choices=("title", "description", "question"), default="title", help="trec: the topic "
                    "field that is the question (default title; <query> counts as title; TREC-COVID's <question>; the "
                    "others go to metadata)")
    gi.add_argument("--map", metavar="FIELD=COLUMN,...", help="csv: which column fills which field, e.g. question=Question,"
                    "ground_truth=Expected,relevant_doc_ids=Doc IDs,metadata.owner=Owner (default: the columns named as fields)")
    gi.add_argument("--sep", default=";", help="csv: what separates the items of a list cell (default ';')")
    gi.add_argument("--delimiter", default=",", help="csv: what separates the cells ('tab' for TSV; default ',')")
    gi.add_argument("--strict", action="store_true", help="a row that cannot be a case is an error (exit 2, nothing written)")
    gi.add_argument("--out", required=True, metavar="FILE", help="the golden set to write (JSONL; '-' for stdout)")

    ge = golden_sub.add_parser("export", help="write the golden set as a RAGAS or DeepEval dataset")
    ge.add_argument("--format", required=True, choices=("ragas", "deepeval"), help="what to write")
    source = ge.add_mutually_exclusive_group()
    source.add_argument("--config", default="rag-eval.yml", help="the spec whose golden_set to export (default: rag-eval.yml)")
    source.add_argument("--golden", metavar="FILE", help="the golden set to export (instead of a spec's)")
    ge.add_argument("--out", required=True, metavar="FILE", help="where to write it: FILE.json a JSON list, else JSONL ('-' for "
                    "stdout)")


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_overwrite(out: str, inputs: Sequence[Path]) -> None:
    if out == "-":
        return
    for path in inputs:
        if _same(Path(out), path) or Path(out).resolve() == path.resolve():
            raise InputError(f"{out} is the input {path}: write to another file", key="--out")


def _inputs(args: argparse.Namespace) -> list[Path]:
    """The files this import reads; InputError for options the format does not take or files it needs."""
    trec = args.format == "trec"
    if trec and args.inputs:
        raise InputError("trec reads two files: give them as --topics PATH --qrels PATH", key="--in")
    if trec and not (args.topics and args.qrels):
        raise InputError("trec needs the topics and the qrels: --topics PATH --qrels PATH",
                         key="--topics" if not args.topics else "--qrels")
    if not trec and not args.inputs:
        raise InputError(f"{args.format} reads --in PATH", key="--in")
    for flag, given, fmt in (("--topics", args.topics, "trec"), ("--qrels", args.qrels, "trec"), ("--map", args.map, "csv")):
        if given and args.format != fmt:
            raise InputError(f"{flag} is for --format {fmt}, not {args.format}", key=flag)
    named = [("--topics", args.topics), ("--qrels", args.qrels)] if trec else [("--in", p) for p in args.inputs]
    for i, (flag, given) in enumerate(named):
        if given == "-":
            raise InputError("standard input is not read: give the file's path (a file named '-' is ./-)", key=flag)
        twice = next((f"{f} {g}" for f, g in named[:i] if _same(Path(g), Path(given))), None)
        if twice:
            raise InputError(f"{given} is the file given already ({twice}): its rows would be read twice", key=flag)
    return [Path(given) for _, given in named]


def _delimiter(args: argparse.Namespace) -> str:
    """The cell delimiter of a CSV import ('tab' and '\\t' for a tab); InputError for one that is not a character
    csv can split on, or an empty --sep."""
    delimiter = "\t" if args.delimiter in ("tab", "\\t") else args.delimiter
    if len(delimiter) != 1 or delimiter in ('"', "\n", "\r"):
        raise InputError(f"must be one character other than a quote or a line end ('tab' for a tab), got {args.delimiter!r}",
                         key="--delimiter")
    if not args.sep or args.sep in ("\n", "\r"):
        raise InputError(f"must be a character or more (not a line end), got {args.sep!r}", key="--sep")
    return delimiter


def _candidates(args: argparse.Namespace, inputs: list[Path]) -> tuple[list[tuple[str, Row | str]], list[str]]:
    """Every input row as a golden row or the reason it is dropped, and the notes of the conversion."""
    from gate.core import goldenformats as gf
    from gate.io import goldenformats as io

    if args.format == "trec":
        topics = io.parse_topics(io.read_text(inputs[0]), str(inputs[0]), args.query_field)
        from gate.core.goldentrec import from_trec

        return from_trec(topics, io.parse_qrels(io.read_text(inputs[1]), str(inputs[1])))
    out: list[tuple[str, Row | str]] = []
    ignored: set[str] = set()
    unread: set[str] = set()
    for path in inputs:
        if args.format == "csv":
            header, rows = io.read_csv(path, _delimiter(args))
            mapping = gf.parse_mapping(args.map, header, str(path))
            out += [(f"{path}:{line}", gf.from_cells(dict(zip(header, cells, strict=False)), mapping, args.sep))
                    for line, cells in rows]
            continue
        convert = gf.from_ragas if args.format == "ragas" else gf.from_deepeval
        for record in io.read_records(path):
            out.append((record.where, convert(record.value)))
            if isinstance(record.value, dict):
                ignored.update(k for k in gf.NOT_LABELS[args.format] if record.value.get(k) not in (None, "", []))
                unread.update(k for k, v in record.value.items() if v not in (None, "", [], {})
                              and k not in gf.READ_KEYS[args.format] and k not in gf.NOT_LABELS[args.format])
    notes = [f"not imported: {', '.join(sorted(ignored))} (what a system once retrieved or answered is no label)"] if ignored else []
    if unread:
        shown = ", ".join(repr(k[:40]) for k in sorted(unread)[:10]) + (f" and {len(unread) - 10} more" if len(unread) > 10 else "")
        notes.append(f"not imported: {shown} (no golden field is read from them in a {args.format} file)")
    return out, notes


def cmd_golden_import(args: argparse.Namespace) -> int:
    from gate.core.goldenformats import finish
    from gate.io.files import write_text

    inputs = _inputs(args)
    _refuse_overwrite(args.out, inputs)
    candidates, notes = _candidates(args, inputs)
    imported = finish(candidates)
    if imported.dropped and (args.strict or not imported.rows):
        why = "--strict: every row must be a case" if imported.rows else "no row could be a case"
        errors = [InputError(f"{where}: {reason} ({why})") for where, reason in imported.dropped]
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    if not imported.rows:
        raise InputError("no row to import", file=str(inputs[0]))
    write_text(args.out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in imported.rows), what="golden set")
    _said_import(args, inputs, imported, notes)
    return EXIT_PASS


def _where(out: str) -> str:
    return "standard output" if out == "-" else out


def _said_import(args: argparse.Namespace, inputs: list[Path], imported: Imported, notes: list[str]) -> None:
    """What golden import wrote, derived, renamed and dropped (stderr when the golden set went to stdout)."""
    from gate.render.console import log_safe

    out = sys.stderr if args.out == "-" else sys.stdout
    rows = imported.rows
    print(log_safe(f"wrote {len(rows)} case(s) to {_where(args.out)} from {', '.join(map(str, inputs))} ({args.format}): "
                   f"{imported.derived} id(s) derived from the question, {len(imported.renamed)} made unique, "
                   f"{len(imported.dropped)} row(s) dropped"), file=out)
    for where, old, new, why in imported.renamed:
        print(log_safe(f"renamed: {where}: the id {old!r} was already taken ({why}): written as {new!r}"), file=out)
    if any(why.startswith("the same question") for *_, why in imported.renamed):
        print("note: a question asked twice is a duplicate_question error of `rag-gate golden check`: merge or reword them",
              file=out)
    for where, why in imported.dropped[:SHOWN_DROPPED]:
        print(log_safe(f"dropped: {where}: {why}"), file=out)
    if len(imported.dropped) > SHOWN_DROPPED:
        print(f"dropped: ... and {len(imported.dropped) - SHOWN_DROPPED} more", file=out)
    text_only = sum(1 for r in rows if r.get("relevant_texts") and not r.get("relevant_doc_ids"))
    if text_only:
        print(f"note: {text_only} case(s) have relevant_texts and no relevant_doc_ids: score their retrieval with "
              "match: {level: text} in stages.retrieval (a passage counts when it holds one of the texts)", file=out)
    graded = sum(1 for r in rows if isinstance(r.get("relevant_doc_ids"), dict))
    if graded:
        print(f"note: {graded} case(s) with graded relevance (nDCG reads the grades)", file=out)
    for note in notes:
        print(log_safe(f"note: {note}"), file=out)
    if args.out != "-":
        print(log_safe(f"check it: rag-gate golden check (with a spec whose golden_set is {args.out})"), file=out)


def cmd_golden_export(args: argparse.Namespace) -> int:
    from gate.core import goldenformats as gf
    from gate.io.files import write_text
    from gate.io.golden import load_golden_set

    if args.out != "-" and Path(args.out).suffix.lower() not in (".jsonl", ".json", ".ndjson"):
        raise InputError(f"must end in .jsonl (JSON lines) or .json (a JSON list), got {args.out!r}",
                         key="--out")
    if args.golden:
        path, read = Path(args.golden), [Path(args.golden)]
    else:
        from gate.config.loader import load_spec

        path = load_spec(args.config, unset_ok=True).golden_set_path  # nothing is asked: variables may be unset
        read = [path, Path(args.config)]
    _refuse_overwrite(args.out, read)
    cases = load_golden_set(path)
    kept = [c for c in cases if not c.pending_review]
    convert = gf.to_ragas if args.format == "ragas" else gf.to_deepeval
    rows = [convert(c) for c in kept]
    if args.out.lower().endswith(".json"):
        text = json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    else:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    write_text(args.out, text, what=f"{args.format} dataset")
    out = sys.stderr if args.out == "-" else sys.stdout
    print(f"wrote {len(rows)} {'sample' if args.format == 'ragas' else 'golden'}(s) to {_where(args.out)} from {path}", file=out)
    if len(kept) < len(cases):
        print(f"left out: {len(cases) - len(kept)} case(s) pending review (metadata.review: pending)", file=out)
    lost = gf.not_carried(kept, args.format)
    if lost:
        print("not carried (a RAGAS sample has no place for them): " + ", ".join(f"{k} of {n} case(s)" for k, n in lost.items()),
              file=out)
    bare = sum(1 for r in rows if set(r) == {"user_input"}) if args.format == "ragas" else 0
    if bare:
        print(f"note: {bare} sample(s) hold the question alone (unanswerable cases: RAGAS has no field for that); golden "
              "import --format ragas drops such samples, so keep the golden set itself as the source", file=out)
    listed = args.out.lower().endswith(".json")
    load = {"ragas": "EvaluationDataset.from_list(json.load(f))" if listed else "EvaluationDataset.from_jsonl(path)",
            "deepeval": "EvaluationDataset().add_goldens_from_json_file(path)" if listed
            else "EvaluationDataset().add_goldens_from_jsonl_file(path)"}[args.format]
    print(f"load it with {load}", file=out)
    return EXIT_PASS
