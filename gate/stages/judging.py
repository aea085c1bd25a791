"""The judging step the generation and robustness stages share: a ``JudgeSession`` (the engines a stage needs, their
one client, the cache) and cache-then-judge (every distinct input judged once, fresh scores stored the moment they
arrive, errors never cached).

A score that cannot be computed comes back as the reason it failed (a string): never NaN, never 0, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gate.core.catalog import EngineMetric
from gate.core.model import GoldenCase, TargetOutput
from gate.core.redact import Redactor
from gate.core.report import Usage
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.judges import Engine, JudgeBudgetExceeded, JudgeError, JudgeInput, JudgeSettings, checked_score
from gate.judges.keys import ScoreSource
from gate.stages.context import JudgeProgress, StageContext

if TYPE_CHECKING:
    from gate.config.spec import Spec
    from gate.judges.cache import ScoreCache
    from gate.judges.client import JudgeClient

Result = float | str  # a score, or why there is none
OnResult = Callable[["Task", Result], None]


@dataclass
class Task:
    """One (case, metric) to score: ``key`` is its cache key."""

    case_id: str
    scored: EngineMetric
    item: JudgeInput
    key: str


def build_engines(names: set[str], settings: JudgeSettings | None, criteria: dict[str, str],
                  cache: ScoreCache | None = None) -> tuple[dict[str, Engine], JudgeClient | None]:
    """The engines a stage needs, sharing one JudgeClient (returned second, None without LLM engines). ``cache``: where
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


class JudgeSession:
    """The engines one stage judges with, their shared client (None without an LLM engine), the cache, and the run's
    secrets (``redactor``: no LLM engine's input holds one)."""

    def __init__(self, engines: dict[str, Engine], client: JudgeClient | None, settings: JudgeSettings | None,
                 cache: ScoreCache, redactor: Redactor | None = None) -> None:
        self.engines, self.client, self.settings, self.cache = engines, client, settings, cache
        self.redactor = redactor or Redactor()
        self._last: tuple[JudgeInput, JudgeInput] | None = None  # the last input redacted (a case's, for each metric)

    @classmethod
    def open(cls, names: set[str], ctx: StageContext, criteria: Mapping[str, str] | None = None) -> JudgeSession:
        engines, client = (ctx.engines or build_engines)(names, ctx.judge, dict(criteria or {}), ctx.cache)
        return cls(engines, client, ctx.judge, ctx.cache, ctx.redactor)

    @property
    def model(self) -> str:
        return self.settings.model if self.settings is not None else ""

    def usage(self) -> Usage:
        return self.client.usage() if self.client is not None else {"calls": 0}

    @property
    def budget_exceeded(self) -> bool:
        return self.client is not None and self.client.budget_exceeded

    def needs(self, scored: EngineMetric) -> set[str]:
        return self.engines[scored.engine].needs(scored.metric)

    def task(self, case_id: str, scored: EngineMetric, item: JudgeInput) -> Task:
        """The task with its cache key: the judge's model and temperature count only for LLM engines. An LLM engine's
        input is redacted first (no secret of the run reaches a prompt), and its key is the redacted input's, so the
        cache keeps no secret and a re-run finds it; the offline engine scores the texts as they are, in process."""
        engine = self.engines[scored.engine]
        llm = self.settings if scored.engine != "offline" else None
        if llm is not None:
            item = self.redacted(item)
        source = ScoreSource(engine.name, engine.version, scored.metric, llm.model if llm else "", llm.temperature if llm else 0.0,
                             engine.prompt_fingerprint(scored.metric))
        key = self.cache.key(source, item)
        return Task(case_id, scored, item, key)

    def redacted(self, item: JudgeInput) -> JudgeInput:
        """``item`` with the run's secrets redacted from its question, answer, contexts and ground truth."""
        if self._last is not None and self._last[0] is item:
            return self._last[1]
        out = redact_input(self.redactor, item)
        self._last = (item, out)
        return out

    def split_cached(self, tasks: Sequence[Task]) -> tuple[dict[str, float], list[Task]]:
        """(the cached scores by key, the tasks still to judge: one per distinct key, so identical inputs are judged
        once)."""
        cached = self.cache.get_many([t.key for t in tasks])
        return cached, list({t.key: t for t in tasks if t.key not in cached}.values())

    def store(self, task: Task, result: Result) -> None:
        """Put a fresh score in the cache the moment it arrives (errors never): a run killed or stopped by its deadline
        keeps every score it paid for."""
        if isinstance(result, float):
            self.cache.put(task.key, result, {"engine": task.scored.engine, "metric": task.scored.metric, "model": self.model})

    async def judge(self, tasks: Sequence[Task], *, on_result: OnResult | None = None,
                    deadline: Deadline = NO_DEADLINE) -> dict[int, Result]:
        """Score the tasks (gate.stages.judging.judge_tasks), twice the judge's concurrency started at once: that keeps
        its slots busy while a task waits between its calls (a metric makes several in turn)."""
        limit = 2 * max(1, self.settings.concurrency) if self.settings is not None else None
        return await judge_tasks(tasks, self.engines, on_result=on_result, deadline=deadline, in_flight=limit)

    async def aclose(self) -> None:
        for e in self.engines.values():
            await e.aclose()
        if self.client is not None:
            await self.client.aclose()


