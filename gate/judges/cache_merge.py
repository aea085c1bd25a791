"""Folding judge caches together: the shards of a CI matrix each save one, and one cache with every score any of
them paid for serves the next run, sharded differently or not at all (``rag-gate cache merge``, the action's
``caches`` input)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gate.judges.cache import JudgeCache, cache_tables


@dataclass(frozen=True, slots=True)
class Folded:
    scores: int  # added
    texts: int
    total_scores: int  # in the cache now
    total_texts: int


def merge_caches(into: Path, caches: Iterable[Path]) -> Folded:
    """Fold several judge cache files (one per shard) into ``into`` (created if need be): a later run, sharded
    differently or not at all, finds every score any of them paid for."""
    caches = list(caches)
    for path in caches:  # every file checked before any is folded in: a bad one leaves ``into`` as it was
        cache_tables(path)
    scores = texts = 0
    with JudgeCache(into) as cache:
        for path in caches:
            if path.resolve() == cache.path.resolve():
                continue
            s, t = cache.fold_in(path)
            scores, texts = scores + s, texts + t
        return Folded(scores, texts, cache.stats().entries, cache.text_stats().entries)
