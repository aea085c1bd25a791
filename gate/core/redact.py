"""Keep secrets (values of ${VARS}, tokens) out of every message rag-gate prints or writes."""

from __future__ import annotations

from collections.abc import Iterable


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of a secret (4+ characters) with ***."""
    for s in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(s, "***")
    return text
