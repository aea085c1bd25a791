"""The frameworks' own objects, read by their attributes and keys (no framework is imported here).

What a Python target's function (or retriever and answerer) returns, and what a results line holds, when it is not
the usual ``{retrieved: [{id, text, score}], answer, contexts?}``:

    documents   LangChain Document (page_content, metadata, id); LlamaIndex NodeWithScore (node, score) or a node
                (node_id, text); Haystack Document (id, content, score, meta); and their serialised forms:
                {page_content, metadata, id?}, LangChain's dumpd {lc: 1, type: constructor, kwargs: {...}},
                {node: {id_, text, metadata}, score}, {id, content, score, meta?}
    outputs     a chain's output {context | source_documents: [documents], answer | result}; a LlamaIndex Response
                (response, source_nodes), a StreamingResponse once read, or {response, source_nodes}; a Haystack
                pipeline's result {component: {documents}, component: {replies} | {answers: [GeneratedAnswer]}}; an
                (answer, documents) pair; a list of documents (retrieval only)
    answers     a string, a message (content, text, data) or an object holding one in ``message``

A document's id is its own (Document.id, the node's id, Haystack's id), else ``metadata["id"]``; with ``id_key``,
``metadata[id_key]`` (``meta`` for Haystack) and nothing else. Its score: the object's, or a LangChain Document's
``metadata["score"]``. Each reads exactly as the dict of the usual shape with the same id, text and score.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

from gate.core.model import RetrievedDoc, TargetOutput
from gate.targets import DEFAULT_FIELDS, FRAMEWORK_KEYS, Beside, ShapeError, get_path, output_from, parse_output, received, shown_id

ACCEPTED = ("{retrieved: [{id, text, score}], answer}, a chain's output {context or source_documents, answer or result}, "
            "a LlamaIndex Response, a Haystack pipeline's result, (answer, documents), or a list of documents "
            "(LangChain, LlamaIndex or Haystack documents, or {id, text, score})")
DOCUMENTS = "LangChain, LlamaIndex or Haystack documents, {id, text, score} objects or id strings"
MAX_DOCUMENTS = 10_000  # documents read of one answer (ten times the largest k): more is a retriever that ignores k
ID_HINT = ("set id_key to the metadata key that holds the ids your golden set's relevant_doc_ids name: target.python.id_key, "
           "or for a results file target.results: {path: ..., id_key: KEY}")


class Parts(NamedTuple):
    """A document as read, before its id is chosen."""

    kind: str  # what it is, in words
    own_id: Any  # the document's own id (None: it has none)
    text: Any
    score: Any
    meta: Any  # its metadata (a dict, else None)


def read_output(case_id: str, obj: Any, fields: dict[str, str] = DEFAULT_FIELDS, latency_ms: float | None = None, *,
                id_key: str | None = None, hint: str | None = None) -> TargetOutput:
    """``parse_output`` for the usual shape (its retrieved items may be framework documents); else a framework's
    output, read as the usual shape would read it. ShapeError naming what was received, with ``hint`` (what to
    return or set) where the shape is not one of these."""
    document = partial(read_document, id_key=id_key)
    if type(obj) is dict and (items := get_path(obj, fields["retrieved"])) is not None:  # the usual shape, as parse_output reads it
        _not_too_many(items, repr(fields["retrieved"]))
        return _hinted(parse_output, hint, case_id, _answer_read(obj, fields["answer"], hint), fields, latency_ms, document=document)
    found = framework_output(obj)
    if found is None and type(obj) is dict:
        return _hinted(parse_output, hint, case_id, obj, fields, latency_ms)  # raises, naming what was received
    if found is None:
        raise ShapeError(f"got {received(obj)}, which is none of the accepted shapes", hint=hint)
    items, answer, where = found
    retrieved = _hinted(read_documents, hint, items, where, id_key)
    return _hinted(output_from, hint, case_id, retrieved, Beside(_hinted(answer_text, hint, answer, "the answer"), None, None),
                   latency_ms=latency_ms)


def _answer_read(obj: dict[str, Any], key: str, hint: str | None) -> dict[str, Any]:
    """The usual shape with its answer a message object (an AIMessage, a ChatMessage: what an LLM call returns) or a
    str subclass read as the string it holds; JSON values are left for parse_output to read (or to name)."""
    value = obj.get(key)
    if value is None or type(value) is str or isinstance(value, (dict, list, int, float)) or "." in key:
        return obj
    return {**obj, key: _hinted(answer_text, hint, value, repr(key))}


def _hinted(fn: Callable[..., Any], hint: str | None, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, its ShapeError given ``hint`` when it has none."""
    try:
        return fn(*args, **kwargs)
    except ShapeError as exc:
        if exc.hint is None and hint is not None:
            exc.hint = hint
        raise


