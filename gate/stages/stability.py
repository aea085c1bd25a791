"""The robustness stage's stability test: asked the same question again, does the system retrieve, answer and get it
right the same way?

Each sampled answerable case is asked ``repeats`` more times (exactly that many target calls per case); the run's own
answer is the first ask. Per case (the arithmetic is gate.core.stability):

    1. asks         the target asked again, ``target.concurrency`` at a time, for max(the cut-off, 10) passages
    2. agreement    the answers compared pairwise: token F1, or the judge's same-meaning verdict (cached as text;
                    identical answers agree with no call)
    3. correctness  every answer scored against ground_truth as the noise test scores it (offline answer-bearing F1 or
                    the judge's correctness, cached), all with the first ask's contexts, so identical answers are one score

A call that failed is left out of its case's figures; a case with fewer than two asks answered is errored (its figures
are null) and left out of the metrics. The target's own answer cache must be off: a repeat it serves from that cache
says nothing, and when every repeat came from it (``cached: true``) the metrics are not evaluated.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gate.core.model import GoldenCase, TargetOutput
from gate.core.report import StabilityCase, StabilityInfo, Usage
from gate.core.settings import StabilitySettings
from gate.core.stability import StabilitySummary, flipped, jaccard, pairwise_mean, summarise
from gate.core.textmatch import normalize_answer, token_f1
from gate.core.usage import sum_usage
from gate.deadline import REACHED
from gate.judges import JudgeInput
from gate.stages.context import StageContext
from gate.stages.judging import JudgeSession, scores_of
from gate.stages.noise import CORRECTNESS_CRITERION
from gate.stages.variants import VariantPart

if TYPE_CHECKING:
    from gate.targets import Target

STABILITY_ANSWERS = "the stability test"  # progress: the target asked again (unit "answer")
ASK_K = 10  # the target is asked for at least this many passages, as in the run
CANNOT_ASK = ("not evaluated: the stability test asks the target again, and a results file holds one answer per question "
              "(use an http or python target)")
ALL_CACHED = ("not evaluated: the target answered every repeat from its own cache (cached: true); turn that cache off for "
              "the stability test")


@dataclass
class Asked:
    """One sampled case and its asks: the run's answer first, then each repeat's."""

    case: GoldenCase
    outs: list[TargetOutput]
    row: StabilityCase = field(init=False)

    def __post_init__(self) -> None:
        self.row = {"id": self.case.id, "question": self.case.question,
                    "answers": [o.answer if o.error is None else None for o in self.outs],
                    "retrieved": [[] for _ in self.outs], "jaccard": None, "agreement": None,
                    "correct": [None] * len(self.outs), "flipped": None}

    def answered(self) -> list[int]:
        """The asks whose call succeeded."""
        return [i for i, o in enumerate(self.outs) if o.error is None]

    def with_answer(self) -> list[int]:
        """The answered asks that gave an answer (a target may return passages alone); none if the case errored."""
        return [i for i in self.answered() if self.outs[i].answer is not None] if self.usable else []

    @property
    def usable(self) -> bool:
        return len(self.answered()) >= 2


def cannot_ask(target: Target | None) -> str | None:
    """Why the target cannot be asked again, if it cannot."""
    return CANNOT_ASK if target is None or target.kind == "results" else None


def ask_again(target: Target, sample: Sequence[GoldenCase], repeats: int, k: int, ctx: StageContext) -> tuple[list[list[TargetOutput]], int]:
    """Each case asked ``repeats`` times (``target.concurrency`` at a time; none once the deadline is reached): per case
    its repeats' outputs, and the calls made. Never raises per call."""
    lock, made = threading.Lock(), [0]
    progress = ctx.progress

    def one(case: GoldenCase) -> TargetOutput:
        if ctx.deadline.reached():
            return TargetOutput.failed(case.id, REACHED)
        with lock:
            made[0] += 1
        try:
            return target.ask(case, k)
        except Exception as exc:  # a bug in a target must not lose the other asks
            return TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}")
        finally:
            if progress is not None:
                progress.done(STABILITY_ANSWERS)

    jobs = [c for c in sample for _ in range(repeats)]
    if progress is not None and jobs:
        progress.start(STABILITY_ANSWERS, len(jobs), unit="answer")
    workers = max(1, min(target.concurrency, len(jobs) or 1))
    if workers == 1:
        outs = [one(c) for c in jobs]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-gate-stability") as pool:
            outs = list(pool.map(one, jobs))
    return [outs[i * repeats:(i + 1) * repeats] for i in range(len(sample))], made[0]


