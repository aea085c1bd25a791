"""Judge model names: is a name pinned to a version, or a floating alias? (No SDK is imported.)"""

from __future__ import annotations

import re

_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2}|\d{8})(?!\d)")
_SUFFIX = re.compile(r"-(\d{3,4})$|-v\d+(\.\d+)*(:\d+)?$")


def is_floating_model(name: str) -> bool:
    """True for an alias that the provider may point at another model (gpt-4o, claude-3-5-sonnet-latest, llama3).

    Pinned: a date (2024-11-20, 20241022), a 3-4 digit snapshot suffix (gpt-4-0613, gemini-1.5-pro-002,
    mistral-large-2407), a weights version (mistral-7b-instruct-v0.3) or a content digest (@sha256:..., an
    Ollama tag of 12+ hex digits).
    """
    text = name.strip().lower()
    if "@sha256:" in text or re.search(r":[0-9a-f]{12,}$", text):
        return False
    base = text.rsplit("/", 1)[-1]
    if base.endswith("latest"):
        return True
    if _DATE.search(base):
        return False
    return _SUFFIX.search(base) is None