RETURNED_LIST = "the returned list"  # where the documents are when the call returned a list of them


def read_documents(items: Any, where: str, id_key: str | None = None) -> list[RetrievedDoc]:
    """A ranked list of documents of any accepted shape (bare id strings too)."""
    if not isinstance(items, (list, tuple)):
        raise ShapeError(f"{where} must be a list of documents, got {received(items)}")
    _not_too_many(items, where)
    at = (lambda i: f"item {i} of {where}") if where == RETURNED_LIST else (lambda i: f"{where}[{i}]")
    return [RetrievedDoc(item) if type(item) is str else read_document(item, at(i), id_key) for i, item in enumerate(items)]


def _not_too_many(items: Any, where: str) -> None:
    if isinstance(items, (list, tuple)) and len(items) > MAX_DOCUMENTS:
        raise ShapeError(f"{where} holds {len(items)} documents, more than the {MAX_DOCUMENTS} rag-gate reads of one answer",
                         hint="return the top k documents only: k is the second argument of the call")


def read_document(item: Any, where: str, id_key: str | None = None) -> RetrievedDoc:
    """One retrieved document of any accepted shape; ShapeError naming ``where`` and what it is otherwise."""
    if type(item) is dict and _is_id(item.get("id")) and (item.get("text") is not None or item.keys().isdisjoint(FRAMEWORK_KEYS)):
        text = item.get("text")  # the usual shape, read as parse_output reads it
        return RetrievedDoc(str(item["id"]), text if type(text) is str else None, _score(item.get("score")))
    parts = _dict_parts(item, id_key) if type(item) is dict else _object_parts(item)
    if parts is None and type(item) is dict and "id" in item and item.keys().isdisjoint(FRAMEWORK_KEYS):
        raise ShapeError(f"{where}.id must be a non-empty string (or an integer), got {shown_id(item['id'])}")
    if parts is None:
        raise ShapeError(f"{where} is not a document (an object with 'id', 'text', 'score', or a LangChain, LlamaIndex or "
                         f"Haystack document): got {received(item)}")
    return RetrievedDoc(_doc_id(parts, where, id_key), parts.text if type(parts.text) is str else None, _score(parts.score))


def _object_parts(obj: Any) -> Parts | None:
    """A framework's document object by its attributes."""
    if isinstance(getattr(obj, "page_content", None), str):  # LangChain Document
        meta = getattr(obj, "metadata", None)
        return Parts("a LangChain Document", getattr(obj, "id", None), obj.page_content,
                     meta.get("score") if isinstance(meta, Mapping) else None, meta)
    node = getattr(obj, "node", None)
    if node is not None and hasattr(obj, "score"):  # LlamaIndex NodeWithScore
        parts = _node_parts(node)
        return parts._replace(kind="a LlamaIndex NodeWithScore", score=obj.score) if parts else None
    parts = _node_parts(obj)
    if parts is not None:
        return parts
    if hasattr(obj, "content") and hasattr(obj, "meta"):  # Haystack Document
        return Parts("a Haystack Document", getattr(obj, "id", None), obj.content, getattr(obj, "score", None), obj.meta)
    return None