def ticking(progress: JudgeProgress | None, stage: str, then: OnResult | None = None) -> OnResult | None:
    """An on_result callback that tells ``progress`` of each result (and calls ``then``)."""
    if progress is None:
        return then

    def tick(task: Task, result: Result) -> None:
        if then is not None:
            then(task, result)
        progress.done(stage)

    return tick


def judge_input(case: GoldenCase, out: TargetOutput) -> JudgeInput:
    """What a metric judges for one case, as the target answered (JudgeSession.task redacts it for an LLM engine)."""
    return JudgeInput(question=case.question, answer=out.answer or "", contexts=tuple(out.contexts), ground_truth=case.ground_truth)


def redact_input(redactor: Redactor, item: JudgeInput) -> JudgeInput:
    """``item`` with every text redacted (itself when there is nothing to remove)."""
    if not redactor:
        return item
    gt = item.ground_truth
    out = JudgeInput(question=redactor(item.question), answer=redactor(item.answer),
                     contexts=tuple(redactor(c) for c in item.contexts), ground_truth=None if gt is None else redactor(gt))
    return item if out == item else out


def missing_input(needs: set[str], item: JudgeInput) -> str | None:
    """Why ``item`` cannot be judged for a metric that needs ``needs``, if it cannot."""
    if not item.answer.strip():
        return "the target gave no answer"
    if "contexts" in needs and not item.contexts:
        return "the target returned no contexts"
    if "ground_truth" in needs and not item.ground_truth:
        return "the golden case has no ground_truth"
    return None


async def judge_tasks(tasks: Sequence[Task], engines: Mapping[str, Engine], *, on_result: OnResult | None = None,
                      deadline: Deadline = NO_DEADLINE, in_flight: int | None = None) -> dict[int, Result]:
    """Score every task concurrently (the client's semaphore bounds the calls). index -> score or reason. ``on_result``
    sees each result as it arrives; when the deadline comes, the tasks still running are cancelled and end as
    "deadline reached". ``in_flight`` bounds the tasks started at once, so that tasks finish one after another
    (and reach the cache) instead of all advancing together and none finishing before a kill or the deadline."""
    import asyncio  # here: a stage that judges nothing (the answer checks alone) does not load the event loop

    gate = asyncio.Semaphore(in_flight) if in_flight else None

    async def one(i: int, task: Task) -> tuple[int, Result]:
        if gate is None:
            return await scored(i, task)
        async with gate:
            return await scored(i, task)

    async def scored(i: int, task: Task) -> tuple[int, Result]:
        result = await score_one(engines[task.scored.engine], task)
        if on_result is not None:
            on_result(task, result)
        return i, result

    if not tasks:
        return {}
    running: list[asyncio.Future[tuple[int, Result]]] = []
    # one task at a time, with a turn of the loop between: a task prepares its first prompt (milliseconds of CPU in
    # the engine) and sends it before the next one starts, so the first calls are on the wire at once instead of
    # after every started task's preparation (0.3 s for 32 ragas tasks); no wait on the judge (the deadline is below)
    for i, t in enumerate(tasks):
        running.append(asyncio.ensure_future(one(i, t)))
        await asyncio.sleep(0)
    done, pending = await asyncio.wait(running, timeout=deadline.left())
    for p in pending:
        p.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    results = dict(f.result() for f in done if not f.cancelled())
    return {i: results.get(i, REACHED) for i in range(len(tasks))}


async def score_one(engine: Engine, task: Task) -> Result:
    """One task's score, or the reason there is none (a library bug for one case must not lose the others)."""
    try:
        value = await engine.score(task.scored.metric, task.item)
        return checked_score(value, task.scored.metric, engine=task.scored.engine, no_score=f"the engine returned {value!r}, not a score")
    except JudgeBudgetExceeded as exc:
        return f"not judged: {exc}"
    except JudgeError as exc:
        return str(exc) or type(exc).__name__
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def open_cache(spec: Spec, use_cache: bool) -> ScoreCache:
    """The judge cache the spec names, or a cache that stores nothing (--no-cache, cache.enabled: false)."""
    from gate.judges.cache import JudgeCache, NullCache

    if not use_cache or not spec.data["cache"]["enabled"]:
        return NullCache()
    return JudgeCache(spec.resolve(spec.data["cache"]["path"]))


def scores_of(tasks: Sequence[Task], session: JudgeSession, ctx: StageContext) -> tuple[dict[str, Result], int]:
    """(each task's score by its case id, the distinct tasks judged: not in the cache) for the robustness stage's
    correctness judgings: the cached ones looked up, the rest judged (fresh scores stored) under the run's deadline,
    the progress told; the session closed after."""
    import asyncio

    cached, todo = session.split_cached(tasks)
    progress = ctx.progress

    async def judge_all() -> dict[int, Result]:
        try:
            return await session.judge(todo, on_result=ticking(progress, "robustness", session.store), deadline=ctx.deadline)
        finally:
            await session.aclose()

    if progress is not None and todo and any(t.scored.engine != "offline" for t in todo):
        progress.start("robustness", len(todo), usage=session.client.usage if session.client else None)
    fresh = asyncio.run(judge_all()) if todo else {}
    by_key: dict[str, Result] = {**cached, **{t.key: fresh[i] for i, t in enumerate(todo)}}
    return {t.case_id: by_key[t.key] for t in tasks}, len(todo)
