"""Targets: the RAG system under test, behind one small interface.

A target answers one golden case at a time with a ``TargetOutput`` (ranked retrieved list,
answer, contexts, latency, error). gate.targets.factory.make_target picks the implementation
the spec names:

    results   a precomputed JSONL file                       gate.targets.results.ResultsFileTarget
    http      a service speaking the HTTP protocol (README)  gate.targets.http.HttpTarget
    python    "package.module:function"                      gate.targets.python.PythonTarget
    (tests)   answers from a table, in memory                gate.targets.fake.FakeTarget
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Protocol

from gate.core.model import Answer, GoldenCase, Passage, RetrievedDoc, TargetOutput


class Target(Protocol):
    kind: str
    concurrency: int

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        """Retrieved list and answer for one case. Failures come back in ``error``, not raised."""

    def close(self) -> None: ...


class ContextAnswerer(Protocol):
    """A target that can also answer from given contexts only (the robustness stage's noise test)."""

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        """The answer to the case's question from ``contexts`` only. Failures in ``error``, not raised."""


def answer_field(obj: Any, field: str) -> str:
    """The answer string of a response object; ValueError naming the field otherwise."""
    value = get_path(obj, field)
    if not isinstance(value, str):
        raise ValueError(f"the response has no {field!r} string (got {type(value).__name__})")
    return value


DEFAULT_FIELDS = {"retrieved": "retrieved", "id": "id", "text": "text", "score": "score", "answer": "answer", "contexts": "contexts"}


def get_path(obj: Any, dotted: str) -> Any:
    """obj['a']['b'] for 'a.b'; None where a step is missing."""
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def parse_output(case_id: str, obj: Any, fields: dict[str, str] = DEFAULT_FIELDS, latency_ms: float | None = None) -> TargetOutput:
    """Turn one answer object (results line, HTTP body, function return) into a TargetOutput.

    Raises ValueError with a sentence naming the field when the shape is wrong.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    items = get_path(obj, fields["retrieved"])
    if items is None:
        raise ValueError(f"no {fields['retrieved']!r} field")
    if not isinstance(items, list):
        raise ValueError(f"{fields['retrieved']!r} must be a list, got {type(items).__name__}")
    fid, ftext, fscore = fields["id"], fields["text"], fields["score"]
    nested_id = "." in fid
    retrieved: list[RetrievedDoc] = []
    append = retrieved.append
    for i, item in enumerate(items):  # hot loop (10,000 cases x 20 passages): type() checks, no isinstance chains
        if type(item) is str:  # a bare id is accepted
            append(RetrievedDoc(item))
            continue
        if type(item) is not dict:
            raise ValueError(f"{fields['retrieved']}[{i}] must be an object with {fid!r}")
        doc_id = get_path(item, fid) if nested_id else item.get(fid)
        if type(doc_id) is not str or not doc_id:
            if type(doc_id) is not int:
                raise ValueError(f"{fields['retrieved']}[{i}].{fid} must be a non-empty string")
            doc_id = str(doc_id)
        text = item.get(ftext)
        score = item.get(fscore)
        append(RetrievedDoc(
            doc_id,
            text if type(text) is str else None,
            score if type(score) is float else float(score) if type(score) is int and -1e300 < score < 1e300 else None,
        ))
    return output_from(case_id, retrieved, get_path(obj, fields["answer"]), get_path(obj, fields["contexts"]), obj.get("usage"),
                       fields, latency_ms)


_TEXT = attrgetter("text")


def output_from(case_id: str, retrieved: Sequence[Passage], answer: Any, contexts: Any, usage: Any,
                fields: dict[str, str] = DEFAULT_FIELDS, latency_ms: float | None = None) -> TargetOutput:
    """The TargetOutput of a ranked list and the answer, contexts and usage read beside it (None: not given).
    Raises ValueError naming the field when the answer or the contexts are not what they must be."""
    if answer is not None and not isinstance(answer, str):
        raise ValueError(f"{fields['answer']!r} must be a string, got {type(answer).__name__}")
    if contexts is None:
        contexts = list(filter(None, map(_TEXT, retrieved)))  # the passages' texts, empty ones left out
    elif not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise ValueError(f"{fields['contexts']!r} must be a list of strings")
    return TargetOutput(
        case_id=case_id, retrieved=retrieved, answer=answer, contexts=contexts, latency_ms=latency_ms,
        usage=usage if isinstance(usage, dict) else None,
    )
