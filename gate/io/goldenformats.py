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

from gate.core.errors import InputError
from gate.core.goldenformats import Record
from gate.core.goldentrec import Qrel
from gate.io.golden import iter_jsonl, open_regular
from gate.io.jsonparse import BadJSON, parse

TSV_HEADERS = {"qid", "query_id", "id", "topic_id", "topic", "num", "number"}
CSV_CELL_LIMIT = 1 << 30  # characters in one cell (Python's csv stops at 131,072 by default: a long passage is more)
_LINE_END = re.compile(r"\r\n|\r|\n")  # what ends a line of these files (not U+2028 nor U+0085, as str.splitlines has it)


def lines_of(text: str) -> list[str]:
    """The lines of a text file, split at its line ends only."""
    lines = _LINE_END.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines
QUERY_FIELDS = ("title", "description")


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text; InputError naming it otherwise (gate.io.golden.open_regular)."""
    with open_regular(path) as handle:
        try:
            return handle.read()
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", file=str(path)) from None


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
        return [Record(f"{path}:{line}", value) for line, value in iter_jsonl(path)]
    try:
        value = parse(text)
    except BadJSON as exc:
        raise InputError(exc.message, file=str(path), line=exc.line) from None
    if not isinstance(value, list):
        raise InputError("expected a JSON list of samples", file=str(path))
    return [Record(f"{path}: item {i}", item) for i, item in enumerate(value, 1)]


def read_csv(path: Path, delimiter: str = ",") -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the rows (the line each starts on, its cells) of a CSV file; InputError for no header, a
    repeated or blank column name, a row of more cells than the header, or a cell csv cannot read."""
    text = read_text(path)
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
        raise InputError(f"not readable as CSV: {exc}", file=str(path), line=reader.line_num) from None
    return header, rows


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