def retrieval_figures(asked: Sequence[Asked], k: int) -> None:
    """Each case's top-k ids per ask, and their mean pairwise Jaccard over the answered asks."""
    for a in asked:
        a.row["retrieved"] = [[d.id for d in o.retrieved[:k]] if o.error is None else [] for o in a.outs]
        if a.usable:
            a.row["jaccard"] = pairwise_mean([a.row["retrieved"][i] for i in a.answered()], jaccard)


def token_agreement(asked: Sequence[Asked]) -> None:
    """Each case's mean pairwise token F1 of its answers."""
    for a in asked:
        a.row["agreement"] = pairwise_mean([a.outs[i].answer or "" for i in a.with_answer()], token_f1)


def same_text(first: str, second: str) -> bool:
    """Answers that normalise to the same text agree with no judge (token F1 normalisation)."""
    return normalize_answer(first) == normalize_answer(second)


async def judged_agreement(asked: Sequence[Asked], ctx: StageContext) -> Usage:
    """Each case's share of its answer pairs the judge says agree (cached as text; redacted first, in the prompt and in
    the key); a case with a pair the judge could not compare has none. The judge's usage, with the cache's counts."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import SAME_ANSWER, answers_payload, compare_answers, prompt_fingerprint

    assert ctx.judge is not None
    settings, cache, redact = ctx.judge, ctx.cache, ctx.redactor
    telemetry_off()
    client = JudgeClient(settings)
    fp, counts = prompt_fingerprint(SAME_ANSWER), {"cache_hits": 0, "cache_misses": 0}

    async def verdict(question: str, first: str, second: str) -> tuple[tuple[str, str, str], bool | None]:
        pair = pair_key(question, first, second)
        q, x, y = redact(question), redact(first), redact(second)
        key = cache.key_text(SAME_ANSWER, fp, settings.model, settings.temperature, answers_payload(q, x, y))
        hit = cache.get_text(key)
        counts["cache_hits" if hit is not None else "cache_misses"] += 1
        if hit is not None:
            return pair, hit == "true"
        try:
            same = await compare_answers(client, settings, q, x, y)
        except JudgeError:
            return pair, None
        cache.put_text(key, "true" if same else "false", {"kind": SAME_ANSWER, "model": settings.model})
        return pair, same

    pairs = {pair_key(a.case.question, x, y) for a in asked for x, y in answer_pairs(a) if not same_text(x, y)}
    try:
        verdicts = dict(await asyncio.gather(*(verdict(*p) for p in sorted(pairs))))
    finally:
        await client.aclose()
    for a in asked:
        def agrees(x: str, y: str, q: str = a.case.question) -> float | None:
            got = True if same_text(x, y) else verdicts.get(pair_key(q, x, y))
            return None if got is None else float(got)

        a.row["agreement"] = pairwise_mean([a.outs[i].answer or "" for i in a.with_answer()], agrees)
    return {**client.usage(), **counts}  # type: ignore[typeddict-item]


def pair_key(question: str, first: str, second: str) -> tuple[str, str, str]:
    """One pair of answers to a question, whichever comes first."""
    a, b = sorted((first, second))
    return question, a, b


def answer_pairs(a: Asked) -> list[tuple[str, str]]:
    """Every pair of a case's answers."""
    answers = [a.outs[i].answer or "" for i in a.with_answer()]
    return [(x, y) for i, x in enumerate(answers) for y in answers[i + 1:]]


def judge_correctness(settings: StabilitySettings, asked: Sequence[Asked], ctx: StageContext) -> Usage:
    """Every answer of every usable case with a ground truth scored against it (the noise test's correctness, cached;
    identical answers scored once): each ask's ``correct``, and whether the case ``flipped``. The judge's usage."""
    scored, threshold = settings.correctness.metric(), settings.correctness.threshold
    session = JudgeSession.open({scored.engine}, ctx, {"correctness": CORRECTNESS_CRITERION})
    tasks = []
    for a in asked:
        if not a.case.ground_truth or not a.with_answer():
            continue
        contexts = tuple(a.outs[a.answered()[0]].contexts)  # one set for every ask: identical answers, one score
        for i in a.with_answer():
            item = JudgeInput(question=a.case.question, answer=a.outs[i].answer or "", contexts=contexts,
                              ground_truth=a.case.ground_truth)
            tasks.append(session.task(f"{a.case.id}\x00{i}", scored, item))
    scores, misses = scores_of(tasks, session, ctx)
    for a in asked:
        for i in a.with_answer():
            score = scores.get(f"{a.case.id}\x00{i}")
            a.row["correct"][i] = score >= threshold if isinstance(score, float) else None
        a.row["flipped"] = flipped([a.row["correct"][i] for i in a.with_answer()]) if a.case.ground_truth else None
    return {**session.usage(), "cache_hits": len(tasks) - misses, "cache_misses": misses}  # type: ignore[typeddict-item]


