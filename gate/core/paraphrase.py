"""The paraphrase test's arithmetic: which rewrites of a question are usable, and the figures from what each one
retrieved. Pure: the stage (gate.stages.paraphrase) asks the target and scores each ranked list; this reads the
per-question metric values.

    paraphrase_robustness   of the cases found within k on the original question (a relevant id in the top k),
                            the share still found on every rewrite
    paraphrase_gap@k        hit_rate@k on the originals minus hit_rate@k over the rewrites (lower is better)

A case counts when its original was answered and at least one rewrite was: the originals' means are over those
cases, the rewrites' over every answered rewrite of them. A rewrite whose call failed is never a loss: a case lost
on none of its answered rewrites but with a failed one is undecided (``errored``) and left out of
paraphrase_robustness; a case lost on an answered rewrite is lost whatever the others did.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.core.catalog import MetricName, parse_metric
from gate.core.report import ParaphraseMetric

ROBUSTNESS = "paraphrase_robustness"
GAP = "paraphrase_gap"

_SPACE = re.compile(r"\s+")
_EDGE = " \t\n\r\"'`.,;:!?¿¡。？！，"


def normalise(text: str) -> str:
    """A question as compared with another: case folded, runs of white space as one space, no punctuation or quotes
    at either end ("How long?" and "how  long" are the same question)."""
    return _SPACE.sub(" ", text.casefold()).strip(_EDGE)


def usable_rewrites(question: str, candidates: Iterable[str], limit: int | None = None) -> list[str]:
    """The candidates that are rewrites of ``question``: stripped, not empty, not the question itself and not a
    repeat of an earlier one (once normalised), at most ``limit`` of them, in their order."""
    seen = {normalise(question)}
    out: list[str] = []
    for text in candidates:
        key = normalise(text)
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(text.strip())
        if limit is not None and len(out) == limit:
            break
    return out


def hit_rate(k: int) -> MetricName:
    return parse_metric(f"hit_rate@{k}")


def gap_ks(metrics: Sequence[MetricName]) -> list[int]:
    """The cut-offs a paraphrase_gap@k is reported at: each distinct k of the metrics."""
    return sorted({m.k for m in metrics if m.k})


def scored_metrics(metrics: Sequence[MetricName], k: int) -> list[MetricName]:
    """What each question is scored on: the configured metrics, then hit_rate@k for the cut-off ``k`` and for every
    gap's k that they do not hold already."""
    out = list(metrics)
    names = {m.name for m in out}
    for j in sorted({k, *gap_ks(metrics)}):
        if f"hit_rate@{j}" not in names:
            out.append(hit_rate(j))
            names.add(f"hit_rate@{j}")
    return out


def found(values: Mapping[str, float], k: int) -> bool:
    """A relevant id within the top ``k`` (``values``: a question's scores, with hit_rate@k)."""
    return values[f"hit_rate@{k}"] >= 1.0


@dataclass(frozen=True)
class CaseScores:
    """One sampled case: its original question's scores (None: the call failed or could not be scored) and each
    rewrite's (None: that call failed)."""

    id: str
    original: Mapping[str, float] | None
    rewrites: Sequence[Mapping[str, float] | None]

    def outcome(self, k: int) -> str:
        """kept | lost | missed (not found on the original) | errored | no rewrite."""
        answered = [r for r in self.rewrites if r is not None]
        if self.original is None or (self.rewrites and not answered):
            return "errored"
        if not self.rewrites:
            return "no rewrite"
        if not found(self.original, k):
            return "missed"
        if not all(found(r, k) for r in answered):
            return "lost"
        return "errored" if len(answered) < len(self.rewrites) else "kept"


