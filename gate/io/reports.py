"""rag-gate's own documents on disk: report.json, the baseline file and history entries.

Writing: ``report_json`` is the one serialisation of a report. Reading: every document read back
from disk goes through ``check_document``, which validates it against ``report.schema.json`` (the
schema the TypedDicts in gate.core.report mirror) and refuses it with exit 2 naming the file, the
line when there is one, and the key path of the first problem. Documents written before per-case
scores had one shape (objects keyed by case id) are turned into the list form first.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, cast

import msgspec

from gate.core.errors import InputError, key_path, value_at
from gate.core.records import compact_texts, text_table
from gate.core.report import SCHEMA_VERSION, Baseline, HistoryEntry, Part, Report
from gate.io.files import RESTART, Restart
from gate.io.jsonparse import BadJSON, parse
from gate.io.schema import PACKAGE_DIR, SchemaValidator, describe

Document = Literal["report", "baseline", "history_entry", "part"]
SELF_CHECK = "RAG_GATE_SELF_CHECK"
COMPACT_ABOVE = 1000  # cases: above this report.json is written compact (json's indenting encoder is pure Python)


@functools.cache
def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json, the baseline and history entries, shipped inside the package."""
    return cast(dict[str, Any], json.loads((PACKAGE_DIR / "report.schema.json").read_text(encoding="utf-8")))


def _root(document: Document) -> dict[str, Any]:
    schema = report_schema()
    return {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{document}"}


@functools.cache
def _validator(document: Document) -> SchemaValidator:
    """The quickstart's baseline is checked in 0.07 ms by the compiled validator (32 ms in pure Python): a run on a
    large golden set does not spend seconds checking its own baseline."""
    return SchemaValidator(_root(document))


def upgrade(data: Any) -> Any:
    """Per-case scores kept as objects keyed by case id (baselines: {id: {metrics, relevant_ranks}}, history entries:
    {id: {metric: value}}), from before they had one shape, become the list of cases."""
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        return data
    for stage in stages.values():
        samples = stage.get("samples") if isinstance(stage, dict) else None
        if not isinstance(samples, dict):
            continue
        cases = []
        for cid, entry in samples.items():
            if isinstance(entry, dict) and isinstance(entry.get("metrics"), dict):
                case = {"id": cid, **entry}
            else:
                case = {"id": cid, "metrics": entry}
            cases.append(case)
        stage["samples"] = cases
    return data


FLOAT_MAX = sys.float_info.max  # the schema's bound on every number: beyond it (10**400, or 1e400 read as infinity), not finite


def _passes(validator: SchemaValidator, data: Any) -> bool | None:
    """Whether ``data`` passes; None when it holds a lone surrogate (JSON's ``"\\ud800"``): not Unicode text, which the
    compiled validator cannot even read (nor could a UTF-8 comment, summary or file hold it)."""
    try:
        return validator.is_valid(data)
    except UnicodeEncodeError:
        return None


def is_valid_document(data: Any, document: Document) -> bool:
    """Whether ``data`` passes the door (without saying why not)."""
    return bool(_passes(_validator(document), upgrade(data)))


def check_document(data: Any, document: Document, *, file: str, line: int | None = None) -> Any:
    """``data`` if it is a valid ``document``; InputError (exit 2) naming the file, line and key path otherwise."""
    data = upgrade(data)
    validator = _validator(document)
    valid = _passes(validator, data)
    if valid:
        return data
    what = {"report": "rag-gate report", "baseline": "rag-gate baseline", "history_entry": "rag-gate history entry",
            "part": "rag-gate shard's part"}[document]
    if valid is None:
        raise InputError(f"not a {what}: it holds text that is not Unicode (a lone surrogate, such as \\ud800)", file=file, line=line)
    best = validator.best_error(data)
    if best is None:  # the two validators disagree: refuse anyway, without a place
        raise InputError(f"not a {what}: it breaks the schema", file=file, line=line)
    at, said = tuple(best.absolute_path), describe(best)
    if best.validator in ("minimum", "maximum") and abs(best.validator_value) == FLOAT_MAX:
        said = "not a finite number (beyond the float range)"
    holder = value_at(data, at)
    if isinstance(holder, dict) and isinstance(best.instance, str) and best.instance in holder:  # a key's name was refused
        at, said = (*at, best.instance[:60]), f"key {best.instance[:60]!r} is not allowed here: it {said}"
    raise InputError(f"not a {what}: {said}", file=file, line=line, key=key_path(at))


def document_json(data: Report | Baseline | HistoryEntry | Part, document: Document, *, indent: int | None = None, compact: bool = False,
                  sort_keys: bool = False, fast: bool = False) -> str:
    """The JSON text of a document rag-gate writes. With RAG_GATE_SELF_CHECK set (the test suite sets it), the text is
    first read back through the schema: a document the next run could not read is a bug, found where it is written.
    ``fast`` (compact only): written by msgspec's encoder (``fast_compact_json``)."""
    if fast and compact and indent is None and not sort_keys:
        text = fast_compact_json(data)
    else:
        text = json.dumps(data, indent=indent, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":") if compact else None)
    if os.environ.get(SELF_CHECK):
        _self_check(text, document)
    return text


