"""The golden set file: JSONL, one case a line, validated row by row with line numbers."""

from __future__ import annotations

import io
import mmap
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, TextIO

import msgspec

from gate.core.cases import MAX_GRADE, derive_id, parse_case
from gate.core.errors import InputError, InputErrors, key_path
from gate.core.model import CASE_TYPES, GoldenCase
from gate.core.surrogates import NOT_UNICODE, NOT_UNICODE_HINT, lone_surrogate
from gate.io.files import special_kind
from gate.io.jsonparse import BadJSON, parse

try:
    from gate.core._native import build as _build
    from gate.core._native import cases_of_rows as _cases_of_rows
except ImportError:
    _build = _cases_of_rows = None


def open_regular(path: Path) -> TextIO:
    """``path`` opened for reading as UTF-8 text; InputError if it does not exist, cannot be read, or is not a regular
    file (a FIFO, a device, a directory, a socket: refused before a byte is read). It is opened without blocking (a
    FIFO would wait for a writer) and the open file is asked what it is, so nothing can be swapped in between."""
    return open(_regular_fd(path), encoding="utf-8-sig")


def read_regular_bytes(path: Path) -> bytes:
    """The bytes of ``path``, refused as ``open_regular`` refuses it (not found, unreadable, not a regular file)."""
    with open(_regular_fd(path), "rb") as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None


def map_regular(path: Path) -> bytes | mmap.mmap:
    """The contents of ``path`` as ``read_regular_bytes`` refuses or reads them, but mapped into memory (read-only,
    its pages mapped at once) instead of copied: a read of 74 MB costs 35 ms, mostly in faulting in the fresh pages it
    copies into; the mapping 1 ms. The bytes when the file cannot be mapped (empty, a file system without mmap, a
    platform without these flags). The file must not be truncated while it is read (a step that still writes it)."""
    fd = _regular_fd(path)
    try:
        if os.fstat(fd).st_size > 0:
            try:
                return mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
            except (OSError, ValueError, AttributeError, TypeError):  # not mappable here: read as usual
                pass
        with open(fd, "rb", closefd=False) as handle:
            try:
                return handle.read()
            except OSError as exc:
                raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    finally:
        os.close(fd)


def _regular_fd(path: Path) -> int:
    """A descriptor of ``path`` open for reading, blocking, once the open file is known to be a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is None:
            os.set_blocking(fd, True)
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    raise InputError(f"is {kind}, not a regular file", file=str(path))


def iter_lines(path: Path, raw: bytes | mmap.mmap | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of a JSONL file; InputError if it is not a regular file or cannot
    be read as UTF-8. ``raw``: the file's bytes, already read (``read_regular_bytes``), split as the file would be."""
    handle = open_regular(path) if raw is None else io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8-sig")
    with handle:
        try:
            for lineno, line in enumerate(handle, 1):
                if not line.isspace():  # what line.strip() calls whitespace, without copying the line
                    yield lineno, line
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", file=str(path)) from None


JSONL_HINT = "write one JSON object per line (JSON Lines), e.g. jq -c '.[]' cases.json > cases.jsonl"


BOM = b"\xef\xbb\xbf"


def python_one_value_a_line(raw: bytes) -> int | None:
    """How many lines ``raw`` holds when each newline (LF, or CRLF throughout: line by line, a lone CR ends a line
    too) stands between ``}`` and ``{`` or ends the file; None otherwise. A raw newline cannot stand inside a JSON
    string, and ``}`` then ``{`` only between two values: such a file holds one JSON object on each line."""
    crlf = b"\r" in raw
    find, at, lines = raw.find, raw.find(b"\n"), 0
    while at >= 0:
        close = at - 2 if crlf else at - 1
        if close < 0 or raw[close] != 125 or (crlf and raw[at - 1] != 13) or raw[at + 1: at + 2] not in (b"{", b""):
            return None
        lines += 1
        at = find(b"\n", at + 1)
    if crlf and raw.count(b"\r") != lines:  # a CR that does not end a line
        return None
    return lines + 1 if raw and raw[-1] != 10 else lines


