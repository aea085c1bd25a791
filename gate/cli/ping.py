"""``rag-gate validate --ping``: one question to the target and one call to the judge, to say before a run whether
both answer and how fast. The target is asked the golden set's first case (as a run would) and, when the robustness
stage runs the noise test, to answer it from that case's own contexts (the noise test's call); the judge gets one
refusal check (rag-gate's own JSON prompt, the one the rejection test uses) through the run's client, with its
retries, timeout and budget."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gate.config.spec import Spec
from gate.core.model import GoldenCase

if TYPE_CHECKING:
    from gate.targets import Target


NO_PASSAGES = {"http": "target.http.response.retrieved; a LangServe chain's output.context or output.source_documents"}
FIXED_CONTEXT = "rag-gate checks that this service answers from the contexts it is given."  # when a case has none


def ping_target(spec: Spec, cases: list[GoldenCase]) -> tuple[bool, str]:
    """(every call answered, the lines to print): the answer call a run makes first, and the noise test's call (the
    answer from given contexts) when the spec's robustness stage runs the noise test and the target can make it."""
    from gate.deadline import Deadline
    from gate.targets.factory import make_target

    if not cases:
        return False, "target: not asked (the golden set is empty)"
    case = cases[0]
    with make_target(spec, cases, Deadline(spec.data.get("max_duration_s"))) as target:  # a call that hangs ends there, as in a run
        started = time.perf_counter()
        out = target.ask(case, spec.target_k)
        took = (time.perf_counter() - started) * 1000
        if out.error is not None:
            return False, f"target ({target.kind}): {failed(target, out.error)} for case {case.id}: {_said(target, out.error)}"
        answered = "an answer" if out.answer else "no answer"
        needed = spec.stages.retrieval is not None and not out.retrieved
        none = f": the retrieval metrics need them ({NO_PASSAGES.get(target.kind, 'retrieved')})" if needed else ""
        lines = [f"target ({target.kind}): answered case {case.id} in {took:.0f} ms ({len(out.retrieved)} passages, {answered}){none}"]
        robustness = spec.stages.robustness
        if robustness is None or robustness.noise is None or not target.answers_from_contexts:
            return True, lines[0]
        contexts = list(out.contexts) or [FIXED_CONTEXT]
        started = time.perf_counter()
        got = target.answer_from(case, contexts)
        took = (time.perf_counter() - started) * 1000
    call = f"target ({target.kind}), the noise test's call (an answer from {len(contexts)} given contexts)"
    if got.error is not None:
        return False, "\n".join([*lines, f"{call}: {failed(target, got.error)} for case {case.id}: {_said(target, got.error)}"])
    return True, "\n".join([*lines, f"{call}: answered case {case.id} in {took:.0f} ms"])


def _said(target: Target, error: str) -> str:
    """A failed call's error after the words ``failed`` gives (which say "returned the wrong shape" already)."""
    from gate.targets import WRONG_SHAPE, shape_said

    return shape_said(error) if failed(target, error) == WRONG_SHAPE else error


def failed(target: Target, error: str) -> str:
    """How a failed ping call is said: a body of the wrong shape is no service that cannot be reached."""
    if target.wrong_shape is not None or "returned the wrong shape" in error:
        return "returned the wrong shape"
    if target.unreachable is not None:
        return "NOT reachable"
    status = target.error_status
    if status is not None and 400 <= status < 500:
        return f"reached, but it answered HTTP {status}"
    return "reached, but the call failed" if target.kind == "http" else "failed"


def ping_judge(spec: Spec, env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """(reachable, the line to print); (True, ...) with nothing asked when the spec has no judge."""
    from gate.judges import resolve_judge

    if not spec.judge:
        return True, "judge: none configured (the judge metrics would be skipped)"
    settings, why_not = resolve_judge(spec.judge, os.environ if env is None else env, secrets=spec.secrets)
    if settings is None:
        return False, f"judge: not asked: {why_not}"
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import classify_refusal

    telemetry_off()

    async def ask() -> tuple[bool, str]:
        client = JudgeClient(settings)
        started = time.perf_counter()
        try:
            refuses = await classify_refusal(client, settings, "What is the capital of Atlantis?", "I don't know.")
            took = (time.perf_counter() - started) * 1000
            sense = "and read the answer right" if refuses else "but called a refusal an answer: check the model"
            return True, f"judge: {settings.model} answered a refusal check in {took:.0f} ms, {sense}"
        except JudgeError as exc:  # worded by the client, without secrets
            return False, f"judge: NOT reachable or not usable: {exc}"
        finally:
            await client.aclose()

    return asyncio.run(ask())
