"""The robustness stage's paraphrase test: is a case still retrieved when a user asks it in their own words?

    1. sample     answerable cases with relevance labels (``paraphrase.sample``), a shard's own
    2. rewrites   a case's golden ``paraphrases``; else ``generate`` rewrites the judge writes in one call (rag-gate's
                  prompt gate.judges.prompts.PARAPHRASE), cached as text by the question, so a second run, or another
                  retriever, is tested on the same rewrites without asking the judge
    3. asks       the target answers each rewrite (``target.concurrency`` at a time); the original question's answer
                  is the run's own, never asked again
    4. scores     each ranked list scored as the retrieval stage scores it (its matching level, gate.core.ranking),
                  the figures from them in gate.core.paraphrase

Exact figures once the rewrites are fixed: no judge noise in them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gate.core.catalog import MetricName
from gate.core.model import GoldenCase, TargetOutput
from gate.core.paraphrase import CaseScores, figures, found, metric_names, scored_metrics, usable_rewrites
from gate.core.ranking import CaseScorer, first_ranks, metric_function
from gate.core.report import ParaphraseCase, ParaphraseInfo, ParaphraseRewrite, Usage
from gate.core.settings import MatchSettings, ParaphraseSettings
from gate.core.usage import sum_usage
from gate.deadline import REACHED
from gate.stages.context import StageContext
from gate.stages.noise import corpus_candidates
from gate.stages.retrieval import _ranking
from gate.stages.variants import VariantPart

if TYPE_CHECKING:
    from gate.judges import JudgeSettings
    from gate.targets import Target

PROGRESS = "the paraphrase test"  # progress unit "answer": it asks the target
ONLY_GOLDEN = ("results", "traces")  # targets that hold answers to the golden questions only
AVOID_PASSAGES, AVOID_CHARS = 3, 1500  # the relevant passages shown to the judge, each cut at this length
Scored = dict[str, float]


@dataclass
class Rewrites:
    """Each sampled case's rewrites (case id -> (text, source)), how many the judge wrote and how many of those came
    from the cache, the judge's usage, and why the judge wrote none for a case."""

    texts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    generated: int = 0
    cached: int = 0
    usage: Usage | None = None
    failures: dict[str, str] = field(default_factory=dict)


def labelled(case: GoldenCase, match: MatchSettings) -> bool:
    """Whether the case can be scored at the matching level: relevant ids, or relevant texts for match.level: text."""
    return bool(case.relevant_texts if match.by_text else case.relevant)


def cannot_run(target: Target | None) -> str | None:
    if target is None or target.kind in ONLY_GOLDEN:
        kind = "no" if target is None else f"a {target.kind}"
        return (f"not evaluated: {kind} target answers only the golden questions; the paraphrase test asks new ones "
                "(a python or http target)")
    return None


def avoid_passages(case: GoldenCase, pool: Mapping[str, str], match: MatchSettings) -> list[str]:
    """The texts of the case's relevant passages the run has (its relevant_texts, the passages the target retrieved
    under a relevant id), whose words the rewrites avoid."""
    to_id = match.to_id()
    relevant = set(case.relevant) | {to_id(r) for r in case.relevant}
    texts = [*case.relevant_texts, *(t for i, t in sorted(pool.items()) if i in relevant or to_id(i) in relevant)]
    return [t[:AVOID_CHARS] for t in dict.fromkeys(texts)][:AVOID_PASSAGES]


async def ask_judge(jobs: Sequence[tuple[GoldenCase, list[str]]], settings: ParaphraseSettings, ctx: StageContext,
                    judge: JudgeSettings) -> tuple[dict[str, list[str] | str], Usage]:
    """The judge's rewrites of each case's question (one call a case), or why it wrote none. The question and the
    passages are redacted first; so are the rewrites (a secret the judge copied is neither used nor cached)."""
    from gate.judges import JudgeError, telemetry_off
    from gate.judges.client import JudgeClient
    from gate.judges.prompts import generate_paraphrases

    telemetry_off()
    client = JudgeClient(judge)

    async def one(case: GoldenCase, passages: list[str]) -> tuple[str, list[str] | str]:
        if ctx.deadline.reached():
            return case.id, REACHED
        try:
            texts = await generate_paraphrases(client, judge, ctx.redactor(case.question), settings.generate, settings.style,
                                               [ctx.redactor(p) for p in passages])
        except JudgeError as exc:
            return case.id, f"writing rewrites failed: {exc}"
        return case.id, [client.redactor(t) for t in texts]

    try:
        return dict(await asyncio.gather(*(one(c, p) for c, p in jobs))), client.usage()
    finally:
        await client.aclose()


