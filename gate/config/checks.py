"""What the spec's schema cannot say: metric names, gates on metrics that are computed, the judge's model
pinned, an embeddings model where a metric needs one. Each check returns every error it finds."""

from __future__ import annotations

import importlib.util
import os
import re

from gate.config.spec import Spec
from gate.core.catalog import (
    CHECK_METRICS,
    HEALTH_METRICS,
    OFFLINE_METRICS,
    TRAFFIC_METRICS,
    engine_metrics,
    higher_is_better,
    parse_metric,
    robustness_metric_names,
)
from gate.core.errors import InputError
from gate.core.goldencheck import REFERENCE_METRICS


def _check_generation(spec: Spec) -> list[InputError]:
    stage = spec.data["stages"].get("generation")
    if not stage:
        return []
    try:
        names = {p.name for p in engine_metrics(stage)}
    except ValueError as exc:
        return [spec.error(str(exc), "stages", "generation", "metrics")]
    errors = [
        spec.error(f"gate on {metric!r}, which is not computed; computed here: {', '.join(sorted(names))} (and the answer "
                   f"checks {', '.join(CHECK_METRICS)}, without listing them)", "stages", "generation", "gates", metric)
        for metric in stage.get("gates", {})
        if metric not in names and metric not in CHECK_METRICS and metric not in TRAFFIC_METRICS
    ]
    if "traces" not in spec.data["target"]:
        errors += [spec.error(f"{metric} is measured on production traces (target.traces); a golden-set run has no traffic to count "
                              "(the robustness stage's rejection_rate measures refusals on a golden set)", "stages", "generation", "gates", metric)
                   for metric in stage.get("gates", {}) if metric in TRAFFIC_METRICS]
    regex = (stage.get("checks") or {}).get("regex")
    if isinstance(regex, str):
        try:
            re.compile(regex)
        except re.error as exc:
            errors.append(spec.error(f"no regular expression: {exc}", "stages", "generation", "checks", "regex"))
    return errors


def _check_robustness(spec: Spec) -> list[InputError]:
    stage = spec.data["stages"].get("robustness")
    if not stage:
        return []
    errors = []
    noise = stage.get("noise") or {}
    if noise.get("source") == "file" and not noise.get("file"):
        errors.append(spec.error("source: file needs file: (a JSONL of {id, distractors})", "stages", "robustness", "noise", "source"))
    names = robustness_metric_names(stage, spec.data_cutoff)
    for metric in stage.get("gates", {}):
        if metric not in names:
            errors.append(spec.error(f"gate on {metric!r}, which is not computed; computed here: {', '.join(sorted(names))}",
                                     "stages", "robustness", "gates", metric))
    return errors


def _check_embeddings(spec: Spec) -> list[InputError]:
    """ragas answer_relevancy and answer_correctness need an embeddings model on the judge's endpoint."""
    judge = spec.data.get("judge")
    if not judge or judge.get("embeddings_model"):
        return []
    errors = []
    gen = spec.data["stages"].get("generation") or {}
    if gen:
        try:
            plans = engine_metrics(gen)
        except ValueError:
            plans = []
        for p in plans:
            if p.engine == "ragas" and p.metric in ("answer_relevancy", "answer_correctness"):
                errors.append(spec.error(f"ragas {p.metric} needs judge.embeddings_model (e.g. text-embedding-3-small), "
                                         f"or compute it with deepeval/{p.metric}" if p.metric == "answer_relevancy" else
                                         f"ragas {p.metric} needs judge.embeddings_model (e.g. text-embedding-3-small)",
                                         "stages", "generation", "metrics"))
    corr = ((spec.data["stages"].get("robustness") or {}).get("noise") or {}).get("correctness") or {}
    if corr.get("method") == "judge" and corr.get("engine", "ragas") == "ragas":
        errors.append(spec.error("ragas answer_correctness needs judge.embeddings_model (e.g. text-embedding-3-small), "
                                 "or set engine: deepeval", "stages", "robustness", "noise", "correctness"))
    return errors


