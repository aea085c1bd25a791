"""What the span formats share: a span (a Langfuse observation, an OpenInference span, an OpenTelemetry span) read
into one shape, the spans of a file grouped into traces, and the helpers every trace reader uses.

A trace of spans becomes one ``Trace`` (gate/io/traces.py tells which published name gives which field):

* the root is the trace's one span without a parent in the file (none when it has several: Langfuse records the
  top-level observations of a trace with no parent; its EVENTs, points in time, are never the root);
* question: the root's input when it is text, else the last user message of the first LLM span, else the query of a
  retriever span; answer: the root's output when it is text, else the output of the LLM span that ended last;
* retrieved: the documents of the retriever span that ended last (a reranker's output comes after its retriever's);
* usage: the token counts of the LLM spans added up; system: ``{"model": ...}`` of the LLM span that ended last;
* timestamp: the root's start, else the earliest start; latency: the root's duration, else the earliest start to
  the latest end; error: the root's, else the first span's in error; feedback: the mean of the trace's feedback.

A span that cannot be read spoils its trace (unreadable, with the span's line and why); a line whose trace cannot be
told is unreadable on its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gate.core.model import RetrievedDoc
from gate.core.traces import Trace, TraceFile, Unreadable
from gate.io.jsonparse import BadJSON, parse

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Bad(ValueError):
    """A value that cannot be read; ``reason`` names the field and what it holds."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def kind(value: Any) -> str:
    """The JSON kind of a value, for messages: null, bool, int, float, str, list, object."""
    return {type(None): "null", dict: "object"}.get(type(value), type(value).__name__)


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC (a naive one is taken to be UTC)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment if moment.tzinfo is UTC else moment.astimezone(UTC)


def parse_time(value: Any, name: str) -> datetime | None:
    """An ISO 8601 string or a number of seconds since 1970 (Unix time), in UTC; None for null."""
    t = type(value)
    if value is None:
        return None
    if t is str:
        try:
            return utc(datetime.fromisoformat(value))
        except ValueError:
            raise Bad(f"{name!r} must be an ISO 8601 date and time, got {value[:40]!r}") from None
    if t is int or t is float:
        try:
            return EPOCH + timedelta(seconds=value)
        except (OverflowError, ValueError):
            raise Bad(f"{name!r} is a Unix time out of range: {value!r}") from None
    raise Bad(f"{name!r} must be an ISO 8601 string or a Unix time in seconds, got {kind(value)}")


def number(value: Any, name: str) -> float | None:
    """A number of at least 0 (an int stays an int); None for null."""
    t = type(value)
    if value is None:
        return None
    if (t is int or t is float) and value >= 0:
        return value  # type: ignore[no-any-return]
    if t is int or t is float:
        raise Bad(f"{name!r} must be a number of at least 0, got {value!r}")
    raise Bad(f"{name!r} must be a number, got {kind(value)}")


def text(value: Any, name: str) -> str | None:
    if value is None or type(value) is str:
        return value  # type: ignore[no-any-return]
    raise Bad(f"{name!r} must be a string, got {kind(value)}")


MAX_ID = 1000  # the longest id report.json holds (its schema's label)


def doc_id(value: Any, name: str) -> str:
    """A document's (or a trace's) id: a non-empty string of at most 1,000 characters (what a report holds), or an
    integer written as one."""
    t = type(value)
    if t is str and value:
        if len(value) > MAX_ID:
            raise Bad(f"{name!r} is {len(value):,} characters long, more than {MAX_ID:,}")
        return value  # type: ignore[no-any-return]
    if t is int:
        return str(value)
    if value is None:
        raise Bad(f"{name!r} is required")
    raise Bad(f"{name!r} must be a non-empty string, got {kind(value) if t is not str else 'an empty string'}")


def tokens(prompt: Any, completion: Any, total: Any, names: tuple[str, str, str]) -> dict[str, Any] | None:
    """Token counts as rag-gate names them (prompt_tokens, completion_tokens, total_tokens; total = prompt +
    completion when not given); None when none is given. ``names``: the published names, for messages."""
    counts = [number(v, n) for v, n in zip((prompt, completion, total), names, strict=True)]
    if all(c is None for c in counts):
        return None
    out = {k: c for k, c in zip(("prompt_tokens", "completion_tokens", "total_tokens"), counts, strict=True) if c is not None}
    if "total_tokens" not in out:
        out["total_tokens"] = out.get("prompt_tokens", 0) + out.get("completion_tokens", 0)
    return out


