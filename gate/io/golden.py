"""The golden set file: JSONL, one case a line, validated row by row with line numbers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from gate.core.cases import parse_case
from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase
from gate.io.files import special_kind
from gate.io.jsonparse import BadJSON, parse


def open_regular(path: Path) -> TextIO:
    """``path`` opened for reading as UTF-8 text; InputError if it does not exist, cannot be read, or is not a regular
    file (a FIFO, a device, a directory, a socket: refused before a byte is read). It is opened without blocking (a
    FIFO would wait for a writer) and the open file is asked what it is, so nothing can be swapped in between."""
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
            return open(fd, encoding="utf-8-sig")
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    raise InputError(f"is {kind}, not a regular file", file=str(path))


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of a JSONL file; InputError if it is not a regular file or cannot
    be read as UTF-8."""
    handle = open_regular(path)
    with handle:
        try:
            for lineno, line in enumerate(handle, 1):
                if line.strip():
                    yield lineno, line
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", file=str(path)) from None


JSONL_HINT = "write one JSON object per line (JSON Lines), e.g. jq -c '.[]' cases.json > cases.jsonl"


def parse_line(path: Path, lineno: int, line: str) -> Any:
    """The JSON value of one line of a JSONL file; InputError naming the file and line otherwise. A line that opens a
    JSON array is said to be one: these files hold one object per line, and an array written whole (or pretty-printed
    over many lines) is the usual mistake."""
    if line.lstrip().startswith("["):
        raise InputError("each line must be a JSON object, got a list (a JSON array): this file takes one JSON object per line "
                         "(JSON Lines), not an array of them",
                         file=str(path), line=lineno, hint=JSONL_HINT)
    try:
        return parse(line, max_depth=None)
    except BadJSON as exc:
        raise InputError(exc.message, file=str(path), line=lineno) from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line; InputError on bad JSON."""
    for lineno, line in iter_lines(path):
        yield lineno, parse_line(path, lineno, line)


def load_golden_set(path: Path) -> list[GoldenCase]:
    """Load and validate every row; all errors are reported together, each with its line."""
    cases: list[GoldenCase] = []
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    for lineno, row in iter_jsonl(path):
        parsed = parse_case(row, lineno)
        if isinstance(parsed, str):
            errors.append(InputError(parsed, file=str(path), line=lineno))
            continue
        if parsed.id in seen:
            errors.append(InputError(f"duplicate id {parsed.id!r} (first at line {seen[parsed.id]})", file=str(path), line=lineno))
            continue
        seen[parsed.id] = lineno
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
