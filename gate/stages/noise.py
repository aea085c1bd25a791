"""The robustness stage's noise test: does the answer survive distractor passages?

For each sampled answerable case the target answers from its own retrieved contexts (clean),
then from the same contexts with k distractors injected (noisy); both answers are judged
correct or not against ground_truth. ``noise_robustness`` = correct noisy / correct clean
(the seed's ratio).

    1. distractors   corpus hard negatives, a file, or judge-written passages (cached as text)
    2. answers       the target answers from the clean and the noisy contexts
    3. correctness   both answers scored against ground_truth (judge or offline), cached

Offline correctness is not plain token F1 with ground_truth: a distractor written like the ground
truth ("The capital of region 17 is Rowan" against "The capital of region 0 is Cedar") shares most of
its words and would pass. It scores the answer-bearing words (those of ground_truth the question does
not give) and requires ground_truth's numbers: gate.core.textmatch.answer_bearing_f1.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gate.core.catalog import EngineMetric
from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.core.ranking import id_mapper
from gate.core.report import CaseResult, Distractor, NoiseInfo, Usage
from gate.core.sampling import sample_from
from gate.core.textmatch import squad_tokens, text_matches
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.judges import JudgeInput, JudgeSettings
from gate.stages.judging import (
    NOISE_ANSWERS,
    JudgeProgress,
    Task,
    build_engines,
    close_all,
    in_flight,
    judge_tasks,
    merge_usage,
    split_cached,
    storing,
    task_key,
    ticking,
)

if TYPE_CHECKING:
    from gate.judges.cache import ScoreCache
    from gate.targets import ContextAnswerer

# noise.method in the report when correctness is offline (gate.core.textmatch.answer_bearing_f1)
OFFLINE_METHOD = "offline (token F1 on the words of ground_truth not in the question; its numbers required)"

CORRECTNESS_CRITERION = (
    "The actual output gives the same answer as the expected output (ground truth) to the question asked: the facts, "
    "numbers and conclusion agree; wording may differ; an answer that contradicts it or refuses is wrong."
)


# ---------------------------------------------------------------------------------- distractors (pure)


def corpus_candidates(outputs: Mapping[str, TargetOutput]) -> dict[str, str]:
    """Every passage (id -> text) the target retrieved for any question: the pool of hard negatives."""
    pool: dict[str, str] = {}
    for out in outputs.values():
        for doc in out.retrieved:
            if doc.text and doc.id not in pool:
                pool[doc.id] = doc.text
    return pool


def pick_corpus_distractors(
    case: GoldenCase, contexts: Sequence[str], pool: Mapping[str, str], k: int, match: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The k passages of the pool closest to the question in words, never a relevant one (at the
    matching level the retrieval stage uses) nor one already among the case's contexts."""
    to_id = id_mapper(match)
    relevant = {to_id(r) for r in case.relevant} | set(case.relevant)
    q = set(squad_tokens(case.question))
    own = set(contexts)
    scored = []
    by_text = match.get("level") == "text"
    min_overlap = float(match.get("min_overlap", 0.8))
    for doc_id, text in pool.items():
        if doc_id in relevant or to_id(doc_id) in relevant or text in own:
            continue
        if by_text and any(text_matches(t, text, min_overlap) for t in case.relevant_texts):
            continue  # a passage that answers the question is no distractor
        words = set(squad_tokens(text))
        overlap = len(q & words) / (len(q | words) or 1)
        scored.append((-overlap, doc_id, text))
    scored.sort()
    return [(doc_id, text) for _, doc_id, text in scored[:k]]


def inject(contexts: Sequence[str], distractors: Sequence[str], position: str, rng: random.Random) -> list[str]:
    """The contexts with the distractors placed at the front, the back, or one random place."""
    if position == "front":
        return [*distractors, *contexts]
    if position == "back":
        return [*contexts, *distractors]
    at = rng.randint(0, len(contexts))
    return [*contexts[:at], *distractors, *contexts[at:]]


