"""The corpus's chunks, checked for the cuts a chunker makes that answers later pay for. Pure.

    cut_json          error    a chunk that looks like JSON ("key": value) with unbalanced {} or []
    cut_code_block    error    an odd number of ``` (or ~~~) fence lines: a code block cut in two
    cut_table         error    table rows (| a | b |) without their header row (| --- |): the header is in another chunk
    orphan_heading    warning  a chunk that is only a heading, or ends with one: the heading left its body
    empty_chunk       error    a chunk with no text
    duplicate_chunk   warning  chunks with the same text (whitespace aside)
    oversized_chunk   warning  more tokens than ``max_tokens`` (counted as the offline metrics count words: CJK per character)

Each finding names its chunks and the evidence.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from gate.core.textmatch import rouge_tokens

Finding = dict[str, Any]  # {"code", "level", "chunks": [ids], "message"}
SHOWN = 5  # chunk ids named in a message
LEVELS = ("error", "warning", "info")

_KEY = re.compile(r'"[^"\n]{1,80}"\s*:')  # a JSON object's key
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_FENCE = re.compile(r"^\s{0,3}(```|~~~)", re.MULTILINE)
_ROW = re.compile(r"^\s*\|.*\|\s*$")
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def cut_json(text: str) -> str | None:
    """The evidence that a JSON-looking chunk was cut (its brackets do not balance, strings aside); None otherwise."""
    if not _KEY.search(text):
        return None
    bare = _STRING.sub('""', text)
    braces, brackets = (bare.count("{"), bare.count("}")), (bare.count("["), bare.count("]"))
    if braces[0] == braces[1] and brackets[0] == brackets[1]:
        return None
    return f"{braces[0]} '{{' and {braces[1]} '}}', {brackets[0]} '[' and {brackets[1]} ']'"


def cut_code_block(text: str) -> str | None:
    fences = len(_FENCE.findall(text))
    return f"{fences} code fences (an odd number)" if fences % 2 else None


def cut_table(text: str) -> str | None:
    lines = text.splitlines()
    rows = [ln for ln in lines if _ROW.match(ln) and not _SEPARATOR.match(ln)]
    if not rows or any(_SEPARATOR.match(ln) for ln in lines):
        return None
    return f"{len(rows)} table row(s) and no header row; the first: {rows[0].strip()[:60]!r}"


def orphan_heading(text: str) -> str | None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or not _HEADING.match(lines[-1]):
        return None
    return f"{'only a heading' if len(lines) == 1 else 'ends with a heading'}: {lines[-1].strip()[:60]!r}"


RULES = (("cut_json", "error", cut_json), ("cut_code_block", "error", cut_code_block), ("cut_table", "error", cut_table),
         ("orphan_heading", "warning", orphan_heading))


def check_corpus(chunks: Iterable[tuple[str, str]], max_tokens: int | None = None) -> list[Finding]:
    """Every finding about the corpus's (id, text) chunks: errors first, then warnings, each in corpus order."""
    findings: list[Finding] = []
    by_text: dict[str, list[str]] = defaultdict(list)
    empty: list[str] = []
    for chunk_id, text in chunks:
        if not text or not text.strip():
            empty.append(chunk_id)
            continue
        by_text[" ".join(text.split())].append(chunk_id)
        for code, level, rule in RULES:
            evidence = rule(text)
            if evidence:
                findings.append({"code": code, "level": level, "chunks": [chunk_id], "message": f"{chunk_id}: {evidence}"})
        if max_tokens is not None and (n := len(rouge_tokens(text))) > max_tokens:
            findings.append({"code": "oversized_chunk", "level": "warning", "chunks": [chunk_id],
                             "message": f"{chunk_id}: {n} tokens, more than --max-tokens {max_tokens}"})
    if empty:
        findings.append({"code": "empty_chunk", "level": "error", "chunks": empty, "message": f"{len(empty)} chunk(s) with no text: {_named(empty)}"})
    for ids in by_text.values():
        if len(ids) > 1:
            findings.append({"code": "duplicate_chunk", "level": "warning", "chunks": ids,
                             "message": f"{len(ids)} chunks hold the same text: {_named(ids)}"})
    findings.sort(key=lambda f: LEVELS.index(f["level"]))  # stable: within a level, in the order found
    return findings
