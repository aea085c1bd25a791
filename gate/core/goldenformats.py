"""Golden cases from the datasets teams already hold, and golden cases back to them: pure conversions.

In: RAGAS samples (``user_input``, ``reference``, ``reference_contexts``, ``reference_context_ids``), DeepEval goldens
(``input``, ``expected_output``, ``context``, ``name``, ``additional_metadata``), TREC topics with their qrels, and a
spreadsheet's rows through a column mapping. Each row becomes a golden row or the sentence saying why it is dropped;
``finish`` gives rows without an id the golden set's own derived id, makes repeated ids unique and checks every row
as the golden set's loader does, so what is written loads. Out: RAGAS samples and DeepEval goldens on the fields the
format has (what it has no place for is counted by ``not_carried``). Reading the files is gate.io.goldenformats's job.
"""

from __future__ import annotations

import ast
import json
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.core.answers import CHECK_KEYS
from gate.core.cases import FIELDS, json_kind, parse_case
from gate.core.errors import InputError, key_path
from gate.core.model import GoldenCase
from gate.core.surrogates import NOT_UNICODE, lone_surrogate

IMPORTS = ("ragas", "deepeval", "trec", "csv")
EXPORTS = ("ragas", "deepeval")
DEEPEVAL_DELIMITER = "|"  # how DeepEval's JSONL and CSV files join a golden's contexts into one string
DEEPEVAL_BLOCK = "rag_gate"  # additional_metadata's key for the golden fields DeepEval has no place for
NOT_LABELS = {"ragas": ("retrieved_contexts", "retrieved_context_ids", "response", "multi_responses", "rubrics"),
              "deepeval": ("actual_output", "retrieval_context", "tools_called", "expected_tools")}
RAGAS_METADATA = ("synthesizer_name", "persona_name", "query_style", "query_length")
READ_KEYS = {"ragas": frozenset({"id", "user_input", "reference", "reference_contexts", "reference_context_ids", *RAGAS_METADATA}),
             "deepeval": frozenset({"name", "input", "expected_output", "context", "additional_metadata", "scenario", "turns"})}
CSV_FIELDS = ("id", "question", "ground_truth", "relevant_doc_ids", "relevant_texts", "type", "tags", "category",
              "question_type", "expected_keywords", "paraphrases")
LIST_FIELDS = frozenset({"relevant_doc_ids", "relevant_texts", "tags", "expected_keywords", "paraphrases"})

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Record:
    """One row of an input file: where it is ("ragas.jsonl:3", "goldens.json: item 2") and its parsed value."""

    where: str
    value: Any


@dataclass(slots=True)
class Imported:
    """The golden rows to write, in input order, and what happened on the way."""

    rows: list[Row] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    derived: int = 0  # ids derived from the question
    renamed: list[tuple[str, str, str, str]] = field(default_factory=list)  # (where, id, the unique id written, why)


def _given_id(value: Any, key: str) -> tuple[str | None, str | None]:
    """The id a row gives under ``key`` (its text stripped, a whole number as its text), or why it cannot be one;
    (None, None) when it gives none (absent, null or blank: one is derived)."""
    raw = value.get(key)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw), None
    if raw is not None and not isinstance(raw, str):
        return None, f"{key!r} (the case's id) must be a string, got {json_kind(raw)}"
    return (raw.strip() or None) if raw else None, None


def _text(value: Any) -> str | None:
    """A non-blank string, or None."""
    return value if isinstance(value, str) and value.strip() else None


