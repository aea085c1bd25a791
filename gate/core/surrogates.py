"""Lone surrogates: text that is not Unicode (an escape from \\ud800 to \\udfff that is not half of a pair, which JSON
and YAML escapes can write and Python's parsers read), which no UTF-8 file, report or comment can hold."""

from __future__ import annotations

from typing import Any

NOT_UNICODE = ("holds text that is not Unicode: a lone surrogate (an escape from \\ud800 to \\udfff that is not half of a "
               "pair), which no UTF-8 file, report or comment can hold")
NOT_UNICODE_HINT = "write the character itself, or both halves of its surrogate pair"


def lone_surrogate(value: Any) -> tuple[str | int, ...] | None:
    """The key path of the first string (a key or a value) in ``value`` holding a lone surrogate; None if none does.
    Walked without recursion: a row may nest as deep as the JSON parser allows."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        at, v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and not _encodes(v):
                return at
        elif isinstance(v, dict):
            for k, item in reversed(v.items()):
                if isinstance(k, str) and not _encodes(k):
                    return (*at, k.encode("utf-8", "backslashreplace").decode("ascii"))
                stack.append(((*at, k), item))
        elif isinstance(v, list):
            stack.extend(((*at, i), item) for i, item in reversed(list(enumerate(v))))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
