"""Which cases the judge sees: a seeded sample plus every case with a pinned tag. Pure.

Each case gets a rank from a hash of (seed, case id); the sample is the ``size`` lowest
ranks. So the same seed and golden set give the same sample on every run and machine, and
adding or removing a case moves at most one case in or out of the sample — the rest of the
sample stays put, which keeps per-case comparisons with earlier runs possible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from gate.core.model import GoldenCase


def _rank(seed: int, case_id: str) -> bytes:
    return hashlib.sha256(f"{seed}\x00{case_id}".encode()).digest()


def select_sample(
    cases: Sequence[GoldenCase], size: int | str, seed: int = 0, always_tags: Iterable[str] = ()
) -> list[GoldenCase]:
    """``size`` cases chosen by seed (``"all"``: every case), plus every case carrying one of
    ``always_tags``; returned in golden-set order."""
    pinned_tags = set(always_tags)
    pinned = {c.id for c in cases if pinned_tags.intersection(c.tags)}
    if size == "all":
        chosen = {c.id for c in cases}
    else:
        ordered = sorted(cases, key=lambda c: _rank(seed, c.id))
        chosen = {c.id for c in ordered[: int(size)]}
    keep = chosen | pinned
    return [c for c in cases if c.id in keep]
