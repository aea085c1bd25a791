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

from collections.abc import Mapping, Sequence
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
    unreachable: str | None = None  # why the last call could not connect at all (a service that is down), if so
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


def answer_field(obj: Any, field: str) -> str:
    """The answer string of a response object; ValueError naming the field otherwise."""
    value = get_path(obj, field)
    if not isinstance(value, str):
        raise ValueError(f"the response has no {field!r} string (got {type(value).__name__})")
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
    beside = Beside(get_path(obj, fields["answer"]), get_path(obj, fields["contexts"]), get_path(obj, fields["usage"]),
                    get_path(obj, fields["cached"]), get_path(obj, fields.get("system", "system")))
    return output_from(case_id, retrieved, beside, fields, latency_ms)


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
    the field when the answer or the contexts are not what they must be."""
    answer, contexts, usage, cached, system = beside
    if usage is not None and not isinstance(usage, dict):
        raise ValueError(f"{fields['usage']!r} must be an object of token counts (prompt_tokens, completion_tokens, total_tokens), "
                         f"got {type(usage).__name__}")
    if cached is not None and not isinstance(cached, bool):
        raise ValueError(f"{fields['cached']!r} must be true or false, got {type(cached).__name__}")
    if answer is not None and not isinstance(answer, str):
        raise ValueError(f"{fields['answer']!r} must be a string, got {type(answer).__name__}")
    if contexts is None:
        contexts = list(filter(None, map(_TEXT, retrieved)))  # the passages' texts, empty ones left out
    elif not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise ValueError(f"{fields['contexts']!r} must be a list of strings")
    return TargetOutput(
        case_id=case_id, retrieved=retrieved, answer=answer, contexts=contexts, latency_ms=latency_ms,
        usage=usage if isinstance(usage, dict) else None, cached=cached,
        system=read_system(system, fields.get("system", "system")),
    )
