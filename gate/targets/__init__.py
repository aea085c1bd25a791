"""Targets: the RAG system under test, behind one small interface.

A target answers one golden case at a time with a ``TargetOutput`` (ranked retrieved list,
answer, contexts, latency, error). gate.targets.factory.make_target picks the implementation
the spec names:

    results   a precomputed JSONL file                       gate.targets.results.ResultsFileTarget
    http      a service speaking the HTTP protocol (README)  gate.targets.http.HttpTarget
    python    "package.module:function", or a retriever and an answerer   gate.targets.python.PythonTarget
    (tests)   answers from a table, in memory                gate.targets.fake.FakeTarget

``parse_output`` reads the usual shape; gate.targets.shapes.read_output reads it too and, when it is not there, the
frameworks' own objects (LangChain, LlamaIndex, Haystack) and their serialised forms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple

from gate.core.changes import read_system
from gate.core.model import Answer, GoldenCase, Passage, RetrievedDoc, TargetOutput


class Target:
    """The whole contract between a run and the RAG system under test: every attribute and method the run uses, with
    the defaults a target that does not need them inherits (as httpx's transports share one base class).

    ``ask`` answers one case (its failures come back in ``TargetOutput.error``, never raised); ``answer_from``
    answers from given contexts only, for the robustness stage's noise test, when ``answers_from_contexts``."""

    kind: ClassVar[str] = "target"  # results | http | python | fake: named in the report and the progress lines
    concurrency: int = 1  # cases asked at once
    fail_fast: ClassVar[bool] = False  # ask the first case alone: if it could not even connect, stop the run there
    ask_first_alone: ClassVar[bool] = False  # ask the first case alone: if its answer had the wrong shape, stop there
    in_memory: ClassVar[bool] = False  # every answer is already read (a results file): ask() only looks one up, never raises
    unreachable: str | None = None  # why the last call could not connect at all (a service that is down), if so
    wrong_shape: str | None = None  # why the last answer had the wrong shape (what was received, the mapping to set), if so
    refused: str | None = None  # why the last call was refused for a reason every case shares (HTTP 401, 403, 405), if so
    error_status: int | None = None  # the error status the last call was answered with (HTTP 404...), if so
    shape_hint: str | None = None  # what to set or return instead, for the last answer of the wrong shape
    unmatched: Sequence[int] = ()  # lines of a results file that match no golden case
    precomputed_noise: Mapping[str, Mapping[str, Any]] | None = None  # a results file's noise-test answers, by case id

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        """Retrieved list and answer for one case. Failures come back in ``error``, not raised."""
        raise NotImplementedError

    @property
    def answers_from_contexts(self) -> bool:
        """Whether ``answer_from`` can answer from given contexts (the noise test asks it)."""
        return False

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        """The answer to the case's question from ``contexts`` only. Failures in ``error``, not raised."""
        return Answer(None, f"the {self.kind} target cannot answer from given contexts")

    def close(self) -> None:
        """Free what the target holds (connections); called once when the run is done with it."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShapeError(ValueError):
    """An answer object of the wrong shape (a results line, an HTTP body, a function's return value): the message names
    the type or the keys received; ``hint``, where one helps, what to set or return instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


MAX_KEYS_SHOWN = 10
MAX_KEY_CHARS = 40


def received(obj: Any) -> str:
    """What an object of the wrong shape is, in a few words: its type, or an object's first keys (shortened; the
    renderers and the console escape them, they are the target's text)."""
    if isinstance(obj, dict):
        if not obj:
            return "an empty object"
        keys = [repr(k if len(k) <= MAX_KEY_CHARS else k[:MAX_KEY_CHARS] + "...") if type(k) is str else _key_shown(k)
                for k in list(obj)[:MAX_KEYS_SHOWN]]
        more = f" and {len(obj) - MAX_KEYS_SHOWN} more" if len(obj) > MAX_KEYS_SHOWN else ""
        return f"an object with key{'s' if len(obj) > 1 else ''} {', '.join(keys)}{more}"
    name = type(obj).__name__
    return "null" if obj is None else f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name[:MAX_KEY_CHARS]}"


def _key_shown(key: Any) -> str:
    """A key that is no string, shown by its repr (cut), or by its type when its repr raises."""
    try:
        return repr(key)[:MAX_KEY_CHARS]
    except Exception:  # an object whose __repr__ raises
        return f"a {type(key).__name__[:MAX_KEY_CHARS]}"


def answer_field(obj: Any, field: str) -> str:
    """The answer string of a response object; ShapeError naming the field otherwise."""
    value = get_path(obj, field)
    if not isinstance(value, str):
        raise ShapeError(f"the response has no {field!r} string (got {type(value).__name__})")
    return value


DEFAULT_FIELDS = {"retrieved": "retrieved", "id": "id", "text": "text", "score": "score", "answer": "answer", "contexts": "contexts",
                  "usage": "usage", "cached": "cached", "system": "system"}


def get_path(obj: Any, dotted: str) -> Any:
    """obj['a']['b'] for 'a.b'; None where a step is missing."""
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def parse_output(case_id: str, obj: Any, fields: dict[str, str] = DEFAULT_FIELDS, latency_ms: float | None = None, *,
                 document: Callable[[Any, str], Passage] | None = None) -> TargetOutput:
    """Turn one answer object (results line, HTTP body, function return) of the usual shape into a TargetOutput.

    ``document(item, where)``: reads a retrieved item that is not of the usual shape (a framework's document,
    gate.targets.shapes) or raises ShapeError. Raises ShapeError with a sentence naming the field and what was
    received when the shape is wrong.
    """
    if not isinstance(obj, dict):
        raise ShapeError(f"expected a JSON object, got {type(obj).__name__}")
    items = get_path(obj, fields["retrieved"])
    if items is None:
        raise ShapeError(f"no {fields['retrieved']!r} field (got {received(obj)})")
    if not isinstance(items, list):
        raise ShapeError(f"{fields['retrieved']!r} must be a list, got {type(items).__name__}")
    fid, ftext, fscore = fields["id"], fields["text"], fields["score"]
    nested_id = "." in fid
    retrieved: list[Passage] = []
    append = retrieved.append
    for i, item in enumerate(items):  # hot loop (10,000 cases x 20 passages): type() checks, no isinstance chains
        if type(item) is str:  # a bare id is accepted
            append(RetrievedDoc(item))
            continue
        if type(item) is not dict:
            where = f"{fields['retrieved']}[{i}]"
            append(_other_item(document, item, where, f"{where} must be an object with {fid!r}"))
            continue
        doc_id = get_path(item, fid) if nested_id else item.get(fid)
        text = item.get(ftext)
        if text is None and document is not None and not item.keys().isdisjoint(FRAMEWORK_KEYS):
            append(document(item, f"{fields['retrieved']}[{i}]"))  # a framework's serialised document
            continue
        if type(doc_id) is not str or not doc_id:
            if type(doc_id) is not int:
                where = f"{fields['retrieved']}[{i}]"
                given = fid in item if not nested_id else doc_id is not None
                append(_other_item(document, item, where, f"{where}.{fid} must be a non-empty string",
                                   shown_id(doc_id) if given else None))
                continue
            doc_id = str(doc_id)
        score = item.get(fscore)
        append(RetrievedDoc(
            doc_id,
            text if type(text) is str else None,
            score if type(score) is float else float(score) if type(score) is int and -1e300 < score < 1e300 else None,
        ))
    beside = Beside(get_path(obj, fields["answer"]), get_path(obj, fields["contexts"]), get_path(obj, fields["usage"]),
                    get_path(obj, fields["cached"]), get_path(obj, fields.get("system", "system")))
    return output_from(case_id, retrieved, beside, fields, latency_ms)


# keys of a retrieved item without the usual text that make it a framework's serialised document (LangChain's
# page_content, Haystack's content): read by gate.targets.shapes, not as an id without a text
FRAMEWORK_KEYS = ("page_content", "content")


WRONG_SHAPE = "returned the wrong shape"


def shape_said(error: str) -> str:
    """A case's wrong-shape error after a line that says so already: without its own "returned the wrong shape: "."""
    lead = f"{WRONG_SHAPE}: "
    return error[len(lead):] if error.startswith(lead) else error.replace(f": {lead}", ": ", 1)


def shown_id(value: Any) -> str:
    """A value that is no id, as an error shows it: its type, and a number's value (NaN, 1.0)."""
    if value is None or type(value) is str:
        return "null" if value is None else "an empty string"
    return f"{received(value)} ({value!r})" if type(value) in (float, bool) else received(value)


def _other_item(document: Callable[[Any, str], Passage] | None, item: Any, where: str, problem: str,
                got: str | None = None) -> Passage:
    """A retrieved item not of the usual shape: read by ``document`` (a framework's document), else ShapeError saying
    ``problem`` and what was received (``got``, else the item's type or keys)."""
    if document is not None:
        return document(item, where)
    raise ShapeError(f"{problem}, got {received(item) if got is None else got}")


_TEXT = attrgetter("text")


class Beside(NamedTuple):
    """What an answer object gives beside its ranked list, as read (None: not given)."""

    answer: Any
    contexts: Any
    usage: Any
    cached: Any = None
    system: Any = None


def output_from(case_id: str, retrieved: Sequence[Passage], beside: Beside, fields: dict[str, str] = DEFAULT_FIELDS,
                latency_ms: float | None = None) -> TargetOutput:
    """The TargetOutput of a ranked list and the answer, contexts and usage read beside it. Raises ValueError naming
    the field when the answer or the contexts are not what they must be (a ShapeError)."""
    answer, contexts, usage, cached, system = beside
    if usage is not None and not isinstance(usage, dict):
        raise ShapeError(f"{fields['usage']!r} must be an object of token counts (prompt_tokens, completion_tokens, total_tokens), "
                         f"got {type(usage).__name__}")
    if cached is not None and not isinstance(cached, bool):
        raise ShapeError(f"{fields['cached']!r} must be true or false, got {type(cached).__name__}")
    if answer is not None and not isinstance(answer, str):
        raise ShapeError(f"{fields['answer']!r} must be a string, got {type(answer).__name__}")
    if contexts is None:
        contexts = list(filter(None, map(_TEXT, retrieved)))  # the passages' texts, empty ones left out
    elif not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise ShapeError(f"{fields['contexts']!r} must be a list of strings")
    try:
        read = read_system(system, fields.get("system", "system"))
    except ValueError as exc:
        raise ShapeError(str(exc)) from None
    return TargetOutput(
        case_id=case_id, retrieved=retrieved, answer=answer, contexts=contexts, latency_ms=latency_ms,
        usage=usage if isinstance(usage, dict) else None, cached=cached, system=read,
    )
