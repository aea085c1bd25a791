"""The robustness stage's noise test: does the answer survive distractor passages?

For each sampled answerable case the target answers from its own retrieved contexts (clean),
then from the same contexts with k distractors injected (noisy); both answers are judged
correct or not against ground_truth. ``noise_robustness`` = correct noisy / correct clean
(correct answers kept when distractors are added).

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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.core.report import CaseResult, Distractor, NoiseInfo, Usage
from gate.core.settings import MatchSettings, NoiseSettings
from gate.core.textmatch import squad_tokens, text_matches
from gate.core.usage import sum_usage
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.judges import JudgeInput, JudgeSettings
from gate.stages.context import NOISE_ANSWERS, StageContext
from gate.stages.judging import JudgeSession, Task, scores_of

if TYPE_CHECKING:
    from gate.core.redact import Redactor
    from gate.judges.cache import ScoreCache
    from gate.targets import Target

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
    case: GoldenCase, contexts: Sequence[str], pool: Mapping[str, str], k: int, match: MatchSettings
) -> list[tuple[str, str]]:
    """The k passages of the pool closest to the question in words, never a relevant one (at the
    matching level the retrieval stage uses) nor one already among the case's contexts."""
    to_id = match.to_id()
    relevant = {to_id(r) for r in case.relevant} | set(case.relevant)
    q = set(squad_tokens(case.question))
    own = set(contexts)
    scored = []
    for doc_id, text in pool.items():
        if doc_id in relevant or to_id(doc_id) in relevant or text in own:
            continue
        if match.by_text and any(text_matches(t, text, match.min_overlap) for t in case.relevant_texts):
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


# ---------------------------------------------------------------------------------- calls


def answer_all(target: Target, jobs: Sequence[tuple[GoldenCase, list[str]]], concurrency: int,
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
                               cache: ScoreCache, redactor: Redactor) -> tuple[dict[str, list[str] | str], Usage]:
    """k judge-written conflicting passages per case (cached as text). case id -> passages, or the reason it failed.
    The prompt's question, ground truth and context are redacted first (``redactor``: the run's secrets), and so is
    the key the passages are cached under."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import DISTRACTOR, distractor_payload, generate_distractor, prompt_fingerprint

    telemetry_off()
    client = JudgeClient(settings)
    fp = prompt_fingerprint(DISTRACTOR)

    async def one(case: GoldenCase) -> tuple[str, list[str] | str]:
        out: list[str] = []
        context: str | None = redactor(contexts[case.id][0]) if contexts[case.id] else None
        question, truth = redactor(case.question), redactor(case.ground_truth or "")
        try:
            for _ in range(k):  # each passage asked to differ from those already written
                payload = distractor_payload(question, truth, context, avoid=out)
                key = cache.key_text("distractor", fp, settings.model, settings.temperature, payload)
                text = cache.get_text(key)
                if text is None:  # a secret the judge copied from the context is neither used nor cached
                    text = client.redactor(await generate_distractor(client, settings, question, truth, context, avoid=out))
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


@dataclass(frozen=True)
class NoiseSources:
    """Where distractors and answers come from besides the target: a results file's precomputed noise answers (then
    the target is not asked), and a file of distractors written per case (``source: file``)."""

    precomputed: Mapping[str, Mapping[str, Any]] | None = None
    file: Mapping[str, list[str]] = field(default_factory=dict)


@dataclass
class NoiseRun:
    """The noise test of one run, as it goes through its three steps."""

    settings: NoiseSettings
    ctx: StageContext
    sample: list[GoldenCase]
    contexts: dict[str, list[str]]  # case id -> the target's own contexts
    rows: dict[str, CaseResult]  # case id -> the case's result so far (``error`` set: it stops there)
    usage: Usage = field(default_factory=lambda: cast(Usage, {}))

    def live(self) -> list[GoldenCase]:
        return [c for c in self.sample if self.rows[c.id]["error"] is None]


def choose_distractors(run: NoiseRun, match: MatchSettings, sources: NoiseSources) -> None:
    """Step 1: each case's distractors (``distractors`` of its row); a case with none errors."""
    chosen: dict[str, list[Distractor]] = {}
    k, precomputed = run.settings.distractors, sources.precomputed
    if precomputed is not None:
        for c in run.sample:
            chosen[c.id] = [{"id": None, "text": t} for t in precomputed.get(c.id, {}).get("distractors", [])]
    elif run.settings.source == "corpus":
        pool = corpus_candidates(run.ctx.outputs)
        for c in run.sample:
            chosen[c.id] = [{"id": i, "text": t} for i, t in pick_corpus_distractors(c, run.contexts[c.id], pool, k, match)]
    elif run.settings.source == "file":
        for c in run.sample:
            chosen[c.id] = [{"id": None, "text": t} for t in sources.file.get(c.id, [])[:k]]
    else:
        assert run.ctx.judge is not None
        made, run.usage = asyncio.run(generate_distractors(run.sample, run.contexts, k, run.ctx.judge, run.ctx.cache,
                                                             run.ctx.redactor))
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


