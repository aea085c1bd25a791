"""``rag-gate plan``: what a run will do and spend, before it spends.

It reads the spec, the golden set, the history and the baseline as a run does, draws the same samples, asks the
target for the judged sample only (``--no-target``: asks nothing and assumes nothing cached), builds the cache keys
the run would build and looks them up. Judge calls are estimated per metric from the calls each engine makes per
judged sample (``CALLS``, measured against the OpenAI-compatible test judge: a metric's call count does not depend
on what the judge answers, only, for a few, on the number of contexts), plus what is judged whatever the cache
holds: the self-check's second judgings and the reference runs' changed answers (same-run pairs). Tokens are
estimated from the size of what each call sends; the cost from ``judge.prices``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.core.sampling import JUDGED_CASES, sample_from
from gate.judges import judge_cost

# calls a metric makes per judged sample (k: the sample's contexts); a GEval criterion also derives its steps once
CALLS: dict[tuple[str, str], Callable[[int], int]] = {
    ("ragas", "faithfulness"): lambda k: 2,  # statements, then the verdict on each against the contexts
    ("ragas", "answer_relevancy"): lambda k: 5,  # 3 generated questions, 2 embedding calls
    ("ragas", "context_recall"): lambda k: 1,
    ("ragas", "context_precision"): lambda k: k,  # one verdict per context
    ("ragas", "answer_correctness"): lambda k: 5,
    ("ragas", "noise_sensitivity_relevant"): lambda k: 3 + 2 * k,
    ("ragas", "noise_sensitivity_irrelevant"): lambda k: 3 + 2 * k,
    ("deepeval", "faithfulness"): lambda k: 3,  # truths and claims, then the verdicts
    ("deepeval", "answer_relevancy"): lambda k: 2,
    ("deepeval", "context_precision"): lambda k: 1,
    ("deepeval", "context_recall"): lambda k: 1,
    ("deepeval", "context_relevancy"): lambda k: k,
    ("deepeval", "hallucination"): lambda k: 1,
}
PROMPT_OVERHEAD = 450  # tokens of instructions, examples and schema around a call's own text
COMPLETION = 80  # tokens a judge reply takes, about


def calls_per_sample(engine: str, metric: str, contexts: int) -> int:
    """The calls one judged sample of ``metric`` costs (a deepeval criterion: one GEval call)."""
    if engine == "offline":
        return 0
    known = CALLS.get((engine, metric))
    return known(contexts) if known else 1


@dataclass
class MetricEstimate:
    name: str
    engine: str
    sampled: int = 0
    cached: int = 0
    to_judge: int = 0
    calls: int = 0
    not_judged: str | None = None  # why the run will not judge it (no judge, no key)


@dataclass
class RunPlan:
    cases: int
    answerable: int
    retrieval_cases: int
    sample: int
    target_calls: int
    metrics: list[MetricEstimate] = field(default_factory=list)
    self_check_calls: int = 0
    pairing_calls: int = 0
    steps_calls: int = 0
    robustness_calls: int = 0
    robustness_note: str = ""
    tokens: int = 0
    cost: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def judge_calls(self) -> int:
        return sum(m.calls for m in self.metrics) + self.self_check_calls + self.pairing_calls + self.steps_calls + self.robustness_calls


def make_plan(config: str, *, ask_target: bool = True, env: Mapping[str, str] | None = None) -> RunPlan:
    """The plan of the run ``config`` describes."""
    from gate.core.catalog import engine_metrics
    from gate.pipeline import RunOptions, collect_outputs, load, paired_runs
    from gate.stages.judging import judge_settings, open_cache, split_cached
    from gate.targets.factory import make_target

    environment = os.environ if env is None else env
    loaded = load(config, RunOptions(), unset_ok=not ask_target)
    spec, cases = loaded.spec, loaded.cases
    answerable = [c for c in cases if c.answerable]
    stages = spec.data["stages"]
    gen = stages.get("generation") or {}
    sample = sample_from({"size": JUDGED_CASES, **gen.get("sample", {})}, answerable) if gen else []
    plan = RunPlan(cases=len(cases), answerable=len(answerable), retrieval_cases=len(answerable) if spec.retrieval else 0,
                   sample=len(sample), target_calls=len(cases))
    if loaded.pending:
        plan.notes.append(f"{loaded.pending} generated case(s) await review and are left out")
    rob = stages.get("robustness") or {}
    if rob.get("noise"):
        noise = rob["noise"]
        noise_sample = sample_from(noise.get("sample", {}), answerable)
        judged = (noise.get("correctness") or {}).get("method") == "judge"
        engine = (noise.get("correctness") or {}).get("engine", "ragas") if judged else "offline"
        per = calls_per_sample(engine, "answer_correctness" if engine == "ragas" else "correctness", 3)
        generated = noise.get("source") == "generated"
        plan.robustness_calls = len(noise_sample) * (2 * per + (int(noise.get("distractors", 2)) if generated else 0))
        plan.target_calls += 2 * len(noise_sample) if noise.get("source") != "precomputed" else 0
        plan.robustness_note = (f"noise test: {len(noise_sample)} cases, clean and noisy answers"
                                + (", judged" if judged else ", scored offline") + (", distractors written by the judge" if generated else "")
                                + " (at most: a cached or identical answer costs nothing)")
    if not gen:
        return plan
    settings, why_not = judge_settings(spec.data.get("judge"), environment, secrets=spec.secrets)
    plans = engine_metrics(gen)
    runnable = [p for p in plans if p.engine == "offline" or settings is not None]
    plan.metrics = [MetricEstimate(p.name, p.engine, sampled=len(sample), not_judged=None if p in runnable else f"not evaluated: {why_not}")
                    for p in plans]
    if not ask_target:
        for m, p in zip(plan.metrics, plans, strict=True):
            if p in runnable:
                m.to_judge = len(sample)
                m.calls = len(sample) * calls_per_sample(p.engine, p.metric, spec.target_k)
        plan.notes.append("the target was not asked: every sampled case is counted as to judge, with k contexts each")
        _tokens(plan, spec, [])
        return plan
    target = make_target(spec, cases, loaded.deadline)
    try:
        outputs = collect_outputs(target, sample, spec.target_k)
    finally:
        target.close()
    from gate.stages.generation import plan_tasks
    from gate.stages.judging import build_engines
    from gate.stages.pairing import plan_pairs

    cache = open_cache(spec, spec.resolve(spec.data["cache"]["path"]).exists())  # a plan never creates the cache file
    try:
        engines, client = build_engines({p.engine for p in runnable}, settings, dict(gen.get("criteria", {})), cache)
        tasks = plan_tasks(sample, outputs, runnable, engines, settings, cache).tasks
        cached, todo = split_cached(tasks, cache)
        by_name = {m.name: m for m in plan.metrics}
        for t in tasks:
            m = by_name[t.plan.name]
            if t.key in cached:
                m.cached += 1
        for t in todo:
            m = by_name[t.plan.name]
            m.to_judge += 1
            m.calls += calls_per_sample(t.plan.engine, t.plan.metric, len(t.item.contexts))
        self_cfg = gen.get("self_check")
        if self_cfg:
            check_ids = {c.id for c in sample[: int(self_cfg.get("cases", 10))]}
            plan.self_check_calls = sum(calls_per_sample(t.plan.engine, t.plan.metric, len(t.item.contexts))
                                        for t in tasks if t.case_id in check_ids and t.plan.engine != "offline")
        references = paired_runs(spec, loaded.baseline, loaded.source, loaded.history, _texts(loaded))
        if references:
            pairs = plan_pairs(references, sample, {c.id for c in cases}, tasks, {t.key for t in todo}, engines, settings, cache)
            plan.pairing_calls = sum(calls_per_sample(t.plan.engine, t.plan.metric, len(t.item.contexts)) for t in pairs.fresh.values())
        judged_criteria = {t.plan.metric for t in [*todo, *tasks] if t.plan.engine == "deepeval" and (t.plan.engine, t.plan.metric) not in CALLS}
        if self_cfg or todo:
            kept = getattr(engines.get("deepeval"), "kept_steps", None)
            plan.steps_calls = len([name for name in judged_criteria if kept is not None and not kept(name)])
        if client is not None:
            import asyncio

            asyncio.run(client.aclose())
    finally:
        cache.close()
    _tokens(plan, spec, [(t.item.question, t.item.answer, t.item.contexts) for t in todo])
    return plan


def _texts(loaded: Any) -> dict[str, str]:
    from gate.core.records import text_table

    return text_table(loaded.baseline, *loaded.entries)


def _tokens(plan: RunPlan, spec: Any, items: list[tuple[str, str, tuple[str, ...]]]) -> None:
    """Tokens (about 4 characters each, plus each prompt's instructions and a reply) and the cost at judge.prices."""
    per_item = [len(q) + len(a) + sum(len(c) for c in ctx) for q, a, ctx in items]
    mean_chars = sum(per_item) / len(per_item) if per_item else 2000
    calls = plan.judge_calls
    prompt = int(calls * (PROMPT_OVERHEAD + mean_chars / 4))
    completion = calls * COMPLETION
    plan.tokens = prompt + completion
    plan.cost = judge_cost((spec.data.get("judge") or {}).get("prices") or {}, prompt, completion)


def render_plan(plan: RunPlan) -> str:
    lines = [f"golden set: {plan.cases} cases ({plan.answerable} answerable)",
             f"target: about {plan.target_calls} calls" + (" (and the noise test's)" if plan.robustness_calls else ""),
             f"retrieval: {plan.retrieval_cases} cases scored, no judge"]
    if plan.metrics:
        lines.append(f"generation: {plan.sample} sampled cases")
        lines.append(f"  {'metric':<28} {'engine':<9} {'cached':>6} {'to judge':>8} {'calls':>6}")
        for m in plan.metrics:
            if m.not_judged:
                lines.append(f"  {m.name:<28} {m.engine:<9} {m.not_judged}")
                continue
            lines.append(f"  {m.name:<28} {m.engine:<9} {m.cached:>6} {m.to_judge:>8} {m.calls:>6}")
        if plan.self_check_calls:
            lines.append(f"  self-check (judged again, never from the cache): {plan.self_check_calls} calls")
        if plan.pairing_calls:
            lines.append(f"  reference runs' changed answers judged again (same-run pairs): {plan.pairing_calls} calls")
        if plan.steps_calls:
            lines.append(f"  GEval criteria's evaluation steps (not in the cache yet): {plan.steps_calls} calls")
    if plan.robustness_calls:
        lines.append(f"robustness: up to {plan.robustness_calls} judge calls ({plan.robustness_note})")
    cost = f", cost about {plan.cost:.4f}" if plan.cost is not None else " (set judge.prices for a cost)"
    lines.append(f"judge: about {plan.judge_calls} calls, {plan.tokens:,} tokens{cost}")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines) + "\n"