def _self_check(text: str | bytes, document: Document) -> None:
    """RAG_GATE_SELF_CHECK: the text being written read back through the schema (a bug if it fails)."""
    try:
        check_document(json.loads(text), document, file=f"(the {document} being written)")
    except InputError as exc:
        raise RuntimeError(f"rag-gate wrote a {document} that report.schema.json refuses: {exc.message}") from None


# A float that is NaN or infinite, as msgspec's MessagePack encoder writes every float: 0xcb, then the IEEE 754 double
# big-endian, whose exponent bits are all ones. (The same bytes inside a string or an integer only cost the fast path.)
_NOT_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")

try:
    from gate.core._native import not_finite as _not_finite_c
except ImportError:
    _not_finite_c = None


def fast_compact_json(data: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, separators=(",", ":"))``, the same JSON value, written by msgspec's
    encoder (a report of 10,000 cases in a quarter of the time, the check below included). A number is written in the shortest form that reads back
    the same (``1e16`` where json writes ``1e+16``). msgspec writes NaN and infinities as null where json writes
    NaN/Infinity, so a document holding one (spotted in its MessagePack encoding, as fast) is written by json; so is
    one msgspec cannot encode (a lone surrogate). msgspec also writes a few types json refuses (a dataclass, a set):
    a report holds none (the test suite reads every document it writes back through the schema: RAG_GATE_SELF_CHECK)."""
    encoded = _msgspec_json(data)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) if encoded is None else encoded.decode()


def _not_finite(data: Any) -> bool:
    """Whether the document holds a NaN or an infinite float (told in C where gate.core._native is built and the
    document holds only JSON's types; else spotted in its MessagePack encoding)."""
    told = _not_finite_c(data) if _not_finite_c is not None else None
    return _NOT_FINITE.search(msgspec.msgpack.encode(data)) is not None if told is None else told


def _msgspec_json(data: Any) -> bytes | None:
    """``fast_compact_json``'s UTF-8 bytes, by msgspec; None when json must write the document."""
    try:
        if not _not_finite(data):
            return msgspec.json.encode(data)
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError):  # a type or value msgspec does not take: json decides
        pass
    return None


def page_json(data: Any) -> str:
    """Compact JSON for the HTML report's data block, by msgspec (NaN and infinities as null, which JSON.parse reads;
    json.dumps would write NaN, which it does not); json for a value msgspec does not take."""
    try:
        return msgspec.json.encode(data).decode()
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError):
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def report_json(report: Report) -> str:
    """report.json text: indented for a golden set of usual size, compact above 1,000 cases (json's indenting
    encoder is pure Python, four times slower than its compact C one, which is four times slower than msgspec's)."""
    if len(report["cases"]) <= COMPACT_ABOVE:
        return document_json(report, "report", indent=2) + "\n"
    return document_json(report, "report", compact=True, fast=True) + "\n"


def report_bytes(report: Report) -> bytes:
    """report.json as written: ``report_json``'s text in UTF-8. Above 1,000 cases, msgspec's encoded bytes as they
    are (a report of 10,000 cases is 9 MB: not copied into a text and back)."""
    encoded = _msgspec_json(report) if len(report["cases"]) > COMPACT_ABOVE else None
    if encoded is None:
        return report_json(report).encode("utf-8")
    if os.environ.get(SELF_CHECK):
        _self_check(encoded, "report")
    return encoded + b"\n"


PIECE_CASES = 1000  # cases encoded at a time by report_pieces


def report_pieces(report: Report) -> Iterator[bytes | memoryview | Restart]:
    """report.json as ``report_bytes`` writes it, in pieces made one after the other (each top-level value, the cases
    a thousand at a time): joined, exactly ``report_bytes(report)``; so that each piece is written while the next is
    encoded (gate.io.files.PiecesWriter). A piece may be ``RESTART``: what came before it is dropped (a value msgspec
    cannot encode, met half-way: the whole report then comes again, written by json)."""
    if len(report["cases"]) <= COMPACT_ABOVE or _not_finite(report):  # json's text (report_bytes', checked once)
        yield report_json(report).encode("utf-8")
        return
    kept: list[bytes] | None = [] if os.environ.get(SELF_CHECK) else None  # read back through the schema at the end
    try:
        for piece in _report_pieces(report):
            if kept is not None:
                kept.append(bytes(piece))
            yield piece
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError):  # a type or value msgspec does not take: json writes it
        yield RESTART
        yield report_json(report).encode("utf-8")
        return
    if kept is not None:
        _self_check(b"".join(kept) + b"\n", "report")
    yield b"\n"


