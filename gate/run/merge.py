"""The parts of a sharded run made one run again: the per-case data merged, then each stage finished by the stage's
own code (gate.stages.generation.assemble, gate.stages.robustness.finish) and the whole evaluated as a single run's,
so the merged report equals the one a single job would have written (micro averages, never an average of shard
averages). What can differ is said where it arises (``CORPUS_NOTE``) and in docs/sharding.md."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from gate.core.catalog import CHECK_METRICS, NOISE_METRICS
from gate.core.errors import InputError
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.report import CaseResult, MetricPairs, NoiseInfo, Pairing, Part, PartOutput, Report, StageMeasurement
from gate.core.settings import GenerationSettings, RobustnessSettings, StageSettings
from gate.core.usage import sum_usage
from gate.run.context import Measured, run_facts
from gate.run.evaluate import evaluate
from gate.run.flow import Viewed, gc_paused, viewed
from gate.run.load import load
from gate.run.options import RunOptions
from gate.run.parts import PART_HINT, check_parts, part_files, read_part
from gate.stages.answers import answer_checks
from gate.stages.generation import GenerationScores, SelfCheckScores, assemble, with_answers
from gate.stages.robustness import Answers, NoisePart, finish, noise_metrics

CORPUS_NOTE = ("sharded run: each shard drew the noise test's corpus distractors from the passages retrieved for its own "
               "questions (about 1/{n} of the pool one job draws from), so its noise figures can differ from an unsharded "
               "run's; `noise.source: file` or `generated` gives the same distractors however the run is split")


def in_order(rows: Iterable[CaseResult], ids: Sequence[str], what: str) -> list[CaseResult]:
    """The rows in ``ids`` order; InputError unless they are exactly those cases, each once."""
    by_id: dict[str, CaseResult] = {}
    for row in rows:
        if row["id"] in by_id:
            raise InputError(f"the parts' {what} holds case {row['id']!r} twice", hint=PART_HINT)
        by_id[row["id"]] = row
    if set(by_id) != set(ids):
        lost = sorted(set(ids) - set(by_id))[:5]
        extra = sorted(set(by_id) - set(ids))[:5]
        raise InputError(f"the parts' {what} does not match the sample this spec draws (missing: {lost or 'none'}; "
                         f"not in the sample: {extra or 'none'})", hint=PART_HINT)
    return [by_id[i] for i in ids]


def merge_pairing(records: Sequence[dict[str, Pairing]], order: Mapping[str, int]) -> dict[str, Pairing]:
    """Each paired run's pairs from every shard: counts summed, pairs in sample order (as one run lists them)."""
    out: dict[str, Pairing] = {}
    for key, first in records[0].items():
        pieces = [r[key] for r in records if key in r]
        merged: Pairing = {**first, "added": sorted({i for p in pieces for i in p["added"]}),
                           "judgings": sum(p["judgings"] for p in pieces), "metrics": {}}
        cached = sum(p.get("cached", 0) for p in pieces)
        merged.pop("cached", None)
        if cached:
            merged["cached"] = cached
        for metric in first["metrics"]:
            parts = [p["metrics"][metric] for p in pieces if metric in p["metrics"]]
            cases = sorted((c for p in parts for c in p["cases"]), key=lambda c: order.get(c["id"], len(order)))
            mp: MetricPairs = {"pairs": sum(p["pairs"] for p in parts), "changed": sum(p["changed"] for p in parts),
                               "errored": sum(p["errored"] for p in parts), "cases": cases}
            merged["metrics"][metric] = mp
        out[key] = merged
    return out


def _measured_alike(stages: Sequence[StageMeasurement]) -> list[StageMeasurement]:
    """The shards' generation stages, refused unless every shard measured it with one judge."""
    measured = [s for s in stages if not s.get("skipped")]
    if measured and len(measured) < len(stages):
        raise InputError(f"the generation stage was measured by some shards and skipped by others ({stages[0].get('skipped') or ''}"
                         f"{next((s.get('skipped') for s in stages if s.get('skipped')), '')}): run the skipped shards again "
                         "with the judge's key set", hint=PART_HINT)
    if len({json.dumps(s.get("judge"), sort_keys=True) for s in measured}) > 1:
        raise InputError("the shards were judged by different judges (engine versions or prompts differ): run them on one "
                         "image", hint=PART_HINT)
    return measured