def correctness_plan(cfg: Mapping[str, Any]) -> EngineMetric:
    """ragas answer_correctness, a deepeval GEval correctness criterion, or offline answer-bearing token F1:
    F1 on the ground truth's words that the question does not give, its numbers required (plain token F1
    with the ground truth, which template-alike wrong answers pass, is not used: see
    gate.core.textmatch.answer_bearing_f1)."""
    c = cfg.get("correctness", {})
    if c.get("method", "offline") != "judge":
        return EngineMetric("correctness", "offline", "answer_bearing_f1")
    if c.get("engine", "ragas") == "deepeval":
        return EngineMetric("correctness", "deepeval", "correctness")
    return EngineMetric("correctness", "ragas", "answer_correctness")


# ---------------------------------------------------------------------------------- calls


def answer_all(target: ContextAnswerer, jobs: Sequence[tuple[GoldenCase, list[str]]], concurrency: int,
               deadline: Deadline = NO_DEADLINE, on_done: Callable[[], None] | None = None) -> list[Answer]:
    """The target's answer to each (case, contexts), ``concurrency`` at a time (``on_done`` told after each). Never
    raises per job."""

    def one(job: tuple[GoldenCase, list[str]]) -> Answer:
        if deadline.reached():
            return Answer(None, REACHED)
        try:
            return target.answer_from(job[0], job[1])
        except Exception as exc:  # a bug in a target must not lose the other cases
            return Answer(None, f"{type(exc).__name__}: {exc}")
        finally:
            if on_done is not None:
                on_done()

    workers = max(1, min(concurrency, len(jobs) or 1))
    if workers == 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-gate-noise") as pool:
        return list(pool.map(one, jobs))


async def generate_distractors(cases: Sequence[GoldenCase], contexts: Mapping[str, list[str]], k: int, settings: JudgeSettings,
                               cache: ScoreCache) -> tuple[dict[str, list[str] | str], Usage]:
    """k judge-written conflicting passages per case (cached as text). case id -> passages, or the reason it failed."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import DISTRACTOR, distractor_payload, generate_distractor, prompt_fingerprint

    telemetry_off()
    client = JudgeClient(settings)
    fp = prompt_fingerprint(DISTRACTOR)

    async def one(case: GoldenCase) -> tuple[str, list[str] | str]:
        out: list[str] = []
        context: str | None = contexts[case.id][0] if contexts[case.id] else None
        try:
            for _ in range(k):  # each passage asked to differ from those already written
                payload = distractor_payload(case.question, case.ground_truth or "", context, avoid=out)
                key = cache.key_text("distractor", fp, settings.model, settings.temperature, payload)
                text = cache.get_text(key)
                if text is None:  # a secret the judge copied from the context is neither used nor cached
                    text = client.redactor(await generate_distractor(client, settings, case.question, case.ground_truth or "",
                                                                      context, avoid=out))
                    cache.put_text(key, text, {"kind": "distractor", "case": case.id})
                out.append(text)
        except JudgeError as exc:
            return case.id, f"generating a distractor failed: {exc}"
        return case.id, out

    try:
        return dict(await asyncio.gather(*(one(c) for c in cases))), client.usage()
    finally:
        await client.aclose()


# ---------------------------------------------------------------------------------- the test


@dataclass
class NoiseRun:
    """The noise test of one run, as it goes through its three steps."""

    sample: list[GoldenCase]
    contexts: dict[str, list[str]]  # case id -> the target's own contexts
    rows: dict[str, CaseResult]  # case id -> the case's result so far (``error`` set: it stops there)
    k: int
    position: str
    source: str
    usage: Usage = field(default_factory=lambda: cast(Usage, {}))

    def live(self) -> list[GoldenCase]:
        return [c for c in self.sample if self.rows[c.id]["error"] is None]


def choose_distractors(run: NoiseRun, outputs: Mapping[str, TargetOutput], settings: JudgeSettings | None, cache: ScoreCache,
                       match: Mapping[str, Any], precomputed: Mapping[str, Mapping[str, Any]] | None,
                       file_distractors: Mapping[str, list[str]]) -> None:
    """Step 1: each case's distractors (``distractors`` of its row); a case with none errors."""
    chosen: dict[str, list[Distractor]] = {}
    if precomputed is not None:
        for c in run.sample:
            chosen[c.id] = [{"id": None, "text": t} for t in precomputed.get(c.id, {}).get("distractors", [])]
    elif run.source == "corpus":
        pool = corpus_candidates(outputs)
        for c in run.sample:
            chosen[c.id] = [{"id": i, "text": t} for i, t in pick_corpus_distractors(c, run.contexts[c.id], pool, run.k, match)]
    elif run.source == "file":
        for c in run.sample:
            chosen[c.id] = [{"id": None, "text": t} for t in file_distractors.get(c.id, [])[: run.k]]
    else:
        assert settings is not None
        made, run.usage = asyncio.run(generate_distractors(run.sample, run.contexts, run.k, settings, cache))
        for c in run.sample:
            got = made[c.id]
            if isinstance(got, str):
                run.rows[c.id]["error"] = got
                chosen[c.id] = []
            else:
                chosen[c.id] = [{"id": f"generated-{i + 1}", "text": t} for i, t in enumerate(got)]
    for c in run.sample:  # precomputed answers need no distractor text (it is optional on the results line)
        if run.rows[c.id]["error"] is None and not chosen[c.id] and precomputed is None:
            run.rows[c.id]["error"] = "no distractor available for this case"
        run.rows[c.id]["distractors"] = chosen[c.id]


def answer_clean_and_noisy(run: NoiseRun, outputs: Mapping[str, TargetOutput], target: ContextAnswerer | None, concurrency: int,
                           precomputed: Mapping[str, Mapping[str, Any]] | None, seed: int, deadline: Deadline = NO_DEADLINE,
                           progress: JudgeProgress | None = None) -> int:
    """Step 2: the answer from the case's own contexts and from them with the distractors injected; the target calls made."""
    live = run.live()
    if precomputed is not None or target is None:
        for c in live:
            pre = (precomputed or {}).get(c.id)
            row = run.rows[c.id]
            if pre is None:
                row["error"] = "no noise.noisy_answer for this case in the results file"
                continue
            row["clean_answer"] = pre.get("clean_answer", outputs[c.id].answer)
            row["noisy_answer"], row["position"] = pre["noisy_answer"], "(precomputed)"
        return 0
    # one generator per case, seeded by the case: a case's noisy contexts do not depend on which cases come before it
    noisy = {c.id: inject(run.contexts[c.id], [d["text"] or "" for d in run.rows[c.id].get("distractors", [])], run.position,
                          random.Random(f"{seed}\x00{c.id}")) for c in live}
    jobs = [(c, run.contexts[c.id]) for c in live] + [(c, noisy[c.id]) for c in live]
    if progress is not None and jobs:
        progress.start(NOISE_ANSWERS, len(jobs), unit="answer")
    answers = answer_all(target, jobs, concurrency, deadline, None if progress is None else lambda: progress.done(NOISE_ANSWERS))
    for i, c in enumerate(live):
        clean, dirty, row = answers[i], answers[len(live) + i], run.rows[c.id]
        bad = clean.error or dirty.error
        if bad:
            row["error"] = f"the target's answer from contexts failed: {bad}"
            continue
        row["clean_answer"], row["noisy_answer"], row["position"] = clean.text, dirty.text, run.position
    return len(jobs)


def judge_correctness(run: NoiseRun, plan: EngineMetric, settings: JudgeSettings | None, cache: ScoreCache, threshold: float,
                      deadline: Deadline = NO_DEADLINE, progress: JudgeProgress | None = None) -> Usage:
    """Step 3: both answers scored against ground_truth (cached; identical answers judged once); the judge usage."""
    engines, client = build_engines({plan.engine}, settings, {"correctness": CORRECTNESS_CRITERION}, cache)
    engine = engines[plan.engine]
    model = settings.model if settings and plan.engine != "offline" else ""
    tasks: list[Task] = []
    for c in run.live():
        row = run.rows[c.id]
        if not c.ground_truth:
            row["error"] = "the golden case has no ground_truth to judge correctness against"
            continue
        # correctness is judged against ground_truth; both answers get the same (clean) contexts so that
        # identical answers share one cache entry and one judge call
        for which, answer in (("clean", row.get("clean_answer")), ("noisy", row.get("noisy_answer"))):
            item = JudgeInput(question=c.question, answer=answer or "", contexts=tuple(run.contexts[c.id]), ground_truth=c.ground_truth)
            tasks.append(Task(f"{c.id}\x00{which}", plan, item, task_key(cache, engine, plan, settings, item)))
    cached, todo = split_cached(tasks, cache)

    async def judge_all() -> dict[int, float | str]:
        try:
            return await judge_tasks(todo, engines, on_result=ticking(progress, "robustness", storing(cache, model)), deadline=deadline,
                                     in_flight=in_flight(settings))
        finally:
            await close_all(engines, client)

    if progress is not None and todo and plan.engine != "offline":
        progress.start("robustness", len(todo), usage=client.usage if client else None)
    fresh = asyncio.run(judge_all()) if todo else {}
    by_key: dict[str, float | str] = {**cached, **{t.key: fresh[i] for i, t in enumerate(todo)}}
    scores = {t.case_id: by_key[t.key] for t in tasks}
    for c in run.live():
        row = run.rows[c.id]
        for which in ("clean", "noisy"):
            score = scores.get(f"{c.id}\x00{which}")
            if isinstance(score, float):
                row["metrics"][f"{which}_score"] = score
                row[f"{which}_correct"] = score >= threshold  # type: ignore[literal-required]
            else:
                row["error"] = f"judging the {which} answer failed: {score}"
        if row["error"] is None:
            row["flipped"] = bool(row["clean_correct"] and not row["noisy_correct"])
    usage = merge_usage(client.usage() if client is not None else {"calls": 0})
    usage.update({"cache_hits": len(tasks) - len(todo), "cache_misses": len(todo)})
    return usage


def noise_test(
    cfg: Mapping[str, Any], plan: EngineMetric, settings: JudgeSettings | None, cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput], target: ContextAnswerer | None, concurrency: int, cache: ScoreCache,
    match: Mapping[str, Any], precomputed: Mapping[str, Mapping[str, Any]] | None, file_distractors: Mapping[str, list[str]],
    deadline: Deadline = NO_DEADLINE, only: Collection[str] | None = None, progress: JudgeProgress | None = None,
) -> tuple[list[CaseResult], int, NoiseInfo]:
    """Per-case noise rows, the number of target calls made, and how the test ran (with its judge usage).
    ``target`` None: the answers come from ``precomputed`` (a results file's noise.noisy_answer). The sample is drawn
    from every answerable case, whatever the target answered (a failed call is the row's error), then restricted to
    ``only`` (a shard's cases), so it never depends on another shard's outputs."""
    sample = sample_from(cfg.get("sample", {}), [c for c in cases if c.answerable])
    if only is not None:
        sample = [c for c in sample if c.id in only]
    run = NoiseRun(sample=sample, contexts={c.id: list(outputs[c.id].contexts) for c in sample},
                   rows={c.id: {"id": c.id, "metrics": {}, "error": None if outputs[c.id].error is None else
                                "the target call failed for this case"} for c in sample}, k=int(cfg.get("distractors", 2)),
                   position=cfg.get("position", "front"), source=cfg.get("source", "corpus"))
    choose_distractors(run, outputs, settings, cache, match, precomputed, file_distractors)
    calls = answer_clean_and_noisy(run, outputs, target, concurrency, precomputed, int(cfg.get("seed", 0)), deadline, progress)
    threshold = float(cfg.get("correctness", {}).get("threshold", 0.5))
    judged = judge_correctness(run, plan, settings, cache, threshold, deadline, progress)
    info: NoiseInfo = {**merge_usage(judged, run.usage), "cache_hits": judged.get("cache_hits", 0),  # type: ignore[typeddict-item]
                       "cache_misses": judged.get("cache_misses", 0),
                       "method": "judge" if plan.engine != "offline" else OFFLINE_METHOD,
                       "threshold": threshold, "source": "precomputed" if precomputed is not None else run.source,
                       "distractors": run.k, "position": run.position}
    for c in sample:
        run.rows[c.id].setdefault("distractors", [])
    return [run.rows[c.id] for c in sample], calls, info
