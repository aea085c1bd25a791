"""Trace files: production traffic as a tracing tool exported it, read into ``gate.core.traces.TraceFile``.

``read_traces(path, fmt)`` reads one JSONL file (blank lines skipped) in one of four formats. InputError (exit 2,
naming the file) only when the file as a whole cannot be read: missing, not a regular file, not UTF-8 text, or an
unknown format. Every trace that cannot be read is listed in ``TraceFile.unreadable`` with its line, its id when that
could be read, and a reason naming the field and what it holds; none is dropped silently. A second trace with an id
already read is unreadable ("duplicate trace id 'x', first on line N").

What rag-gate reads, and the published name it reads it from (rag-gate's own format: one trace a line, the names
of the first column; the span formats: one span a line, grouped into traces as gate/io/tracespans.py says):

    field        langfuse (1)                       openinference (2)                    otel-genai (3)
    id           traceId | trace_id                 context.trace_id                     traceId
    question     root input, GENERATION input       root input.value, LLM                root or chat span gen_ai.input.messages
                 (last user message), RETRIEVER     llm.input_messages (last user        (last user message), retrieval span
                 input                              message), RETRIEVER input.value      gen_ai.retrieval.query.text
    retrieved    RETRIEVER output: documents        retrieval.documents.N.document.id    gen_ai.retrieval.documents [{id, score}]
                 {id | metadata.id, page_content    / .content / .score; RERANKER
                 | content | text, score |          reranker.output_documents
                 metadata.score}
    answer       root output, GENERATION output     root output.value, LLM               root or chat span gen_ai.output.messages
                 (text, or a message's content)     llm.output_messages.0.message        (first message's text parts)
                                                    .content or output.value
    timestamp    startTime | start_time             start_time                           startTimeUnixNano
    latency_ms   root latency (seconds) or          root end_time - start_time           root endTimeUnixNano - startTimeUnixNano
                 endTime - startTime
    usage        GENERATION usageDetails |          llm.token_count.prompt /             gen_ai.usage.input_tokens /
                 usage_details {input, output,      .completion / .total                 gen_ai.usage.output_tokens
                 total}
    system       GENERATION model |                 llm.model_name                       gen_ai.response.model | gen_ai.request.model
                 provided_model_name
    feedback     score line: name, value,           (trace.)annotations.N.annotation     span event gen_ai.evaluation.result:
                 traceId; dataType BOOLEAN          / (trace.)evaluations.N.evaluation   gen_ai.evaluation.name,
                                                    .name / .score                       gen_ai.evaluation.score.value
    error        level "ERROR", statusMessage       status_code "ERROR", status_message  status.code 2 (ERROR), status.message,
                                                                                         error.type
    span kind    type: GENERATION, RETRIEVER,       openinference.span.kind | span_kind  gen_ai.operation.name: chat,
                 EVENT                              LLM, RETRIEVER, RERANKER             text_completion, generate_content,
                                                                                         retrieval
    tree         id, parentObservationId |          context.span_id, parent_id           spanId, parentSpanId
                 parent_observation_id

    (1) Langfuse public API (Observation, ObservationsView, Score: camelCase; https://api.reference.langfuse.com)
        and its blob storage export (snake_case; https://langfuse.com/docs/api-and-data-platform/features/blob-storage-export-fields)
    (2) OpenInference semantic conventions, https://github.com/Arize-ai/openinference/blob/main/spec/semantic_conventions.md,
        spans as Phoenix exports them (spec/traces.md there); attributes flat ("input.value") or nested
    (3) OpenTelemetry GenAI semantic conventions v1.41.0 (the last release inside open-telemetry/semantic-conventions:
        docs/gen-ai/gen-ai-spans.md, gen-ai-events.md), in OTLP/JSON as the collector's file exporter writes it
        (https://github.com/open-telemetry/opentelemetry-proto/blob/main/docs/specification.md#json-protobuf-encoding)

rag-gate's own format, one JSON object a line: ``id`` (string, or an integer, required), ``question`` (non-empty
string, required), ``timestamp`` (ISO 8601; a number is Unix time in seconds; no zone: UTC), ``retrieved`` (list,
best first, of ``{id, text, score}`` or bare ids), ``answer`` (string or null), ``contexts`` (list of strings),
``latency_ms`` (number), ``usage`` (token counts: prompt_tokens / completion_tokens / total_tokens, or input_tokens /
output_tokens, read as the first two), ``system`` (object of strings and numbers), ``feedback`` (a number: +1 / -1
thumbs or a score; true is +1, false is -1), ``error`` (string or null: the request failed). Other keys are ignored.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from gate.core.changes import read_system
from gate.core.errors import InputError
from gate.core.model import RetrievedDoc
from gate.core.traces import FORMATS, Trace, TraceFile, Unreadable
from gate.io import langfuse, openinference, otelgenai
from gate.io.golden import open_regular
from gate.io.jsonparse import BadJSON, fast_as, parse
from gate.io.tracespans import Bad, doc_id, kind, number, parse_time, text

SPAN_READERS = {"langfuse": langfuse.read, "openinference": openinference.read, "otel-genai": otelgenai.read}


def read_traces(path: Path, fmt: str) -> TraceFile:
    """Every trace of the file at ``path`` in format ``fmt`` (one of FORMATS), and each one that could not be read.
    The cyclic garbage collector is paused meanwhile: a file makes hundreds of thousands of small acyclic objects,
    which its passes would only scan again and again (reference counting still frees what is dropped)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r}: use one of {', '.join(FORMATS)}", file=str(path))
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return read_rows(lines_of(path)) if fmt == "rag-gate" else SPAN_READERS[fmt](lines_of(path))
    finally:
        if was_enabled:
            gc.freeze()  # what was read moves to the oldest generation at once: the next collection does not scan it all
            gc.unfreeze()
            gc.enable()


