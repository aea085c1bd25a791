"""Strict JSON for every file rag-gate reads (golden set, results, distractors, reports, baselines, history).

Python's parser accepts what JSON does not (NaN, Infinity) and fails in ways that are not input errors
(RecursionError on deep nesting, ValueError on an integer of more than 4,300 digits). ``parse`` turns every
one of them into ``BadJSON`` with the line, the column and a few characters around it, which the caller
reports as exit 2 naming the file.

Speed: a text is parsed first by msgspec's C parser (twice as fast as the json module's on a results file, four
to six times when it decodes a line straight into typed passages: ``fast_as``). It accepts a subset of what the
json module accepts, with the same values (integers of any size it takes are exact ``int``s, floats correctly
rounded, the last of repeated keys kept where the first stood), and refuses NaN, Infinity, numbers beyond the
float range, lone surrogates and malformed JSON. Whatever it refuses, or nests deeper than it may go alone, goes
to the json module's parser (``strict``), which gives the answer: the same value, or the same BadJSON as before.
tests/unit/test_fast_paths.py holds the two to this, on hostile and mutated texts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

MAX_DEPTH = 64  # deeper than any rag-gate document or golden row needs: refused before anything walks it
# Rows parsed without a depth limit (max_depth None) are refused by the json module only when its recursion limit
# (about a thousand levels) is hit: the fast parser's value is taken only up to this depth, deeper ones go to it.
ROW_FAST_DEPTH = 200


class BadJSON(ValueError):
    def __init__(self, message: str, line: int = 1, column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # one decoder: json.loads(..., parse_constant=) makes one a call
_FAST = msgspec.json.Decoder().decode


def _near(text: str, pos: int) -> str:
    """Up to 12 characters either side of ``pos``, within its line."""
    start = max(0, pos - 12, text.rfind("\n", 0, pos) + 1)
    end = text.find("\n", pos)
    return repr(text[start: min(pos + 12, len(text) if end < 0 else end)])


def parse(text: str, *, max_depth: int | None = MAX_DEPTH) -> Any:
    """The parsed value of ``text``; BadJSON saying what is wrong and where. ``max_depth`` None: no depth check beyond
    the parser's own (for rows of a known shape, which nothing walks recursively)."""
    try:
        value = _FAST(text)
    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError; so is a lone surrogate's UnicodeEncodeError
        return strict(text, max_depth=max_depth)
    limit = ROW_FAST_DEPTH if max_depth is None else max_depth
    # nesting needs brackets: a text with few of them is not walked (a results line of 20 passages has 22)
    if text.count("[") + text.count("{") > limit and depth(value, limit) > limit:
        return strict(text, max_depth=max_depth)
    return value


def fast_as(text: str, shape: type[T], *, open_fields: tuple[str, ...] = ()) -> T | None:
    """``text`` (a line of a JSONL file: no depth limit but the parser's own) decoded straight into ``shape`` (a
    msgspec Struct or a dataclass) by msgspec: no dict is built for the objects it types. None when the fast parser refuses the text or
    the value is not of that shape: the caller then parses it with ``parse``, which gives what the json module would
    (the value, or the error). Values are those ``parse`` gives, typed per ``shape``; msgspec takes a JSON integer for
    a float field (the caller checks what matters to it). ``open_fields``: the fields typed Any, the only ones that
    can nest deep; a value nested deeper than ROW_FAST_DEPTH in one of them is left to ``parse``."""
    decode = _TYPED.get(shape)
    if decode is None:
        decode = _TYPED[shape] = msgspec.json.Decoder(shape).decode
    try:
        value = decode(text)
    except (ValueError, RecursionError):
        return None
    for name in open_fields:
        v = getattr(value, name)
        if isinstance(v, (dict, list)) and depth(v, ROW_FAST_DEPTH) >= ROW_FAST_DEPTH:  # the line is one level more
            return None
    return value  # type: ignore[no-any-return]


_TYPED: dict[type, Callable[[str], Any]] = {}  # one decoder per shape


def strict(text: str, *, max_depth: int | None = MAX_DEPTH) -> Any:
    """``parse`` by the json module alone: the reference the fast path is held to, and the one that words errors."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        if text[exc.pos: exc.pos + 1] == "\ufeff":
            raise BadJSON("a byte-order mark (U+FEFF) where JSON was expected; save the file as UTF-8 without BOM",
                          exc.lineno, exc.colno) from None
        msg = exc.msg.removesuffix(" at")  # "Invalid control character at": the column follows
        raise BadJSON(f"invalid JSON: {msg} at column {exc.colno}, near {_near(text, exc.pos)}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise BadJSON(f"invalid JSON: nested more than {max_depth or 'a thousand'} levels deep") from None
    except ValueError as exc:  # NaN/Infinity, or an integer beyond Python's 4,300-digit limit
        what = str(exc) if "JSON number" in str(exc) else "a number with too many digits"
        raise BadJSON(f"invalid JSON: {what}") from None
    if max_depth is not None and depth(value, max_depth) > max_depth:
        raise BadJSON(f"invalid JSON: nested more than {max_depth} levels deep")
    return value


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (stops counting past ``limit``), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d > limit:
                return d
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest
