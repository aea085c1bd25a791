"""Golden cases from parsed rows: validation of one row, ids, the set's fingerprint and its groups. Pure
(reading the JSONL file is gate.io.golden's job)."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from gate.core.digest import digest_text
from gate.core.model import CASE_TYPES, GoldenCase

MAX_GRADE = 1000  # graded relevance is a small scale (trec's 1-3); a huge grade would overflow the nDCG arithmetic
FIELDS = ("id", "question", "ground_truth", "relevant_doc_ids", "relevant_texts", "type", "tags", "category", "metadata",
          "question_type")
_FIELDS = frozenset(FIELDS)


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
        return "'relevant_texts' must be a list of non-empty strings (passages or key sentences that answer the question)"
    if ctype == "answerable" and not relevant and not texts:
        return "an answerable case needs a non-empty 'relevant_doc_ids' or 'relevant_texts' (or set type: out_of_scope)"
    tags = row.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return "'tags' must be a list of strings"
    category = row.get("category")
    if category is not None and not isinstance(category, str):
        return "'category' must be a string"
    metadata = row.get("metadata", {})
    if not isinstance(metadata, dict):
        return "'metadata' must be an object"
    qtype = row.get("question_type")
    if qtype is not None and (not isinstance(qtype, str) or not qtype.strip() or len(qtype) > 100):
        return "'question_type' must be a non-empty string of at most 100 characters (simple, multi_context, ambiguous, ...)"
    return GoldenCase(
        id=case_id, question=question, line=line, ground_truth=gt, relevant=relevant, type=ctype,
        tags=tuple(tags), category=category, metadata=metadata, question_type=qtype, relevant_texts=tuple(texts),
    )


_ENCODER = json.JSONEncoder(ensure_ascii=False)  # what json.dumps(..., ensure_ascii=False) uses, made once


def fingerprint(cases: Iterable[GoldenCase]) -> str:
    """Content hash of the golden set: what each case asks and what counts as relevant."""
    encode = _ENCODER.encode
    rows = "".join(encode([c.id, c.question, c.ground_truth, sorted(c.relevant.items()), c.type,
                           *([list(c.relevant_texts)] if c.relevant_texts else [])]) + "\n"  # sets without texts: as before
                   for c in sorted(cases, key=lambda c: c.id))
    return digest_text(rows)


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