def lines_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line; InputError when the file is missing, not a regular file, or not
    UTF-8 text."""
    handle = open_regular(path)
    with handle:
        try:
            for lineno, line in enumerate(handle, 1):
                if line[:1] == "{" or line.strip():
                    yield lineno, line
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", file=str(path)) from None


class _Row(msgspec.Struct, gc=False):
    """A line of the usual shape, decoded by msgspec straight into its passages (``fast_as``); any other line is
    parsed into dicts, and ``row_trace`` reads both alike (and says what is wrong with the other)."""

    id: str | int | None = None
    question: str | None = None
    timestamp: str | int | float | None = None
    retrieved: tuple[RetrievedDoc, ...] | None = None
    answer: str | None = None
    contexts: list[str] | None = None
    latency_ms: int | float | None = None
    usage: dict[str, int | float | dict[str, int | float | None] | None] | None = None  # typed: no open field to walk
    system: dict[str, str | int | float] | None = None
    feedback: bool | int | float | None = None
    error: str | None = None

    get = object.__getattribute__  # row.get(key), as for a dict row: the field (in C)


def read_rows(lines: Iterator[tuple[int, str]]) -> TraceFile:
    """rag-gate's own format: one trace a line."""
    out = TraceFile()
    first: dict[str, int] = {}
    for lineno, line in lines:
        out.lines += 1
        row: Any = fast_as(line, _Row)
        try:
            trace = row_trace(row, lineno) if row is not None else None
        except Bad:
            trace = None  # the fast row is read again as a dict: the reason then is the same whichever way the line went
        if trace is None:
            try:
                row = parse(line.rstrip("\r\n"), max_depth=None)
            except BadJSON as exc:
                out.unreadable.append(Unreadable(lineno, None, exc.message))
                continue
            if type(row) is not dict:
                out.unreadable.append(Unreadable(lineno, None, f"each line must be a JSON object (one trace), got {kind(row)}"))
                continue
            try:
                trace = row_trace(row, lineno)
            except Bad as exc:
                raw = row.get("id")
                out.unreadable.append(Unreadable(lineno, raw if type(raw) is str and raw else str(raw) if type(raw) is int else None,
                                                 exc.reason))
                continue
        seen = first.setdefault(trace.id, lineno)
        if seen != lineno:
            out.unreadable.append(Unreadable(lineno, trace.id, f"duplicate trace id {trace.id!r}, first on line {seen}"))
            continue
        out.traces.append(trace)
    return out


