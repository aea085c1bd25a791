"""The metric catalog: every metric name rag-gate knows, the stage that computes it, and which way is better.

    retrieval   hit_rate@k, mrr[@k], recall@k, precision@k, ndcg[@k], map[@k], context_recall@k
    health      error_rate, mean/p50/p95/p99_latency_ms (of the target calls)
    generation  ragas and deepeval LLM metrics, GEval criteria, and exact_match / token_f1 / rouge_l; a traces run's
                refusal_rate and negative_feedback_rate
    robustness  noise_robustness, clean/noisy_accuracy, rejection_rate, false_rejection_rate,
                adversarial_pass_rate

Every metric name in a report matches ``METRIC_NAME_PATTERN`` (the report schema uses the same one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# name -> (needs k, may take k)
RETRIEVAL_BASES: dict[str, tuple[bool, bool]] = {
    "hit_rate": (True, True),
    "mrr": (False, True),
    "recall": (True, True),
    "precision": (True, True),
    "ndcg": (False, True),
    "map": (False, True),
    "context_recall": (True, True),
}
HEALTH_METRICS: dict[str, str] = {
    "error_rate": "share of target calls that failed",
    "mean_latency_ms": "mean latency of the target calls that succeeded",
    "p50_latency_ms": "median latency of the target calls that succeeded",
    "p95_latency_ms": "95th percentile latency of the target calls that succeeded",
    "p99_latency_ms": "99th percentile latency of the target calls that succeeded",
    "mean_total_tokens": "mean tokens the RAG system reported for a call (its usage)",
    "p95_total_tokens": "95th percentile of the tokens the RAG system reported for a call",
    "cache_hit_rate": "share of the calls the RAG system answered from its own cache (its cached flag)",
}
HIGHER_IS_BETTER_HEALTH = frozenset({"cache_hit_rate"})
RAGAS_METRICS = frozenset({"faithfulness", "answer_relevancy", "context_precision", "context_recall", "answer_correctness",
                           "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"})
DEEPEVAL_METRICS = frozenset(
    {"faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevancy", "hallucination"}
)
OFFLINE_METRICS = frozenset({"exact_match", "token_f1", "rouge_l"})
# the generation stage's answer checks (gate.stages.answers): computed over every answerable case, never listed in metrics
CHECK_METRICS = ("keyword_coverage", "check_pass_rate")
# a traces run's generation stage (gate.stages.traffic): exact shares of the sampled traces, computed with no model
TRAFFIC_METRICS = ("refusal_rate", "negative_feedback_rate")
# the robustness stage's paraphrase and stability tests (gate.stages.paraphrase, gate.stages.stability): exact figures
# of the answers once the rewrites are fixed (a "@k" name takes the test's cut-off)
PARAPHRASE_METRICS = ("paraphrase_robustness", "paraphrase_gap")
STABILITY_METRICS = ("retrieval_stability", "answer_stability", "correctness_flip_rate")
NOISE_METRICS = ("noise_robustness", "clean_accuracy", "noisy_accuracy")
REJECTION_METRICS = ("rejection_rate", "false_rejection_rate", "adversarial_pass_rate")

# Stages whose metrics come from a judge: noisy, so their per-case scores are kept and compared case by case.
PER_CASE_STAGES = ("generation", "robustness")
FAITHFULNESS_LIKE = ("faithfulness", "deepeval/faithfulness", "ragas/faithfulness", "hallucination", "deepeval/hallucination")

# deepeval 4's hallucination is higher-is-better; ragas's noise sensitivity (share of misled claims) is not
LOWER_IS_BETTER = frozenset({"false_rejection_rate", "noise_sensitivity_relevant", "noise_sensitivity_irrelevant", *TRAFFIC_METRICS,
                             "paraphrase_gap", "correctness_flip_rate",
                             *(set(HEALTH_METRICS) - HIGHER_IS_BETTER_HEALTH)})

# Every metric name a report may carry: an optional engine prefix, a lower-case name, an optional cut-off.
METRIC_NAME_PATTERN = r"^((ragas|deepeval)/)?[a-z][a-z0-9_]*(@[1-9][0-9]*)?$"
_RETRIEVAL_NAME = re.compile(r"^([a-z_]+)(?:@([1-9][0-9]*))?$")


@dataclass(frozen=True, slots=True)
class MetricName:
    """A parsed retrieval or health metric name such as ``ndcg@10``."""

    name: str
    base: str
    k: int | None
    higher_is_better: bool = True


def retrieval_metric_names() -> list[str]:
    """The retrieval metrics as a reader writes them: ``hit_rate@k``, ``mrr[@k]``..."""
    return [f"{b}@k" if needs_k else f"{b}[@k]" for b, (needs_k, _) in RETRIEVAL_BASES.items()]


def parse_metric(name: str) -> MetricName:
    """Parse a retrieval or health metric name; ValueError with a sentence if unknown."""
    if name in HEALTH_METRICS:
        return MetricName(name, name, None, higher_is_better=name in HIGHER_IS_BETTER_HEALTH)
    m = _RETRIEVAL_NAME.fullmatch(name)  # fullmatch: "$" alone would accept a trailing newline ("mrr\n")
    if not m or m.group(1) not in RETRIEVAL_BASES:
        known = ", ".join(retrieval_metric_names())
        raise ValueError(f"unknown metric {name!r}; retrieval metrics are {known}; health metrics are {', '.join(HEALTH_METRICS)}")
    base, k = m.group(1), m.group(2)
    if RETRIEVAL_BASES[base][0] and k is None:
        raise ValueError(f"metric {name!r} needs a cut-off, e.g. {base}@5")
    return MetricName(name, base, int(k) if k else None)


def judge_noise(stage: str, metric: str) -> bool:
    """Whether a stage's metric carries a judge's noise, so that its relative gates decide on paired statistics;
    otherwise it is an exact figure of the answers (retrieval and health metrics, the offline text metrics
    exact_match, token_f1 and rouge_l), gated as an exact number like a retrieval metric."""
    base = metric.split("@", 1)[0]
    return (stage in PER_CASE_STAGES and metric not in OFFLINE_METRICS and metric not in CHECK_METRICS and metric not in TRAFFIC_METRICS
            and base not in PARAPHRASE_METRICS and base not in STABILITY_METRICS)


def higher_is_better(name: str) -> bool:
    """Direction of a metric by name (its cut-off aside); judge metrics are higher-better unless listed in LOWER_IS_BETTER."""
    return name not in LOWER_IS_BETTER and name.split("@", 1)[0] not in LOWER_IS_BETTER


@dataclass(frozen=True)
class EngineMetric:
    """Which engine computes a generation metric, and the name it has in the report."""

    name: str  # the name in the report
    engine: str  # ragas | deepeval | offline
    metric: str  # the engine's metric name


def engine_metrics(cfg: Mapping[str, Any]) -> list[EngineMetric]:
    """Which engine computes which metric of a generation stage's settings, and the report names.
    ValueError with a sentence if a metric is unknown.

    A metric keeps its plain name unless two engines compute it, then the second is
    engine-prefixed (``faithfulness`` and ``deepeval/faithfulness``).
    """
    default = cfg.get("engine", "ragas")
    criteria = dict(cfg.get("criteria", {}))
    raw: list[tuple[str, str, str]] = []  # (as written, engine, metric)
    for written in cfg["metrics"]:
        engine, _, metric = written.rpartition("/")
        if metric in CHECK_METRICS:
            raise ValueError(f"{written!r} is an answer check, computed whenever a case has expected_keywords (keyword_coverage) or "
                             "a check applies (check_pass_rate): gate it under stages.generation.gates without listing it in metrics")
        if metric in OFFLINE_METRICS:
            if engine:
                raise ValueError(f"{written!r}: {metric} needs no LLM engine; write it without a prefix")
            raw.append((written, "offline", metric))
            continue
        if metric in criteria:
            if engine not in ("", "deepeval"):
                raise ValueError(f"{written!r}: custom criteria are judged by deepeval (GEval)")
            raw.append((written, "deepeval", metric))
            continue
        engine = engine or default
        known = RAGAS_METRICS if engine == "ragas" else DEEPEVAL_METRICS
        if metric not in known:
            both = sorted(RAGAS_METRICS | DEEPEVAL_METRICS | OFFLINE_METRICS)
            hint = generation_metric_hint(written, criteria)
            raise ValueError(
                f"{written!r} is not a {engine} metric{hint}; known: {', '.join(both)} (ragas: {', '.join(sorted(RAGAS_METRICS))}; "
                f"deepeval: {', '.join(sorted(DEEPEVAL_METRICS))}), or a name from criteria"
            )
        raw.append((written, engine, metric))
    for name in criteria:
        if name not in [m for _, _, m in raw]:
            raw.append((name, "deepeval", name))
    counts: dict[str, int] = {}
    for _, _, metric in raw:
        counts[metric] = counts.get(metric, 0) + 1
    plans, seen = [], set()
    for written, engine, metric in raw:
        name = metric if counts[metric] == 1 or engine == default else f"{engine}/{metric}"
        if name in seen:
            raise ValueError(f"metric {written!r} is listed twice")
        seen.add(name)
        plans.append(EngineMetric(name, engine, metric))
    return plans


def robustness_metric_names(stage_cfg: Mapping[str, Any], k: int = 5) -> set[str]:
    """The metrics a robustness stage computes: rejection always, noise, paraphrase and stability when configured (the
    last two's "@k" names with their test's cut-off: ``k``, the spec's; paraphrase: the smallest k of its metrics)."""
    names = set(REJECTION_METRICS) | (set(NOISE_METRICS) if stage_cfg.get("noise") else set())
    paraphrase = stage_cfg.get("paraphrase")
    if paraphrase:
        ks = [m.k for m in map(parse_metric, paraphrase.get("metrics", ["hit_rate@5"])) if m.k]
        names |= {"paraphrase_robustness", *(f"paraphrase_gap@{k}" for k in sorted(set(ks)))}
    if stage_cfg.get("stability"):
        names |= {"answer_stability", "correctness_flip_rate", f"retrieval_stability@{k}"}
    return names


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a mistyped one (difflib, cutoff 0.6, ignoring case); None when none is close or it
    is the name itself."""
    by_lower = {k.lower(): k for k in sorted(set(known), reverse=True)}  # the first spelling wins on a case clash
    import difflib  # only for a name that is mistyped

    close = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close and by_lower[close[0]] != name else None


def generation_metric_names(criteria: Iterable[str] = ()) -> set[str]:
    """Every name a generation stage may list without an engine prefix: the engines' metrics, the no-model ones, criteria."""
    return set(RAGAS_METRICS | DEEPEVAL_METRICS | OFFLINE_METRICS) | set(criteria)


def suggest_generation_metric(written: str, criteria: Iterable[str] = ()) -> str | None:
    """How a mistyped generation metric was probably meant (``token-f1`` -> ``token_f1``, ``deepeval/faithfulnes``
    -> ``deepeval/faithfulness``); None when nothing is close."""
    engine, _, metric = written.rpartition("/")
    criteria = set(criteria)
    match = did_you_mean(metric, generation_metric_names(criteria))
    if match is None:
        return None
    if engine in ("ragas", "deepeval") and match not in OFFLINE_METRICS:
        if match in criteria and engine != "deepeval":
            return match
        match = f"{engine}/{match}"
    return match if match != written else None


def suggest_retrieval_metric(name: str) -> str | None:
    """How a mistyped retrieval or health metric was probably meant, keeping its cut-off (``hits@5`` -> ``hit_rate@5``,
    ``ndgc`` -> ``ndcg``, ``hitrate`` -> ``hit_rate@k``); None when nothing is close."""
    base, at, k = name.partition("@")
    spellings: dict[str, str] = {h: h for h in HEALTH_METRICS}  # compared -> shown
    for b, (needs_k, _) in RETRIEVAL_BASES.items():
        if at:
            spellings[f"{b}@{k}"] = f"{b}@{k}" if re.fullmatch(r"[1-9][0-9]*", k) else f"{b}@k"
        else:
            spellings[b] = f"{b}@k" if needs_k else b
    match = did_you_mean(name, spellings)
    shown = spellings[match] if match is not None else None
    return shown if shown != name else None


def generation_metric_hint(written: str, criteria: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for a mistyped generation metric, or a pointer to the retrieval stage; "" otherwise."""
    suggestion = suggest_generation_metric(written, criteria)
    if suggestion:
        return f" (did you mean {suggestion!r}?)"
    return " (a retrieval metric: list it under stages.retrieval.metrics)" if is_retrieval_metric_name(written) else ""


def is_retrieval_metric_name(name: str) -> bool:
    """True for a name of the retrieval stage, written right or without its cut-off (``mrr``, ``recall``, ``ndcg@10``)."""
    m = _RETRIEVAL_NAME.fullmatch(name)
    return bool(m and m.group(1) in RETRIEVAL_BASES) or name in HEALTH_METRICS
