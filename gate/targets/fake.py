"""A fake target for tests: answers from a table, in memory, with no server (as httpx ships a mock transport).

    FakeTarget({"q1": {"retrieved": [{"id": "doc#1", "text": "..."}], "answer": "..."}})

Rows are keyed by case id (or by question) and take the results-file shape; a row with ``error`` fails that
case. ``answer_from`` (the noise test) calls ``contexts_answer(question, contexts)`` when one is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.targets import Target, parse_output


class FakeTarget(Target):
    kind = "fake"

    def __init__(self, rows: Mapping[str, Mapping[str, Any]], *, contexts_answer: Callable[[str, list[str]], str] | None = None,
                 concurrency: int = 1) -> None:
        self.rows = rows
        self.contexts_answer = contexts_answer
        self.concurrency = concurrency
        self.asked: list[str] = []  # case ids, in the order they were asked
        self.answered_from: list[tuple[str, list[str]]] = []  # (case id, contexts) of every answer_from call

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        self.asked.append(case.id)
        row = self.rows.get(case.id, self.rows.get(case.question))
        if row is None:
            return TargetOutput.failed(case.id, "the fake target has no row for this case")
        if row.get("error"):
            return TargetOutput.failed(case.id, str(row["error"]), row.get("latency_ms"))
        return parse_output(case.id, dict(row), latency_ms=row.get("latency_ms"))

    @property
    def answers_from_contexts(self) -> bool:
        return self.contexts_answer is not None

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        self.answered_from.append((case.id, list(contexts)))
        if self.contexts_answer is None:
            return Answer(None, "the fake target has no contexts_answer")
        return Answer(self.contexts_answer(case.question, list(contexts)))
