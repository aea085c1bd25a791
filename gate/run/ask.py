"""Asking the target: once per golden case, its answers kept for every stage (nothing is asked twice)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gate.core.errors import RunError
from gate.core.model import GoldenCase, TargetOutput
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.targets import Target, shape_said


def collect_outputs(
    target: Target, cases: Sequence[GoldenCase], k: int, on_done: Callable[[TargetOutput], None] | None = None,
    deadline: Deadline = NO_DEADLINE, on_all: Callable[[list[TargetOutput]], None] | None = None,
) -> dict[str, TargetOutput]:
    """Ask the target once per case (``target.concurrency`` at a time). Never raises per case, but for a target that
    cannot be reached at all (``fail_fast``) or whose answer has the wrong shape (``fail_fast`` or
    ``ask_first_alone``): its first case is asked alone, and if no attempt even connected, or its answer had the wrong
    shape, the run stops there (RunError naming the URL, or what was received and what to set) instead of asking
    every case in vain. Cases not started by the deadline end as errors saying so. A target whose answers are all in
    memory (``in_memory``: a results file) is read in one pass, said to ``on_all`` (else ``on_done``, one by one)."""
    if target.in_memory and not deadline.reached():
        read = {c.id: target.ask(c, k) for c in cases}
        if on_all is not None:
            on_all(list(read.values()))
        elif on_done is not None:
            for out in read.values():
                on_done(out)
        return read

    def ask(case: GoldenCase) -> TargetOutput:
        if deadline.reached():
            out = TargetOutput.failed(case.id, REACHED)
        else:
            try:
                out = target.ask(case, k)
            except Exception as exc:  # a bug in a target must not lose the other cases
                out = TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}")
        if on_done:
            on_done(out)
        return out

    outputs: dict[str, TargetOutput] = {}
    rest = list(cases)
    if (target.fail_fast or target.ask_first_alone) and rest:
        first = ask(rest.pop(0))
        outputs[first.case_id] = first
        if target.unreachable:
            raise RunError(f"the target cannot be reached: {target.unreachable}",
                           hint="start the service (or fix target.http.url) and run again; no other case was asked")
        if target.refused:
            raise RunError(f"the target refused the first case ({first.case_id}), as it would every case: {target.refused}",
                           hint="check target.http.url (its path), the headers (credentials) and the request mapping "
                                "(target.http.request; preset: langserve for a LangServe chain); no other case was asked")
        if target.wrong_shape:
            raise RunError(f"the target returned the wrong shape for case {first.case_id}: {shape_said(target.wrong_shape)}",
                           hint=f"{target.shape_hint or 'fix what the target returns'}; no other case was asked")
    if target.concurrency <= 1 or len(rest) <= 1:
        outputs.update((c.id, ask(c)) for c in rest)
        return outputs
    from concurrent.futures import ThreadPoolExecutor  # a target asked several cases at a time only

    with ThreadPoolExecutor(max_workers=min(target.concurrency, len(rest)), thread_name_prefix="rag-gate-target") as pool:
        outputs.update((out.case_id, out) for out in pool.map(ask, rest))
    return outputs
