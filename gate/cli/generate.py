"""``rag-gate golden generate``: candidate golden cases from a corpus, written by the spec's judge, for a person to review.

    plan      how many cases of each kind (the mix, by largest remainder) and which passages each is made from
              (seeded: the same corpus, seed and n give the same plan)
    write     one judge call per candidate through the run's JudgeClient (its concurrency, budget and retries) and
              the judge cache's text table (a second run asks nothing); kinds are written concurrently, the cases of a
              kind one after another (each is asked to differ from the ones before it)
    keep      a candidate is kept when it is a valid golden case and no near-duplicate of an existing case or of a
              kept candidate (gate.core.goldencheck); then it gets ``metadata: {generated: true, review: "pending",
              generator, source_ids}`` and runs leave it out until a reviewer approves it

Every kind uses rag-gate's own prompt (gate.judges.prompts.GENERATE_PROMPT): one call per candidate, cached by
its inputs. RAGAS's and DeepEval's synthesizers build a knowledge graph or embed the whole corpus first (many
calls before the first case, none of them keyed for a cache), so a second run would pay again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.core.cases import parse_case
from gate.core.errors import InputError, RunError
from gate.core.goldencheck import NEAR, normalised, similarity
from gate.core.model import GoldenCase
from gate.core.textmatch import squad_tokens
from gate.judges import JudgeBudgetExceeded, JudgeError, JudgeSettings

KINDS = ("simple", "multi_context", "ambiguous", "out_of_scope", "adversarial")
ATTEMPTS = 3  # tries per wanted candidate before a kind gives up (near-duplicates, unusable replies)
AVOID = 20  # questions of the same kind a request shows the judge to differ from


def allocate(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """``n`` split by ``mix`` (largest remainder: the counts add up to n, each within 1 of n x share)."""
    total = sum(mix.values()) or 1.0
    exact = {k: n * v / total for k, v in mix.items()}
    counts = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: (-(exact[k] - counts[k]), k))[: n - sum(counts.values())]:
        counts[k] += 1
    return counts


@dataclass
class Outcome:
    """What a generation produced: the kept candidates, what was dropped and why, and the judge's usage."""

    cases: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # one sentence per dropped candidate
    wanted: dict[str, int] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    cached: int = 0  # candidates served from the cache
    stopped: str | None = None  # why generation stopped early (the judge budget)


def _similar(question: str, others: Sequence[list[str]]) -> bool:
    tokens = squad_tokens(question)
    return any(similarity(tokens, o) >= NEAR for o in others if o)


def _canary(seed: int, i: int) -> str:
    return "RG-CANARY-" + hashlib.sha256(f"{seed}\x00{i}".encode()).hexdigest()[:8].upper()


@dataclass(frozen=True)
class Request:
    """What to write: ``n`` candidates in the ``mix`` of kinds (checked by the command: gate.cli.golden.parse_mix),
    from passages picked by ``seed``; ``to_doc`` maps a passage id to its document (two passages of a multi-context
    case come from different documents)."""

    n: int
    mix: Mapping[str, float]
    seed: int = 0
    to_doc: Callable[[str], str] = str  # str: a passage id is its document


def generate(corpus: Sequence[tuple[str, str]], existing: Sequence[GoldenCase], request: Request, settings: JudgeSettings,
             cache: Any) -> Outcome:
    """``request.n`` candidate cases from ``corpus`` ((id, text) pairs) in the mix of kinds."""
    from gate.judges import telemetry_off
    from gate.judges.client import JudgeClient

    usable = [(i, t) for i, t in corpus if t and t.strip()]
    if not usable:
        raise InputError("the corpus holds no passage with text to write questions from", key="--corpus")
    telemetry_off()
    writer = Writer(JudgeClient(settings), settings, cache, request, usable, existing)
    asyncio.run(writer.run())
    outcome = writer.outcome
    order = {k: i for i, k in enumerate(KINDS)}
    outcome.cases.sort(key=lambda c: order[c["question_type"]])  # stable: within a kind, in the order written
    if not outcome.cases and outcome.stopped:
        raise RunError(f"no candidate was written: {outcome.stopped}", hint="raise judge.max_judge_calls")
    return outcome


