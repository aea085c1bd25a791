"""A traces run's cases: the trace file read (gate.io.traces), the window and the seeded day-stratified sample drawn
(gate.core.tracesample), each sampled trace a case whose output is what the system answered its user."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gate.config.spec import Spec
from gate.core.changes import read_system
from gate.core.model import GoldenCase, TargetOutput
from gate.core.report import TraceCase, TracesInfo
from gate.core.traces import Trace

PROBLEMS_SHOWN = 20  # unreadable traces the report names one by one (all are counted)
_AGO = re.compile(r"^\s*([0-9]+)\s*([dhm])\s*$")


@dataclass
class TracesRead:
    """The sampled traces as cases, their outputs, and what the report says of the file and the sample."""

    cases: list[GoldenCase]
    outputs: dict[str, TargetOutput]
    info: TracesInfo


def traces_fingerprint(spec: Spec) -> str:
    """What stands for a traces run's golden set in its fingerprints: the same for every window of one system's traffic
    (its comment_id), so that each window is compared with the ones before it."""
    from gate.core.digest import digest_json

    return digest_json({"traces": spec.data["report"]["comment_id"]})


def when(spec: Spec, key: str, now: datetime) -> datetime | None:
    """target.traces.since / until as an aware datetime: an ISO 8601 date (midnight UTC) or date-time (UTC when it names
    no zone), or a duration back from ``now`` (7d, 24h, 30m). InputError naming the key otherwise."""
    text = (spec.traces or {}).get(key)
    if text is None:
        return None
    ago = _AGO.match(text)
    if ago:
        amount, unit = int(ago.group(1)), ago.group(2)
        return now - timedelta(**{{"d": "days", "h": "hours", "m": "minutes"}[unit]: amount})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise spec.error(f"must be an ISO 8601 date or date-time (2026-11-24, 2026-11-24T00:00:00Z) or a duration back from now "
                         f"(7d, 24h), got {text!r}", "target", "traces", key) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def output_of(trace: Trace) -> TargetOutput:
    """What the system answered, as a target's output (a request that failed in production keeps its error)."""
    contexts = list(trace.contexts) if trace.contexts is not None else [d.text for d in trace.retrieved if d.text]
    return TargetOutput(case_id=trace.id, retrieved=list(trace.retrieved), answer=trace.answer, contexts=contexts,
                        latency_ms=trace.latency_ms, error=None if trace.error is None else f"failed in production: {trace.error}",
                        usage=trace.usage, system=read_system(trace.system, "system") if trace.system else None)


def read_window(spec: Spec, now_iso: str) -> TracesRead:
    """Read the spec's trace file, draw the window's sample, and make its cases. InputError for a file that cannot be
    read at all or a window that is not a time; an unreadable trace is counted and named in ``info``, never dropped."""
    from gate.core.tracesample import sample_traces
    from gate.io.traces import read_traces

    settings: dict[str, Any] = spec.traces or {}
    now = datetime.fromisoformat(now_iso)
    since, until = when(spec, "since", now), when(spec, "until", now)
    if since is not None and until is not None and since >= until:
        raise spec.error(f"the window is empty: since {since.isoformat()} is not before until {until.isoformat()}",
                         "target", "traces", "since")
    path = spec.resolve(settings["path"])
    read = read_traces(path, settings["format"])
    sample = settings["sample"]
    drawn = sample_traces(read.traces, rate=float(sample["rate"]), max=int(sample["max"]), seed=int(sample["seed"]),
                          since=since, until=until)
    below = float(settings["negative_below"])
    cases = [GoldenCase(id=t.id, question=t.question, line=t.line) for t in drawn.traces]
    stamps = [t.timestamp for t in read.traces
              if t.timestamp is not None and (since is None or t.timestamp >= since) and (until is None or t.timestamp < until)]
    info: TracesInfo = {
        "path": str(path), "format": settings["format"], "lines": read.lines, "read": len(read.traces),
        "unreadable": len(read.unreadable),
        "problems": [{"line": u.line, "id": _short(u.id), "reason": u.reason[:1000]} for u in read.unreadable[:PROBLEMS_SHOWN]],
        "since": since.isoformat() if since else None, "until": until.isoformat() if until else None,
        "in_window": drawn.in_window, "undated": drawn.undated,
        "first": min(stamps).isoformat() if stamps else None, "last": max(stamps).isoformat() if stamps else None,
        "sampled": len(drawn.traces), "by_day": dict(drawn.by_day), "rate": float(sample["rate"]), "max": int(sample["max"]),
        "seed": int(sample["seed"]), "negative_below": below,
        "cases": [trace_case(t, below) for t in drawn.traces],
    }
    return TracesRead(cases, {t.id: output_of(t) for t in drawn.traces}, info)


def _short(text: str | None, limit: int = 200) -> str | None:
    """An id as an unreadable trace's problem names it: cut (the id may be what was wrong with it)."""
    return text if text is None or len(text) <= limit else text[:limit] + "…"


def trace_case(trace: Trace, negative_below: float) -> TraceCase:
    return {"id": trace.id, "question": trace.question, "line": trace.line,
            "timestamp": trace.timestamp.isoformat() if trace.timestamp else None, "feedback": trace.feedback,
            "negative": None if trace.feedback is None else trace.feedback < negative_below}