def _check_judge(spec: Spec) -> list[InputError]:
    judge = spec.data.get("judge")
    if not judge or judge.get("allow_floating_model") or "${" in judge["model"]:
        return []
    from gate.judges.models import is_floating_model

    if not is_floating_model(judge["model"]):
        return []
    return [spec.error(
        f"judge model {judge['model']!r} is a floating alias: when the provider updates it, the scores move without any "
        "change of yours",
        "judge", "model",
        hint=f"pin a dated version (e.g. {judge['model'].removesuffix('-latest')}-2024-11-20, as your provider lists it), "
             "or set judge.allow_floating_model: true",
    )]


# What each kind of judging imports (checked with find_spec: nothing is imported to check it)
ENGINE_MODULES = {"ragas": ("ragas", "openai", "httpx", "instructor"), "deepeval": ("deepeval", "openai", "httpx"),
                  "rag-gate": ("openai", "httpx")}  # rag-gate's own prompts: generated distractors, refusal classification


def _judging(spec: Spec) -> tuple[set[str], tuple[str | int, ...]]:
    """The judge engines the spec's stages use (none without a judge: those metrics are reported as not evaluated),
    and the key that uses the first of them."""
    if not spec.data.get("judge"):
        return set(), ()
    used: set[str] = set()
    where: tuple[str | int, ...] = ()
    gen = spec.data["stages"].get("generation")
    if gen:
        try:
            engines = {p.engine for p in engine_metrics(gen)} - {"offline"}
        except ValueError:
            engines = set()
        if engines:
            used |= engines
            where = ("stages", "generation", "metrics")
    rob = spec.data["stages"].get("robustness") or {}
    noise = rob.get("noise") or {}
    correctness = noise.get("correctness") or {}
    if correctness.get("method") == "judge":
        used.add(correctness.get("engine", "ragas"))
        where = where or ("stages", "robustness", "noise", "correctness")
    if noise.get("source") == "generated" or (rob.get("rejection") or {}).get("judge"):
        used.add("rag-gate")
        where = where or ("stages", "robustness")
    return used, where


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _check_engines(spec: Spec) -> list[InputError]:
    """A judge configured without the judge engines installed: say so now, not after every question was asked."""
    used, where = _judging(spec)
    missing = sorted({m for engine in used for m in ENGINE_MODULES.get(engine, ()) if not _installed(m)})  # ${E} engines: later
    if not missing:
        return []
    return [spec.error(f"the judge metrics need the judge engines, and {', '.join(missing)} "
                       f"{'is' if len(missing) == 1 else 'are'} not installed", *where, hint=_engines_hint())]


def _engines_hint() -> str:
    """Where the judge engines are: the slim image (it sets RAG_GATE_IMAGE=slim) has none, the full one has them."""
    if os.environ.get("RAG_GATE_IMAGE") == "slim":
        return ("this is the action's slim image, which holds no judge engine: use the full action, `uses: OWNER/rag-gate@VERSION` "
                "(not `OWNER/rag-gate/slim@VERSION`), whose image has RAGAS and DeepEval")
    return ("install the judges extra into rag-gate's environment: pip install -e '.[judges]' in a clone of rag-gate, or "
            "pip install 'rag-gate[judges] @ git+https://github.com/OWNER/rag-gate@VERSION' (the action's full Docker image "
            "has them)")


def _check_pair_keys(spec: Spec) -> list[InputError]:
    """case_drop and min_pairs are about same-run pairs of judged answers: the generation stage's judge metrics only
    (an offline text metric is an exact figure of the answers, gated as an exact number)."""
    errors = []
    for stage_name in ("retrieval", "generation", "robustness"):
        for metric, gate in (spec.data["stages"].get(stage_name) or {}).get("gates", {}).items():
            if stage_name == "generation" and metric not in OFFLINE_METRICS and metric not in CHECK_METRICS:
                continue
            for key in ("case_drop", "min_pairs"):
                if key in gate:
                    why = (f"{metric} needs no judge: it is gated as an exact number, like a retrieval metric"
                           if stage_name == "generation" else "their answers are paired with the reference run's")
                    errors.append(spec.error(f"{key} applies to the generation stage's judge metrics ({why}); remove it here",
                                             "stages", stage_name, "gates", metric, key))
    return errors


