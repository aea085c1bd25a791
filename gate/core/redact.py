"""Keep secrets out of every message rag-gate prints or writes. Pure.

A run knows its secrets: the value of every ${NAME} the spec expands, the judge's key, the GitHub
token. ``Redactor`` replaces each of them, wherever it appears, by ``***``:

* whole: as it is, each of its lines (a multi-line secret may be shown one line at a time),
  JSON-escaped and URL-encoded (the forms an error body echoes it in);
* in part: any piece of ``PIECE`` (8) characters or more of a token-like secret (no blank, no
  ``://``), because a service that echoes a token may cut it first. A URL read from ${NAME} is
  redacted whole, and its credentials (``user:password@``) in part, so that answers that merely
  mention the same host keep their text.

Text is always redacted *before* it is cut, so a cut never leaves part of a secret behind:
``shorten`` is the one way to shorten text that may hold one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

MIN_LENGTH = 4  # shorter values are not secrets worth hiding (and would erase ordinary words)
PIECE = 8  # a piece this long of a token is redacted too
MASK = "***"


def _forms(secret: str) -> set[str]:
    forms = {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret, safe="")}
    forms |= {line.strip() for line in secret.splitlines()}
    return {f for f in forms if len(f) >= MIN_LENGTH}


def _token_parts(secret: str) -> list[str]:
    """The parts of a secret whose pieces are secret too: a token whole, a URL's credentials."""
    if "://" in secret:
        creds = secret.split("://", 1)[1].split("@", 1)
        return [creds[0]] if len(creds) == 2 and len(creds[0]) >= PIECE else []
    return [secret] if len(secret) > PIECE and not any(c.isspace() for c in secret) else []


class Redactor:
    """The secrets of one run, and the functions that remove them from text and documents."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        grams: set[str] = set()
        for s in secrets:
            if s and len(s) >= MIN_LENGTH:
                forms |= _forms(s)
                for part in _token_parts(s):
                    grams |= {part[i:i + PIECE] for i in range(len(part) - PIECE + 1)}
        self._forms = sorted(forms, key=len, reverse=True)  # the longest first: a secret that holds another
        self._pattern = re.compile("|".join(map(re.escape, self._forms))) if self._forms else None
        self._grams = frozenset(grams)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        if self._pattern.search(text) is not None:
            text = self._pattern.sub(MASK, text)
        return self._pieces(text) if self._grams and len(text) >= PIECE else text

    def _pieces(self, text: str) -> str:
        """Every run of text covered by a secret's 8-character pieces, replaced by ***."""
        grams = self._grams
        spans: list[list[int]] = []
        for i in range(len(text) - PIECE + 1):
            if text[i:i + PIECE] in grams:
                if spans and i <= spans[-1][1]:
                    spans[-1][1] = i + PIECE
                else:
                    spans.append([i, i + PIECE])
        if not spans:
            return text
        out, at = [], 0
        for start, end in spans:
            out += [text[at:start], MASK]
            at = end
        return "".join(out) + text[at:]

    def shorten(self, text: Any, limit: int, ellipsis: str = "...") -> str:
        """``text`` redacted, on one line, then cut to ``limit`` characters."""
        s = " ".join(self(str(text)).split())
        return s if len(s) <= limit else s[: max(0, limit - len(ellipsis))] + ellipsis

    def document(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys included) redacted; the value itself when there is no
        secret to remove."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self.document(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.document(v) for v in value]
        return value


def redact(text: str, secrets: Iterable[str]) -> str:
    """Every form of every secret in ``text`` replaced by ***."""
    return Redactor(secrets)(text)
