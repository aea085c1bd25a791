"""The traces target: production traffic as its tracing tool recorded it. Nothing is asked; each sampled trace is a
case whose retrieved passages and answer are the ones the system gave its user (gate.run.traces reads and samples)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from gate.core.model import GoldenCase, TargetOutput
from gate.targets import Target


class TracesTarget(Target):
    """Answers each case with its trace's recorded output."""

    kind: ClassVar[str] = "traces"

    def __init__(self, outputs: Mapping[str, TargetOutput]) -> None:
        self.outputs = outputs

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        out = self.outputs.get(case.id)
        return out if out is not None else TargetOutput.failed(case.id, "no trace for this case")
