"""Content digests: one way to hash a text, a JSON value or a list of prompt parts. Pure.

    digest_text   "sha256:" + 16 hex digits of a text (golden-set, spec and stage fingerprints)
    digest_utf8   the same of a text already encoded as UTF-8
    digest_json   the same of a JSON value in canonical form (sorted keys, no spaces, ASCII)
    digest_parts  the full hex SHA-256 of parts joined by a separator no prompt holds (prompt fingerprints)

Changing any of these changes every stored fingerprint and cache key: baselines would read as "measured
differently" and every cached score would be judged again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

PART_SEPARATOR = "\n\x1e"  # a newline and the ASCII record separator


def digest_text(text: str) -> str:
    return digest_utf8(text.encode("utf-8"))


def digest_utf8(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def digest_json(value: Any) -> str:
    return digest_text(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str))


def digest_parts(parts: Iterable[str]) -> str:
    return hashlib.sha256(PART_SEPARATOR.join(parts).encode("utf-8")).hexdigest()