def needs_judge(settings: StabilitySettings, ctx: StageContext) -> dict[str, str]:
    """The metrics that need the judge this run has not, with why."""
    if ctx.judge is not None:
        return {}
    out = {}
    if settings.method == "judge":
        out["answer_stability"] = f"not evaluated: answers are compared by the judge (method: judge) and {ctx.no_judge}"
    if settings.correctness.judged:
        out["correctness_flip_rate"] = f"not evaluated: the judge is needed for correctness and {ctx.no_judge}"
    return out


def measure(settings: StabilitySettings, asked: Sequence[Asked], ctx: StageContext) -> list[Usage]:
    """Steps 2 and 3 on the cases' asks (the ones this run can compute); the judge's usage of each."""
    missing, usage = needs_judge(settings, ctx), []
    retrieval_figures(asked, ctx.cutoff)
    if "answer_stability" not in missing:
        if settings.method == "judge":
            usage.append(asyncio.run(judged_agreement(asked, ctx)))
        else:
            token_agreement(asked)
    if "correctness_flip_rate" not in missing:
        usage.append(judge_correctness(settings, asked, ctx))
    return usage


def all_cached(asked: Sequence[Asked]) -> bool:
    """Whether every answered repeat says it came from the target's own cache."""
    repeats = [o for a in asked for o in a.outs[1:] if o.error is None]
    return bool(repeats) and all(o.cached is True for o in repeats)


def stability_part(settings: StabilitySettings, ctx: StageContext, target: Target | None) -> VariantPart:
    """The stability test, when it can run: its metrics (or why not), its record, its target calls and judge usage. In a
    shard (``ctx.only``) the sample is drawn from every case, then restricted to the shard's."""
    part = VariantPart("stability")
    names = (f"retrieval_stability@{ctx.cutoff}", "answer_stability", "correctness_flip_rate")
    reason = cannot_ask(target)
    if reason or target is None:
        part.not_evaluated = dict.fromkeys(names, reason or CANNOT_ASK)
        return part
    drawn = settings.sample.draw(ctx.cases)
    sample = ctx.mine(drawn)
    repeats, part.target_calls = ask_again(target, sample, settings.repeats, max(ctx.cutoff, ASK_K), ctx)
    asked = [Asked(c, [ctx.outputs[c.id], *r]) for c, r in zip(sample, repeats, strict=True)]
    usage = measure(settings, asked, ctx)
    summary = summarise([a.row for a in asked], ctx.cutoff)
    missing = needs_judge(settings, ctx) | (dict.fromkeys(names, ALL_CACHED) if all_cached(asked) else {})
    part.metrics = {m: v for m, v in summary.metrics.items() if m not in missing}
    part.not_evaluated = {**summary.not_evaluated, **missing}
    part.info = info(settings, drawn, ctx, part.target_calls, summary, asked)
    if usage and (settings.method == "judge" or settings.correctness.judged):  # offline: no judge to account for
        part.usage = sum_usage(usage)
        part.info["usage"] = part.usage
    return part


def info(settings: StabilitySettings, drawn: Sequence[GoldenCase], ctx: StageContext, calls: int, summary: StabilitySummary,
         asked: Sequence[Asked]) -> dict[str, Any]:
    """The test's record in the report (StabilityInfo)."""
    record: StabilityInfo = {  # the ids drawn from every case; the cases: this shard's
        "repeats": settings.repeats, "k": ctx.cutoff, "method": settings.method,
        "sample": {"size": len(drawn), "of": sum(1 for c in ctx.cases if c.answerable), "ids": [c.id for c in drawn]},
        "target_calls": calls, "flip_interval": summary.flip_interval, "unstable": summary.unstable,
        "cases": [a.row for a in asked],
    }
    return dict(record)

