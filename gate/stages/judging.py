"""The judging step the generation and robustness stages share: judge settings, the engines a run needs,
and cache-then-judge (every distinct input judged once, fresh scores stored, errors never cached).

A score that cannot be computed comes back as the reason it failed (a string): never NaN, never 0,
never dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gate.core.catalog import EngineMetric
from gate.core.model import GoldenCase, TargetOutput
from gate.core.report import Usage
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.judges import Engine, JudgeBudgetExceeded, JudgeError, JudgeInput, JudgeSettings, checked_score

if TYPE_CHECKING:
    from gate.config.spec import Spec
    from gate.judges.cache import ScoreCache
    from gate.judges.client import JudgeClient


def judge_settings(judge: Mapping[str, Any] | None, env: Mapping[str, str], no_judge: str = "no judge configured (add judge: to the spec)",
                   secrets: Sequence[str] = ()) -> tuple[JudgeSettings | None, str | None]:
    """(settings, None), or (None, why the judge cannot be used in this run)."""
    if not judge:
        return None, no_judge
    key = None
    if judge.get("api_key_env"):
        key = env.get(judge["api_key_env"]) or None
        if key is None:
            return None, f"the judge's key {judge['api_key_env']} is not set in this run (a fork's pull request has no secrets)"
    return JudgeSettings(
        base_url=judge["base_url"], model=judge["model"], api_key=key, temperature=float(judge.get("temperature", 0)),
        timeout_s=float(judge.get("timeout_s", 60)), max_retries=int(judge.get("max_retries", 3)),
        concurrency=int(judge.get("concurrency", 16)), embeddings_model=judge.get("embeddings_model"),
        max_judge_calls=judge.get("max_judge_calls"), prices=dict(judge.get("prices", {})), max_tokens=judge.get("max_tokens"),
        secrets=tuple(secrets),
    ), None


@dataclass
class Task:
    """One (case, metric) to score: ``key`` is its cache key."""

    case_id: str
    plan: EngineMetric
    item: JudgeInput
    key: str


EngineFactory = Callable[..., "tuple[dict[str, Engine], JudgeClient | None]"]


NOISE_ANSWERS = "the noise test"  # the robustness stage asking the target again (unit "answer")


class JudgeProgress(Protocol):
    """Where a judge stage says how far it is: ``start`` with the scores it will judge (and, with an LLM judge, the
    client's usage so far: calls, tokens, cost, read as they accrue), ``done`` after each. ``unit`` "answer": the
    stage asks the target (the noise test's answers from given passages), not the judge."""

    def start(self, stage: str, total: int, usage: Callable[[], Usage] | None = None, unit: str = "score") -> None: ...

    def done(self, stage: str) -> None: ...


def ticking(progress: JudgeProgress | None, stage: str,
            then: Callable[[Task, float | str], None] | None = None) -> Callable[[Task, float | str], None] | None:
    """An on_result callback that tells ``progress`` of each result (and calls ``then``)."""
    if progress is None:
        return then

    def tick(task: Task, result: float | str) -> None:
        if then is not None:
            then(task, result)
        progress.done(stage)

    return tick


def build_engines(names: set[str], settings: JudgeSettings | None, criteria: dict[str, str],
                  cache: ScoreCache | None = None) -> tuple[dict[str, Engine], JudgeClient | None]:
    """The engines a run needs, sharing one JudgeClient (returned second, None without LLM engines). ``cache``: where
    the deepeval engine keeps its criteria's evaluation steps."""
    engines: dict[str, Engine] = {}
    client = None
    if "offline" in names:
        from gate.judges.offline import OfflineEngine

        engines["offline"] = OfflineEngine()
    llm = names - {"offline"}
    if llm and settings is not None:
        from gate.judges import telemetry_off

        telemetry_off()
        from gate.judges.client import JudgeClient

        client = JudgeClient(settings)
        if "ragas" in llm:
            from gate.judges.ragas_engine import RagasEngine

            engines["ragas"] = RagasEngine(client, settings, max_tokens=settings.max_tokens)
        if "deepeval" in llm:
            from gate.judges.deepeval_engine import DeepEvalEngine

            engines["deepeval"] = DeepEvalEngine(client, settings, criteria, max_tokens=settings.max_tokens, cache=cache)
    return engines, client


def judge_input(case: GoldenCase, out: TargetOutput) -> JudgeInput:
    return JudgeInput(question=case.question, answer=out.answer or "", contexts=tuple(out.contexts), ground_truth=case.ground_truth)


def missing_input(needs: set[str], item: JudgeInput) -> str | None:
    """Why ``item`` cannot be judged for a metric that needs ``needs``, if it cannot."""
    if not item.answer.strip():
        return "the target gave no answer"
    if "contexts" in needs and not item.contexts:
        return "the target returned no contexts"
    if "ground_truth" in needs and not item.ground_truth:
        return "the golden case has no ground_truth"
    return None


def task_key(cache: ScoreCache, engine: Engine, plan: EngineMetric, settings: JudgeSettings | None, item: JudgeInput) -> str:
    """The cache key of one (engine, metric, input): the judge's model and temperature count only for LLM engines."""
    llm = plan.engine != "offline" and settings is not None
    return cache.key(engine.name, engine.version, plan.metric, settings.model if llm and settings else "",
                     settings.temperature if llm and settings else 0.0, engine.prompt_fingerprint(plan.metric), item)


def split_cached(tasks: Sequence[Task], cache: ScoreCache) -> tuple[dict[str, float], list[Task]]:
    """(the cached scores by key, the tasks still to judge: one per distinct key, so identical
    inputs are judged once)."""
    cached = cache.get_many([t.key for t in tasks])
    return cached, list({t.key: t for t in tasks if t.key not in cached}.values())


def in_flight(settings: JudgeSettings | None) -> int | None:
    """How many tasks to start at once: twice the judge's concurrency keeps its slots busy while a task waits
    between its calls (a metric makes several in turn)."""
    return 2 * max(1, settings.concurrency) if settings is not None else None


def storing(cache: ScoreCache, model: str) -> Callable[[Task, float | str], None]:
    """The callback that puts each fresh score in the cache the moment it arrives (errors never): a run killed or
    stopped by its deadline keeps every score it paid for."""

    def store(task: Task, result: float | str) -> None:
        if isinstance(result, float):
            cache.put(task.key, result, {"engine": task.plan.engine, "metric": task.plan.metric, "model": model})

    return store


async def judge_tasks(tasks: Sequence[Task], engines: Mapping[str, Engine], *, on_result: Callable[[Task, float | str], None] | None = None,
                      deadline: Deadline = NO_DEADLINE, in_flight: int | None = None) -> dict[int, float | str]:
    """Score every task concurrently (the client's semaphore bounds the calls). index -> score or reason. ``on_result``
    sees each result as it arrives; when the deadline comes, the tasks still running are cancelled and end as
    "deadline reached". ``in_flight`` bounds the tasks started at once, so that tasks finish one after another
    (and reach the cache) instead of all advancing together and none finishing before a kill or the deadline."""
    gate = asyncio.Semaphore(in_flight) if in_flight else None

    async def one(i: int, task: Task) -> tuple[int, float | str]:
        if gate is None:
            return await scored(i, task)
        async with gate:
            return await scored(i, task)

    async def scored(i: int, task: Task) -> tuple[int, float | str]:
        result: float | str
        try:
            value = await engines[task.plan.engine].score(task.plan.metric, task.item)
            result = checked_score(value, task.plan.metric, engine=task.plan.engine, no_score=f"the engine returned {value!r}, not a score")
        except JudgeBudgetExceeded as exc:
            result = f"not judged: {exc}"
        except JudgeError as exc:
            result = str(exc) or type(exc).__name__
        except Exception as exc:  # a library bug for this case must not lose the others
            result = f"{type(exc).__name__}: {exc}"
        if on_result is not None:
            on_result(task, result)
        return i, result

    if not tasks:
        return {}
    running: list[asyncio.Future[tuple[int, float | str]]] = []

    async def start_all() -> None:
        # one task at a time, with a turn of the loop between: a task prepares its first prompt (milliseconds of
        # CPU in the engine) and sends it before the next one starts, so the first calls are on the wire at once
        # instead of after every started task's preparation (0.3 s for 32 ragas tasks)
        for i, t in enumerate(tasks):
            running.append(asyncio.ensure_future(one(i, t)))
            await asyncio.sleep(0)

    await start_all()  # one turn of the loop per task: no wait on the judge (the deadline applies below)
    done, pending = await asyncio.wait(running, timeout=deadline.left())
    for p in pending:
        p.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    results = dict(f.result() for f in done if not f.cancelled())
    return {i: results.get(i, REACHED) for i in range(len(tasks))}


async def close_all(engines: Mapping[str, Engine], client: JudgeClient | None) -> None:
    for e in engines.values():
        await e.aclose()
    if client is not None:
        await client.aclose()


COUNTERS = ("calls", "chat_calls", "embedding_calls", "retried", "prompt_tokens", "completion_tokens", "embedding_tokens",
            "cost", "max_in_flight", "cache_hits", "cache_misses")


def merge_usage(*usages: Mapping[str, Any]) -> Usage:
    """Sum the counters of several judge clients' usage (cost stays absent when none has one); other keys are left out."""
    out: dict[str, Any] = {}
    for u in usages:
        for k in COUNTERS:
            v = u.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            out[k] = out.get(k, 0) + v
    return out  # type: ignore[return-value]


def open_cache(spec: Spec, use_cache: bool) -> ScoreCache:
    """The judge cache the spec names, or a cache that stores nothing (--no-cache, cache.enabled: false)."""
    from gate.judges.cache import JudgeCache, NullCache

    if not use_cache or not spec.data["cache"]["enabled"]:
        return NullCache()
    return JudgeCache(spec.resolve(spec.data["cache"]["path"]))
