"""The target the spec names: exactly one of results, http, python, traces."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from gate.config.spec import Spec
from gate.core.model import GoldenCase, TargetOutput
from gate.deadline import NO_DEADLINE, Deadline
from gate.targets import Target

if TYPE_CHECKING:
    from gate.targets.results import Read


def make_target(spec: Spec, cases: Sequence[GoldenCase], deadline: Deadline = NO_DEADLINE,
                traced: Mapping[str, TargetOutput] | None = None, prefetched: Callable[[], Read] | None = None) -> Target:
    """The target the spec names (exactly one of results, http, python, traces: ``traced`` holds the sampled traces'
    outputs, read by gate.run.traces; ``prefetched``: the results file, read while the golden set was)."""
    cfg = spec.target
    if "traces" in cfg:
        from gate.targets.traces import TracesTarget

        return TracesTarget(traced or {})
    results = spec.results_file
    if results is not None:
        from gate.targets.results import ResultsFileTarget

        # the judged stages read the passages' texts; the retrieval stage only their ids, or their texts with match.level text
        path, id_key = results
        return ResultsFileTarget.read(path, cases, texts=spec.stages.reads_texts, id_key=id_key, prefetched=prefetched)
    if "http" in cfg:
        from gate.targets.http import HttpTarget

        return HttpTarget(cfg["http"], secrets=spec.secrets, deadline=deadline)
    from gate.targets.python import PythonTarget

    return PythonTarget.from_spec(spec, deadline)