def _node_parts(node: Any) -> Parts | None:
    """A LlamaIndex node (TextNode): node_id or id_, its text (else get_content()), its metadata."""
    own_id = getattr(node, "node_id", None) or getattr(node, "id_", None)
    if own_id is None:
        return None
    text = getattr(node, "text", None)
    if not isinstance(text, str) and callable(getattr(node, "get_content", None)):
        text = node.get_content()
    return Parts("a LlamaIndex node", own_id, text, None, getattr(node, "metadata", None))


def _dict_parts(d: dict[str, Any], id_key: str | None) -> Parts | None:
    """A framework's document as JSON (or as a dict a user built)."""
    if "page_content" in d:  # LangChain's Document as model_dump / JSON gives it
        meta = d.get("metadata")
        return Parts("a LangChain document", d.get("id"), d["page_content"], meta.get("score") if type(meta) is dict else None, meta)
    kwargs = d.get("kwargs")
    if d.get("lc") == 1 and d.get("type") == "constructor" and type(kwargs) is dict and "page_content" in kwargs:
        return _dict_parts(kwargs, id_key)  # LangChain's dumpd form
    node = d.get("node")
    if type(node) is dict:  # LlamaIndex's NodeWithScore as model_dump gives it
        return Parts("a LlamaIndex node", node.get("id_", node.get("node_id")), node.get("text"), d.get("score"), node.get("metadata"))
    if "content" in d:  # Haystack's Document: meta nested (to_dict(flatten=False)) or its keys beside the others
        meta = d.get("meta")
        return Parts("a Haystack document", d.get("id"), d["content"], d.get("score"), meta if type(meta) is dict else d)
    meta = d.get("metadata", d.get("meta"))
    if id_key is not None and type(meta) is dict:  # the usual fields, the id in the metadata
        return Parts("a document", None, d.get("text"), d.get("score"), meta)
    return None


def _doc_id(parts: Parts, where: str, id_key: str | None) -> str:
    """The id a document is scored by: ``meta[id_key]`` when id_key is set; else its own id, else ``meta["id"]``."""
    meta = parts.meta if isinstance(parts.meta, Mapping) else {}
    key = "id" if id_key is None else id_key
    if id_key is not None:
        value, said = meta.get(id_key), f"its metadata has no {id_key!r} (id_key)"
    else:
        value, said = parts.own_id, "it has no id and its metadata no 'id'"
        if not _is_id(value):
            value = meta.get("id")
    if type(value) is int:
        return str(value)
    if not _is_id(value) and key in meta:
        said = f"its metadata's {key!r} is {shown_id(meta[key])}, not a non-empty string or an integer"
    if not _is_id(value):
        keys = f"; metadata: {received(dict(meta))}" if meta else "; no metadata"
        raise ShapeError(f"{where} ({parts.kind}): {said}{keys}", hint=ID_HINT)
    return str(value)


def _is_id(value: Any) -> bool:
    return (type(value) is str and bool(value)) or type(value) is int


def _score(x: Any) -> float | None:
    """A score as the usual shape reads it (a float; an integer within +-1e300); a number of another type (numpy's)
    as the float it is, when finite."""
    if type(x) is float:
        return x
    if type(x) is int:
        return float(x) if -1e300 < x < 1e300 else None
    if x is None or isinstance(x, (bool, str, bytes)) or not hasattr(x, "__float__"):
        return None
    try:
        f = float(x)
    except Exception:  # a number-like object whose __float__ fails (or raises anything): no score
        return None
    return f if math.isfinite(f) else None


def answer_text(answer: Any, where: str) -> str | None:
    """An answer: a string (LangChain's StrOutputParser gives a str subclass, read as the str it is), None (retrieval
    only), or a message object holding one (content, its content a list of text blocks too, text, data), or holding
    such a message (LlamaIndex's ChatResponse)."""
    if answer is None or type(answer) is str:
        return answer
    text = _text_of(answer)
    if text is None:
        raise ShapeError(f"{where} must be a string, got {received(answer)}")
    return text


def _text_of(obj: Any) -> str | None:
    """The text an answer object holds (``answer_text``), or None."""
    text = _message_text(obj)
    if text is None and type(obj) is not dict and (inner := getattr(obj, "message", None)) is not None:
        text = _message_text(inner)  # LlamaIndex's ChatResponse (what llm.chat returns): its ChatMessage
    return text


