"""Judge usage added up: several clients' counts (a stage's, a merge's shards') as one. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from gate.core.report import Usage

SUMMED = ("calls", "chat_calls", "embedding_calls", "retried", "prompt_tokens", "completion_tokens", "embedding_tokens", "cost",
          "cache_hits", "cache_misses")


def sum_usage(usages: Sequence[Mapping[str, Any]], *, rest: bool = False) -> Usage:
    """The counters summed (the cost left as the first has it when none has a number: no judge.prices), the largest
    number of calls in flight, and (``rest``) the budget reached if any reached it and every other key as the first
    has it (how a noise test ran); without ``rest`` only the counters."""
    out: dict[str, Any] = dict(usages[0]) if rest and usages else {}
    for key in dict.fromkeys(k for u in usages for k in u):
        values = [u[key] for u in usages if key in u]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if key in SUMMED and numbers:
            out[key] = sum(numbers)
        elif key == "max_in_flight" and numbers:
            out[key] = max(numbers)
        elif key == "budget_exceeded" and rest:
            out[key] = any(values)
    return cast(Usage, out)


def tokens(usage: Mapping[str, Any]) -> int:
    """Every token a usage counts: prompt, completion and embedding."""
    return int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)) + int(usage.get("embedding_tokens", 0))