def row_trace(row: Any, lineno: int) -> Trace:
    """One line of rag-gate's format (a dict, or a _Row) as a Trace; Bad naming the field otherwise."""
    question = row.get("question")
    if type(question) is not str:
        raise Bad("'question' is required" if question is None else f"'question' must be a string, got {kind(question)}")
    if not question.strip():
        raise Bad("'question' must not be empty")
    get = row.get
    contexts = get("contexts")
    if contexts is not None and (type(contexts) is not list or any(type(c) is not str for c in contexts)):
        raise Bad(f"'contexts' must be a list of strings, got {_list_kind(contexts)}")
    try:
        system = read_system(get("system"))
    except ValueError as exc:
        raise Bad(str(exc)) from None
    return Trace(
        id=doc_id(get("id"), "id"), question=question, line=lineno, timestamp=parse_time(get("timestamp"), "timestamp"),
        retrieved=_retrieved(get("retrieved")), answer=text(get("answer"), "answer"),
        contexts=tuple(contexts) if contexts is not None else None, latency_ms=number(get("latency_ms"), "latency_ms"),
        usage=_usage(get("usage")), system=system, feedback=_feedback(get("feedback")), error=text(get("error"), "error"),
    )


def _list_kind(value: Any) -> str:
    if type(value) is list:
        bad = next(c for c in value if type(c) is not str)
        return f"a list holding {kind(bad)}"
    return kind(value)


def _retrieved(value: Any) -> tuple[RetrievedDoc, ...]:
    if value is None:
        return ()
    if type(value) is tuple:  # decoded by msgspec: every id a string, every text a string or null, every score a number
        if not all(d.id for d in value):
            raise Bad("a passage id is empty")  # not seen: the line is read again as a dict, which says which
        return value
    if type(value) is not list:
        raise Bad(f"'retrieved' must be a list of passages ({{id, text, score}} or ids), got {kind(value)}")
    docs = []
    for i, item in enumerate(value):
        t = type(item)
        if t is dict:
            txt, score = item.get("text"), item.get("score")
            if txt is not None and type(txt) is not str:
                raise Bad(f"'retrieved[{i}].text' must be a string, got {kind(txt)}")
            if score is not None and type(score) is not float and type(score) is not int:
                raise Bad(f"'retrieved[{i}].score' must be a number, got {kind(score)}")
            docs.append(RetrievedDoc(doc_id(item.get("id"), f"retrieved[{i}].id"), txt, score))
        elif t is str or t is int:
            docs.append(RetrievedDoc(doc_id(item, f"retrieved[{i}]")))
        else:
            raise Bad(f"'retrieved[{i}]' must be a passage {{id, text, score}} or an id, got {kind(item)}")
    return tuple(docs)


_TOKEN_NAMES = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}


def _usage(value: Any) -> dict[str, Any] | None:
    """Token counts (other keys kept as they are); input_tokens / output_tokens read as prompt_tokens /
    completion_tokens, total_tokens added when not given."""
    if value is None:
        return None
    if type(value) is not dict:
        raise Bad(f"'usage' must be an object of token counts (prompt_tokens, completion_tokens, total_tokens), got {kind(value)}")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if key.endswith("_tokens") and v is not None and ((type(v) is not int and type(v) is not float) or v < 0):
            number(v, f"usage.{key}")  # raises, naming the key
        out[_TOKEN_NAMES.get(key) or key] = v
    if "total_tokens" not in out and ("prompt_tokens" in out or "completion_tokens" in out):
        out["total_tokens"] = (out.get("prompt_tokens") or 0) + (out.get("completion_tokens") or 0)
    return out


def _feedback(value: Any) -> float | None:
    t = type(value)
    if value is None:
        return None
    if t is bool:
        return 1.0 if value else -1.0
    if t is int or t is float:
        return float(value)
    raise Bad(f"'feedback' must be a number (+1 / -1, or a score) or true / false, got {kind(value)}")