def _report_pieces(report: Report) -> Iterator[bytes | memoryview]:
    encode = msgspec.json.encode
    yield b"{"
    for i, (key, value) in enumerate(report.items()):
        yield (b"," if i else b"") + encode(key) + b":"
        if key != "cases" or not isinstance(value, list) or len(value) <= PIECE_CASES:
            yield encode(value)
            continue
        for at in range(0, len(value), PIECE_CASES):  # "[a,b" then ",c,d" ... then "]"
            chunk = memoryview(encode(value[at:at + PIECE_CASES]))
            if at:
                yield b","
            yield chunk[:-1] if at == 0 else chunk[1:-1]
        yield b"]"
    yield b"}"


def load_json(path: Path, what: str, *, hint: str | None = None) -> Any:
    """Parsed JSON of a file; InputError naming the file (and the line of a syntax error) otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found", file=str(path), hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the {what}: {getattr(exc, 'strerror', None) or exc}", file=str(path)) from None
    try:
        return parse(text)
    except BadJSON as exc:
        raise InputError(f"not JSON: {exc.message}", file=str(path), line=exc.line, hint=hint) from None


def read_report(path: Path, *, allow_error: bool = False) -> Report:
    """A report.json, checked at the door. A report whose verdict is 'error' is refused unless ``allow_error``."""
    report = cast(Report, check_document(load_json(path, "report", hint="write one with `rag-gate run --report PATH`"),
                                         "report", file=str(path)))
    if report["verdict"] == "error" and not allow_error:
        raise InputError("the report's verdict is 'error' (the run did not complete); refusing to record it",
                         file=str(path), key="verdict", hint="fix the run, or pass --force")
    return report


def read_baseline(path: Path) -> Baseline | None:
    """The baseline at ``path``, checked at the door; None if there is none."""
    if not path.exists():
        return None
    data = load_json(path, "baseline", hint="write it again with `rag-gate baseline update`")
    return cast(Baseline, check_document(data, "baseline", file=str(path)))


def parse_history(text: str, where: str, warnings: list[str]) -> list[HistoryEntry]:
    """Entries of a history file; a line that is not JSON or not a valid entry is skipped with a warning naming
    ``where``, the line and what is wrong (one bad entry must not break every later run)."""
    entries: list[HistoryEntry] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = parse(line)
        except BadJSON:
            warnings.append(f"{where}:{lineno}: not JSON, skipped")
            continue
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            warnings.append(f"{where}:{lineno}: not a rag-gate history entry (schema_version {SCHEMA_VERSION}), skipped")
            continue
        try:
            entries.append(cast(HistoryEntry, check_document(data, "history_entry", file=where, line=lineno)))
        except InputError as exc:
            warnings.append(f"{exc.message}, skipped")
    return entries


def parse_json_line(line: str) -> Any:
    """A line's JSON value, or None if it is not JSON."""
    try:
        return parse(line)
    except BadJSON:
        return None


def appended_history(text: str, entry: HistoryEntry, max_entries: int) -> str:
    """The history file's text with ``entry`` appended: the newest ``max_entries`` lines; a line this version cannot
    read is kept as it is; each text is held once, by the oldest kept entry that refers to it (the texts of the
    entries dropped move to the next entry that needs them). A line whose texts did not move is kept byte for byte."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    lines.append(document_json(entry, "history_entry", compact=True))
    parsed: list[HistoryEntry | None] = []
    for line in lines:
        try:
            data = parse(line)
        except BadJSON:
            parsed.append(None)
            continue
        valid = isinstance(data, dict) and data.get("schema_version") == SCHEMA_VERSION and is_valid_document(data, "history_entry")
        parsed.append(cast(HistoryEntry, data) if valid else None)
    table = text_table(*parsed)
    kept = list(zip(lines[-max_entries:], parsed[-max_entries:], strict=True))
    compacted = iter(compact_texts([e for _, e in kept if e is not None], table))
    out = []
    for line, e in kept:
        if e is None:
            out.append(line)
            continue
        new = next(compacted)
        out.append(line if new.get("texts") == e.get("texts") else document_json(new, "history_entry", compact=True))
    return "".join(ln + "\n" for ln in out)