def _check_traces(spec: Spec) -> list[InputError]:
    """A traces run reads its questions from the traces, which carry no relevance labels and no reference answers."""
    if "traces" not in spec.data["target"]:
        return [] if "golden_set" in spec.data else [spec.error("golden_set is required (the golden set's path), but for a traces "
                                                                "target", "golden_set")]
    stages, errors = spec.data["stages"], []
    if (stages.get("retrieval") or {}).get("metrics"):
        errors.append(spec.error("a traces run has no relevance labels to score retrieval against: write metrics: [] (the health "
                                 "metrics, error_rate and the latencies and tokens, are still measured and may be gated)",
                                 "stages", "retrieval", "metrics"))
    if stages.get("robustness"):
        errors.append(spec.error("a traces run cannot test robustness (it asks the system nothing): run the robustness stage on a "
                                 "golden set", "stages", "robustness"))
    generation = stages.get("generation") or {}
    try:
        reading = sorted({m.name for m in engine_metrics(generation) if m.metric in REFERENCE_METRICS}) if generation else []
    except ValueError:
        reading = []  # said by _check_generation
    if reading:
        errors.append(spec.error(f"{', '.join(reading)} compare{'s' if len(reading) == 1 else ''} with a reference answer or "
                                 "relevance labels, which traces do not carry; judge traces with faithfulness, answer_relevancy, "
                                 "context_relevancy (and the answer checks)", "stages", "generation", "metrics"))
    return errors


def check_semantics(spec: Spec) -> list[InputError]:
    errors: list[InputError] = (_check_traces(spec) + _check_generation(spec) + _check_robustness(spec) + _check_judge(spec)
                                + _check_embeddings(spec) + _check_engines(spec) + _check_pair_keys(spec))
    stage = spec.data["stages"].get("retrieval")
    if stage:
        names = set()
        for i, name in enumerate(stage["metrics"]):
            try:
                names.add(parse_metric(name).name)
            except ValueError as exc:
                errors.append(spec.error(str(exc), "stages", "retrieval", "metrics", i))
        for metric, gate in stage.get("gates", {}).items():
            if metric not in names and metric not in HEALTH_METRICS:
                errors.append(
                    spec.error(
                        f"gate on {metric!r}, which is not computed; add it to stages.retrieval.metrics "
                        f"(or gate a health metric: {', '.join(HEALTH_METRICS)})",
                        "stages", "retrieval", "gates", metric,
                    )
                )
            if "min" in gate and "max" in gate and gate["min"] > gate["max"]:
                errors.append(spec.error("min is larger than max", "stages", "retrieval", "gates", metric))
            if "by" in gate and (metric in HEALTH_METRICS or metric.startswith("context_recall")):
                errors.append(spec.error(f"by: {metric} is not a mean over cases, so it has no per-group value; gate a "
                                         "per-case metric by group (hit_rate, mrr, recall, precision, ndcg, map)",
                                         "stages", "retrieval", "gates", metric, "by"))
    for name in ("generation", "robustness"):
        for metric, gate in ((spec.data["stages"].get(name) or {}).get("gates") or {}).items():
            for key in ("by", "min_group_size"):
                if key in gate and metric not in CHECK_METRICS:
                    errors.append(spec.error(f"{key}: per-group gates apply to retrieval metrics and the answer checks (a judge "
                                             "stage's groups are too small a sample to gate)", "stages", name, "gates", metric, key))
    return errors + _check_share_gates(spec)


def _check_share_gates(spec: Spec) -> list[InputError]:
    """share_below / share_above need a value per case: not on a health metric, context_recall@k (a micro average) or
    a robustness metric (a ratio over the stage's cases); share_below for a higher-is-better metric, share_above for a
    lower-is-better one."""
    errors = []
    for name in ("retrieval", "generation", "robustness"):
        for metric, gate in ((spec.data["stages"].get(name) or {}).get("gates") or {}).items():
            for key in ("share_below", "share_above"):
                if key not in gate:
                    continue
                if name == "robustness" or metric in HEALTH_METRICS or metric.startswith("context_recall"):
                    errors.append(spec.error(f"{key}: {metric} has no value per case (it is a figure of the whole run); a share "
                                             "gate needs a per-case metric", "stages", name, "gates", metric, key))
                elif (key == "share_below") != higher_is_better(metric):
                    other = "share_above" if key == "share_below" else "share_below"
                    errors.append(spec.error(f"{key} on {metric}, for which {'lower' if key == 'share_below' else 'higher'} is "
                                             f"better: write {other}", "stages", name, "gates", metric, key))
    return errors
