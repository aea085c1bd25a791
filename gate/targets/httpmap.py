"""The HTTP target's mappings beyond its fields: ``preset: langserve``, and what a wrong-shape error shows (what was
received, the field whose mapping does not fit). Pure: no I/O."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gate.core.redact import Redactor
from gate.targets import get_path

DEFAULT_REQUEST = {"question": "question", "k": "k", "contexts": "contexts"}

# preset: langserve. A response field maps to the places a LangServe body holds it, the first present wins; the
# request sends the question as the input and no k (a chain's input schema refuses unknown keys).
LANGSERVE_RESPONSE = {
    "retrieved": ("output.context", "output.source_documents"),
    "answer": ("output.answer", "output.result", "output"),
    "id": ("id", "metadata.id"),  # not metadata.source: a loader's file path, the same for every chunk of a file
    "text": ("page_content",),
}
LANGSERVE_REQUEST = {"question": "input", "k": None, "contexts": None}
LANGSERVE_CONTEXTS_REQUEST = {"question": "input.question", "contexts": "input.contexts"}
SHAPE_EXAMPLE = {"retrieved": "data.docs", "id": "doc_id", "text": "content", "score": "relevance", "answer": "data.text",
                 "contexts": "data.passages", "usage": "meta.usage", "cached": "meta.cached", "system": "meta.system"}


# bodies that are a stream (of server-sent events, of JSON lines), not one JSON value
STREAM_TYPES = ("text/event-stream", "application/x-ndjson", "application/jsonl", "application/json-seq", "application/stream+json")
STREAM_HINT = ("point target.http.url at the endpoint that answers with one JSON body (a LangServe chain's /invoke, with "
               "`preset: langserve`; a FastAPI route that returns the dict, not a StreamingResponse); rag-gate reads no stream")
LANGSERVE_ENDPOINTS = ("/stream", "/stream_log", "/stream_events", "/batch")


class StreamBody(RuntimeError):
    """An answer that is a stream, not one JSON body: every case would get the same (a wrong shape)."""

    hint = STREAM_HINT


def stream_body(content_type: str | None, content: bytes) -> StreamBody | None:
    """StreamBody saying what the stream is, when the body is one (by its Content-Type, or its first bytes: an SSE
    ``event:`` or ``data:`` line); else None."""
    media = (content_type or "").split(";")[0].strip().lower()
    sse = media == "text/event-stream" or content.lstrip()[:6].startswith((b"event:", b"data:"))
    if not sse and media not in STREAM_TYPES:
        return None
    kind = "a stream of server-sent events (text/event-stream)" if sse else f"a stream of JSON lines ({media})"
    return StreamBody(f"returned the wrong shape: the body is {kind}, not one JSON body")


def endpoint_note(url: str, langserve: bool) -> str:
    """What a 404 adds when the preset's /invoke went below another LangServe endpoint (a URL given as .../stream)."""
    path = urlsplit(url).path.rstrip("/")
    end = next((e for e in LANGSERVE_ENDPOINTS if path.endswith(e + "/invoke")), None)
    if not langserve or end is None:
        return ""
    return (f" (preset langserve posts to the chain's /invoke: {end} is the chain's {end.lstrip('/')} endpoint, so set "
            f"target.http.url to the chain's base URL, without {end})")


def set_path(obj: dict[str, Any], dotted: str, value: Any) -> None:
    """obj['a']['b'] = value for 'a.b', the objects on the way made where missing."""
    *parents, last = dotted.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    obj[last] = value


def invoke_url(url: str) -> str:
    """A LangServe chain's URL as given (its base, or its /invoke) made its /invoke."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return url if path.endswith("/invoke") else urlunsplit(parts._replace(path=path + "/invoke"))


def explicit(given: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The keys of a filled mapping the user set: those whose value is not the schema's default."""
    return {k: v for k, v in given.items() if defaults.get(k) != v}


def received(obj: Any, redactor: Redactor, path: str = "") -> str:
    """What a body is, as an error shows it: its type, or its keys (the first 10, shortened, redacted); with where a
    dotted ``path`` stops, when it stops below the top level."""
    said = describe(obj, redactor)
    parts = path.split(".")
    for depth in range(1, len(parts)):
        obj = obj.get(parts[depth - 1]) if isinstance(obj, dict) else None
        if obj is None:
            break
        if not isinstance(obj, dict) or parts[depth] not in obj:
            said += f"; {redactor.shorten('.'.join(parts[:depth]), 60)!r} holds {describe(obj, redactor)}"
            break
    return said


def describe(obj: Any, redactor: Redactor) -> str:
    if isinstance(obj, dict):
        keys = [repr(redactor.shorten(k, 40)) for k in list(obj)[:10]]
        more = f" and {len(obj) - 10} more" if len(obj) > 10 else ""
        return f"an object with key{'s' if len(obj) > 1 else ''} {', '.join(keys)}{more}" if keys else "an empty object"
    kind = {str: "a string", list: "a list", bool: "a boolean", int: "a number", float: "a number"}.get(type(obj))
    return kind or ("null" if obj is None else f"a {type(obj).__name__}")


def misplaced(obj: Any, fields: dict[str, Any]) -> str:
    """The response field whose mapping does not lead to what it must (the one a wrong-shape error names)."""
    items = get_path(obj, fields["retrieved"]) if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return "retrieved"
    for item in items:
        if type(item) is not str:
            doc_id = get_path(item, fields["id"]) if isinstance(item, dict) else None
            if not (isinstance(doc_id, str) and doc_id) and type(doc_id) is not int:
                return "id"
    checks = {"answer": lambda v: isinstance(v, str), "contexts": lambda v: isinstance(v, list),
              "usage": lambda v: isinstance(v, dict), "cached": lambda v: isinstance(v, bool)}
    for field, ok in checks.items():
        value = get_path(obj, fields[field])
        if value is not None and not ok(value):
            return field
    return "retrieved"