@dataclass
class Figures:
    """The test's metrics (or why not), each configured metric on the originals and on the rewrites, and the count
    of each case outcome."""

    metrics: dict[str, float] = field(default_factory=dict)
    not_evaluated: dict[str, str] = field(default_factory=dict)
    table: dict[str, ParaphraseMetric] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def compare(cases: Sequence[CaseScores], name: str) -> ParaphraseMetric:
    """``name``'s mean on the originals of the cases that count, over their answered rewrites, and the difference."""
    counted = [c for c in cases if c.original is not None and any(r is not None for r in c.rewrites)]
    original = _mean([c.original[name] for c in counted if c.original is not None])
    rewrites = _mean([r[name] for c in counted for r in c.rewrites if r is not None])
    gap = None if original is None or rewrites is None else original - rewrites
    return {"original": original, "rewrites": rewrites, "gap": gap}


def figures(cases: Sequence[CaseScores], metrics: Sequence[MetricName], k: int) -> Figures:
    """paraphrase_robustness (cut-off ``k``), paraphrase_gap@k for each k of ``metrics``, and the table of the
    configured metrics. ``cases``' scores hold every name of ``scored_metrics(metrics, k)``."""
    out = Figures(table={m.name: compare(cases, m.name) for m in metrics})
    for c in cases:
        o = c.outcome(k)
        out.outcomes[o] = out.outcomes.get(o, 0) + 1
    counted = sum(1 for c in cases if c.original is not None and any(r is not None for r in c.rewrites))
    why = "no sampled case was answered on a rewrite and on its original" if not counted else None
    kept, lost = out.outcomes.get("kept", 0), out.outcomes.get("lost", 0)
    if why is None and kept + lost:
        out.metrics[ROBUSTNESS] = kept / (kept + lost)
    elif why is None:
        why = f"no sampled case was found within the top {k} on its original question"
        if out.outcomes.get("errored"):
            why += " and answered on every rewrite"
        out.not_evaluated[ROBUSTNESS] = why
    else:
        out.not_evaluated[ROBUSTNESS] = why
    for j in gap_ks(metrics):
        gap = compare(cases, f"hit_rate@{j}")["gap"]
        if gap is None:
            out.not_evaluated[f"{GAP}@{j}"] = why or "nothing to compare"
        else:
            out.metrics[f"{GAP}@{j}"] = gap
    return out


def metric_names(metrics: Sequence[MetricName]) -> list[str]:
    """The metrics the test reports (gate.core.catalog.robustness_metric_names says the same from the spec)."""
    return [ROBUSTNESS, *(f"{GAP}@{j}" for j in gap_ks(metrics))]


def shortfall(info: Mapping[str, Any], wanted: int) -> list[str]:
    """Sentences on what the test could not do as asked (from its record, gate.core.report.ParaphraseInfo): cases
    with fewer generated rewrites than ``wanted``, cases with none, rewrites whose call failed."""
    notes = []
    cases = info.get("cases", [])
    short = [c["id"] for c in cases if c["rewrites"] and all(r["source"] == "generated" for r in c["rewrites"])
             and len(c["rewrites"]) < wanted]
    if short:
        notes.append(f"the judge wrote fewer than {wanted} usable rewrites for {_few(short)}: the test used those it wrote")
    none = [c["id"] for c in cases if not c["rewrites"]]
    if none:
        notes.append(f"no rewrite for {_few(none)}: left out of the paraphrase test")
    failed = sum(1 for c in cases for r in c["rewrites"] if r.get("error"))
    if failed:
        notes.append(f"{failed} rewrite call{'s' if failed != 1 else ''} failed (a case counts in paraphrase_robustness then "
                     "only when it is lost on another rewrite)")
    return notes


def _few(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:5])
    return f"{len(ids)} case{'s' if len(ids) != 1 else ''} ({shown}{', ...' if len(ids) > 5 else ''})"


def review_lines(info: Mapping[str, Any]) -> str:
    """The rewrites a run used, one JSONL line per case that had any: ``{"id": ..., "paraphrases": [...]}`` (what
    ``rag-gate run --write-paraphrases`` writes, to review and merge into the golden set)."""
    rows = [{"id": c["id"], "paraphrases": [r["text"] for r in c["rewrites"]]} for c in info.get("cases", []) if c["rewrites"]]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
