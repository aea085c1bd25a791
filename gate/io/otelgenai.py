"""OpenTelemetry spans following the GenAI semantic conventions, in OTLP/JSON: one export request a line
(``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``, as the collector's file exporter writes them), grouped
into traces by ``traceId`` across lines (gate/io/tracespans.py says how).

A span: ``traceId``, ``spanId``, ``parentSpanId`` (hex), ``startTimeUnixNano``, ``endTimeUnixNano`` (a string or a
number of nanoseconds), ``status`` {``code``: 2 or "STATUS_CODE_ERROR" is an error, ``message``}, ``attributes`` as
``[{"key": ..., "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue" | "kvlistValue"}}]``
and ``events``. The kind is ``gen_ai.operation.name``: ``retrieval`` for a retriever span; ``chat``,
``text_completion`` or ``generate_content`` for an LLM span. ``gen_ai.input.messages``, ``gen_ai.output.messages``
and ``gen_ai.retrieval.documents`` are read as JSON text or as structured values. The convention's retrieved
documents carry ``id`` and ``score`` (its schema allows more): rag-gate reads a document's ``content`` too when it
has one, which the convention does not define. Feedback: a span event ``gen_ai.evaluation.result`` whose
``gen_ai.evaluation.name`` says "feedback", with ``gen_ai.evaluation.score.value``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from gate.core.model import RetrievedDoc
from gate.core.traces import TraceFile
from gate.io.tracespans import EPOCH, Bad, Collector, Span, doc_id, feedback_value, json_lines, kind, parts_text, text, tokens

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
NO_QUESTION = ("no question: neither the root span's nor a chat span's gen_ai.input.messages has a user message with "
               "text, nor has a retrieval span gen_ai.retrieval.query.text")


def read(lines: Iterator[tuple[int, str]]) -> TraceFile:
    c = Collector()
    for lineno, request in json_lines(c, lines, None):
        try:
            spans = _spans(request)
        except Bad as exc:
            c.unreadable(lineno, exc.reason)
            continue
        for raw in spans:
            trace_id = raw.get("traceId") if type(raw) is dict else None
            if type(trace_id) is not str or not trace_id:
                c.unreadable(lineno, f"each span needs a 'traceId' (hex), got {kind(trace_id)}" if type(raw) is dict else
                             f"each of 'spans' must be an object, got {kind(raw)}")
                continue
            try:
                c.add(span(raw, trace_id, lineno))
            except Bad as exc:
                c.spoil(trace_id, lineno, exc.reason)
    return c.finish(NO_QUESTION)


def _spans(request: Any) -> list[Any]:
    """Every span of one export request, in order."""
    if type(request) is not dict or type(request.get("resourceSpans")) is not list:
        raise Bad(f"each line must be an OTLP/JSON export request {{\"resourceSpans\": [...]}}, got {_shape(request)}")
    out: list[Any] = []
    for rs in request["resourceSpans"]:
        for ss in (rs.get("scopeSpans") or []) if type(rs) is dict else []:
            spans = ss.get("spans") if type(ss) is dict else None
            if spans is not None and type(spans) is not list:
                raise Bad(f"'resourceSpans[].scopeSpans[].spans' must be a list, got {kind(spans)}")
            out += spans or []
    return out


def _shape(value: Any) -> str:
    return f"an object with keys {', '.join(sorted(value)[:5])}" if type(value) is dict else kind(value)


def any_value(v: Any, name: str) -> Any:
    """An OTLP AnyValue as a Python value (an array as a list, a kvlist as a dict, an empty value as None)."""
    if type(v) is not dict:
        raise Bad(f"attribute {name!r} must hold an OTLP value object, got {kind(v)}")
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            raise Bad(f"attribute {name!r}: intValue must be an integer, got {v['intValue']!r}") from None
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [any_value(x, name) for x in _values(v["arrayValue"], name)]
    if "kvlistValue" in v:
        return {kv.get("key"): any_value(kv.get("value"), name) for kv in _values(v["kvlistValue"], name) if type(kv) is dict}
    return v.get("bytesValue")


def _values(container: Any, name: str) -> list[Any]:
    """The ``values`` of an arrayValue or a kvlistValue."""
    values = container.get("values") if type(container) is dict else None
    if values is not None and type(values) is not list:
        raise Bad(f"attribute {name!r}: 'values' must be a list, got {kind(values)}")
    return values or []


def attributes(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if type(raw) is not list:
        raise Bad(f"{where} must be a list of {{key, value}}, got {kind(raw)}")
    out = {}
    for kv in raw:
        if type(kv) is not dict or type(kv.get("key")) is not str:
            raise Bad(f"each of {where} must be an object with a string 'key', got {kind(kv)}")
        out[kv["key"]] = any_value(kv.get("value"), kv["key"])
    return out


def _nanos(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        ns = int(value) if type(value) in (str, int) else None
    except ValueError:
        ns = None
    if ns is None or ns < 0:
        raise Bad(f"{name!r} must be nanoseconds since 1970 (a string or integer), got {value!r}"[:160])
    return EPOCH + timedelta(microseconds=ns // 1000)


def span(raw: dict[str, Any], trace_id: str, lineno: int) -> Span:
    """One OTLP span as a Span; Bad naming the field or attribute when it cannot be read."""
    attrs = attributes(raw.get("attributes"), "'attributes'")
    op = attrs.get("gen_ai.operation.name")
    s = Span(trace_id, lineno, span_id=_id(raw.get("spanId"), "spanId"), parent_id=_id(raw.get("parentSpanId"), "parentSpanId"),
             kind="retriever" if op == "retrieval" else "llm" if op in LLM_OPERATIONS else "other",
             start=_nanos(raw.get("startTimeUnixNano"), "startTimeUnixNano"), end=_nanos(raw.get("endTimeUnixNano"), "endTimeUnixNano"))
    s.input = _user_text(_structured(attrs, "gen_ai.input.messages"))
    s.output = _output_text(_structured(attrs, "gen_ai.output.messages"))
    if s.kind == "retriever":
        s.input = s.input or text(attrs.get("gen_ai.retrieval.query.text"), "gen_ai.retrieval.query.text")
        s.documents = documents(_structured(attrs, "gen_ai.retrieval.documents"))
    if s.kind == "llm":
        s.usage = tokens(attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens"), None,
                         ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", ""))
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        s.model = model if type(model) is str else None
    status: dict[str, Any] = raw["status"] if type(raw.get("status")) is dict else {}
    if status.get("code") in (2, "STATUS_CODE_ERROR"):
        message = status.get("message") or attrs.get("error.type")
        s.error = message if type(message) is str and message else f"span {raw.get('name')!r} ended in error"
    s.feedback = _feedback(raw.get("events"))
    return s


def _id(value: Any, name: str) -> str | None:
    if value is None or value == "":
        return None
    if type(value) is not str:
        raise Bad(f"{name!r} must be a hex string, got {kind(value)}")
    return value  # type: ignore[no-any-return]


def _structured(attrs: dict[str, Any], name: str) -> Any:
    """A structured attribute, recorded as JSON text or as an OTLP array / kvlist value."""
    value = attrs.get(name)
    if type(value) is str:
        try:
            return json.loads(value)
        except ValueError:
            raise Bad(f"attribute {name!r} must be JSON text or a structured value, got text that is not JSON") from None
    return value


def _user_text(messages: Any) -> str | None:
    """The text parts of the last message with role "user" ({role, parts: [{type: "text", content}]})."""
    if type(messages) is not list:
        return None
    for m in reversed(messages):
        if type(m) is dict and m.get("role") == "user":
            return parts_text(m.get("parts"), "content")
    return None


def _output_text(messages: Any) -> str | None:
    """The text parts of the first output message (one message per choice; the first is the answer)."""
    if type(messages) is not list or not messages or type(messages[0]) is not dict:
        return None
    return parts_text(messages[0].get("parts"), "content")


def documents(value: Any) -> tuple[RetrievedDoc, ...] | None:
    """gen_ai.retrieval.documents: [{id, score}] (``content`` read too when a document has it)."""
    if value is None:
        return None
    if type(value) is not list:
        raise Bad(f"attribute 'gen_ai.retrieval.documents' must be a list of {{id, score}}, got {kind(value)}")
    docs = []
    for i, d in enumerate(value):
        if type(d) is not dict:
            raise Bad(f"'gen_ai.retrieval.documents[{i}]' must be an object {{id, score}}, got {kind(d)}")
        score = d.get("score")
        if score is not None and type(score) not in (int, float):
            raise Bad(f"'gen_ai.retrieval.documents[{i}].score' must be a number, got {kind(score)}")
        docs.append(RetrievedDoc(doc_id(d.get("id"), f"gen_ai.retrieval.documents[{i}].id"),
                                 text(d.get("content"), f"gen_ai.retrieval.documents[{i}].content"), score))
    return tuple(docs)


def _feedback(events: Any) -> list[float]:
    out = []
    for e in events if type(events) is list else []:
        if type(e) is dict and e.get("name") == "gen_ai.evaluation.result":
            attrs = attributes(e.get("attributes"), "the event's 'attributes'")
            score = attrs.get("gen_ai.evaluation.score.value")
            if score is not None:
                v = feedback_value(attrs.get("gen_ai.evaluation.name"), score, "'gen_ai.evaluation.score.value'")
                out += [v] if v is not None else []
    return out
