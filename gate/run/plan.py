"""``rag-gate plan``: what a run will do and spend, before it spends.

It loads the spec, the golden set, the history and the baseline as a run does, draws the same samples, asks the
target for the judged sample only (``--no-target``: asks nothing and assumes nothing cached), builds the cache keys
the run would build and looks them up. Judge calls are estimated per metric from the calls each engine makes per
judged sample (``CALLS``, measured against the OpenAI-compatible test judge: a metric's call count does not depend
on what the judge answers, only, for a few, on the number of contexts), plus what is judged whatever the cache
holds: the self-check's second judgings and the paired runs' changed answers (same-run pairs). Tokens are
estimated from the size of what each call sends; the cost from ``judge.prices``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gate.core.catalog import EngineMetric
from gate.core.model import GoldenCase
from gate.core.settings import GenerationSettings, NoiseSettings, RobustnessSettings
from gate.judges import judge_cost, resolve_judge
from gate.run.ask import collect_outputs
from gate.run.load import Loaded, load
from gate.run.measure import paired_runs, window_refs
from gate.run.options import RunOptions
from gate.stages.context import StageContext
from gate.stages.generation import TaskList, make_tasks
from gate.stages.judging import JudgeSession, Task, open_cache
from gate.stages.pairing import pair_up
from gate.stages.windows import anchor_tasks
from gate.targets.factory import make_target

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


def calls_of(tasks: Sequence[Task]) -> int:
    return sum(calls_per_sample(t.scored.engine, t.scored.metric, len(t.item.contexts)) for t in tasks)


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
    judge: bool = False  # the spec configures a judge
    traces: str = ""  # a traces run: what it read and sampled, in words
    anchor_calls: int = 0  # a traces run: the earlier windows' anchor traces judged again (never from the cache)
    asked_again: list[str] = field(default_factory=list)  # the paraphrase and stability tests, in words

    @property
    def judge_calls(self) -> int:
        return (sum(m.calls for m in self.metrics) + self.self_check_calls + self.pairing_calls + self.steps_calls + self.robustness_calls
                + self.anchor_calls)


def make_plan(config: str, *, ask_target: bool = True, env: Mapping[str, str] | None = None) -> RunPlan:
    """The plan of the run ``config`` describes."""
    loaded = load(config, RunOptions(), unset_ok=not ask_target)
    spec, cases = loaded.spec, loaded.cases
    answerable = [c for c in cases if c.answerable]
    gen = spec.stages.generation
    sample = (answerable if loaded.traces else gen.sample.draw(cases)) if gen else []  # a traces run judges every sampled trace
    plan = RunPlan(cases=len(cases), answerable=len(answerable), retrieval_cases=len(answerable) if spec.stages.retrieval else 0,
                   sample=len(sample), target_calls=len(cases))
    plan.judge = spec.judge is not None
    if loaded.traces is not None:
        t = loaded.traces.info
        plan.traces = (f"traces: {t['sampled']} sampled of {t['in_window']} in the window from {t['read']} read"
                       + (f", {t['unreadable']} unreadable" if t["unreadable"] else "") + f" ({t['path']}, {t['format']})")
        plan.target_calls = 0
    if loaded.pending:
        plan.notes.append(f"{loaded.pending} generated case(s) await review and are left out")
    noise = spec.stages.robustness.noise if spec.stages.robustness else None
    if noise is not None:
        _plan_noise(plan, noise, cases)
    if spec.stages.robustness is not None:
        _plan_asked_again(plan, spec.stages.robustness, cases)
    if gen is None:
        return plan
    judge, why_not = resolve_judge(spec.judge, os.environ if env is None else env, secrets=spec.secrets)
    runnable = [m for m in gen.metrics if m.engine == "offline" or judge is not None]
    plan.metrics = [MetricEstimate(m.name, m.engine, sampled=len(sample), not_judged=None if m in runnable else f"not evaluated: {why_not}")
                    for m in gen.metrics]
    if not ask_target:
        for estimate, m in zip(plan.metrics, gen.metrics, strict=True):
            if m in runnable:
                estimate.to_judge = len(sample)
                estimate.calls = len(sample) * calls_per_sample(m.engine, m.metric, spec.target_k)
        plan.notes.append("the target was not asked: every sampled case is counted as to judge, with k contexts each")
        _tokens(plan, loaded, [])
        return plan
    with make_target(spec, cases, loaded.deadline, loaded.traces.outputs if loaded.traces else None, loaded.results_read) as target:
        outputs = collect_outputs(target, sample, spec.target_k)
    cache = open_cache(spec, spec.resolve(spec.data["cache"]["path"]).exists())  # a plan never creates the cache file
    try:
        ctx = StageContext(cases, outputs, cache, judge=judge, redactor=spec.redactor())  # the run's cache keys: redacted inputs
        session = JudgeSession.open({m.engine for m in runnable}, ctx, gen.criteria)
        todo = _plan_judging(plan, loaded, gen, sample, make_tasks(sample, outputs, runnable, session), session)
        if session.client is not None:
            asyncio.run(session.client.aclose())
    finally:
        cache.close()
    _tokens(plan, loaded, [(t.item.question, t.item.answer, t.item.contexts) for t in todo])
    return plan


def _plan_noise(plan: RunPlan, noise: NoiseSettings, cases: Sequence[GoldenCase]) -> None:
    """The noise test's judge and target calls, at most."""
    sample = noise.sample.draw(cases)
    judged = noise.correctness.judged
    engine = noise.correctness.engine if judged else "offline"
    per = calls_per_sample(engine, "answer_correctness" if engine == "ragas" else "correctness", 3)
    generated = noise.source == "generated"
    plan.robustness_calls = len(sample) * (2 * per + (noise.distractors if generated else 0))
    plan.target_calls += 2 * len(sample)
    plan.robustness_note = (f"noise test: {len(sample)} cases, clean and noisy answers" + (", judged" if judged else ", scored offline")
                            + (", distractors written by the judge" if generated else "")
                            + " (at most: a cached or identical answer costs nothing)")