def _listed(value: Any, name: str, split: str | None = None) -> list[str] | str:
    """A list of non-empty strings from a list, a list written as text (RAGAS's CSV writes Python's form of it, a
    JSON list is read too) or one string (split on ``split`` when given); the sentence saying what is wrong
    otherwise. None and blanks give an empty list; numbers in a list (ids) are taken as their text."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        listed = _list_text(text) if text.startswith("[") else None
        if listed is None and split is None and text.startswith("["):  # RAGAS's CSV writes each list column as one
            return f"{name!r} looks like a list but is neither JSON nor Python's list of strings: {text[:60]!r}"
        if listed is None:  # DeepEval's joined contexts, even one that starts with "[" ("[1] Loans last 21 days.")
            return [p.strip() for p in text.split(split) if p.strip()] if split else [text]
        value = listed
    if not isinstance(value, list):
        return f"{name!r} must be a list of strings, got {json_kind(value)}"
    out: list[str] = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            return f"{name!r} must be a list of strings, got {json_kind(item)} in it"
        if item.strip():
            out.append(item)
    return out


def _list_text(text: str) -> list[Any] | None:
    """A list written as text: JSON, Python's repr of a list, or numpy's repr of an array of strings (what a Hugging
    Face dataset's ``to_csv`` writes: ``['a' 'b']``, no commas, which Python would read as one string ``'ab'``): its
    items, each string literal one item; None when the text is none of these."""
    try:
        value = json.loads(text)
        return value if isinstance(value, list) else None
    except (ValueError, RecursionError):
        pass
    lines = iter(text.splitlines(keepends=True))
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)
    try:
        tokens = [t for t in tokenize.generate_tokens(lambda: next(lines, "")) if t.type not in skip]
    except (tokenize.TokenError, SyntaxError):
        return None
    if len(tokens) < 2 or tokens[0].string != "[" or tokens[-1].string != "]":
        return None
    items: list[Any] = []
    for tok in tokens[1:-1]:
        if tok.type == tokenize.STRING:
            try:
                item = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
            if not isinstance(item, str):
                return None
            items.append(item)
        elif tok.type == tokenize.NUMBER and tok.string.isdigit():
            items.append(int(tok.string))
        elif tok.string != ",":
            return None
    return items


def _object(value: Any, name: str) -> dict[str, Any] | str:
    """An object, from itself or from its JSON text (DeepEval's CSV writes additional_metadata so); {} for None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return f"{name!r} must be a JSON object, got the text {value[:60]!r}"
    return value if isinstance(value, dict) else f"{name!r} must be an object, got {json_kind(value)}"


def _question_type(synthesizer: Any) -> str | None:
    """RAGAS's test set synthesizers (single_hop_specific_query_synthesizer, multi_hop_abstract_...) as a question type."""
    if not isinstance(synthesizer, str):
        return None
    return "simple" if synthesizer.startswith("single_hop") else "multi_context" if synthesizer.startswith("multi_hop") else None


def from_ragas(value: Any) -> Row | str:
    """A golden row from one RAGAS sample (EvaluationDataset.to_list's dict, a line of to_jsonl, a row of to_csv, or a
    Testset's with its synthesizer_name), or why it cannot be one."""
    if not isinstance(value, dict):
        return f"a RAGAS sample must be an object, got {json_kind(value)}"
    question = value.get("user_input")
    if isinstance(question, list):
        return "a multi-turn sample (user_input is a conversation): a golden case is one question"
    if question is not None and not isinstance(question, str):
        return f"'user_input' must be a string (the question), got {json_kind(question)}"
    if _text(question) is None:
        return "no question: 'user_input' is missing or empty"
    case_id, bad = _given_id(value, "id")  # RAGAS has no id: a file a user wrote may
    if bad:
        return bad
    row: Row = {"id": case_id} if case_id else {}
    row["question"] = question
    if value.get("reference") is not None and not isinstance(value["reference"], str):
        return f"'reference' must be a string, got {json_kind(value['reference'])}"
    if _text(value.get("reference")):
        row["ground_truth"] = value["reference"]
    ids = _listed(value.get("reference_context_ids"), "reference_context_ids")
    texts = _listed(value.get("reference_contexts"), "reference_contexts")
    for got in (ids, texts):
        if isinstance(got, str):
            return got
    if not ids and not texts:
        return "no 'reference_contexts' nor 'reference_context_ids': an answerable case needs its relevant passages or ids"
    if ids:
        row["relevant_doc_ids"] = list(dict.fromkeys(ids))
    if texts:
        row["relevant_texts"] = texts
    qtype = _question_type(value.get("synthesizer_name"))
    if qtype:
        row["question_type"] = qtype
    meta = {k: value[k] for k in RAGAS_METADATA if value.get(k) not in (None, "")}
    if meta:
        row["metadata"] = meta
    return row


def from_deepeval(value: Any) -> Row | str:
    """A golden row from one DeepEval golden (as EvaluationDataset.save_as writes it: JSON, JSONL or a CSV row), or
    why it cannot be one. ``name`` is the id; ``context`` (the ideal contexts) the relevant texts; the golden fields
    DeepEval has no place for are read from ``additional_metadata.rag_gate``, its other keys go to metadata."""
    if not isinstance(value, dict):
        return f"a DeepEval golden must be an object, got {json_kind(value)}"
    if value.get("scenario") or value.get("turns"):
        return "a conversational golden (scenario and turns): a golden case is one question"
    if value.get("input") is not None and not isinstance(value["input"], str):
        return f"'input' must be a string (the question), got {json_kind(value['input'])}"
    if _text(value.get("input")) is None:
        return "no question: 'input' is missing or empty"
    extra = _object(value.get("additional_metadata"), "additional_metadata")
    if isinstance(extra, str):
        return extra
    extra = dict(extra)
    block = _object(extra.pop(DEEPEVAL_BLOCK, None), f"additional_metadata.{DEEPEVAL_BLOCK}")
    if isinstance(block, str):
        return block
    unknown = sorted(set(block) - set(FIELDS) - {"id", "question", "ground_truth", "relevant_texts"})
    if unknown:
        return f"unknown field {unknown[0]!r} in additional_metadata.{DEEPEVAL_BLOCK} (fields: {', '.join(FIELDS)})"
    case_id, bad = _given_id(value, "name")
    if bad:
        return bad
    row: Row = {"id": case_id} if case_id else {}
    row["question"] = value["input"]
    if value.get("expected_output") is not None and not isinstance(value["expected_output"], str):
        return f"'expected_output' must be a string, got {json_kind(value['expected_output'])}"
    if _text(value.get("expected_output")):
        row["ground_truth"] = value["expected_output"]
    texts = _listed(value.get("context"), "context", DEEPEVAL_DELIMITER)
    if isinstance(texts, str):
        return texts
    if texts:
        row["relevant_texts"] = texts
    row.update({k: v for k, v in block.items() if k not in ("id", "question", "ground_truth", "relevant_texts", "metadata")})
    meta = {**extra, **(block["metadata"] if isinstance(block.get("metadata"), dict) else {})}
    if "metadata" in block and not isinstance(block["metadata"], dict):
        return f"'additional_metadata.{DEEPEVAL_BLOCK}.metadata' must be an object"
    if meta:
        row["metadata"] = meta
    if row.get("type", "answerable") == "answerable" and not texts and not row.get("relevant_doc_ids"):
        return ("no 'context' (the ideal contexts) nor additional_metadata.rag_gate.relevant_doc_ids: an answerable case "
                "needs its relevant passages or ids")
    return row


def parse_mapping(text: str | None, header: Sequence[str], where: str) -> dict[str, str]:
    """``--map question=Question,ground_truth=Expected,metadata.owner=Owner`` as {field: column}; without it, the
    header's columns named as golden fields. InputError naming --map, or the file's header, otherwise."""
    if text is None:
        mapping = {c: c for c in header if c in CSV_FIELDS}
    else:
        mapping = {}
        for item in text.split(","):
            name, sep, column = (p.strip() for p in item.partition("="))
            if not sep or not name or not column:
                raise InputError(f"must be FIELD=COLUMN pairs, comma-separated (question=Question,ground_truth=Expected), "
                                 f"got {item!r}", key="--map")
            if name not in CSV_FIELDS and not (name.startswith("metadata.") and len(name) > len("metadata.")):
                raise InputError(f"{name!r} is no golden field that a column can fill (fields: {', '.join(CSV_FIELDS)}, "
                                 "or metadata.NAME)", key="--map")
            if name in mapping:
                raise InputError(f"fills {name!r} twice, from {mapping[name]!r} and from {column!r}", key="--map")
            mapping[name] = column
        missing = [c for c in mapping.values() if c not in header]
        if missing:
            raise InputError(f"--map names the column {missing[0]!r}, which the header does not have (its columns: "
                             f"{', '.join(repr(c) for c in header)})", file=where, line=1)
    if "question" not in mapping:
        raise InputError(f"no column gives the question (the header's columns: {', '.join(repr(c) for c in header)})",
                         file=where, line=1, hint="map one: --map question=COLUMN (and ground_truth=, relevant_doc_ids=...)")
    return mapping


def from_cells(cells: Mapping[str, str], mapping: Mapping[str, str], sep: str) -> Row | str:
    """A golden row from one spreadsheet row ({column: cell}) through ``mapping`` ({field: column}); list fields are
    split on ``sep``. Blank cells are absent fields."""
    if not any(c.strip() for c in cells.values()):
        return "an empty row"
    row: Row = {}
    meta: dict[str, str] = {}
    for name, column in mapping.items():
        cell = (cells.get(column) or "").strip()
        if not cell:
            continue
        if name.startswith("metadata."):
            meta[name[len("metadata."):]] = cell
        elif name in LIST_FIELDS:
            row[name] = list(dict.fromkeys(p.strip() for p in cell.split(sep) if p.strip()))
        else:
            row[name] = cell
    if "question" not in row:
        return f"no question: the column {mapping['question']!r} is empty"
    if meta:
        row["metadata"] = meta
    return row


def finish(candidates: Iterable[tuple[str, Row | str]]) -> Imported:
    """The rows checked as the golden set's loader checks them, ids derived where absent (gate.core.cases.derive_id)
    and made unique (``-2``, ``-3``... after the first; ids alike but for case are one id); every row that cannot be
    a case dropped with its reason."""
    out = Imported()
    kept: list[tuple[str, Row, GoldenCase]] = []
    for where, row in candidates:
        parsed = row if isinstance(row, str) else parse_case(row)
        if isinstance(parsed, GoldenCase) and (at := lone_surrogate(row)) is not None:
            parsed = f"{key_path(at)}: {NOT_UNICODE}"
        if isinstance(parsed, str):
            out.dropped.append((where, parsed))
            continue
        assert isinstance(row, dict)
        kept.append((where, row, parsed))
    # an id the file gives is kept where it first appears: no derived id, nor a -2 made for another row, takes it
    given: dict[str, tuple[str, str]] = {}  # id casefolded -> where it is given first, as written there
    for where, row, parsed in kept:
        if row.get("id") is not None:
            given.setdefault(parsed.id.casefold(), (where, parsed.id))
    seen: dict[str, tuple[str, str, str]] = {}  # id casefolded -> where it is written, its question, the id written
    for where, row, parsed in kept:
        case_id, key = parsed.id, parsed.id.casefold()
        if row.get("id") is None:
            out.derived += 1
        if key in seen or (row.get("id") is None and key in given) or given.get(key, (where,))[0] != where:
            first, question, other = seen[key] if key in seen else (given[key][0], "", given[key][1])
            n = 2
            while f"{case_id}-{n}".casefold() in seen or f"{case_id}-{n}".casefold() in given:
                n += 1
            why = f"the same question as {first}" if question == parsed.question else f"the id of {first}"
            why += f", {other!r}: ids alike but for case are one id" if other != case_id else ""
            out.renamed.append((where, case_id, f"{case_id}-{n}", why))
            case_id, key = f"{case_id}-{n}", f"{case_id}-{n}".casefold()
        seen[key] = (where, parsed.question, case_id)
        out.rows.append({"id": case_id, **{k: row[k] for k in FIELDS if k in row and k != "id"}})
    return out


def golden_row(case: GoldenCase) -> Row:
    """A case as its line of the golden set: the fields it sets, none of the defaults."""
    row: Row = {"id": case.id, "question": case.question}
    if case.ground_truth is not None:
        row["ground_truth"] = case.ground_truth
    if case.relevant:
        graded = any(g != 1 for g in case.relevant.values())
        row["relevant_doc_ids"] = dict(case.relevant) if graded else list(case.relevant)
    optional: dict[str, Any] = {
        "relevant_texts": list(case.relevant_texts), "type": case.type if case.type != "answerable" else None,
        "tags": list(case.tags), "category": case.category, "question_type": case.question_type,
        "expected_keywords": list(case.expected_keywords), "paraphrases": list(case.paraphrases),
        "checks": _checks(case), "metadata": dict(case.metadata)}
    row.update({k: v for k, v in optional.items() if v})
    return row


def _checks(case: GoldenCase) -> dict[str, Any] | None:
    if not case.checks:
        return None
    values = {k: getattr(case.checks, k) for k in CHECK_KEYS}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if v not in (None, ())}


def to_ragas(case: GoldenCase) -> Row:
    """A case as a RAGAS SingleTurnSample's dict (what EvaluationDataset.to_list writes: no None values)."""
    sample: Row = {"user_input": case.question}
    if case.relevant_texts:
        sample["reference_contexts"] = list(case.relevant_texts)
    if case.relevant:
        sample["reference_context_ids"] = list(case.relevant)
    if case.ground_truth is not None:
        sample["reference"] = case.ground_truth
    return sample


def to_deepeval(case: GoldenCase) -> Row:
    """A case as a DeepEval golden (the keys EvaluationDataset.save_as writes): the id as ``name``, the relevant texts
    as ``context``, the golden fields DeepEval has no place for under ``additional_metadata.rag_gate``."""
    row = golden_row(case)
    block = {k: v for k, v in row.items() if k not in ("id", "question", "ground_truth", "relevant_texts")}
    return {"input": case.question, "expected_output": case.ground_truth,
            "context": list(case.relevant_texts) or None, "name": case.id,
            "additional_metadata": {DEEPEVAL_BLOCK: block} if block else None}


def not_carried(cases: Sequence[GoldenCase], fmt: str) -> dict[str, int]:
    """What ``fmt`` has no place for: {field: how many of the cases set it}. RAGAS samples hold the question, the
    reference, the reference contexts and their ids only; DeepEval carries every field."""
    if fmt != "ragas":
        return {}
    lost = ("id", "type", "tags", "category", "question_type", "expected_keywords", "checks", "paraphrases", "metadata")
    counts = {k: sum(1 for c in cases if k in golden_row(c)) for k in lost}
    counts["relevance grades"] = sum(1 for c in cases if any(g != 1 for g in c.relevant.values()))
    return {k: n for k, n in counts.items() if n}
