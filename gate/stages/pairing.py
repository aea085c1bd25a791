"""Same-run paired judging in the generation stage: pair this run's judged cases with each reference run's, judge
both sides of every changed pair in this run, confirm the large drops a ``case_drop`` gate looks at, and record
the pairs (gate.core.pairs says why; gate.core.verdict gates on them).

    pair_up      which cases pair up with each paired run, which changed, what must be judged fresh
    settle       the pairs' scores from this run's judgings (or a pair judged together earlier: the pair cache)
    to_confirm   the changed pairs whose drop is above a case_drop: both sides judged once more
    records      the report's ``pairing`` for the stage

A pair's two scores are cached together, under a key made of both sides' keys, so a re-run of the same pull
request against the same reference costs nothing, and the two sides of a cached pair always come from one run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.core.catalog import higher_is_better
from gate.core.model import GoldenCase
from gate.core.pairs import PairedRun, judge_change
from gate.core.report import JudgeInfo, MetricPairs, PairedCase, Pairing
from gate.judges import JudgeInput
from gate.stages.judging import JudgeSession, Result, Task, missing_input

if TYPE_CHECKING:
    from gate.judges.cache import ScoreCache

@dataclass
class Pair:
    """One changed case of one metric against one reference run."""

    run: str  # the paired run's key
    case_id: str
    metric: str
    ref: Task  # the reference's answer, with this run's question and ground truth
    cur: Task  # this run's main task
    key: str  # the pair's cache key
    scores: tuple[Result, Result] | None = None  # (reference, current)
    again: tuple[Result, Result] | None = None  # the confirming second judgings
    cached: bool = False

    def drop(self) -> float | None:
        if self.scores is None or not all(isinstance(s, float) for s in self.scores):
            return None
        ref, cur = self.scores
        assert isinstance(ref, float) and isinstance(cur, float)
        return (ref - cur) if higher_is_better(self.metric) else (cur - ref)


@dataclass
class PairSet:
    references: Sequence[PairedRun]
    pairs: list[Pair] = field(default_factory=list)
    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (reference, metric) -> [pairs, changed]
    added: dict[str, list[str]] = field(default_factory=dict)
    removed: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (reference, case, metric) -> why unpaired
    fresh: dict[str, Task] = field(default_factory=dict)  # key -> a task to judge in this run, cache or not
    judgings: dict[str, set[str]] = field(default_factory=dict)  # reference -> the fresh keys its pairs used
    order: dict[str, int] = field(default_factory=dict)  # case id -> its place in the sample (the order of the records)


def _pair_key(ref_key: str, cur_key: str) -> str:
    return "pair:" + hashlib.sha256(f"{ref_key}\x00{cur_key}".encode()).hexdigest()[:40]


def _same_input(cur: JudgeInput, ref: JudgeInput, needs: set[str]) -> bool:
    """Whether the metric would read the same thing on both sides (question and ground truth are this run's on both)."""
    return cur.answer == ref.answer and ("contexts" not in needs or cur.contexts == ref.contexts)


def pair_up(references: Sequence[PairedRun], sample: Sequence[GoldenCase], golden_ids: set[str], tasks: Sequence[Task],
            todo_keys: set[str], session: JudgeSession) -> PairSet:
    """Pair the sample's main tasks with every reference run that kept its outputs. ``todo_keys``: the main tasks
    judged in this run (their scores are fresh, so a pair reuses them for its current side)."""
    pairs = PairSet(references, order={c.id: i for i, c in enumerate(sample)})
    in_sample = pairs.order.keys()
    for run in references:
        pairs.added[run.key] = sorted(i for i in in_sample if i not in run.scores)
        pairs.removed[run.key] = sorted(i for i in run.scores if i not in golden_ids)
        pairs.judgings[run.key] = set()
        if not run.outputs:
            continue  # kept no answers: the gate falls back on the stored scores
        for t in tasks:
            stored = run.outputs.get(t.case_id)
            if stored is None:
                continue
            counts = pairs.counts.setdefault((run.key, t.scored.name), [0, 0])
            counts[0] += 1
            needs = session.needs(t.scored)
            ref_item = JudgeInput(question=t.item.question, answer=stored.answer, contexts=stored.contexts, ground_truth=t.item.ground_truth)
            if _same_input(t.item, ref_item, needs):
                continue  # the same input would get the same score: a delta of exactly 0, no call
            counts[1] += 1
            missing = missing_input(needs, ref_item)
            if missing:
                pairs.errors[(run.key, t.case_id, t.scored.name)] = f"the reference's output cannot be judged: {missing}"
                continue
            ref = session.task(t.case_id, t.scored, ref_item)
            pairs.pairs.append(Pair(run.key, t.case_id, t.scored.name, ref, t, _pair_key(ref.key, t.key)))
    cached = session.cache.get_many([k for p in pairs.pairs for k in (p.key + ":r", p.key + ":c")])
    for p in pairs.pairs:
        if p.key + ":r" in cached and p.key + ":c" in cached:
            p.scores, p.cached = (cached[p.key + ":r"], cached[p.key + ":c"]), True
            continue
        pairs.fresh.setdefault(p.ref.key, p.ref)
        pairs.judgings[p.run].add(p.ref.key)
        if p.cur.key not in todo_keys:  # its score came from the cache (an earlier run's judge): judge it again now
            pairs.fresh.setdefault(p.cur.key, p.cur)
            pairs.judgings[p.run].add(p.cur.key)
    return pairs


def settle(pairs: PairSet, main: Mapping[str, Result], fresh: Mapping[str, Result], session: JudgeSession) -> None:
    """Fill every uncached pair's scores from this run's judgings (``main``: the main tasks judged now, by key;
    ``fresh``: the pairing's own judgings, by key) and cache the pairs whose two sides both scored."""
    for p in pairs.pairs:
        if p.scores is not None:
            continue
        cur = main[p.cur.key] if p.cur.key in main else fresh[p.cur.key]
        p.scores = (fresh[p.ref.key], cur)
        _store(session, p, "", p.scores)


def _store(session: JudgeSession, p: Pair, suffix: str, scores: tuple[Result, Result]) -> None:
    if isinstance(scores[0], float) and isinstance(scores[1], float):
        meta = {"engine": p.cur.scored.engine, "metric": p.cur.scored.metric, "model": session.model, "pair": True}
        session.cache.put(f"{p.key}:r{suffix}", scores[0], meta)
        session.cache.put(f"{p.key}:c{suffix}", scores[1], meta)


def to_confirm(pairs: PairSet, case_drop: Mapping[str, float], cache: ScoreCache) -> list[tuple[Pair, Task, Task]]:
    """The changed pairs whose drop is above their metric's case_drop, to judge once more on both sides (a second
    judging cached with the pair is used instead)."""
    out = []
    over = [p for p in pairs.pairs if p.metric in case_drop and (d := p.drop()) is not None and d > case_drop[p.metric]]
    cached = cache.get_many([k for p in over for k in (p.key + ":r2", p.key + ":c2")])
    for p in over:
        if p.key + ":r2" in cached and p.key + ":c2" in cached:
            p.again = (cached[p.key + ":r2"], cached[p.key + ":c2"])
        else:
            out.append((p, p.ref, p.cur))
            pairs.judgings[p.run].add(p.ref.key + "#2")
            pairs.judgings[p.run].add(p.cur.key + "#2")
    return out


def confirmed(confirm: Sequence[tuple[Pair, Task, Task]], results: Mapping[int, Result], session: JudgeSession) -> None:
    """Record the second judgings (``results``: index -> result over the tasks [ref, cur] of each pair in turn)."""
    for i, (p, _, _) in enumerate(confirm):
        p.again = (results[2 * i], results[2 * i + 1])
        _store(session, p, "2", p.again)


def records(pairs: PairSet, metrics: Sequence[str], judge: JudgeInfo | None) -> dict[str, Pairing]:
    """The stage's ``pairing``: one record per reference run."""
    out: dict[str, Pairing] = {}
    for run in pairs.references:
        pairing: Pairing = {"against": run.against, "label": run.label, "commit": run.commit, "created_at": run.created_at,
                            "method": "same run" if run.outputs else "stored scores", "added": pairs.added[run.key],
                            "removed": pairs.removed[run.key], "metrics": {}, "judgings": len(pairs.judgings[run.key])}
        cached = sum(1 for p in pairs.pairs if p.run == run.key and p.cached)
        if cached:
            pairing["cached"] = cached
        if not run.outputs:
            pairing["note"] = ("the reference run kept no answers (it was recorded by an older rag-gate), so this run is compared "
                               "with its stored scores: a judge that changed since would move the delta")
            out[run.key] = pairing
            continue
        changed = judge_change(run.judge, judge)
        if changed:
            pairing["note"] = (f"the judge changed since the reference ({changed}); the reference's changed answers were judged "
                               "again in this run, so the delta compares like with like")
        for metric in metrics:
            n, k = pairs.counts.get((run.key, metric), [0, 0])
            cases: list[PairedCase] = []
            for p in pairs.pairs:
                if p.run == run.key and p.metric == metric:
                    cases.append(_paired_case(p))
            for (ref_key, cid, m), why in pairs.errors.items():
                if ref_key == run.key and m == metric:
                    cases.append({"id": cid, "reference": None, "current": None, "error": why})
            cases.sort(key=lambda c: pairs.order.get(c["id"], len(pairs.order)))  # sample order: shards merge into it
            mp: MetricPairs = {"pairs": n, "changed": k, "errored": sum(1 for c in cases if "error" in c), "cases": cases}
            pairing["metrics"][metric] = mp
        out[run.key] = pairing
    return out


def _paired_case(p: Pair) -> PairedCase:
    assert p.scores is not None
    ref, cur = p.scores
    if not isinstance(ref, float) or not isinstance(cur, float):
        why = [f"{side}: {r}" for side, r in (("reference", ref), ("this run", cur)) if not isinstance(r, float)]
        return {"id": p.case_id, "reference": ref if isinstance(ref, float) else None,
                "current": cur if isinstance(cur, float) else None, "error": "; ".join(why)}
    case: PairedCase = {"id": p.case_id, "reference": ref, "current": cur}
    if p.again is not None and isinstance(p.again[0], float) and isinstance(p.again[1], float):
        case["confirmed"] = [(ref + p.again[0]) / 2, (cur + p.again[1]) / 2]  # a failed second judging: left unconfirmed
    return case