def precomputed_answers(run: NoiseRun, precomputed: Mapping[str, Mapping[str, Any]]) -> None:
    """Step 2 from a results file: the clean and noisy answers its lines carry."""
    for c in run.live():
        pre = precomputed.get(c.id)
        row = run.rows[c.id]
        if pre is None:
            row["error"] = "no noise.noisy_answer for this case in the results file"
            continue
        row["clean_answer"] = pre.get("clean_answer", run.ctx.outputs[c.id].answer)
        row["noisy_answer"], row["position"] = pre["noisy_answer"], "(precomputed)"


def answer_clean_and_noisy(run: NoiseRun, target: Target) -> int:
    """Step 2: the answer from the case's own contexts and from them with the distractors injected; the target calls made."""
    live, position, progress = run.live(), run.settings.position, run.ctx.progress
    # one generator per case, seeded by the case: a case's noisy contexts do not depend on which cases come before it
    noisy = {c.id: inject(run.contexts[c.id], [d["text"] or "" for d in run.rows[c.id].get("distractors", [])], position,
                          random.Random(f"{run.settings.seed}\x00{c.id}")) for c in live}
    jobs = [(c, run.contexts[c.id]) for c in live] + [(c, noisy[c.id]) for c in live]
    if progress is not None and jobs:
        progress.start(NOISE_ANSWERS, len(jobs), unit="answer")
    answers = answer_all(target, jobs, target.concurrency, run.ctx.deadline,
                         None if progress is None else lambda: progress.done(NOISE_ANSWERS))
    for i, c in enumerate(live):
        clean, dirty, row = answers[i], answers[len(live) + i], run.rows[c.id]
        bad = clean.error or dirty.error
        if bad:
            row["error"] = f"the target's answer from contexts failed: {bad}"
            continue
        row["clean_answer"], row["noisy_answer"], row["position"] = clean.text, dirty.text, position
    return len(jobs)


def correctness_tasks(run: NoiseRun, session: JudgeSession) -> list[Task]:
    """Both answers of every live case, against its ground truth, with the same (clean) contexts, so that identical
    answers share one cache entry and one judge call. A case without a ground truth errors."""
    scored = run.settings.correctness.metric()
    tasks: list[Task] = []
    for c in run.live():
        row = run.rows[c.id]
        if not c.ground_truth:
            row["error"] = "the golden case has no ground_truth to judge correctness against"
            continue
        for which, answer in (("clean", row.get("clean_answer")), ("noisy", row.get("noisy_answer"))):
            item = JudgeInput(question=c.question, answer=answer or "", contexts=tuple(run.contexts[c.id]), ground_truth=c.ground_truth)
            tasks.append(session.task(f"{c.id}\x00{which}", scored, item))
    return tasks


def judge_correctness(run: NoiseRun) -> Usage:
    """Step 3: both answers scored against ground_truth (cached; identical answers judged once); the judge usage."""
    correctness = run.settings.correctness
    scored = correctness.metric()
    session = JudgeSession.open({scored.engine}, run.ctx, {"correctness": CORRECTNESS_CRITERION})
    tasks = correctness_tasks(run, session)
    scores, misses = scores_of(tasks, session, run.ctx)
    for c in run.live():
        row = run.rows[c.id]
        for which in ("clean", "noisy"):
            score = scores.get(f"{c.id}\x00{which}")
            if isinstance(score, float):
                row["metrics"][f"{which}_score"] = score
                row[f"{which}_correct"] = score >= correctness.threshold  # type: ignore[literal-required]
            else:
                row["error"] = f"judging the {which} answer failed: {score}"
        if row["error"] is None:
            row["flipped"] = bool(row["clean_correct"] and not row["noisy_correct"])
    usage = sum_usage([session.usage()])
    usage.update({"cache_hits": len(tasks) - misses, "cache_misses": misses})
    return usage


def noise_test(settings: NoiseSettings, ctx: StageContext, target: Target | None, match: MatchSettings,
               sources: NoiseSources) -> tuple[list[CaseResult], int, NoiseInfo]:
    """Per-case noise rows, the number of target calls made, and how the test ran (with its judge usage).
    ``target`` None: the answers come from ``sources.precomputed`` (a results file's noise.noisy_answer). The sample
    is drawn from every answerable case, whatever the target answered (a failed call is the row's error), then
    restricted to the shard's cases, so it never depends on another shard's outputs."""
    sample = ctx.mine(settings.sample.draw(ctx.cases))
    run = NoiseRun(settings, ctx, sample, {c.id: list(ctx.outputs[c.id].contexts) for c in sample},
                   {c.id: {"id": c.id, "metrics": {}, "error": None if ctx.outputs[c.id].error is None else
                           "the target call failed for this case"} for c in sample})
    choose_distractors(run, match, sources)
    calls = 0
    if target is None:
        precomputed_answers(run, sources.precomputed or {})
    else:
        calls = answer_clean_and_noisy(run, target)
    judged = judge_correctness(run)
    info: NoiseInfo = {**sum_usage([judged, run.usage]), "cache_hits": judged.get("cache_hits", 0),  # type: ignore[typeddict-item]
                       "cache_misses": judged.get("cache_misses", 0),
                       "method": "judge" if settings.correctness.judged else OFFLINE_METHOD,
                       "threshold": settings.correctness.threshold,
                       "source": "precomputed" if target is None else settings.source,
                       "distractors": settings.distractors, "position": settings.position}
    for c in sample:
        run.rows[c.id].setdefault("distractors", [])
    return [run.rows[c.id] for c in sample], calls, info
