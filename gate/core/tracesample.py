"""Which production traces a traces run judges: a seeded sample, stratified by UTC day. Pure.

The window is [since, until) (either end may be open). Each UTC day of the window is a stratum, and so are the
traces without a timestamp when no window is set (they cannot be placed in one when it is: then they are counted,
never sampled). The sample size is round(rate x traces in the window), at least 1 when the window holds a trace and
the rate is above 0; each day gets its share of it (rate x that day's traces, the fractions settled by largest
remainder, so the days add up to the size). Over ``max``, every day's share is scaled down in proportion (largest
remainder again). Remainders that tie are settled by a seeded hash of the day, so no day is favoured for its date.

Within a day the traces are taken in the order of sha256(f"{seed}:{trace id}"): the same traces, seed and settings
give the same sample, and traffic added on another day changes a day's choice only by the one trace or so its share
moves (the traces taken are always the first of the same order).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from fractions import Fraction

from gate.core.traces import Trace

UNDATED = "undated"  # the stratum of the traces without a timestamp (when no window is set)


@dataclass(frozen=True)
class Sampled:
    """The sample: ``traces`` in timestamp order (ties by id; the undated ones last, by id)."""

    traces: list[Trace]
    in_window: int  # the traces the sample was drawn from: those in the window (and the undated ones when none is set)
    by_day: dict[str, int]  # UTC day "YYYY-MM-DD" (or "undated") -> traces sampled, for every day with traces in the window
    undated: int  # traces without a timestamp (in the sample's strata only when no window is set)
    window_by_day: dict[str, int] = field(default_factory=dict)  # the same days -> traces in the window


def rank(seed: int, trace_id: str) -> bytes:
    """A trace's place in its day's order: sha256 of f"{seed}:{trace_id}"."""
    return hashlib.sha256(f"{seed}:{trace_id}".encode()).digest()


def _ranks(seed: int) -> Callable[[Trace], bytes]:
    prefix, sha256 = f"{seed}:", hashlib.sha256
    return lambda t: sha256((prefix + t.id).encode()).digest()


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def strata(traces: Iterable[Trace], since: datetime | None, until: datetime | None) -> tuple[dict[str, list[Trace]], int]:
    """The traces of the window by UTC day (in order of day; "undated" last when no window is set), and the number
    of traces without a timestamp."""
    windowed = since is not None or until is not None
    days: dict[date, list[Trace]] = {}
    undated: list[Trace] = []
    for t in traces:
        ts = t.timestamp
        if ts is None:
            undated.append(t)
            continue
        if ts.tzinfo is not UTC:
            ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
        if (since is None or ts >= since) and (until is None or ts < until):
            days.setdefault(ts.date(), []).append(t)
    out = {day.isoformat(): ts for day, ts in sorted(days.items())}
    if undated and not windowed:
        out[UNDATED] = undated
    return out, len(undated)


def apportion(shares: dict[str, Fraction], total: int, seed: int) -> dict[str, int]:
    """``total`` split across the keys: each its share rounded down, then one more for the largest remainders (ties
    by a seeded hash of the key) until they add up to ``total``."""
    out = {k: int(s) for k, s in shares.items()}  # int() of a non-negative Fraction rounds down
    rest = total - sum(out.values())
    order = sorted(shares, key=lambda k: (-(shares[k] - out[k]), rank(seed, "day " + k)))
    for k in order[:rest]:
        out[k] += 1
    return out


def sample_size(rate: float, in_window: int) -> int:
    """round(rate x in_window), halves up; at least 1 when there is a trace and the rate is above 0."""
    if in_window == 0 or rate <= 0:
        return 0
    size = int(Fraction(rate) * in_window + Fraction(1, 2))
    return min(in_window, size if size > 0 else 1)


def quotas(counts: dict[str, int], rate: float, limit: int | None, seed: int) -> dict[str, int]:
    """How many traces each day gives: its share of the sample size, scaled down when the size is over ``limit``."""
    size = sample_size(rate, sum(counts.values()))
    shares = apportion({d: Fraction(rate) * n for d, n in counts.items()}, size, seed)
    if limit is not None and size > limit:
        shares = apportion({d: Fraction(q * limit, size) for d, q in shares.items()}, limit, seed)
    return shares


def _order(t: Trace) -> tuple[bool, datetime, str]:
    return (t.timestamp is None, t.timestamp or datetime.min.replace(tzinfo=UTC), t.id)


def sample_traces(traces: Iterable[Trace], *, rate: float, max: int | None, seed: int, since: datetime | None,
                  until: datetime | None) -> Sampled:
    """The seeded sample of ``traces`` (see the module docstring). ``rate`` in [0, 1]; ``max`` (None: no limit) at
    least 0; ``since`` / ``until`` without a zone are UTC. ValueError when a setting is out of range."""
    limit = max
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must be between 0 and 1, got {rate!r}")
    if limit is not None and limit < 0:
        raise ValueError(f"max must be at least 0, got {limit!r}")
    since, until = _aware(since), _aware(until)
    if since is not None and until is not None and since >= until:
        raise ValueError(f"since ({since.isoformat()}) must be before until ({until.isoformat()})")
    days, undated = strata(traces, since, until)
    counts = {d: len(ts) for d, ts in days.items()}
    take = quotas(counts, rate, limit, seed)
    chosen: list[Trace] = []
    key = _ranks(seed)
    for day, ts in days.items():
        chosen += heapq.nsmallest(take[day], ts, key=key)
    chosen.sort(key=_order)
    return Sampled(traces=chosen, in_window=sum(counts.values()), by_day=take, undated=undated, window_by_day=counts)
