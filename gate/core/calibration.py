"""How far to trust each judged metric: its status against the calibration file (``rag-gate calibrate``: people's
labels against this judge), what its gates do when the judge is not shown to agree with people, and the metric's
estimate on the people's scale. Pure (the file is read by gate.run.load).

    calibrated  labels exist for this judge (same model, engine versions and prompt), recent enough, kappa >= min_kappa
    weak        labels for this judge, but kappa below min_kappa (or undefined)
    stale       the labels are older than max_age_days, or were given to another judge (a new model or prompt: label again)
    none        no calibration file, or no labels for the metric

``on_fail`` says what a gate on a metric that is not calibrated does: ``warn`` decides as usual and the comment says
so, ``skip`` skips the gate with the status as its reason, ``error`` makes the gate an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gate.core.agreement import ppi_mean
from gate.core.report import CalibrationInfo, HumanScale, StageResult

STATUSES = ("calibrated", "weak", "stale", "none")


@dataclass(frozen=True)
class CalibrationSettings:
    """The spec's judge.calibration."""

    file: str
    min_kappa: float = 0.6
    max_age_days: float = 90
    on_fail: str = "warn"  # warn | skip | error

    @classmethod
    def read(cls, block: Mapping[str, Any] | None) -> CalibrationSettings | None:
        if not block:
            return None
        return cls(str(block["file"]), float(block.get("min_kappa", 0.6)), float(block.get("max_age_days", 90)),
                   str(block.get("on_fail", "warn")))


def _days(then: str | None, now: str) -> float | None:
    try:
        return (datetime.fromisoformat(now) - datetime.fromisoformat(str(then))).total_seconds() / 86400
    except (TypeError, ValueError):
        return None


def _other_judge(labelled: Mapping[str, Any], judge: Mapping[str, Any], metric: str) -> str | None:
    """What differs between the judge the labels were compared with and this run's (None: the same judge)."""
    if labelled.get("model") != judge.get("model"):
        return f"the labels were compared with the judge {labelled.get('model')}, this run's is {judge.get('model')}"
    for engine, version in (judge.get("engines") or {}).items():
        then = (labelled.get("engines") or {}).get(engine)
        if then is not None and then != version:
            return f"{engine} was {then} when the labels were compared, it is {version} now"
    then_prompt, now_prompt = (labelled.get("prompts") or {}).get(metric), (judge.get("prompts") or {}).get(metric)
    if then_prompt is not None and now_prompt is not None and then_prompt != now_prompt:
        return f"the prompt of {metric} changed since the labels were compared"
    return None


def status_of(metric: str, doc: Mapping[str, Any] | None, judge: Mapping[str, Any], settings: CalibrationSettings,
              now: str) -> CalibrationInfo:
    """One metric's calibration status, with its figures and the reason when it is not calibrated."""
    found = (doc or {}).get("metrics", {}).get(metric) if doc else None
    if doc is None or not isinstance(found, Mapping):
        where = "no calibration file" if doc is None else f"no labels for {metric} in the calibration file"
        return {"status": "none", "reason": f"{where} ({settings.file}): run `rag-gate label` and `rag-gate calibrate`"}
    info: CalibrationInfo = {"status": "calibrated", "kappa": found.get("kappa"), "n": int(found.get("n", 0)),
                             "created_at": str(doc.get("created_at", "")), "reason": ""}
    age = _days(doc.get("created_at"), now)
    other = _other_judge(doc.get("judge") or {}, judge, metric)
    if other is not None:
        info["status"], info["reason"] = "stale", f"stale: {other}; label again"
    elif age is None or age > settings.max_age_days:
        shown = "of unknown age" if age is None else f"{age:.0f} days old"
        info["status"], info["reason"] = "stale", f"stale: the labels are {shown} (max_age_days {settings.max_age_days:g})"
    elif info["kappa"] is None or info["kappa"] < settings.min_kappa:
        shown = "undefined" if info["kappa"] is None else f"{info['kappa']:.2f}"
        info["status"], info["reason"] = "weak", f"weak: the judge agrees with people at kappa {shown}, below min_kappa {settings.min_kappa:g}"
    return info


def human_scale(metric: str, doc: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> HumanScale | None:
    """The prediction-powered estimate of the run's mean on the people's scale, from the calibration file's labelled
    cases of ``metric`` (their judge scores and labels) and this run's judge scores."""
    cases = (doc.get("metrics", {}).get(metric) or {}).get("cases") or []
    run = [float(s["metrics"][metric]) for s in samples if metric in (s.get("metrics") or {})]
    judge = [float(c["judge"]) for c in cases if isinstance(c, Mapping) and "judge" in c and "human" in c]
    human = [float(c["human"]) for c in cases if isinstance(c, Mapping) and "judge" in c and "human" in c]
    return ppi_mean(run, judge, human)


def apply_calibration(stage: StageResult, doc: Mapping[str, Any] | None, settings: CalibrationSettings, now: str) -> list[str]:
    """Give a judged stage its calibration (``stage["calibration"]``), apply ``on_fail`` to the gates of metrics that
    are not calibrated, and return the warnings to show."""
    judge = stage.get("judge")
    if not judge or not judge.get("model"):
        return []
    metrics = [m for m in (judge.get("prompts") or {}) if m in stage["metrics"]] or \
        [m for m in stage["metrics"] if doc and m in doc.get("metrics", {})]
    infos: dict[str, CalibrationInfo] = {}
    for metric in metrics:
        info = status_of(metric, doc, judge, settings, now)
        if doc is not None and info["status"] in ("calibrated", "weak"):
            estimate = human_scale(metric, doc, stage.get("samples", []))
            if estimate is not None:
                info["human_scale"] = estimate
        infos[metric] = info
    if not infos:
        return []
    stage["calibration"] = infos
    warnings: list[str] = []
    from_gates = _status([g["status"] for g in stage["gates"]])  # the stage's status as its gates alone make it
    for g in stage["gates"]:
        found = infos.get(g["metric"])
        if found is None or found["status"] == "calibrated" or g["status"] == "skipped":
            continue
        if settings.on_fail == "skip":
            g["status"], g["reason"] = "skipped", f"judge not calibrated for {g['metric']}: {found['reason']} (on_fail: skip)"
        elif settings.on_fail == "error":
            g["status"], g["reason"] = "error", f"judge not calibrated for {g['metric']}: {found['reason']} (on_fail: error)"
        else:
            warnings.append(f"the {g['metric']} gate rests on a judge that is not calibrated: {found['reason']}")
    if stage["status"] == from_gates:  # not skipped, nor failed by something else (an unstable judge): the gates decide
        stage["status"] = _status([g["status"] for g in stage["gates"]])
    return warnings


def _status(statuses: Sequence[str]) -> Any:
    return "error" if "error" in statuses else "fail" if "fail" in statuses else "pass"

