"""Reading the datasets ``rag-gate golden import`` converts: RAGAS and DeepEval files (JSONL, a JSON list, CSV),
spreadsheets (CSV), TREC topics (the classic ``<top>`` form, the ``<topic number=...>`` form, or ``qid<TAB>text``
lines) and qrels (``qid iteration docid grade``). Each gives records that name their file and line (or item); what
cannot be read is an InputError naming the file and line and what was there. The conversions are
gate.core.goldenformats's."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from gate.core.errors import InputError, key_path
from gate.core.goldenformats import Record
from gate.core.goldentrec import Qrel
from gate.core.surrogates import NOT_UNICODE, NOT_UNICODE_HINT, lone_surrogate
from gate.io.golden import iter_jsonl, read_regular_bytes
from gate.io.jsonparse import BadJSON, parse

TSV_HEADERS = {"qid", "query_id", "id", "topic_id", "topic", "num", "number"}
CSV_CELL_LIMIT = 1 << 30  # characters in one cell (Python's csv stops at 131,072 by default: a long passage is more)
_LINE_END = re.compile(r"\r\n|\r|\n")  # what ends a line of these files (not U+2028 nor U+0085, as str.splitlines has it)


def lines_of(text: str) -> list[str]:
    """The lines of a text file, split at its line ends only."""
    lines = _LINE_END.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines
QUERY_FIELDS = ("title", "description")


def read_text(path: Path, newlines: bool = True) -> str:
    """The whole file as UTF-8 text, a BOM left out, its line ends made "\n" (``newlines`` False: left as they are,
    a CSV's quoted cell keeps its own); InputError naming the file and the line of a NUL byte or of a byte that is not
    UTF-8, or a UTF-16 file (gate.io.golden.read_regular_bytes refuses what is no regular file)."""
    raw = read_regular_bytes(path)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError("UTF-16 text, not UTF-8 (a spreadsheet's 'Unicode text' is UTF-16)", file=str(path),
                         hint="save it as UTF-8 (in Excel: CSV UTF-8)")
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # the BOM a spreadsheet's "CSV UTF-8" starts with
    bad, what, why = raw.find(b"\x00"), "a NUL byte", "not a text file, or not UTF-8 text"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if bad < 0 or exc.start < bad:
            bad, what, why = exc.start, f"the byte 0x{raw[exc.start]:02x}", "not UTF-8 text (Latin-1 or Windows-1252?)"
    if bad >= 0:
        line, column = raw.count(b"\n", 0, bad) + 1, bad - raw.rfind(b"\n", 0, bad)
        raise InputError(f"{what} at column {column}: {why}", file=str(path), line=line, hint="save the file as UTF-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if newlines else text


def _shown(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def read_records(path: Path) -> list[Record]:
    """The rows of a RAGAS or DeepEval file: a CSV (by its .csv name: every row as {column: cell}, blank cells left
    out), a JSON list (the file starts with ``[``: each item), else JSONL (each line)."""
    if path.suffix.lower() == ".csv":
        header, rows = read_csv(path)
        return [Record(f"{path}:{line}", {k: v for k, v in zip(header, cells, strict=False) if v.strip()})
                for line, cells in rows]
    text = read_text(path)
    if not text.lstrip().startswith("["):
        _not_one_object(text, path)
        return [Record(f"{path}:{line}", value) for line, value in iter_jsonl(path)]
    try:
        value = parse(text)
    except BadJSON as exc:
        raise InputError(exc.message, file=str(path), line=exc.line) from None
    if not isinstance(value, list):
        raise InputError("expected a JSON list of samples", file=str(path))
    if _SURROGATE_ESCAPE.search(text) and (at := lone_surrogate(value)) is not None:
        raise InputError(NOT_UNICODE, file=f"{path}: item {int(at[0]) + 1}", key=key_path(at[1:]), hint=NOT_UNICODE_HINT)
    return [Record(f"{path}: item {i}", item) for i, item in enumerate(value, 1)]


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # JSON's only way to a lone surrogate (the file is UTF-8)


def _not_one_object(text: str, path: Path) -> None:
    """InputError when the file is one JSON object over several lines (a sample pretty-printed, or an object around
    the list of samples): neither JSONL, one sample a line, nor a JSON list."""
    body = text.strip()
    if not body.startswith("{") or "\n" not in body:
        return
    try:
        value = parse(body)
    except BadJSON:
        return  # JSONL, or broken JSON: read line by line, which names the line
    if not isinstance(value, dict):
        return
    listed = next((k for k, v in value.items() if isinstance(v, list) and v and isinstance(v[0], dict)), None)
    keys = ", ".join(repr(k[:40]) for k in list(value)[:6]) + (", ..." if len(value) > 6 else "")
    hint = (f"its key {listed!r} holds a list: write that list alone (jq '.[\"{listed}\"]' {path.name})" if listed
            else "put the sample in a JSON list ([{...}]) or on one line (JSONL: one sample a line)")
    raise InputError(f"one JSON object over {body.count(chr(10)) + 1} lines (keys: {keys}), not a JSON list of samples "
                     "nor one sample a line (JSONL)", file=str(path), line=1, hint=hint)


def read_csv(path: Path, delimiter: str = ",") -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the rows (the line each starts on, its cells) of a CSV file; InputError for no header, a
    repeated or blank column name, a row of more cells than the header, or a cell csv cannot read."""
    text = read_text(path, newlines=False)
    csv.field_size_limit(max(csv.field_size_limit(), CSV_CELL_LIMIT))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = [c.strip() for c in next(reader, [])]
        if not any(header):
            raise InputError("no header: the first line must name the columns", file=str(path), line=1)
        blank = [i for i, c in enumerate(header, 1) if not c]
        if blank:
            raise InputError(f"column {blank[0]} of the header has no name", file=str(path), line=1)
        twice = next((c for c in header if header.count(c) > 1), None)
        if twice is not None:
            raise InputError(f"the header names the column {twice!r} twice", file=str(path), line=1)
        rows: list[tuple[int, list[str]]] = []
        start = reader.line_num + 1
        for cells in reader:
            if len(cells) > len(header) and any(c.strip() for c in cells[len(header):]):
                raise InputError(f"{len(cells)} cells, the header has {len(header)} columns (is the delimiter "
                                 f"{delimiter!r} right?)", file=str(path), line=start)
            rows.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        opened = _open_quote(text, start, delimiter) if "unexpected end of data" in str(exc) else None
        if opened is not None:
            raise InputError(f"a quoted cell opens here and is never closed: {_shown(_LINE_END.split(text[opened[1]:], 1)[0])}",
                             file=str(path), line=opened[0], hint='close it with a " (a " inside a quoted cell is written "")'
                             ) from None
        raise InputError(f"not readable as CSV: {exc}", file=str(path), line=reader.line_num) from None
    return header, rows


def _open_quote(text: str, line: int, delimiter: str) -> tuple[int, int] | None:
    """The line, and the offset in ``text``, of the quoted cell left open in the row that starts on ``line`` (csv's
    rules: a quote opens a cell only at its start; "" inside one is a quote); None when no cell is left open."""
    ends = [m.end() for m in _LINE_END.finditer(text)]
    pos = ends[line - 2] if 2 <= line <= len(ends) + 1 else 0
    opened: int | None = None
    cell_start, quoted = True, False
    while pos < len(text):
        ch = text[pos]
        if quoted and ch == '"' and text.startswith('"', pos + 1):
            pos += 2
            continue
        if ch == '"' and (quoted or cell_start):
            quoted = not quoted
            opened = pos
        cell_start = not quoted and ch in (delimiter, "\n", "\r")
        pos += 1
    return (len(_LINE_END.findall(text, 0, opened)) + 1, opened) if quoted and opened is not None else None


_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_TOPIC = re.compile(r"<topic\b([^>]*)>(.*?)</topic>", re.S | re.I)
_NUMBER_ATTR = re.compile(r"""number\s*=\s*["']?([^"'\s>]+)""", re.I)
_TAG = re.compile(r"<([A-Za-z][\w-]*)>")  # every field's opening tag: the known ones and any other (TREC-COVID's <question>)
_LABELS = {"num": "number:", "title": "topic:", "desc": "description:", "narr": "narrative:"}
_NAMES = {"desc": "description", "narr": "narrative", "query": "title"}


def _fields(body: str) -> dict[str, str]:
    """The tagged fields of one topic's body, closing tags or not, their "Number:"-like labels and spacing removed."""
    marks = list(_TAG.finditer(body))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        tag = m.group(1).lower()
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        value = re.sub(r"</?\w+>", " ", body[m.end():end])
        value = " ".join(value.split())
        label = _LABELS.get(tag)
        if label and value.lower().startswith(label):
            value = value[len(label):].strip()
        out[_NAMES.get(tag, tag)] = value
    return out


def parse_topics(text: str, where: str, query: str = "title") -> list[Record]:
    """TREC topics as records {"id", "question", "metadata"}: ``<top>`` blocks or ``<topic number=...>`` ones when
    the text holds any, else ``qid<TAB>text`` lines (a first line naming the columns is skipped). ``query``: the
    field asked (title or description); the other fields go to metadata. A topic without the field is a record
    whose value is the sentence saying so. InputError for a block without a number or a line without a tab."""
    blocks: list[tuple[int, str | None, str]] = [(m.start(), None, m.group(1)) for m in _TOP.finditer(text)]
    blocks += [(m.start(), m.group(1), m.group(2)) for m in _TOPIC.finditer(text)]
    if not blocks:
        return _tsv_topics(text, where)
    out = []
    for start, attrs, body in sorted(blocks, key=lambda b: b[0]):
        line = text.count("\n", 0, start) + 1
        fields = _fields(body)
        number = _NUMBER_ATTR.search(attrs) if attrs is not None else None
        qid = number.group(1) if number else fields.pop("num", "").split(" ")[0]
        if not qid:
            raise InputError("a topic without a number (<num> Number: 301, or <topic number=\"301\">)", file=where, line=line)
        question = fields.pop(query, "")
        if not question:
            out.append(Record(f"{where}:{line}", f"topic {qid} has no {query}"))
            continue
        value = {"id": qid, "question": question}
        meta = {k: v for k, v in fields.items() if v and k != "num"}
        out.append(Record(f"{where}:{line}", {**value, "metadata": meta} if meta else value))
    return out


def _tsv_topics(text: str, where: str) -> list[Record]:
    out: list[Record] = []
    for lineno, line in enumerate(lines_of(text), 1):
        if not line.strip():
            continue
        qid, tab, rest = line.partition("\t")
        if not tab:
            raise InputError(f"expected <top> topics or qid<TAB>text lines, got {_shown(line)}", file=where, line=lineno)
        if not out and qid.strip().lower() in TSV_HEADERS:
            continue  # the header
        question = rest.split("\t")[0].strip()
        value = {"id": qid.strip(), "question": question} if question else f"topic {qid.strip()} has no text"
        out.append(Record(f"{where}:{lineno}", value))
    if not out:
        raise InputError("no topic in the file", file=where)
    return out


def parse_qrels(text: str, where: str) -> list[Qrel]:
    """Every judgement of a qrels text (``qid iteration docid grade``, whitespace-separated); InputError naming the
    line for any other shape or a grade that is no whole number."""
    out = []
    for lineno, line in enumerate(lines_of(text), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise InputError(f"expected 4 columns (qid iteration docid grade), got {len(parts)}: {_shown(line)}",
                             file=where, line=lineno)
        try:
            grade = int(parts[3])
        except ValueError:
            raise InputError(f"the grade must be a whole number, got {_shown(parts[3])}", file=where, line=lineno) from None
        out.append(Qrel(f"{where}:{lineno}", parts[0], parts[2], grade))
    if not out:
        raise InputError("no judgement in the qrels file", file=where)
    return out
