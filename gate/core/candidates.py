"""Golden-case candidates from a traces run: the worst-scored and the negatively rated production traces, written as
golden cases a reviewer completes and approves. Pure (``rag-gate golden add`` reads the report and writes the file).

    score     a trace's score is the mean of its judge-scored generation metrics (a lower-is-better one counted as
              1 - value), or one metric alone; a trace with none is not among the worst
    pick      the ``worst`` lowest-scored traces (ties by id), and with ``negative`` every negatively rated trace,
              once each
    keep      a picked trace is dropped when its question is a near-duplicate (gate.core.goldencheck: the same
              measure golden check and golden generate use) of an existing case, or of a candidate scored lower
    write     each kept trace becomes a case with ``metadata.review: pending`` (runs leave it out): its question, no
              ground truth and no relevance labels; what production retrieved and answered are in its metadata for
              the reviewer (``suggested_relevant_ids`` are suggestions, not labels)
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.core.catalog import higher_is_better, judge_noise
from gate.core.goldencheck import NEAR, normalised, similarity
from gate.core.model import GoldenCase
from gate.core.textmatch import squad_tokens

ID_PREFIX = "trace-"
MAX_ID = 64  # characters of the trace id kept in a candidate's id (a longer or unsafe one gets a hash of it appended)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class ScoredTrace:
    """One sampled trace of a traces run with what the system answered and how the judge scored it."""

    id: str
    question: str
    timestamp: str | None = None
    feedback: float | None = None
    negative: bool | None = None
    answer: str | None = None
    retrieved: tuple[str, ...] = ()
    scores: Mapping[str, float] = field(default_factory=dict)  # the metrics the score is the mean of, as reported

    @property
    def score(self) -> float | None:
        """The mean of ``scores``, each lower-is-better metric as 1 - value (lower: worse); None without any."""
        if not self.scores:
            return None
        return sum(v if higher_is_better(m) else 1 - v for m, v in self.scores.items()) / len(self.scores)


@dataclass(frozen=True, slots=True)
class Dropped:
    """A picked trace left out: its question nearly duplicates ``like`` (an existing case, or a candidate kept)."""

    trace_id: str
    question: str
    like: str  # the case id it nearly duplicates
    ratio: float  # how alike the two questions are (gate.core.goldencheck.similarity; 1.0: the same after normalising)
    existing: bool  # like is a case of the golden set (False: another candidate, scored lower)


@dataclass
class Choice:
    """What golden add writes: the candidate rows, the picked traces dropped as near-duplicates, and the counts."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    worst: int = 0  # traces picked as among the worst-scored
    negative: int = 0  # traces picked for their negative rating alone (not among the worst)
    scored: int = 0  # sampled traces with a score (the pool the worst are picked from)


def is_judged(metric: str) -> bool:
    """Whether a generation metric is the judge's score (not an exact figure of the answers, gate.core.catalog)."""
    return judge_noise("generation", metric)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def scores_of(metrics: Mapping[str, Any], metric: str | None = None) -> dict[str, float]:
    """The metrics of one case a score is made of: ``metric`` alone when named, else every judge-scored one."""
    if metric is not None:
        return {metric: float(metrics[metric])} if _number(metrics.get(metric)) else {}
    return {m: float(v) for m, v in sorted(metrics.items()) if is_judged(m) and _number(v)}


