"""Strict JSON for every file rag-gate reads (golden set, results, distractors, reports, baselines, history).

Python's parser accepts what JSON does not (NaN, Infinity) and fails in ways that are not input errors
(RecursionError on deep nesting, ValueError on an integer of more than 4,300 digits). ``parse`` turns every
one of them into ``BadJSON`` with the line, the column and a few characters around it, which the caller
reports as exit 2 naming the file.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # deeper than any rag-gate document or golden row needs: refused before anything walks it


class BadJSON(ValueError):
    def __init__(self, message: str, line: int = 1, column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # one decoder: json.loads(..., parse_constant=) makes one a call


def _near(text: str, pos: int) -> str:
    """Up to 12 characters either side of ``pos``, within its line."""
    start = max(0, pos - 12, text.rfind("\n", 0, pos) + 1)
    end = text.find("\n", pos)
    return repr(text[start: min(pos + 12, len(text) if end < 0 else end)])


def parse(text: str, *, max_depth: int | None = MAX_DEPTH) -> Any:
    """The parsed value of ``text``; BadJSON saying what is wrong and where. ``max_depth`` None: no depth check beyond
    the parser's own (for rows of a known shape, which nothing walks recursively)."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        if text[exc.pos: exc.pos + 1] == "\ufeff":
            raise BadJSON("a byte-order mark (U+FEFF) where JSON was expected; save the file as UTF-8 without BOM",
                          exc.lineno, exc.colno) from None
        raise BadJSON(f"invalid JSON: {exc.msg} at column {exc.colno}, near {_near(text, exc.pos)}", exc.lineno, exc.colno) from None
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