def _utf8(raw: bytes) -> bool:
    if raw.isascii():
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def python_lines_and_utf8(raw: bytes) -> tuple[int | None, bool]:
    """(``python_one_value_a_line`` of raw, whether raw is valid UTF-8)."""
    return python_one_value_a_line(raw), _utf8(raw)


try:  # the same two answers from one pass in C, where gate.core._native is built
    from gate.core._native import one_value_a_line as lines_and_utf8
except ImportError:
    lines_and_utf8 = python_lines_and_utf8


def parse_line(path: Path, lineno: int, line: str) -> Any:
    """The JSON value of one line of a JSONL file; InputError naming the file and line otherwise. A line that opens a
    JSON array is said to be one: these files hold one object per line, and an array written whole (or pretty-printed
    over many lines) is the usual mistake."""
    if line.lstrip().startswith("["):
        raise InputError("each line must be a JSON object, got a list (a JSON array): this file takes one JSON object per line "
                         "(JSON Lines), not an array of them",
                         file=str(path), line=lineno, hint=JSONL_HINT)
    try:
        value = parse(line, max_depth=None)
    except BadJSON as exc:
        raise InputError(exc.message, file=str(path), line=lineno) from None
    if _SURROGATE_ESCAPE.search(line) is not None and (at := lone_surrogate(value)) is not None:
        raise InputError(NOT_UNICODE, file=str(path), line=lineno, key=key_path(at), hint=NOT_UNICODE_HINT)
    return value


# JSON's only way to a lone surrogate is its escape (the file is read as UTF-8): a line without one is not walked
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line; InputError on bad JSON."""
    for lineno, line in iter_lines(path):
        yield lineno, parse_line(path, lineno, line)


class _Row(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A golden row of the usual shape, as msgspec decodes it (``_fast_case``): only these fields, each of its JSON
    type. Any other row (another field, a value of another type, malformed JSON) is read by ``parse_case``."""

    question: str
    id: str | None = None
    ground_truth: str | None = None
    relevant_doc_ids: list[str] | dict[str, int] | None = None
    type: str = "answerable"
    category: str | None = None
    tags: list[str] | None = None


_ROW = msgspec.json.Decoder(_Row).decode
_ROWS = msgspec.json.Decoder(_Row).decode_lines


def _fast_case(text: str, lineno: int) -> GoldenCase | None:
    """The GoldenCase ``parse_case`` gives for a line of the usual shape, decoded straight into ``_Row`` (no dict is
    built); None for any other line, and for one ``parse_case`` would refuse (it then says why).
    tests/unit/test_golden_fast.py holds the two paths to the same cases."""
    try:
        row = _ROW(text)
    except (ValueError, RecursionError):  # not of this shape, or not JSON msgspec takes: the general path
        return None
    return _case_of(row, lineno)


def _case_of(row: _Row, lineno: int) -> GoldenCase | None:
    """``_fast_case``'s case of a decoded row; None for a row ``parse_case`` would refuse."""
    question, case_id, ctype, rel = row.question, row.id, row.type, row.relevant_doc_ids
    if not question.strip() or ctype not in CASE_TYPES:
        return None
    if case_id is None:
        case_id = derive_id(question)
    elif not case_id.strip():
        return None
    relevant: dict[str, int]
    if rel is None:
        relevant = {}
    elif type(rel) is list:
        if not all(rel):
            return None
        relevant = dict.fromkeys(rel, 1)
    else:
        if "" in rel or not all(1 <= g <= MAX_GRADE for g in rel.values()):  # type: ignore[union-attr]
            return None
        relevant = rel  # type: ignore[assignment]
    if not relevant and ctype == "answerable":
        return None
    return new_case((case_id, question, lineno, row.ground_truth, relevant, ctype, tuple(row.tags) if row.tags else (), row.category))


_FIELDS = fields(GoldenCase)
_SLOTS = tuple(getattr(GoldenCase, f.name) for f in _FIELDS)  # the slots' member descriptors, in the fields' order
_USUAL = ("id", "question", "line", "ground_truth", "relevant", "type", "tags", "category")  # the first fields: a usual row's


def _rest_of_fields() -> Callable[[], tuple[Any, ...]]:
    """The values of the fields after the usual ones, as GoldenCase() gives them by default (a fresh one per call where
    a field's default is made by a factory)."""
    assert tuple(f.name for f in _FIELDS[:len(_USUAL)]) == _USUAL, "GoldenCase's first fields are no longer the usual row's"
    rest = _FIELDS[len(_USUAL):]
    made = [i for i, f in enumerate(rest) if f.default_factory is not MISSING]
    values = tuple(f.default for f in rest)
    if not made:
        return lambda: values
    if made == [0]:  # the usual: metadata, a dict of its own per case, then the plain defaults
        factory, tail = rest[0].default_factory, values[1:]
        return lambda: (factory(), *tail)  # type: ignore[misc,operator]
    return lambda: tuple(f.default_factory() if f.default_factory is not MISSING else f.default for f in rest)  # type: ignore[misc]


_REST = _rest_of_fields()


def _rest_parts() -> tuple[Callable[[], Any] | None, tuple[Any, ...]]:
    """The fields after the usual ones as cases_of_rows takes them: (the first one's factory, or None when it has
    none, the plain defaults of the others); any other layout raises (cases_of_rows would build it wrong)."""
    rest = _FIELDS[len(_USUAL):]
    first = rest[0].default_factory if rest and rest[0].default_factory is not MISSING else None
    tail = rest[1:] if first is not None else rest
    assert all(f.default_factory is MISSING for f in tail), "a field made by a factory after the first of the rest"
    return first, tuple(f.default for f in tail)  # type: ignore[return-value]


_REST_PARTS = _rest_parts()


Usual = tuple[str, str, int, "str | None", dict[str, int], str, tuple[str, ...], "str | None"]  # the values of _USUAL


def new_case(usual: Usual) -> GoldenCase:
    """GoldenCase(id=..., ..., category=...) of the values of ``_USUAL``, every other field at its default, from values
    already checked: built in C where gate.core._native is built (its slots set: __init__'s work without the frozen
    class's detour through object.__setattr__)."""
    if _build is None:
        case_id, question, line, ground_truth, relevant, ctype, tags, category = usual
        return GoldenCase(id=case_id, question=question, line=line, ground_truth=ground_truth, relevant=relevant, type=ctype,
                          tags=tags, category=category)
    return _build(GoldenCase, _SLOTS, usual + _REST())


def _read_text(path: Path) -> str | None:
    """The whole file as text (newlines as iterating it gives them); None if it is not UTF-8 (``iter_lines`` says so)."""
    handle = open_regular(path)
    with handle:
        try:
            return handle.read()
        except UnicodeDecodeError:
            return None


def _whole_file(path: Path) -> list[GoldenCase] | None:
    """Every case of a golden set of the usual shape, its lines decoded by msgspec in one call (row i is line i + 1):
    when the file is UTF-8 without a byte-order mark, holds one JSON object on each line (``lines_and_utf8``) and
    every row is a usual one ``parse_case`` takes. None otherwise: the file is then read line by line, which gives
    the same cases and words what is wrong where (a mistake costs a second read, not a different answer)."""
    # mapped, not copied, where the line and UTF-8 check is the C one (the Python one reads bytes' methods)
    raw = read_regular_bytes(path) if lines_and_utf8 is python_lines_and_utf8 else map_regular(path)
    lines, utf8 = lines_and_utf8(raw)
    if lines is None or not utf8 or raw[:3] == BOM:  # msgspec does not check the UTF-8 of what it skips
        return None
    try:
        rows = _ROWS(raw)
    except (ValueError, RecursionError):
        return None
    if len(rows) != lines:
        return None
    if _cases_of_rows is not None:  # _case_of of every row, in C
        return _cases_of_rows(rows, GoldenCase, _SLOTS, CASE_TYPES, derive_id, *_REST_PARTS, MAX_GRADE)
    cases = []
    for lineno, row in enumerate(rows, 1):
        case = _case_of(row, lineno)
        if case is None:
            return None
        cases.append(case)
    return cases