@dataclass(frozen=True)
class WholeRun:
    """What the merge knows of the whole run: every golden case, every answer, and the golden set's folder."""

    cases: Sequence[GoldenCase]
    outputs: Mapping[str, TargetOutput]
    golden_dir: Path | None = None


def merge_generation(settings: GenerationSettings, run: WholeRun, stages: Sequence[StageMeasurement]) -> StageMeasurement:
    """The generation stage of the whole run from its shards' (every metric recomputed from the per-case scores; the
    answer checks computed again from every answer, as one job computes them)."""
    answers = answer_checks(settings.checks, run.cases, run.outputs, run.golden_dir)
    order = [c.id for c in run.cases]
    measured = _measured_alike(stages)
    if not measured:
        return stages[0]
    first = measured[0]
    if "judge" not in first:  # no judge metric could run: the shards measured the answer checks alone
        stage: StageMeasurement = {"metrics": {}, "samples": [], "warnings": list(first["warnings"]), "sample": first["sample"],
                                   "not_evaluated": {m: why for m, why in first["not_evaluated"].items() if m not in CHECK_METRICS}}
        return with_answers(stage, answers, settings, order)
    engines = first["judge"].get("engines", {})
    runnable = [m for m in settings.metrics if m.engine in engines]
    by_id = {c.id: c for c in run.cases}
    judged = set(first["sample"]["ids"])  # the rows of the other cases hold only answer checks: computed again below
    rows = in_order((r for s in measured for r in s["samples"] if r["id"] in judged), first["sample"]["ids"], "generation sample")
    union = {k: v for s in measured for k, v in s.get("texts", {}).items()}
    scores = GenerationScores(
        info=first["sample"], sample=[by_id[r["id"]] for r in rows], runnable=runnable,
        per_case={r["id"]: {m: v for m, v in r["metrics"].items() if m not in CHECK_METRICS} for r in rows},
        errors={r["id"]: r.get("errors", {}) for r in rows},
        not_evaluated={m: why for m, why in first["not_evaluated"].items() if m not in {r.name for r in runnable} and m not in CHECK_METRICS},
        judge=first["judge"], usage=sum_usage([s["usage"] for s in measured], rest=True),
        budget_exceeded=any(s.get("budget_exceeded") for s in measured),
        outputs={r["id"]: r["output"] for r in rows if "output" in r},
    )
    for out in scores.outputs.values():
        scores.texts.update({tid: union[tid] for tid in [*out["contexts"], out["answer"]] if tid is not None})
    if "pairing" in first:
        scores.pairing = merge_pairing([s["pairing"] for s in measured], {cid: i for i, cid in enumerate(first["sample"]["ids"])})
    if "self_check" in first:
        checks = [s["self_check"] for s in measured]
        scores.self_check = SelfCheckScores({m.name: [d for c in checks for d in c.get("diffs", {}).get(m.name, [])] for m in runnable},
                                            sum(c["errored"] for c in checks), sum(c["cases"] for c in checks))
    stage = assemble(scores, settings)
    stage["warnings"] = list(first["warnings"])
    return with_answers(stage, answers, settings, order)