def _plan_asked_again(plan: RunPlan, robustness: RobustnessSettings, cases: Sequence[GoldenCase]) -> None:
    """The paraphrase and stability tests' target calls, and the judge calls they may add (at most: rewrites and
    answer comparisons are cached)."""
    notes = []
    para = robustness.paraphrase
    if para is not None:
        from gate.stages.paraphrase import labelled

        sample = para.sample.draw([c for c in cases if c.answerable and labelled(c, robustness.match)])
        calls = sum(len(c.paraphrases) or para.generate for c in sample)
        writes = sum(1 for c in sample if not c.paraphrases) if para.generate else 0
        plan.target_calls += calls
        plan.robustness_calls += writes
        notes.append(f"paraphrase test: {len(sample)} cases, {calls} rewrites asked, {writes} judge call(s) writing rewrites")
    stab = robustness.stability
    if stab is not None:
        sample = stab.sample.draw(cases)
        plan.target_calls += stab.repeats * len(sample)
        asks = stab.repeats + 1
        compared = len(sample) * asks * (asks - 1) // 2 if stab.method == "judge" else 0
        plan.robustness_calls += compared
        notes.append(f"stability test: {len(sample)} cases asked {stab.repeats} more time(s)"
                     + (f", {compared} answer comparisons judged" if compared else ""))
    plan.asked_again = notes


def _plan_judging(plan: RunPlan, loaded: Loaded, gen: GenerationSettings, sample: Sequence[GoldenCase], work: TaskList,
                  session: JudgeSession) -> list[Task]:
    """Each metric's cached and to-judge counts and calls, and what is judged whatever the cache holds; the tasks to
    judge."""
    cached, todo = session.split_cached(work.tasks)
    by_name = {m.name: m for m in plan.metrics}
    for t in work.tasks:
        if t.key in cached:
            by_name[t.scored.name].cached += 1
    for t in todo:
        by_name[t.scored.name].to_judge += 1
        by_name[t.scored.name].calls += calls_of([t])
    if gen.self_check:
        check_ids = {c.id for c in sample[: gen.self_check.cases]}
        plan.self_check_calls = calls_of([t for t in work.tasks if t.case_id in check_ids and t.scored.engine != "offline"])
    windows = window_refs(loaded)
    if windows:
        plan.anchor_calls = calls_of(anchor_tasks(windows, plan_metrics(gen, session), session))
    paired = paired_runs(loaded) if loaded.traces is None else []
    if paired:
        judged = [t for t in work.tasks if t.scored.engine != "offline"]  # only a judge's scores are paired
        pairs = pair_up(paired, sample, {c.id for c in loaded.cases}, judged, {t.key for t in todo}, session)
        plan.pairing_calls = calls_of(list(pairs.fresh.values()))
    criteria = {t.scored.metric for t in [*todo, *work.tasks] if t.scored.engine == "deepeval" and (t.scored.engine, t.scored.metric) not in CALLS}
    deepeval = session.engines.get("deepeval")
    if (gen.self_check or todo) and deepeval is not None:
        plan.steps_calls = len([name for name in criteria if not deepeval.kept_steps(name)])
    return todo


