"""A traces window against the window(s) before it. Pure.

Two windows of production traffic hold different questions, so nothing pairs them: the comparison is of two
independent means, with a standard error from both. And a judge drifts (a hosted model behind the same name grows
harsher or kinder from one month to the next), so the reference's scores as judged then are not what today's judge
would give: a fixed anchor sample of the reference window's traces is judged again in this run, and the mean change
of their scores (the drift) moves the reference to today's scale before the two are compared::

    corrected = reference mean + drift                     (drift = mean over anchors of today's score - then)
    delta     = this window's mean - corrected
    se        = sqrt(var(this) / n + var(reference) / m + var(anchor changes) / a)

With several reference windows (a trend), each is corrected by its own anchors and the reference is their mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.core.gates import EPS, Check
from gate.core.report import WindowMetric


@dataclass(frozen=True)
class Side:
    """n values' mean and the squared standard error of that mean."""

    n: int
    mean: float | None
    sd: float | None

    @property
    def se2(self) -> float:
        return 0.0 if self.sd is None or self.n == 0 else self.sd * self.sd / self.n


def side(values: Sequence[float]) -> Side:
    n = len(values)
    if n == 0:
        return Side(0, None, None)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Side(n, mean, sd)


@dataclass(frozen=True)
class ReferenceWindow:
    """One reference window's scores of a metric as judged then, and its anchor traces' scores then and today (only the
    anchors judged on both sides)."""

    label: str
    scores: Mapping[str, float]  # trace id -> score as judged then
    anchor_now: Mapping[str, float]  # anchor trace id -> today's score

    def changes(self) -> list[float]:
        return [now - self.scores[i] for i, now in sorted(self.anchor_now.items()) if i in self.scores]


def one_sided_p(drop: float, se: float) -> float:
    """P(a drop at least this large | no real change), normal approximation; 1 for no drop with no spread."""
    if se <= 0:
        return 0.0 if drop > 1e-12 else 1.0
    return 0.5 * math.erfc(drop / se / math.sqrt(2))


def compare(current: Sequence[float], references: Sequence[ReferenceWindow], *, higher_is_better: bool, min_sample: int,
            anchored: bool) -> WindowMetric:
    """This window's scores against the reference windows (``anchored``: each corrected by its anchors' drift)."""
    now = side(list(current))
    refs = [side(list(r.scores.values())) for r in references]
    drifts = [side(r.changes()) for r in references] if anchored else [Side(0, 0.0, 0.0) for _ in references]
    record: WindowMetric = {"n": now.n, "mean": now.mean, "sd": now.sd, "reference_n": sum(r.n for r in refs),
                            "reference_mean": None, "anchor_n": sum(d.n for d in drifts) if anchored else 0, "drift": None,
                            "corrected": None, "delta": None, "se": None, "p_value": None}
    why = insufficient(now, refs, drifts, references, min_sample, anchored)
    means = [r.mean for r in refs if r.mean is not None]
    shifts = [d.mean for d in drifts if d.mean is not None]
    if why:
        record["insufficient"] = why
    if not refs or len(means) < len(refs):
        return record
    count = len(refs)
    reference_mean = record["reference_mean"] = math.fsum(means) / count
    if len(shifts) < count:  # an anchored reference whose anchors could not be judged again: no drift to cancel
        record["insufficient"] = why or "the anchor traces could not be judged again"
        return record
    drift = math.fsum(shifts) / count
    corrected = reference_mean + drift
    record["drift"] = drift if anchored else None
    record["corrected"] = corrected
    if now.mean is None:
        return record
    delta = now.mean - corrected
    se = math.sqrt(now.se2 + math.fsum(r.se2 + d.se2 for r, d in zip(refs, drifts, strict=True)) / (count * count))
    record["delta"], record["se"] = delta, se
    record["p_value"] = one_sided_p(-delta if higher_is_better else delta, se)
    return record


def insufficient(now: Side, refs: Sequence[Side], drifts: Sequence[Side], references: Sequence[ReferenceWindow], min_sample: int,
                 anchored: bool) -> str | None:
    """Why the comparison cannot decide: a window under ``min_sample`` scored traces, or too few anchors judged again."""
    if now.n < min_sample:
        return f"{now.n} scored trace{'s' if now.n != 1 else ''} in this window, fewer than min_sample {min_sample}"
    for ref, window in zip(refs, references, strict=True):
        if ref.n < min_sample:
            return f"{ref.n} scored trace{'s' if ref.n != 1 else ''} in {window.label}, fewer than min_sample {min_sample}"
    if anchored:
        for d, window in zip(drifts, references, strict=True):
            if d.n < 2:
                return (f"{d.n} anchor trace{'s' if d.n != 1 else ''} of {window.label} judged again on both sides: the judge's "
                        "drift since cannot be measured")
    return None


def anchor_ids(ids: Sequence[str], size: int, seed: int) -> list[str]:
    """The anchor sample of a window's judged traces: the same ids for the same window and seed, whichever run asks."""
    import hashlib

    order = sorted(ids, key=lambda i: (hashlib.sha256(f"{seed}:anchor:{i}".encode("utf-8", "surrogatepass")).hexdigest(), i))
    return order[:size]


def window_decline_check(runs: int, changes: Sequence[tuple[float, float] | None], higher_is_better: bool,
                         confidence: float) -> Check:
    """``consecutive_decline: N`` on traces windows: fails when each of the last N windows fell against the one before
    (each change judge-corrected) AND their total fall is significant at ``confidence``: the signs alone of N noisy
    changes all point down by chance (about one week in twelve for N = 3 on a stable system). ``changes``: the earlier
    windows' recorded (change, its standard error), oldest first, then this one's; None where a window could not be
    compared. Skipped until the last N are all known."""
    last = list(changes[-runs:])
    if len(last) < runs or any(c is None for c in last):
        known = 0
        for c in reversed(changes):
            if c is None:
                break
            known += 1
        return Check("consecutive_decline", runs, "skipped", f"needs the judge-corrected change of the last {runs} window"
                                                            f"{'s' if runs != 1 else ''}, {known} known in a row")
    pairs = [c for c in last if c is not None]
    sign = 1.0 if higher_is_better else -1.0
    worse = all(sign * d < -EPS for d, _ in pairs)
    total = -sign * math.fsum(d for d, _ in pairs)  # the total fall, positive when worse
    se = math.sqrt(math.fsum(s * s for _, s in pairs))
    p = one_sided_p(total, se)
    path = ", ".join(f"{d:+.3f}" for d, _ in pairs)
    sure = p < 1.0 - confidence
    said = f"{path}; total {'fall' if higher_is_better else 'rise'} {max(total, 0.0):.3f}, p = {p:.3g} " \
           f"({'significant' if sure else 'not significant'} at {confidence:g})"
    if worse and sure:
        return Check("consecutive_decline", runs, "fail", f"worse in each of the last {runs} windows (judge drift cancelled): {said}")
    what = (f"worse in each of the last {runs} windows, but the total fall is within noise" if worse else
            f"not worse in each of the last {runs} windows")
    return Check("consecutive_decline", runs, "pass", f"{what} (judge drift cancelled): {said}")
