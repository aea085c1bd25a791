"""What a judged stage reports its progress to (the run's progress bar implements it; gate.run.options extends it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gate.core.report import Usage


class JudgeProgress(Protocol):
    """Where a judged stage says how far it is: ``start`` with the scores it will judge (and, with an LLM judge, the
    client's usage so far: calls, tokens, cost, read as they accrue), ``done`` after each. ``unit`` "answer": the
    stage asks the target (the noise test's answers from given passages), not the judge."""

    def start(self, stage: str, total: int, usage: Callable[[], Usage] | None = None, unit: str = "score") -> None: ...

    def done(self, stage: str) -> None: ...