def maybe_json(value: Any) -> Any:
    """A string holding a JSON object or array, decoded (exports write structured values as JSON text); anything
    else as it is."""
    if type(value) is str and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def parts_text(content: Any, key: str) -> str | None:
    """A message's content as text: a string, or the ``key`` of its parts of type "text" joined by blank lines."""
    if type(content) is str:
        return content  # type: ignore[no-any-return]
    if type(content) is list:
        texts = [p[key] for p in content if type(p) is dict and p.get("type") == "text" and type(p.get(key)) is str]
        return "\n\n".join(texts) if texts else None
    return None


def last_user(messages: Any, role: str = "role", content: str = "content", part: str = "text") -> str | None:
    """The text of the last message whose ``role`` is "user" in a list of messages; None when there is none."""
    if type(messages) is dict and type(messages.get("messages")) is list:
        messages = messages["messages"]
    if type(messages) is not list:
        return None
    for m in reversed(messages):
        if type(m) is dict and m.get(role) == "user":
            return parts_text(m.get(content), part)
    return None


@dataclass(slots=True)
class Span:
    """One span as the trace assembly reads it (see the module docstring); kind: "retriever", "llm", "event" (a point
    in time, Langfuse's EVENT observation) or "other"."""

    trace_id: str
    line: int
    span_id: str | None = None
    parent_id: str | None = None
    kind: str = "other"
    start: datetime | None = None
    end: datetime | None = None
    duration_ms: float | None = None  # given by the format (Langfuse's latency); else end - start
    input: str | None = None
    output: str | None = None
    documents: tuple[RetrievedDoc, ...] | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    error: str | None = None
    feedback: list[float] = field(default_factory=list)


@dataclass
class Collector:
    """A file's spans by trace (in the order the traces first appear), the traces spoiled by a span that could not
    be read, feedback that came apart from the spans (Langfuse scores), and the lines read."""

    unit: str = "span"  # what the format calls a span, for messages
    spans: dict[str, list[Span]] = field(default_factory=dict)
    spoiled: dict[str, Unreadable] = field(default_factory=dict)
    feedback: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    out: TraceFile = field(default_factory=TraceFile)
    _lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (trace id, span id) -> the line it was first on

    def add(self, span: Span) -> None:
        """A span of its trace; a second span with the same id (an export written twice over) spoils the trace, whose
        counts it would double."""
        key = (span.trace_id, span.span_id or "")
        if span.span_id is not None and key in self._lines:
            self.spoil(span.trace_id, span.line, f"duplicate {self.unit} id {span.span_id!r}, first on line {self._lines[key]}")
            return
        self._lines[key] = span.line
        self.spans.setdefault(span.trace_id, []).append(span)

    def spoil(self, trace_id: str, line: int, reason: str) -> None:
        """The trace cannot be read: the first reason found is kept (with its line)."""
        self.spans.setdefault(trace_id, [])
        self.spoiled.setdefault(trace_id, Unreadable(line, trace_id, reason))

    def unreadable(self, line: int, reason: str, trace_id: str | None = None) -> None:
        self.out.unreadable.append(Unreadable(line, trace_id, reason))

    def finish(self, no_question: str) -> TraceFile:
        """The traces assembled (in the order they first appear); each one that cannot be, unreadable."""
        for trace_id, spans in self.spans.items():
            if trace_id in self.spoiled:
                self.out.unreadable.append(self.spoiled[trace_id])
                continue
            scores = self.feedback.pop(trace_id, [])
            if not spans:
                continue
            try:
                self.out.traces.append(assemble(trace_id, spans, [v for _, v in scores], no_question))
            except Bad as exc:
                self.out.unreadable.append(Unreadable(spans[0].line, trace_id, exc.reason))
        for trace_id, scores in self.feedback.items():
            for line, _ in scores:
                self.unreadable(line, f"feedback for trace {trace_id!r}, which has nothing else in the file", trace_id)
        self.out.unreadable.sort(key=lambda u: u.line)
        return self.out


def _ended(span: Span) -> tuple[bool, datetime, int]:
    return (span.end is not None, span.end or EPOCH, span.line)


