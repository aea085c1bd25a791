"""The target the spec names: exactly one of results, http, python."""

from __future__ import annotations

from collections.abc import Sequence

from gate.config.spec import Spec
from gate.core.model import GoldenCase
from gate.deadline import NO_DEADLINE, Deadline
from gate.targets import Target


def make_target(spec: Spec, cases: Sequence[GoldenCase], deadline: Deadline = NO_DEADLINE) -> Target:
    """The target the spec names (exactly one of results, http, python)."""
    cfg = spec.target
    if "results" in cfg:
        from gate.targets.results import ResultsFileTarget

        # the judged stages read the passages' texts; the retrieval stage only their ids, or their texts with match.level text
        return ResultsFileTarget.read(spec.resolve(cfg["results"]), cases, texts=spec.stages.reads_texts)
    if "http" in cfg:
        from gate.targets.http import HttpTarget

        return HttpTarget(cfg["http"], secrets=spec.secrets, deadline=deadline)
    from gate.targets.python import PythonTarget

    return PythonTarget.from_spec(spec)