def _message_text(obj: Any) -> str | None:
    if isinstance(obj, str):
        return str.__str__(obj)
    for name in ("content", "text", "data"):  # LangChain's AIMessage, Haystack's ChatMessage, GeneratedAnswer
        value = obj.get(name) if type(obj) is dict else getattr(obj, name, None)
        if isinstance(value, str):
            return str.__str__(value)
        if name == "content" and (joined := _blocks_text(value)) is not None:
            return joined
    return None


def _blocks_text(value: Any) -> str | None:
    """A message's content given as blocks (LangChain's [{type: text, text}], Haystack's [{text}], strings): their
    texts joined; None when it is not such a list or holds no text."""
    if not isinstance(value, list) or not all(isinstance(b, (str, dict)) for b in value):
        return None
    texts = [b if isinstance(b, str) else b["text"] for b in value
             if isinstance(b, str) or (isinstance(b.get("text"), str) and b.get("type", "text") == "text")]
    return "".join(map(str.__str__, texts)) if texts else None


def _is_answer(obj: Any) -> bool:
    """Whether ``obj`` is an answer beside a list of documents: a string, or an object holding one (not a dict, not a
    document)."""
    if isinstance(obj, str):
        return True
    if obj is None or isinstance(obj, (dict, list, tuple)) or _object_parts(obj) is not None:
        return False
    return _text_of(obj) is not None


def answer_of(obj: Any, where: str) -> str | None:
    """What an answerer returned, as an answer: a string; an object holding one (an AIMessage, a ChatMessage); a
    {answer} object; or any accepted output's answer (a chain's output, a Response, a pipeline's result)."""
    if obj is None or type(obj) is str:
        return obj
    if type(obj) is dict and "answer" in obj:
        return answer_text(obj["answer"], f"{where}'s 'answer'")
    found = framework_output(obj) if type(obj) is dict or hasattr(obj, "source_nodes") else None
    if found is None and isinstance(obj, (list, tuple)) and len(obj) == 2:
        found = framework_output(obj)
    if found is not None and found[2] != RETURNED_LIST:
        return answer_text(found[1], where)
    return answer_text(obj, where)


def framework_output(obj: Any) -> tuple[Any, Any, str] | None:
    """A framework's output: (its ranked documents, its answer, where the documents are), or None."""
    if isinstance(obj, (list, tuple)):
        if len(obj) == 2 and isinstance(obj[1], (list, tuple)) and _is_answer(obj[0]):
            return obj[1], obj[0], "documents"
        if len(obj) == 2 and isinstance(obj[0], (list, tuple)) and _is_answer(obj[1]):
            return obj[0], obj[1], "documents"
        _not_a_stream_of_chunks(obj)
        return obj, None, RETURNED_LIST
    if type(obj) is dict:
        return _dict_output(obj)
    nodes = getattr(obj, "source_nodes", None)
    if isinstance(nodes, list) and hasattr(obj, "response"):  # LlamaIndex Response
        if hasattr(obj, "chat_stream") and not getattr(obj, "is_done", True):  # a chat engine's stream_chat(), still running
            raise ShapeError(f"got {received(obj)} whose answer is still a stream (a chat engine's stream_chat(): its "
                             "response fills in as the stream is read, after the call)",
                             hint="return chat_engine.chat(question); or read the stream first (''.join(r.response_gen)) "
                                  "and return (r.response, r.source_nodes)")
        return nodes, obj.response, "source_nodes"
    if isinstance(nodes, list) and hasattr(obj, "response_gen"):  # LlamaIndex StreamingResponse (streaming=True)
        return nodes, _streamed(obj), "source_nodes"
    return None


_CHUNK_KEYS = frozenset(("input", "question", "context", "source_documents", "answer", "result"))