def _cached(text: str | None) -> list[str] | None:
    """The rewrites a cache entry holds (None: no entry, or not a list of strings)."""
    try:
        texts = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return texts if isinstance(texts, list) and all(isinstance(t, str) for t in texts) else None


def generated_rewrites(cases: Sequence[GoldenCase], settings: ParaphraseSettings, ctx: StageContext, match: MatchSettings,
                       out: Rewrites) -> None:
    """The judge's rewrites of ``cases`` into ``out``: from the cache, else asked (and cached when any is usable)."""
    from gate.judges.prompts import PARAPHRASE, paraphrase_key, prompt_fingerprint

    judge = ctx.judge
    assert judge is not None
    fp = prompt_fingerprint(PARAPHRASE)
    keys = {c.id: ctx.cache.key_text("paraphrase", fp, judge.model, judge.temperature,
                                     paraphrase_key(ctx.redactor(c.question), settings.generate, settings.style)) for c in cases}
    got: dict[str, list[str] | str] = {}
    for c in cases:
        hit = _cached(ctx.cache.get_text(keys[c.id]))
        if hit is not None:
            got[c.id] = usable_rewrites(c.question, hit, settings.generate)
            out.cached += len(got[c.id])
    todo = [c for c in cases if c.id not in got]
    if todo:
        pool = corpus_candidates(ctx.outputs)
        fresh, out.usage = asyncio.run(ask_judge([(c, avoid_passages(c, pool, match)) for c in todo], settings, ctx, judge))
        for c in todo:
            reply = fresh[c.id]
            usable = [] if isinstance(reply, str) else usable_rewrites(c.question, reply, settings.generate)
            if usable:
                ctx.cache.put_text(keys[c.id], json.dumps(usable, ensure_ascii=False), {"kind": "paraphrase", "case": c.id})
            got[c.id] = usable or (reply if isinstance(reply, str) else "the judge's rewrites all repeat the question")
    for c in cases:
        texts = got[c.id]
        if isinstance(texts, str):
            out.failures[c.id], texts = texts, []
        out.texts[c.id] = [(t, "generated") for t in texts]
        out.generated += len(texts)


def choose_rewrites(settings: ParaphraseSettings, ctx: StageContext, sample: Sequence[GoldenCase], match: MatchSettings) -> Rewrites:
    """Step 2: a case's golden paraphrases, else (with a judge) the judge's rewrites."""
    out = Rewrites()
    want = []
    for c in sample:
        given = usable_rewrites(c.question, c.paraphrases)
        if given or not settings.generate or ctx.judge is None:
            out.texts[c.id] = [(t, "golden") for t in given]
        else:
            want.append(c)
    if want:
        generated_rewrites(want, settings, ctx, match, out)
    return out


def ask_all(target: Target, jobs: Sequence[tuple[GoldenCase, str]], ctx: StageContext, k: int) -> list[TargetOutput]:
    """Step 3: the target's answer to each (case, rewrite), ``target.concurrency`` at a time. Never raises per job."""
    progress = ctx.progress
    if progress is not None and jobs:
        progress.start(PROGRESS, len(jobs), unit="answer")

    def one(job: tuple[GoldenCase, str]) -> TargetOutput:
        case = job[0]
        try:
            if ctx.deadline.reached():
                return TargetOutput.failed(case.id, REACHED)
            return target.ask(replace(case, question=job[1]), k)
        except Exception as exc:  # a bug in a target must not lose the other rewrites
            return TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}")
        finally:
            if progress is not None:
                progress.done(PROGRESS)

    workers = max(1, min(target.concurrency, len(jobs)))
    if workers == 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-gate-paraphrase") as pool:
        return list(pool.map(one, jobs))