def _duration(span: Span) -> float | None:
    if span.duration_ms is not None:
        return span.duration_ms
    if span.start is not None and span.end is not None:
        return (span.end - span.start).total_seconds() * 1000
    return None


def _envelope(spans: Iterable[Span]) -> tuple[datetime | None, float | None]:
    """The earliest start and, when every span has both ends, the time from it to the latest end (ms)."""
    spans = list(spans)
    starts = [s.start for s in spans if s.start is not None]
    ends = [s.end for s in spans if s.end is not None]
    first = min(starts) if starts else None
    if first is None or len(starts) < len(spans) or len(ends) < len(spans):
        return first, None
    return first, (max(ends) - first).total_seconds() * 1000


def _usage(spans: Iterable[Span]) -> dict[str, Any] | None:
    usages = [s.usage for s in spans if s.usage]
    if not usages:
        return None
    out: dict[str, Any] = {}
    for u in usages:
        for k, v in u.items():
            out[k] = out.get(k, 0) + v
    return out


def _question(root: Span | None, llms: list[Span], retrievers: list[Span]) -> str | None:
    candidates = [root.input if root else None, *(s.input for s in llms), *(s.input for s in retrievers)]
    return next((q for q in candidates if q and q.strip()), None)


def assemble(trace_id: str, spans: list[Span], feedback: list[float], no_question: str) -> Trace:
    """One trace of its spans (in file order), as the module docstring says; Bad(no_question) without a question."""
    ids = {s.span_id for s in spans if s.span_id}
    timed = [s for s in spans if s.kind != "event"]  # a point in time (Langfuse's EVENT): neither a root nor a duration
    tops = [s for s in timed if not s.parent_id or s.parent_id not in ids]
    root = tops[0] if len(tops) == 1 else None
    llms = [s for s in spans if s.kind == "llm"]
    retrievers = [s for s in spans if s.kind == "retriever"]
    question = _question(root, llms, retrievers)
    if question is None:
        raise Bad(no_question)
    last_llm = max(llms, key=_ended) if llms else None
    answer = root.output if root is not None and root.output is not None else (last_llm.output if last_llm else None)
    with_docs = [s for s in retrievers if s.documents is not None]
    retrieved = (max(with_docs, key=_ended).documents or ()) if with_docs else ()
    first, envelope = _envelope(timed or spans)
    timestamp = root.start if root is not None and root.start is not None else first
    latency = _duration(root) if root is not None else envelope
    error = root.error if root is not None else next((s.error for s in spans if s.error), None)
    feedback = feedback + [v for s in spans for v in s.feedback]
    model = next((s.model for s in sorted(llms, key=_ended, reverse=True) if s.model), None)
    return Trace(
        id=trace_id, question=question, line=spans[0].line, timestamp=timestamp, retrieved=retrieved, answer=answer,
        latency_ms=latency, usage=_usage(llms), system={"model": model} if model else None,
        feedback=sum(feedback) / len(feedback) if feedback else None, error=error,
    )


def feedback_value(name: Any, value: Any, where: str) -> float | None:
    """A feedback score: the value of a score whose name says "feedback" (any case); None for any other score.
    Bad when such a score's value is not a number."""
    if type(name) is not str or "feedback" not in name.lower():
        return None
    if type(value) is bool:
        return 1.0 if value else -1.0
    if type(value) in (int, float):
        return float(value)
    raise Bad(f"{where} must be a number, got {kind(value)}")


def pick(row: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` the row has (an export's camelCase or snake_case name); None if none."""
    for n in names:
        if n in row:
            return row[n]
    return None


def json_lines(c: Collector, lines: Iterator[tuple[int, str]], what: str | None) -> Iterator[tuple[int, Any]]:
    """Each line of the file parsed, counted; a line that is not JSON (or, with ``what``, not a JSON object: "a span")
    recorded as unreadable and skipped."""
    for lineno, line in lines:
        c.out.lines += 1
        try:
            row = parse(line.rstrip("\r\n"), max_depth=None)
        except BadJSON as exc:
            c.unreadable(lineno, exc.message)
            continue
        if what is not None and type(row) is not dict:
            c.unreadable(lineno, f"each line must be a JSON object ({what}), got {kind(row)}")
            continue
        yield lineno, row
