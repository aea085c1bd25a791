"""``rag-gate validate --ping``: one question to the target and one call to the judge, to say before a run whether
both answer and how fast. The target is asked the golden set's first case (as a run would); the judge gets one
refusal check (rag-gate's own JSON prompt, the one the rejection test uses) through the run's client, with its
retries, timeout and budget."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping

from gate.config.spec import Spec
from gate.core.model import GoldenCase


def ping_target(spec: Spec, cases: list[GoldenCase]) -> tuple[bool, str]:
    """(reachable, the line to print)."""
    from gate.targets.factory import make_target

    if not cases:
        return False, "target: not asked (the golden set is empty)"
    with make_target(spec, cases) as target:
        started = time.perf_counter()
        out = target.ask(cases[0], spec.target_k)
        took = (time.perf_counter() - started) * 1000
    if out.error is not None:
        return False, f"target ({target.kind}): NOT reachable for case {cases[0].id}: {out.error}"
    answered = "an answer" if out.answer else "no answer"
    return True, f"target ({target.kind}): answered case {cases[0].id} in {took:.0f} ms ({len(out.retrieved)} passages, {answered})"


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
