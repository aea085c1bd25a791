"""The data model every stage shares: golden cases and what the target answered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gate.core.answers import AnswerChecks

CASE_TYPES = ("answerable", "out_of_scope", "adversarial")


@dataclass(frozen=True, slots=True)
class GoldenCase:
    """One line of the golden set."""

    id: str
    question: str
    line: int
    ground_truth: str | None = None
    relevant: dict[str, int] = field(default_factory=dict)  # id -> grade (>= 1)
    type: str = "answerable"
    tags: tuple[str, ...] = ()
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    question_type: str | None = None  # simple, multi_context, ambiguous, ... (any label); None: derived (gate.core.goldencheck)
    relevant_texts: tuple[str, ...] = ()  # passages or key sentences that answer it (match.level: text)
    expected_keywords: tuple[str, ...] = ()  # what its answer must say (keyword_coverage)
    checks: AnswerChecks | None = None  # its answer's own checks, besides the spec's (check_pass_rate)
    paraphrases: tuple[str, ...] = ()  # the question in a user's words (the robustness stage's paraphrase test)

    @property
    def answerable(self) -> bool:
        return self.type == "answerable"

    @property
    def pending_review(self) -> bool:
        """A generated case nobody has approved yet (metadata.review == "pending"): runs leave it out."""
        return self.metadata.get("review") == "pending"


class Passage(Protocol):
    """A retrieved passage as the stages read it: a RetrievedDoc, or the compact form a results file is decoded into
    (gate.targets.results), which has the same read-only fields."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str | None: ...

    @property
    def score(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class RetrievedDoc:
    id: str
    text: str | None = None
    score: float | None = None


@dataclass(slots=True)
class TargetOutput:
    """What the target returned for one case; ``error`` set means the call failed."""

    case_id: str
    retrieved: Sequence[Passage] = field(default_factory=list)  # ranked, best first
    answer: str | None = None
    contexts: list[str] = field(default_factory=list)
    latency_ms: float | None = None
    error: str | None = None
    usage: dict[str, Any] | None = None  # the RAG system's own token counts for the call
    cached: bool | None = None  # whether the RAG system answered from its own cache
    system: dict[str, Any] | None = None  # what the RAG system says about itself: model, prompt version, documents...

    @classmethod
    def failed(cls, case_id: str, error: str, latency_ms: float | None = None) -> TargetOutput:
        return cls(case_id=case_id, error=error, latency_ms=latency_ms)


@dataclass(frozen=True, slots=True)
class Answer:
    """A target's answer from given contexts (the robustness stage's noise test); ``error`` set means it failed."""

    text: str | None
    error: str | None = None
    latency_ms: float | None = None
