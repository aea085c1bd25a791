"""OpenInference spans, one a line (as Arize Phoenix exports them), grouped into traces by ``context.trace_id``
(gate/io/tracespans.py says how).

A span: ``name``, ``context`` {``trace_id``, ``span_id``}, ``parent_id``, ``span_kind``, ``start_time``, ``end_time``,
``status_code``, ``status_message``, ``attributes``, ``events``. Attributes may be flat (``"input.value"``,
``"retrieval.documents.0.document.id"``), nested (``{"input": {"value": ...}}``) or lists of objects
(``"retrieval.documents": [{"document.id": ...}]``): each span is flattened to dotted names first, so all three read
alike (so does a line whose keys are already dotted, ``"context.trace_id"``, ``"attributes.input.value"``). The span
kind is ``openinference.span.kind``, or ``span_kind`` when it holds one (Phoenix's REST API moves it there).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gate.core.model import RetrievedDoc
from gate.core.traces import TraceFile
from gate.io.tracespans import Bad, Collector, Span, doc_id, feedback_value, json_lines, kind, parse_time, text, tokens

KINDS = {"LLM": "llm", "RETRIEVER": "retriever", "RERANKER": "retriever"}
A = "attributes."
NO_QUESTION = ("no question: neither the root span's input.value, an LLM span's last user message "
               "(llm.input_messages) nor a RETRIEVER's input.value is text")
_INDEX = re.compile(r"(\d+)\.(.+)")
_FEEDBACK = re.compile(r"(?:trace\.)?(?:annotations\.\d+\.annotation|evaluations\.\d+\.evaluation)\.name")


def flatten(value: Any) -> dict[str, Any]:
    """``value`` as dotted names to leaves (list items by index): {"a": {"b": [1]}} -> {"a.b.0": 1}."""
    out: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        prefix, v = stack.pop()
        if type(v) is dict and v:
            stack.extend((f"{prefix}{k}.", x) for k, x in v.items())
        elif type(v) is list and v:
            stack.extend((f"{prefix}{i}.", x) for i, x in enumerate(v))
        else:
            out[prefix[:-1]] = v
    return out


def read(lines: Iterator[tuple[int, str]]) -> TraceFile:
    c = Collector()
    for lineno, row in json_lines(c, lines, "a span"):
        flat = flatten(row)
        trace_id = flat.get("context.trace_id")
        if type(trace_id) is not str or not trace_id:
            c.unreadable(lineno, "'context.trace_id' is required" if trace_id is None else
                         f"'context.trace_id' must be a non-empty string, got {kind(trace_id)}")
            continue
        try:
            c.add(span(flat, trace_id, lineno))
        except Bad as exc:
            c.spoil(trace_id, lineno, exc.reason)
    return c.finish(NO_QUESTION)


def span(flat: dict[str, Any], trace_id: str, lineno: int) -> Span:
    """One flattened span as a Span; Bad naming the attribute when it cannot be read."""
    oi_kind = flat.get(A + "openinference.span.kind")
    if oi_kind is None and flat.get("span_kind") in ("LLM", "CHAIN", "RETRIEVER", "RERANKER", "EMBEDDING", "TOOL", "AGENT"):
        oi_kind = flat["span_kind"]
    parent = flat.get("parent_id")
    s = Span(trace_id, lineno, span_id=_opt_id(flat.get("context.span_id")), parent_id=_opt_id(parent),
             kind=KINDS.get(oi_kind, "other") if type(oi_kind) is str else "other",
             start=parse_time(flat.get("start_time"), "start_time"), end=parse_time(flat.get("end_time"), "end_time"))
    value_in, value_out = _plain(flat, "input"), _plain(flat, "output")
    if s.kind == "llm":
        s.input = _last_user(flat) or value_in
        s.output = _first_output(flat) or value_out
        s.usage = tokens(flat.get(A + "llm.token_count.prompt"), flat.get(A + "llm.token_count.completion"),
                         flat.get(A + "llm.token_count.total"), ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total"))
        model = flat.get(A + "llm.model_name") or flat.get(A + "llm.response.model_name")
        s.model = model if type(model) is str else None
    else:
        s.input, s.output = value_in, value_out
    if oi_kind == "RETRIEVER":
        s.documents = documents(flat, "retrieval.documents")
    elif oi_kind == "RERANKER":
        s.documents = documents(flat, "reranker.output_documents")
    if flat.get("status_code") == "ERROR":
        message = flat.get("status_message")
        s.error = message if type(message) is str and message else f"span {flat.get('name')!r} ended in error"
    s.feedback = _feedback(flat)
    return s


def _opt_id(value: Any) -> str | None:
    return None if value is None or value == "" else doc_id(value, "span id")


def _plain(flat: dict[str, Any], which: str) -> str | None:
    """``input.value`` / ``output.value`` when it is text (not given as application/json)."""
    value = text(flat.get(f"{A}{which}.value"), f"{which}.value")
    if value is None or flat.get(f"{A}{which}.mime_type") == "application/json":
        return None
    return value


def _indexed(flat: dict[str, Any], name: str) -> dict[int, dict[str, Any]]:
    """The items of a flattened list attribute: ``<name>.N.<rest>`` -> {N: {rest: value}}."""
    prefix = A + name + "."
    items: dict[int, dict[str, Any]] = {}
    for key, value in flat.items():
        if key.startswith(prefix) and (m := _INDEX.match(key, len(prefix))):
            items.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return items


def _message_text(m: dict[str, Any]) -> str | None:
    """A message's text: message.content, or the text items of message.contents joined by blank lines."""
    if type(m.get("message.content")) is str:
        return m["message.content"]  # type: ignore[no-any-return]
    texts, i = [], 0
    while f"message.contents.{i}.message_content.type" in m:
        t = m.get(f"message.contents.{i}.message_content.text")
        if m[f"message.contents.{i}.message_content.type"] == "text" and type(t) is str:
            texts.append(t)
        i += 1
    return "\n\n".join(texts) if texts else None


def _last_user(flat: dict[str, Any]) -> str | None:
    messages = _indexed(flat, "llm.input_messages")
    users = [i for i, m in messages.items() if m.get("message.role") == "user"]
    return _message_text(messages[max(users)]) if users else None


def _first_output(flat: dict[str, Any]) -> str | None:
    messages = _indexed(flat, "llm.output_messages")
    return _message_text(messages[min(messages)]) if messages else None


def documents(flat: dict[str, Any], name: str) -> tuple[RetrievedDoc, ...]:
    """``<name>.N.document.id`` / ``.content`` / ``.score``, in the order of N."""
    fields = _indexed(flat, name)
    docs = []
    for i in sorted(fields):
        d = fields[i]
        where = f"{name}.{i}.document"
        body, score = text(d.get("document.content"), f"{where}.content"), d.get("document.score")
        if score is not None and type(score) not in (int, float):
            raise Bad(f"'{where}.score' must be a number, got {kind(score)}")
        docs.append(RetrievedDoc(doc_id(d.get("document.id"), f"{where}.id"), body, score))
    return tuple(docs)


def _feedback(flat: dict[str, Any]) -> list[float]:
    """The scores of the annotations and evaluations (span or trace scope) whose name says "feedback"; one with a
    label and no score is left aside."""
    out = []
    for key, name in flat.items():
        if key.startswith(A) and _FEEDBACK.fullmatch(key, len(A)):
            score_key = key[: -len("name")] + "score"
            if flat.get(score_key) is not None:
                v = feedback_value(name, flat[score_key], f"'{score_key[len(A):]}'")
                out += [v] if v is not None else []
    return out