class Writer:
    """One generation: the kinds written concurrently, each kind's candidates one after another."""

    def __init__(self, client: Any, settings: JudgeSettings, cache: Any, request: Request, usable: list[tuple[str, str]],
                 existing: Sequence[GoldenCase]) -> None:
        from gate.judges.prompts import GENERATE, prompt_fingerprint

        self.client, self.settings, self.cache, self.request, self.usable = client, settings, cache, request, usable
        self.fp = prompt_fingerprint(GENERATE)
        self.outcome = Outcome(wanted=allocate(request.n, {**dict.fromkeys(KINDS, 0.0), **request.mix}))
        self.seen_text = {normalised(c.question) for c in existing}
        self.seen_tokens = [squad_tokens(c.question) for c in existing]
        self.lock = asyncio.Lock()

    async def run(self) -> None:
        try:
            await asyncio.gather(*(self.one_kind(k, w) for k, w in self.outcome.wanted.items() if w))
        finally:
            self.outcome.usage = dict(self.client.usage())
            await self.client.aclose()

    def passages_for(self, kind: str, rng: random.Random) -> list[tuple[str, str]]:
        usable, to_doc = self.usable, self.request.to_doc
        if kind in ("out_of_scope", "adversarial"):  # the collection's subject only: a few passages, none answering
            return rng.sample(usable, min(3, len(usable)))
        first = rng.choice(usable)
        if kind != "multi_context":
            return [first]
        others = [p for p in usable if to_doc(p[0]) != to_doc(first[0])] or [p for p in usable if p != first]
        return [first, rng.choice(others)] if others else [first]

    async def one_kind(self, kind: str, wanted: int) -> None:
        rng = random.Random(f"{self.request.seed}\x00{kind}")
        asked: list[str] = []
        outcome = self.outcome
        for attempt in range(wanted * ATTEMPTS):
            if sum(1 for c in outcome.cases if c["question_type"] == kind) >= wanted or outcome.stopped:
                return
            passages = self.passages_for(kind, rng)
            canary = _canary(self.request.seed, attempt) if kind == "adversarial" else None
            reply = await self.ask(kind, passages, asked, canary)
            if reply is None:
                continue
            asked.append(reply["question"])
            await self.keep(kind, _row(kind, reply, passages, canary, self.settings.model))

    async def ask(self, kind: str, passages: list[tuple[str, str]], asked: list[str], canary: str | None) -> dict[str, Any] | None:
        """The judge's candidate (from the cache when it was written before); None when the judge failed (said in
        ``dropped``) or the budget ran out (``stopped``)."""
        from gate.judges.prompts import GENERATE, case_payload, generate_case

        payload = case_payload(kind, passages, asked[-AVOID:], canary)
        key = self.cache.key_text(GENERATE, self.fp, self.settings.model, self.settings.temperature, payload)
        text = self.cache.get_text(key)
        if text is not None:
            self.outcome.cached += 1
            return dict(json.loads(text))
        try:
            reply = await generate_case(self.client, self.settings, payload)
        except JudgeBudgetExceeded as exc:
            self.outcome.stopped = str(exc)
            return None
        except JudgeError as exc:
            self.outcome.dropped.append(f"{kind}: the judge failed ({exc})")
            return None
        text = json.dumps(reply, ensure_ascii=False)
        self.cache.put_text(key, self.client.redactor(text), {"kind": GENERATE, "case_kind": kind})
        return dict(json.loads(text))

    async def keep(self, kind: str, row: dict[str, Any]) -> None:
        async with self.lock:
            why = _refused(row, self.seen_text, self.seen_tokens)
            if why:
                self.outcome.dropped.append(f"{kind}: {why}")
                return
            self.seen_text.add(normalised(row["question"]))
            self.seen_tokens.append(squad_tokens(row["question"]))
            self.outcome.cases.append(row)


def _row(kind: str, reply: Mapping[str, Any], passages: Sequence[tuple[str, str]], canary: str | None, model: str) -> dict[str, Any]:
    question = reply["question"]
    row: dict[str, Any] = {"id": "gen-" + hashlib.sha1(question.encode()).hexdigest()[:10], "question": question}
    if kind in ("out_of_scope", "adversarial"):
        row["type"] = kind
    else:
        row["ground_truth"] = reply.get("ground_truth")
        row["relevant_doc_ids"] = [i for i, _ in passages]
    row["question_type"] = kind
    meta: dict[str, Any] = {"generated": True, "review": "pending", "generator": f"rag-gate golden generate ({model})",
                            "source_ids": [i for i, _ in passages]}
    if canary:
        meta["canary"] = canary
    row["metadata"] = meta
    return row


def _refused(row: Mapping[str, Any], seen_text: set[str], seen_tokens: Sequence[list[str]]) -> str | None:
    """Why a candidate is not kept: not a valid golden case, or a duplicate of a case or of a kept candidate."""
    parsed = parse_case(dict(row))
    if isinstance(parsed, str):
        return f"not a valid case ({parsed})"
    if parsed.answerable and not parsed.ground_truth:
        return "the judge gave no ground_truth"
    if normalised(row["question"]) in seen_text:
        return f"duplicate question ({row['question'][:80]})"
    if _similar(row["question"], seen_tokens):
        return f"near-duplicate question ({row['question'][:80]})"
    return None