def scoring(match: MatchSettings, metrics: Sequence[MetricName], k: int) -> Callable[[GoldenCase, TargetOutput], Scored | str]:
    """Step 4: a case's answer scored on ``metrics`` as the retrieval stage scores it, on its top ``k`` passages (the
    originals as the rewrites: the run may have asked for more), or why it cannot be."""
    ranked = _ranking(match)
    functions = [(m.name, metric_function(m)) for m in metrics]

    def score(case: GoldenCase, out: TargetOutput) -> Scored | str:
        if out.error is not None:
            return out.error
        got = ranked(case, replace(out, retrieved=out.retrieved[:k]))
        if isinstance(got, str):
            return got
        ids, relevant = got
        scorer = CaseScorer.from_ranks(first_ranks(ids, relevant), relevant)
        return {name: f(scorer) for name, f in functions}

    return score


def ask_k(settings: ParaphraseSettings) -> int:
    """How many passages each rewrite asks for: the largest k of the metrics, 10 at least."""
    return max([10, *(m.k for m in settings.metrics if m.k)])


def case_row(case: GoldenCase, texts: Sequence[tuple[str, str]], original: Scored | str,
             asked: Mapping[str, Scored | str], k: int) -> tuple[ParaphraseCase, CaseScores]:
    """A case's record and its scores: the original's, each rewrite's (``asked``: rewrite -> its scores or why not;
    a rewrite missing from it was not asked, its original's call having failed)."""
    rewrites: list[ParaphraseRewrite] = []
    for text, source in texts:
        got = asked.get(text, "not asked: the call on the original question failed")
        row: ParaphraseRewrite = {"text": text, "source": source, "found": None if isinstance(got, str) else found(got, k),
                                  "metrics": {} if isinstance(got, str) else dict(got)}
        if isinstance(got, str):
            row["error"] = got
        rewrites.append(row)
    scores = CaseScores(case.id, None if isinstance(original, str) else original,
                        [None if isinstance(g, str) else g for g in (asked.get(t, "") for t, _ in texts)])
    outcome = scores.outcome(k)
    return ({"id": case.id, "question": case.question, "found": None if scores.original is None else found(scores.original, k),
             "lost": outcome == "lost", "rewrites": rewrites}, scores)


def no_rewrite(settings: ParaphraseSettings, ctx: StageContext, rewrites: Rewrites) -> str:
    """Why no sampled case has a rewrite."""
    if rewrites.failures:
        return f"not evaluated: the judge wrote no usable rewrite ({sorted(rewrites.failures.values())[0]})"
    if not settings.generate:
        return "not evaluated: no sampled case has paraphrases in the golden set (and paraphrase.generate is 0)"
    return f"not evaluated: no sampled case has paraphrases in the golden set, and rewriting them needs the judge and {ctx.no_judge}"


@dataclass(frozen=True)
class Asked:
    """What the target answered: each case's rewrites' scores (or why not), and the calls made."""

    scores: dict[str, dict[str, Scored | str]]
    calls: int


def ask_rewrites(target: Target, sample: Sequence[GoldenCase], rewrites: Rewrites, ctx: StageContext,
                 score: Callable[[GoldenCase, TargetOutput], Scored | str], limit: int) -> Asked:
    """Steps 3 and 4: every rewrite of a case whose original was answered, asked and scored."""
    jobs = [(c, t) for c in sample if ctx.outputs[c.id].error is None for t, _ in rewrites.texts[c.id]]
    scores: dict[str, dict[str, Scored | str]] = {c.id: {} for c in sample}
    for (case, text), out in zip(jobs, ask_all(target, jobs, ctx, limit), strict=True):
        scores[case.id][text] = score(case, out)
    return Asked(scores, len(jobs))