def merge_robustness(settings: RobustnessSettings, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
                     stages: Sequence[StageMeasurement], shards: int) -> StageMeasurement:
    """The robustness stage of the whole run from its shards': the noise rows in sample order with the metrics
    recomputed, the rejection rows recomputed from every answer (with the judge's refusal verdicts the shards got)."""
    first = stages[0]
    noise = NoisePart(target_calls=sum(s.get("target_calls", 0) for s in stages))
    if settings.noise is not None and "noise" in first:
        ids = [c.id for c in settings.noise.sample.draw(cases)]
        noise.rows = in_order((r for s in stages for r in s["samples"]), ids, "noise test")
        noise.info = cast(NoiseInfo, sum_usage([s["noise"] for s in stages], rest=True))
        noise_metrics(noise.rows, noise.metrics, noise.not_evaluated)
    elif settings.noise is not None:
        noise.not_evaluated.update({m: why for m, why in first["not_evaluated"].items() if m in NOISE_METRICS})
    judged = {r["id"]: bool(r.get("refused")) for s in stages for r in s["rejection"]["cases"] if r.get("method") == "judge"}
    variants = []
    if settings.paraphrase is not None:  # the rewrites' figures recomputed from the shards' scores, in sample order
        from gate.stages.paraphrase import merged_part

        variants.append(merged_part(settings.paraphrase, settings.match, cases, outputs, stages))
    stage = finish(noise, settings.rejection, Answers(cases, outputs, judged), [s["usage"] for s in stages if "usage" in s], variants)
    if settings.noise is not None and "noise" in first and first["noise"].get("source") == "corpus" and shards > 1:
        stage["warnings"].append(CORPUS_NOTE.format(n=shards))
    return stage


def _target_output(o: PartOutput) -> TargetOutput:
    return TargetOutput(o["id"], [RetrievedDoc(d["id"], d["text"], d["score"]) for d in o["retrieved"]], o["answer"],
                        list(o["contexts"]), o["latency_ms"], o["error"], o.get("usage"), o.get("cached"), o.get("system"))


def merge(config: str, paths: Sequence[str], options: RunOptions | None = None) -> Report:
    """The report of the run the parts make up (see ``merge_viewed``)."""
    return merge_viewed(config, paths, options).report


def merge_viewed(config: str, paths: Sequence[str], options: RunOptions | None = None) -> Viewed:
    """The report of the run the parts make up, as one job would have written it (``run.shards`` says it was split).
    InputError (exit 2) when the parts are not one run's complete set of shards."""
    started = time.perf_counter()
    options = options or RunOptions()
    with gc_paused():
        loaded = load(config, options, unset_ok=True)  # the merge asks no target and no judge: their variables may be unset
        parts = [(path, read_part(path)) for path in part_files(paths)]
        check_parts(loaded, parts)
        parts.sort(key=lambda pp: pp[1]["shard"]["index"])
        n, spec, cases = parts[0][1]["shard"]["of"], loaded.spec, loaded.cases
        by_id = {o["id"]: _target_output(o) for _, p in parts for o in p["outputs"]}
        outputs = {c.id: by_id[c.id] for c in cases}
        judged = merge_stages(loaded.spec.stages, cases, outputs, [p for _, p in parts], spec.golden_set_path.parent)
        notes = [f"shard {p['shard']['index']} of {n}: {e}" for _, p in parts for e in p["errors"]]
        longest = max(p["run"]["duration_s"] for _, p in parts)
        measured = Measured(outputs, judged, parts[0][1]["target_kind"], parts[0][1]["unmatched"])
        facts = run_facts(loaded, replace(options, commit=options.commit or parts[0][1]["run"]["commit"]), measured,
                          longest + time.perf_counter() - started, " ".join(notes) or None)
        report = evaluate(spec, cases, outputs, facts, judged)
        report["run"]["shards"] = n
        return viewed(report, loaded, outputs, options)


def merge_stages(settings: StageSettings, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
                 parts: Sequence[Part], golden_dir: Path | None = None) -> dict[str, StageMeasurement]:
    """Each judged stage the parts measured, merged (every part must hold it)."""
    judged: dict[str, StageMeasurement] = {}
    for name in ("generation", "robustness"):
        stages = [p["stages"][name] for p in parts if name in p["stages"]]
        if not stages:
            continue
        if len(stages) != len(parts):
            raise InputError(f"the {name} stage is missing from some parts", hint=PART_HINT)
        if name == "generation" and settings.generation is not None:
            judged[name] = merge_generation(settings.generation, WholeRun(cases, outputs, golden_dir), stages)
        elif name == "robustness" and settings.robustness is not None:
            judged[name] = merge_robustness(settings.robustness, cases, outputs, stages, parts[0]["shard"]["of"])
    return judged
