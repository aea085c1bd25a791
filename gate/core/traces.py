"""Production traces: one request to the RAG system as its tracing tool recorded it, read into one shape. Pure.

A trace file (gate.io.traces reads rag-gate's own JSONL and the exports of Langfuse, OpenInference and OpenTelemetry
GenAI) becomes a ``TraceFile``: the traces that could be read, and each one that could not with its line and why
(never dropped silently). ``gate.core.tracesample`` draws the seeded, day-stratified sample a traces run judges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gate.core.model import RetrievedDoc

FORMATS = ("rag-gate", "langfuse", "openinference", "otel-genai")


@dataclass(frozen=True, slots=True)
class Trace:
    """One request as traced: the question, what was retrieved (ranked, best first), the answer, and what the system
    said about the call. ``timestamp`` is timezone-aware (UTC when the file gives no zone); None when the trace has
    none. ``feedback`` is the user's rating as a number (+1 / -1 thumbs, or a score); None: no rating."""

    id: str
    question: str
    line: int  # the file's line where the trace starts (its first span or observation for the span formats)
    timestamp: datetime | None = None
    retrieved: tuple[RetrievedDoc, ...] = ()
    answer: str | None = None
    contexts: tuple[str, ...] | None = None  # the passages the answer was written from, when given apart from retrieved
    latency_ms: float | None = None
    usage: dict[str, Any] | None = None
    system: dict[str, Any] | None = None
    feedback: float | None = None
    error: str | None = None  # the request failed in production (the trace says so)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A trace (or a line) that could not be read: where, which trace if its id could be read, and why."""

    line: int
    id: str | None
    reason: str


@dataclass
class TraceFile:
    """What a trace file holds: the readable traces in file order, and the unreadable ones."""

    traces: list[Trace] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    lines: int = 0  # non-blank lines read
