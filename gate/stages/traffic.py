"""A traces run's own shares, with no model: how often the system declined (``refusal_rate``, by the refusal phrases)
and how often its users rated the answer down (``negative_feedback_rate``, over the rated traces). Exact figures of
the sampled traces; each case's row holds 1 or 0, so the window comparison (gate.core.windows) can test them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gate.core.model import GoldenCase, TargetOutput
from gate.core.rejection import detect_refusal
from gate.core.report import StageMeasurement
from gate.stages.answers import joined
from gate.stages.context import Traffic


def traffic_rows(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
                 traffic: Traffic) -> tuple[dict[str, float], list[dict[str, object]], dict[str, str]]:
    """(the metrics, a row per case with its values, why a metric could not be computed)."""
    rows: list[dict[str, object]] = []
    refused: list[float] = []
    negative: list[float] = []
    for case in cases:
        out = outputs.get(case.id)
        values: dict[str, float] = {}
        if out is not None and out.error is None:
            values["refusal_rate"] = 1.0 if detect_refusal(out.answer, traffic.refusal_phrases) is not None else 0.0
            refused.append(values["refusal_rate"])
        rating = traffic.negative.get(case.id)
        if rating is not None:
            values["negative_feedback_rate"] = 1.0 if rating else 0.0
            negative.append(values["negative_feedback_rate"])
        if values:
            rows.append({"id": case.id, "metrics": values})
    metrics: dict[str, float] = {}
    why: dict[str, str] = {}
    for name, values_of in (("refusal_rate", refused), ("negative_feedback_rate", negative)):
        if values_of:
            metrics[name] = math.fsum(values_of) / len(values_of)
    if not refused:
        why["refusal_rate"] = "no sampled trace has an answer"
    if not negative:
        why["negative_feedback_rate"] = "no sampled trace carries feedback (a user's rating)"
    return metrics, rows, why


def with_traffic(stage: StageMeasurement, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
                 traffic: Traffic | None) -> StageMeasurement:
    """The stage with the traffic shares joined in (a stage skipped for want of a judge is measured with them)."""
    if traffic is None:
        return stage
    metrics, rows, why = traffic_rows(cases, outputs, traffic)
    if not metrics:
        return stage
    if stage.get("skipped") is not None:
        measured: StageMeasurement = {"metrics": {}, "samples": [], "not_evaluated": dict(stage["not_evaluated"]), "warnings": []}
        if "sample" in stage:
            measured["sample"] = stage["sample"]
        stage = measured
    stage["metrics"].update(metrics)
    stage["samples"] = joined(stage["samples"], rows, [c.id for c in cases])
    for metric, reason in why.items():
        stage["not_evaluated"].setdefault(metric, reason)
    return stage
