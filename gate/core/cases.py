"""Golden cases from parsed rows: validation of one row, ids, the set's fingerprint and its groups. Pure
(reading the JSONL file is gate.io.golden's job)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from gate.core.answers import CHECK_KEYS, AnswerChecks
from gate.core.digest import digest_utf8
from gate.core.model import CASE_TYPES, GoldenCase

try:  # fingerprint_utf8 in C, where gate.core._native is built (tests/unit/test_native.py holds it to the Python one)
    from gate.core._native import fingerprint_utf8 as _native_utf8
except ImportError:
    _native_utf8 = None

MAX_GRADE = 1000  # graded relevance is a small scale (trec's 1-3); a huge grade would overflow the nDCG arithmetic
FIELDS = ("id", "question", "ground_truth", "relevant_doc_ids", "relevant_texts", "type", "tags", "category", "metadata",
          "question_type", "expected_keywords", "checks", "paraphrases")
_FIELDS = frozenset(FIELDS)



def _list_kind(value: Any, fits: Any) -> str:
    """What a list that should hold only items that ``fits`` holds instead: "a list holding a number (3)"."""
    if not isinstance(value, list):
        return json_kind(value)
    bad = next(x for x in value if not fits(x))
    return f"a list holding {json_kind(bad)}"


def json_kind(value: Any) -> str:
    """What a value is, and the value itself when it is short to say: "a number (42)", "a string ('x')", "a list"."""
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
    shown = repr(value[:40] + "..." if len(value) > 40 else value) if isinstance(value, str) else repr(value)[:40]
    return kind if isinstance(value, (dict, list)) or value is None else f"{kind} ({shown})"

def derive_id(question: str) -> str:
    """Stable id for a case without one: a hash of its question."""
    return "q-" + hashlib.sha1(question.strip().encode("utf-8")).hexdigest()[:12]


def _relevant(value: Any) -> dict[str, int]:
    if isinstance(value, list):
        if not all(isinstance(x, str) and x for x in value):
            raise ValueError("relevant_doc_ids must be a list of non-empty strings or an object {id: grade}")
        return dict.fromkeys(value, 1)
    if isinstance(value, dict):
        for k, g in value.items():
            if not k or isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= MAX_GRADE:
                shown = repr(g) if len(repr(g)) <= 40 else f"a number of {len(str(g))} digits"
                raise ValueError(f"relevant_doc_ids[{k!r}] must be an integer grade from 1 to {MAX_GRADE}, got {shown}")
        return dict(value)
    raise ValueError(f"relevant_doc_ids must be a list or an object {{id: grade}}, got {type(value).__name__}")


def parse_case(row: Any, line: int = 0) -> GoldenCase | str:
    """A GoldenCase (read from line ``line``), or the sentence saying what is wrong with the row."""
    if not isinstance(row, dict):
        return f"each line must be a JSON object, got {type(row).__name__}"
    if not row.keys() <= _FIELDS:
        unknown = [k for k in row if k not in _FIELDS]
        return f"unknown field {unknown[0]!r} (fields: {', '.join(FIELDS)}; put your own under 'metadata')"
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        return "'question' is required and must be a non-empty string"
    case_id = row.get("id", None)
    if case_id is None:
        case_id = derive_id(question)
    elif not isinstance(case_id, str) or not case_id.strip():
        return f"'id' must be a non-empty string, got {case_id!r}"
    ctype = row.get("type", "answerable")
    if ctype not in CASE_TYPES:
        return f"'type' must be one of {', '.join(CASE_TYPES)}, got {ctype!r}"
    gt = row.get("ground_truth")
    if gt is not None and not isinstance(gt, str):
        return f"'ground_truth' must be a string, got {type(gt).__name__}"
    try:
        relevant = _relevant(row["relevant_doc_ids"]) if row.get("relevant_doc_ids") is not None else {}
    except ValueError as exc:
        return str(exc)
    texts = row.get("relevant_texts") or []
    if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
        return ("'relevant_texts' must be a list of non-empty strings (passages or key sentences that answer the question), "
                f"got {_list_kind(texts, lambda t: isinstance(t, str) and bool(t.strip()))}")
    tags = row.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return f"'tags' must be a list of strings, got {_list_kind(tags, lambda t: isinstance(t, str))}"
    category = row.get("category")
    if category is not None and not isinstance(category, str):
        return f"'category' must be a string, got {json_kind(category)}"
    metadata = row.get("metadata", {})
    if not isinstance(metadata, dict):
        return f"'metadata' must be an object, got {json_kind(metadata)}"
    if ctype == "answerable" and not relevant and not texts and metadata.get("review") != "pending":
        # a candidate awaiting review (runs leave it out) may wait for its labels: the reviewer adds them to approve it
        return "an answerable case needs a non-empty 'relevant_doc_ids' or 'relevant_texts' (or set type: out_of_scope)"
    qtype = row.get("question_type")
    if qtype is not None and (not isinstance(qtype, str) or not qtype.strip() or len(qtype) > 100):
        return "'question_type' must be a non-empty string of at most 100 characters (simple, multi_context, ambiguous, ...)"
    keywords = row.get("expected_keywords") or []
    if not isinstance(keywords, list) or not all(isinstance(k, str) and k.strip() for k in keywords):
        return "'expected_keywords' must be a list of non-empty strings (what the answer must say)"
    checks = read_checks(row["checks"], "checks") if row.get("checks") is not None else None
    if isinstance(checks, str):
        return checks
    paraphrases = row.get("paraphrases") or []
    if not isinstance(paraphrases, list) or not all(isinstance(p, str) and p.strip() for p in paraphrases):
        return "'paraphrases' must be a list of non-empty strings (the question as a user would type it)"
    return GoldenCase(
        id=case_id, question=question, line=line, ground_truth=gt, relevant=relevant, type=ctype,
        tags=tuple(tags), category=category, metadata=metadata, question_type=qtype, relevant_texts=tuple(texts),
        expected_keywords=tuple(keywords), checks=checks, paraphrases=tuple(paraphrases),
    )


def read_checks(value: Any, where: str) -> AnswerChecks | str:
    """An answer's checks (a golden case's ``checks``), or the sentence saying what is wrong with them."""
    if not isinstance(value, dict):
        return f"'{where}' must be an object with any of {', '.join(CHECK_KEYS)}"
    unknown = [k for k in value if k not in CHECK_KEYS]
    if unknown:
        return f"unknown key {unknown[0]!r} in '{where}' (keys: {', '.join(CHECK_KEYS)})"
    for key in ("must_contain", "must_not_contain"):
        phrases = value.get(key, [])
        if not isinstance(phrases, list) or not all(isinstance(x, str) and x.strip() for x in phrases):
            return f"'{where}.{key}' must be a list of non-empty strings"
    for key in ("max_words", "max_chars"):
        n = value.get(key)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            return f"'{where}.{key}' must be a whole number from 1, got {n!r}"
    for key in ("regex", "json_schema"):
        text = value.get(key)
        if text is not None and (not isinstance(text, str) or not text):
            return f"'{where}.{key}' must be a non-empty string"
    if value.get("regex") is not None:
        try:
            re.compile(value["regex"])
        except re.error as exc:
            return f"'{where}.regex' is no regular expression: {exc}"
    return AnswerChecks.read(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False)  # what json.dumps(..., ensure_ascii=False) uses, made once
_STRING = json.encoder.encode_basestring  # the string encoder _ENCODER uses (ensure_ascii False): the same text


def _row(c: GoldenCase) -> str:
    """The case's line of the fingerprint: the JSON text of [id, question, ground truth, sorted (id, grade) pairs,
    type, and the fields a set may not have, when it has them], as ``_ENCODER`` writes it. A case without the
    optional fields (the usual one) is written here piece by piece, to the same text, without building the list."""
    if c.relevant_texts or c.expected_keywords or c.checks or c.paraphrases:
        return _ENCODER.encode([c.id, c.question, c.ground_truth, sorted(c.relevant.items()), c.type,
                                *([list(c.relevant_texts)] if c.relevant_texts else []),  # sets without them: as before
                                *([["keywords", list(c.expected_keywords)]] if c.expected_keywords else []),
                                *([["checks", repr(c.checks)]] if c.checks else []),
                                *([["paraphrases", list(c.paraphrases)]] if c.paraphrases else [])])
    s, gt = _STRING, c.ground_truth
    pairs = ", ".join([f"[{s(d)}, {int.__repr__(g)}]" for d, g in sorted(c.relevant.items())])
    return f"[{s(c.id)}, {s(c.question)}, {'null' if gt is None else s(gt)}, [{pairs}], {s(c.type)}]"


def fingerprint(cases: Iterable[GoldenCase]) -> str:
    """Content hash of the golden set: what each case asks and what counts as relevant."""
    return digest_utf8(fingerprint_utf8(sorted(cases, key=_by_id)))


def fingerprint_utf8(cases: list[GoldenCase]) -> bytes:
    """The UTF-8 of what ``fingerprint`` hashes: each case's ``_row`` and a newline (written straight into one buffer
    in C where gate.core._native is built)."""
    if _native_utf8 is not None:
        return _native_utf8(cases, _STRING, _row)
    return "".join([_row(c) + "\n" for c in cases]).encode("utf-8")


def _by_id(c: GoldenCase) -> str:
    return c.id


def groups(cases: Iterable[GoldenCase]) -> dict[str, dict[str, list[str]]]:
    """Case ids by type, category and tag: the breakdown every stage can report on."""
    out: dict[str, dict[str, list[str]]] = {"type": defaultdict(list), "category": defaultdict(list), "tag": defaultdict(list)}
    for c in cases:
        out["type"][c.type].append(c.id)
        if c.category:
            out["category"][c.category].append(c.id)
        for t in c.tags:
            out["tag"][t].append(c.id)
    return {k: dict(v) for k, v in out.items()}