def _not_a_stream_of_chunks(items: list[Any] | tuple[Any, ...]) -> None:
    """ShapeError for what a LangChain chain's stream() yields, listed: objects of one key each (input, context,
    answer...), the output in pieces."""
    if len(items) > 1 and all(isinstance(c, dict) and len(c) == 1 for c in items) and any(not _CHUNK_KEYS.isdisjoint(c) for c in items):
        names = list(dict.fromkeys(repr(k)[:40] for c in items for k in c))
        keys = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise ShapeError(f"{RETURNED_LIST} holds {len(items)} objects of one key each ({keys}): a chain's output streamed "
                         "in pieces (chain.stream()), not the output", hint="return chain.invoke(...), not chain.stream(...)")


def _streamed(obj: Any) -> Any:
    """A LlamaIndex StreamingResponse's answer once it has been streamed (``response_txt``, set by its
    ``get_response()``); ShapeError while it is still a stream: rag-gate reads what the call returned, it does not
    run a stream (whose time would be left out of the latency, past max_duration_s)."""
    text = getattr(obj, "response_txt", None)
    if text is not None or getattr(obj, "response_gen", None) is None:
        return text
    raise ShapeError(f"got {received(obj)} whose answer is still a stream (response_gen, not yet read)",
                     hint="return response.get_response() (await it for an async query), or build the query engine without "
                          "streaming=True")


def _dict_output(d: dict[str, Any]) -> tuple[Any, Any, str] | None:
    context, sources = d.get("context"), d.get("source_documents")
    if isinstance(context, list) and isinstance(sources, list) and context is not sources and _differ(context, sources):
        raise ShapeError(f"the chain's output has both 'context' ({len(context)} documents) and 'source_documents' "
                         f"({len(sources)}), which differ: which one is the ranking is not clear",
                         hint="return (answer, documents) with the documents whose ranking is measured, or drop the other key")
    for docs_key in ("context", "source_documents"):  # LangChain's retrieval chains
        if isinstance(d.get(docs_key), (list, tuple)):
            return d[docs_key], d.get("answer", d.get("result")), docs_key
    for docs_key in ("context", "source_documents"):
        if docs_key in d and ("answer" in d or "result" in d):  # a chain's output whose documents were formatted (a str)
            raise ShapeError(f"the chain's output's {docs_key!r} must be a list of documents, got {received(d[docs_key])}",
                             hint=f"keep the retriever's documents in {docs_key!r} (format them for the prompt inside the "
                                  "chain), or return (answer, documents)")
    if isinstance(d.get("source_nodes"), list):  # LlamaIndex's Response as JSON
        return d["source_nodes"], d.get("response"), "source_nodes"
    return _haystack_output(d)


def _differ(a: list[Any], b: list[Any]) -> bool:
    try:
        return bool(a != b)
    except Exception:  # documents whose comparison raises: not known to be the same
        return True


def _haystack_output(d: dict[str, Any]) -> tuple[Any, Any, str] | None:
    """A Haystack pipeline's result: the documents of the one component that returned some (else those of the first
    generated answer), the first reply or answer."""
    components = {k: v for k, v in d.items() if type(v) is dict}
    with_docs = [k for k, v in components.items() if isinstance(v.get("documents"), list)]
    replies = next((v["replies"] for v in components.values() if isinstance(v.get("replies"), list)), None)
    answers = next((v["answers"] for v in components.values() if isinstance(v.get("answers"), list)), None)
    if not with_docs and replies is None and answers is None:
        return None
    first = answers[0] if answers else None
    answer = first if first is not None else (replies[0] if replies else None)
    answer_docs = first.get("documents") if type(first) is dict else getattr(first, "documents", None)
    if len(with_docs) == 1:
        return components[with_docs[0]]["documents"], answer, f"{with_docs[0]}.documents"
    if isinstance(answer_docs, list) and answer_docs:
        return answer_docs, answer, "answers[0].documents"
    if with_docs:
        raise ShapeError(f"the pipeline's result has documents from several components ({', '.join(map(repr, with_docs[:5]))})",
                         hint="return (answer, result[name]['documents']) for the component whose ranking is measured")
    raise ShapeError(f"the pipeline's result has no documents (components: {received(components)})",
                     hint="run the pipeline with include_outputs_from={'<retriever>'} so its documents come back")