def _tokens(plan: RunPlan, loaded: Loaded, items: list[tuple[str, str, tuple[str, ...]]]) -> None:
    """Tokens (about 4 characters each, plus each prompt's instructions and a reply) and the cost at judge.prices."""
    per_item = [len(q) + len(a) + sum(len(c) for c in ctx) for q, a, ctx in items]
    mean_chars = sum(per_item) / len(per_item) if per_item else 2000
    calls = plan.judge_calls
    prompt = int(calls * (PROMPT_OVERHEAD + mean_chars / 4))
    completion = calls * COMPLETION
    plan.tokens = prompt + completion
    plan.cost = judge_cost((loaded.spec.judge or {}).get("prices") or {}, prompt, completion)


def plan_metrics(gen: GenerationSettings, session: JudgeSession) -> list[EngineMetric]:
    """The metrics the session can judge."""
    return [m for m in gen.metrics if m.engine in session.engines]


def render_plan(plan: RunPlan) -> str:
    if plan.traces:
        lines = [plan.traces, "target: nothing asked (the traces hold what the system answered)",
                 f"retrieval: the health of {plan.cases} production calls, no judge"]
    else:
        lines = [f"golden set: {plan.cases} cases ({plan.answerable} answerable)",
                 f"target: about {plan.target_calls} calls" + (" (and the noise test's)" if plan.robustness_calls else "")
                 + (" (the paraphrase and stability tests' included)" if plan.asked_again else ""),
                 f"retrieval: {plan.retrieval_cases} cases scored, no judge"]
    if plan.metrics:
        lines.append(f"generation: {plan.sample} sampled cases")
        lines.append(f"  {'metric':<28} {'engine':<9} {'cached':>6} {'to judge':>8} {'calls':>6}")
        for m in plan.metrics:
            if m.not_judged:
                lines.append(f"  {m.name:<28} {m.engine:<9} {m.not_judged}")
                continue
            if m.engine == "offline":
                lines.append(f"  {m.name:<28} {m.engine:<9} scored in process, no judge call")
                continue
            lines.append(f"  {m.name:<28} {m.engine:<9} {m.cached:>6} {m.to_judge:>8} {m.calls:>6}")
        if plan.self_check_calls:
            lines.append(f"  self-check (judged again, never from the cache): {plan.self_check_calls} calls")
        if plan.anchor_calls:
            lines.append(f"  earlier windows' anchor traces judged again (never from the cache): {plan.anchor_calls} calls")
        if plan.pairing_calls:
            lines.append(f"  reference runs' changed answers judged again (same-run pairs): {plan.pairing_calls} calls")
        if plan.steps_calls:
            lines.append(f"  GEval criteria's evaluation steps (not in the cache yet): {plan.steps_calls} calls")
    if plan.robustness_calls:
        lines.append(f"robustness: up to {plan.robustness_calls} judge calls ({plan.robustness_note or 'the tests that ask again'})")
    lines += [f"robustness: {note}" for note in plan.asked_again]
    if not plan.judge:
        lines.append("judge: none configured, so no judge call (the LLM metrics are reported as not evaluated)")
    else:
        cost = f", cost about {plan.cost:.4f}" if plan.cost is not None else " (set judge.prices for a cost)"
        lines.append(f"judge: about {plan.judge_calls} calls, {plan.tokens:,} tokens{cost}")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines) + "\n"
