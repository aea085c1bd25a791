"""Langfuse's observations, one a line, grouped into traces by their trace id (gate/io/tracespans.py says how).

Names as Langfuse's public API writes them (camelCase: ``traceId``, ``type``, ``startTime``, ``endTime``,
``parentObservationId``, ``usageDetails``, ``latency`` in seconds, ``model``, ``level``, ``statusMessage``), or as its
blob storage export does (snake_case: ``trace_id``, ``start_time``, ``usage_details``, ``provided_model_name``..., with
``input`` and ``output`` as JSON text). A line without a ``type`` that has a ``name`` and a ``value`` is a score: one
whose name says "feedback" (``user-feedback``...) is the trace's feedback (a BOOLEAN score: 1 is +1, 0 is -1); other
scores are left aside.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gate.core.model import RetrievedDoc
from gate.core.traces import TraceFile
from gate.io.tracespans import (
    Bad,
    Collector,
    Span,
    doc_id,
    feedback_value,
    json_lines,
    kind,
    last_user,
    maybe_json,
    number,
    parse_time,
    parts_text,
    pick,
    tokens,
)

KINDS = {"GENERATION": "llm", "RETRIEVER": "retriever", "EVENT": "event"}
NO_QUESTION = ("no question: neither the root observation's input, a GENERATION's last user message nor a RETRIEVER's "
               "input is text")


def read(lines: Iterator[tuple[int, str]]) -> TraceFile:
    c = Collector(unit="observation")
    for lineno, row in json_lines(c, lines, "an observation or a score"):
        trace_id = pick(row, "traceId", "trace_id")
        if type(trace_id) is not str or not trace_id:
            c.unreadable(lineno, "'traceId' is required (the trace the line belongs to)" if trace_id is None else
                         f"'traceId' must be a non-empty string, got {kind(trace_id)}")
            continue
        try:
            if "type" not in row and "name" in row and "value" in row:
                _score(c, row, trace_id, lineno)
            else:
                c.add(observation(row, trace_id, lineno))
        except Bad as exc:
            if "type" in row:
                c.spoil(trace_id, lineno, exc.reason)
            else:
                c.unreadable(lineno, exc.reason, trace_id)
    return c.finish(NO_QUESTION)


def _score(c: Collector, row: dict[str, Any], trace_id: str, lineno: int) -> None:
    value = row["value"]
    if pick(row, "dataType", "data_type") == "BOOLEAN" and value in (0, 1) and type(value) is not bool:
        value = 1 if value == 1 else -1
    v = feedback_value(row["name"], value, f"score {row['name']!r} value")
    if v is not None:
        c.feedback.setdefault(trace_id, []).append((lineno, v))


def observation(row: dict[str, Any], trace_id: str, lineno: int) -> Span:
    """One observation as a Span; Bad naming the field when it cannot be read."""
    obs_type = row.get("type")
    if type(obs_type) is not str:
        raise Bad(f"'type' must be the observation's type (SPAN, GENERATION, RETRIEVER...), got {kind(obs_type)}")
    span = Span(trace_id, lineno, span_id=_opt_id(row.get("id"), "id"),
                parent_id=_opt_id(pick(row, "parentObservationId", "parent_observation_id"), "parentObservationId"),
                kind=KINDS.get(obs_type, "other"),
                start=parse_time(pick(row, "startTime", "start_time"), "startTime"),
                end=parse_time(pick(row, "endTime", "end_time"), "endTime"))
    latency = number(row.get("latency"), "latency")
    span.duration_ms = latency * 1000 if latency is not None else None
    inp, out = maybe_json(row.get("input")), maybe_json(row.get("output"))
    if span.kind == "llm":
        span.input = inp if type(inp) is str else last_user(inp)
        span.usage = _usage(row)
        model = pick(row, "model", "provided_model_name")
        span.model = model if type(model) is str and model else None
    else:
        span.input = inp if type(inp) is str else (inp.get("query") if type(inp) is dict and type(inp.get("query")) is str else None)
    span.output = _answer(out)
    if span.kind == "retriever":
        span.documents = documents(out)
        span.output = None
    if row.get("level") == "ERROR":
        message = pick(row, "statusMessage", "status_message")
        span.error = message if type(message) is str and message else f"{obs_type} observation at level ERROR"
    return span


def _opt_id(value: Any, name: str) -> str | None:
    return None if value is None or value == "" else doc_id(value, name)


def _answer(out: Any) -> str | None:
    """An output as text: a string, a message's (or an object's) ``content``, or the first message of a list."""
    if type(out) is list and out:
        out = out[0]
    if type(out) is dict:
        return parts_text(out.get("content"), "text")
    return out if type(out) is str else None


def _usage(row: dict[str, Any]) -> dict[str, Any] | None:
    usage = pick(row, "usageDetails", "usage_details")
    name = "usageDetails"
    if usage is None:
        usage, name = row.get("usage"), "usage"
    if usage is None:
        return None
    usage = maybe_json(usage)
    if type(usage) is not dict:
        raise Bad(f"{name!r} must be an object of token counts (input, output, total), got {kind(usage)}")
    return tokens(usage.get("input"), usage.get("output"), usage.get("total"), (f"{name}.input", f"{name}.output", f"{name}.total"))


def documents(out: Any) -> tuple[RetrievedDoc, ...]:
    """A RETRIEVER's output: a list of documents, or ``{"documents": [...]}``; each with an ``id`` (or
    ``metadata.id``), its text in ``page_content`` (LangChain), ``content`` or ``text``, and a ``score`` (or
    ``metadata.score``)."""
    if type(out) is dict and "documents" in out:
        out = out["documents"]
    if out is None:
        return ()
    if type(out) is not list:
        raise Bad(f"a RETRIEVER's 'output' must be a list of documents, got {kind(out)}")
    docs = []
    for i, d in enumerate(out):
        if type(d) is not dict:
            raise Bad(f"RETRIEVER 'output' document {i} must be an object, got {kind(d)}")
        meta: dict[str, Any] = d["metadata"] if type(d.get("metadata")) is dict else {}
        raw_id = d.get("id") if d.get("id") is not None else meta.get("id")
        body = next((d[k] for k in ("page_content", "content", "text") if k in d), None)
        score = d.get("score") if "score" in d else meta.get("score")
        if body is not None and type(body) is not str:
            raise Bad(f"RETRIEVER 'output' document {i} text must be a string, got {kind(body)}")
        if score is not None and type(score) not in (int, float):
            raise Bad(f"RETRIEVER 'output' document {i} 'score' must be a number, got {kind(score)}")
        docs.append(RetrievedDoc(doc_id(raw_id, f"output document {i} id (id or metadata.id)"), body, score))
    return tuple(docs)
