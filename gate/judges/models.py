"""Judge model names: is a name pinned to a version, or a floating alias? (No imports of any SDK.)"""

from __future__ import annotations

import re

# A date (2024-11-20, 20241022), a numeric revision suffix (-0613, -002), or a digest (@sha256:..., :abcdef1).
_PINNED = re.compile(
    r"(\d{4}-\d{2}-\d{2})|(?<!\d)(20\d{6})(?!\d)|-(\d{3,4})$|@sha256:[0-9a-f]{12,}|:[0-9a-f]{12,}$",
    re.IGNORECASE,
)


def is_floating_model(name: str) -> bool:
    """True for an alias the provider may move (gpt-4o, gpt-4.1, claude-3-5-sonnet-latest, llama3)."""
    if name.lower().endswith("latest"):
        return True
    return _PINNED.search(name) is None