def _cases(path: Path) -> Iterator[tuple[int, GoldenCase | str]]:
    """(line number, the case or what is wrong with its row) of every non-blank line; InputError on bad JSON (at the
    first such line, as ``iter_jsonl`` raises it). Lines of the usual shape are decoded straight into their case; the
    others, with their newline, go ``parse_line`` and ``parse_case``'s way, which word what is wrong."""
    whole = _whole_file(path)
    if whole is not None:
        yield from enumerate(whole, 1)
        return
    text = _read_text(path)
    if text is None:
        for lineno, row in iter_jsonl(path):
            yield lineno, parse_case(row, lineno)
        return
    pieces = text.split("\n")
    last = len(pieces)
    for lineno, piece in enumerate(pieces, 1):
        case = _fast_case(piece, lineno) if piece else None
        if case is not None:
            yield lineno, case
            continue
        line = piece + "\n" if lineno < last else piece  # the line as iterating the file gives it
        if line and not line.isspace():
            yield lineno, parse_case(parse_line(path, lineno, line), lineno)


def load_golden_set(path: Path) -> list[GoldenCase]:
    """Load and validate every row; all errors are reported together, each with its line."""
    cases: list[GoldenCase] = []
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    for lineno, parsed in _cases(path):
        if isinstance(parsed, str):
            errors.append(InputError(parsed, file=str(path), line=lineno))
            continue
        first = seen.setdefault(parsed.id, lineno)
        if first != lineno:
            errors.append(InputError(f"duplicate id {parsed.id!r} (first at line {first})", file=str(path), line=lineno))
            continue
        cases.append(parsed)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    if not cases:
        hint = 'add one JSON object a line: {"question": ..., "relevant_doc_ids": [...]}'
        raise InputError("the golden set is empty", file=str(path), hint=hint)
    return cases


def load_distractor_file(path: Path) -> dict[str, list[str]]:
    """A JSONL file of {"id": case id, "distractors": [passage, ...]}; InputError naming the line otherwise."""
    out: dict[str, list[str]] = {}
    for lineno, row in iter_jsonl(path):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise InputError("each line needs an 'id' (the golden case's id)", file=str(path), line=lineno)
        d = row.get("distractors")
        if not isinstance(d, list) or not d or not all(isinstance(x, str) and x.strip() for x in d):
            raise InputError("'distractors' must be a non-empty list of passages (strings)", file=str(path), line=lineno)
        out[row["id"]] = d
    return out


def load_corpus(path: Path, *, texts: bool = False) -> list[tuple[str, str]]:
    """(id, text) of every document of a corpus file (JSONL, one ``{"id", "text", "metadata"}`` a line), in file order;
    InputError naming the file and line for a line without a string id (or, with ``texts``, a string text)."""
    docs: list[tuple[str, str]] = []
    errors: list[InputError] = []
    for lineno, row in iter_jsonl(path):
        doc_id = row.get("id") if isinstance(row, dict) else None
        if not isinstance(doc_id, str) or not doc_id:
            errors.append(InputError("each corpus line must be an object with a non-empty string 'id'", file=str(path), line=lineno))
            continue
        text = row.get("text")
        if texts and not isinstance(text, str):
            errors.append(InputError("each corpus line needs a string 'text' to write questions from", file=str(path), line=lineno))
            continue
        docs.append((doc_id, text if isinstance(text, str) else ""))
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    return docs


def load_corpus_ids(path: Path) -> list[str]:
    """The document ids of a corpus file, in file order (load_corpus)."""
    return [doc_id for doc_id, _ in load_corpus(path)]