def metric_names(samples: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every metric the samples carry a number for, sorted."""
    return sorted({m for s in samples for m, v in (s.get("metrics") or {}).items() if _number(v)})


def traces_of(report: Mapping[str, Any], metric: str | None = None) -> list[ScoredTrace]:
    """The sampled traces of a traces run's report (``traces.cases``) with each one's answer and retrieved ids
    (``cases``) and scores (the generation stage's samples), in the report's order."""
    outputs = {c["id"]: c for c in report.get("cases") or []}
    stage = (report.get("stages") or {}).get("generation") or {}
    samples = {s["id"]: s for s in stage.get("samples") or []}
    out: list[ScoredTrace] = []
    for t in report["traces"]["cases"]:
        given = outputs.get(t["id"], {})
        out.append(ScoredTrace(
            id=t["id"], question=t["question"], timestamp=t.get("timestamp"), feedback=t.get("feedback"),
            negative=t.get("negative"), answer=given.get("answer"), retrieved=tuple(given.get("retrieved") or ()),
            scores=scores_of(samples.get(t["id"], {}).get("metrics") or {}, metric),
        ))
    return out


def _rank(t: ScoredTrace) -> tuple[bool, float, bool, str]:
    """Worst first: scored before unscored, lower score first, a negative rating before none, then by id."""
    score = t.score
    return score is None, score if score is not None else 0.0, not t.negative, t.id


def pick(traces: Sequence[ScoredTrace], worst: int | None, negative: bool) -> list[tuple[ScoredTrace, bool]]:
    """The ``worst`` lowest-scored traces (ties by id) and, with ``negative``, every negatively rated one, once each,
    worst first; each with whether it is among the worst."""
    ranked = sorted({t.id: t for t in traces}.values(), key=_rank)
    chosen = [t for t in ranked if t.score is not None][: worst or 0]
    among = {t.id for t in chosen}
    if negative:
        chosen += [t for t in ranked if t.negative is True and t.id not in among]
    return [(t, t.id in among) for t in sorted(chosen, key=_rank)]


class Seen:
    """Questions a new one is compared with: each one's id, normalised text and tokens."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, list[str], bool]] = []

    def add(self, case_id: str, question: str, existing: bool) -> None:
        self.items.append((case_id, normalised(question), squad_tokens(question), existing))

    def nearest(self, question: str) -> tuple[str, float, bool] | None:
        """The first question ``question`` duplicates (the same after normalising) or nearly duplicates (at least
        goldencheck.NEAR alike): its id, how alike and whether it is an existing case; None when none is."""
        text, tokens = normalised(question), squad_tokens(question)
        for case_id, other_text, other_tokens, existing in self.items:
            if text == other_text:
                return case_id, 1.0, existing
            ratio = similarity(tokens, other_tokens)
            if ratio >= NEAR:
                return case_id, ratio, existing
        return None


def candidate_id(trace_id: str, taken: set[str]) -> str:
    """``trace-<id>``: the trace id with what is not a letter, digit, dot, hyphen or underscore made a hyphen, at most
    MAX_ID characters of it; a hash of the trace id is appended when that changed it or the id is ``taken``."""
    safe = _UNSAFE.sub("-", trace_id).strip("-")[:MAX_ID]
    digest = hashlib.sha1(trace_id.encode("utf-8", "surrogatepass")).hexdigest()
    stem = ID_PREFIX + (f"{safe}-" if safe else "")
    tries = [ID_PREFIX + safe] if safe and safe == trace_id else []
    for cid in [*tries, *(stem + digest[:n] for n in range(8, len(digest) + 1, 4))]:
        if cid not in taken:
            return cid
    n = 2
    while f"{stem}{digest}-{n}" in taken:
        n += 1
    return f"{stem}{digest}-{n}"


def row(trace: ScoredTrace, case_id: str, report_created: str | None) -> dict[str, Any]:
    """The golden-case line of a candidate: the question, and for the reviewer what production did with it."""
    return {
        "id": case_id, "question": trace.question, "type": "answerable",
        "metadata": {
            "review": "pending", "source": "traces", "trace_id": trace.id, "timestamp": trace.timestamp,
            "scores": dict(trace.scores), "feedback": trace.feedback, "answer": trace.answer,
            "suggested_relevant_ids": list(trace.retrieved), "report": report_created,
        },
    }


def choose(traces: Sequence[ScoredTrace], existing: Sequence[GoldenCase], worst: int | None, negative: bool,
           report_created: str | None = None) -> Choice:
    """The candidates of a traces run: ``pick``, then each picked trace (worst first) kept unless its question nearly
    duplicates an existing case or a candidate kept before it (scored lower)."""
    seen = Seen()
    for c in existing:
        seen.add(c.id, c.question, True)
    taken = {c.id for c in existing}
    choice = Choice(scored=sum(1 for t in traces if t.score is not None))
    for trace, among in pick(traces, worst, negative):
        if among:
            choice.worst += 1
        else:
            choice.negative += 1
        like = seen.nearest(trace.question)
        if like is not None:
            choice.dropped.append(Dropped(trace.id, trace.question, like[0], like[1], like[2]))
            continue
        cid = candidate_id(trace.id, taken)
        taken.add(cid)
        seen.add(cid, trace.question, False)
        choice.rows.append(row(trace, cid, report_created))
    return choice