def paraphrase_part(settings: ParaphraseSettings, ctx: StageContext, target: Target | None, match: MatchSettings) -> VariantPart:
    """The paraphrase test: its metrics (or why not), its record (gate.core.report.ParaphraseInfo), the target calls it
    made and the judge's usage. The sample is drawn from every labelled answerable case, then restricted to the
    shard's."""
    part = VariantPart("paraphrase")
    names = metric_names(settings.metrics)
    eligible = [c for c in ctx.cases if c.answerable and labelled(c, match)]
    sample = ctx.mine(settings.sample.draw(eligible))
    reason = cannot_run(target) or (None if sample else "not evaluated: no answerable case with relevance labels to sample")
    if reason is not None or target is None:
        part.not_evaluated = dict.fromkeys(names, reason or "")
        return part
    rewrites = choose_rewrites(settings, ctx, sample, match)
    part.usage = rewrites.usage
    if not any(rewrites.texts.values()):
        part.not_evaluated = dict.fromkeys(names, no_rewrite(settings, ctx, rewrites))
        return part
    k, limit = settings.k or ask_k(settings), ask_k(settings)
    score = scoring(match, scored_metrics(settings.metrics, k), limit)
    asked = ask_rewrites(target, sample, rewrites, ctx, score, limit)
    rows = [case_row(c, rewrites.texts[c.id], score(c, ctx.outputs[c.id]), asked.scores[c.id], k) for c in sample]
    fig = figures([s for _, s in rows], settings.metrics, k)
    part.metrics, part.not_evaluated, part.target_calls = fig.metrics, fig.not_evaluated, asked.calls
    info: ParaphraseInfo = {"k": k, "style": settings.style, "sample": {"size": len(sample), "of": len(eligible), "ids": [c.id for c in sample]},
                            "given": sum(1 for c in sample for _, src in rewrites.texts[c.id] if src == "golden"),
                            "generated": rewrites.generated, "cached": rewrites.cached, "target_calls": asked.calls,
                            "metrics": fig.table, "cases": [r for r, _ in rows]}
    if rewrites.usage is not None:
        info["usage"] = rewrites.usage
    part.info = dict(info)
    return part


def merged_part(settings: ParaphraseSettings, match: MatchSettings, cases: Sequence[GoldenCase],
                outputs: Mapping[str, TargetOutput], stages: Sequence[Mapping[str, Any]]) -> VariantPart:
    """The paraphrase test of a sharded run from its shards' robustness stages (gate.run.merge): the cases in sample
    order, the figures recomputed from the rewrites' scores and the originals' (scored again from the answers), the
    counts summed. Its ``usage`` and ``target_calls`` are left out: the shards' stage totals hold them already."""
    part = VariantPart("paraphrase")
    infos = [s["paraphrase"] for s in stages if "paraphrase" in s]
    names = metric_names(settings.metrics)
    if not infos:
        part.not_evaluated = {m: why for m, why in stages[0].get("not_evaluated", {}).items() if m in names} if stages else {}
        return part
    k = int(infos[0]["k"])
    by_id = {c["id"]: c for info in infos for c in info["cases"]}
    eligible = [c for c in cases if c.answerable and labelled(c, match)]
    sample = [c for c in settings.sample.draw(eligible) if c.id in by_id]
    score = scoring(match, scored_metrics(settings.metrics, k), ask_k(settings))
    scores = []
    for c in sample:
        original = score(c, outputs[c.id])
        scores.append(CaseScores(c.id, None if isinstance(original, str) else original,
                                 [None if r.get("error") else r["metrics"] for r in by_id[c.id]["rewrites"]]))
    fig = figures(scores, settings.metrics, k)
    part.metrics, part.not_evaluated = fig.metrics, fig.not_evaluated
    given, generated, cached, calls = (sum(int(i[n]) for i in infos) for n in ("given", "generated", "cached", "target_calls"))
    info: ParaphraseInfo = {"k": k, "style": settings.style, "sample": {"size": len(sample), "of": len(eligible), "ids": [c.id for c in sample]},
                            "given": given, "generated": generated, "cached": cached, "target_calls": calls, "metrics": fig.table,
                            "cases": [by_id[c.id] for c in sample]}
    used = [i["usage"] for i in infos if "usage" in i]
    if used:
        info["usage"] = sum_usage(used)
    part.info = dict(info)
    return part
