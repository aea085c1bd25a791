"""Each judged metric's calibration in the comment and the console: one line per metric (its status, kappa, labels
and date, or why it is not calibrated) and, where labels exist for this judge, the metric on the people's scale
beside the judge's own mean. Pure."""

from __future__ import annotations

from gate.core.report import CalibrationInfo, StageResult
from gate.render.escape import cell, code

ICON = {"calibrated": "✅", "weak": "⚠️", "stale": "⚠️", "none": "➖"}


def _figures(info: CalibrationInfo) -> str:
    kappa = info.get("kappa")
    parts = [f"κ {kappa:.2f}" if kappa is not None else "κ undefined", f"{int(info.get('n', 0))} labels"]
    if info.get("created_at"):
        parts.append(str(info["created_at"])[:10])
    return ", ".join(parts)


def _scale(info: CalibrationInfo) -> str:
    hs = info.get("human_scale")
    if not hs:
        return ""
    return (f"; on the people's scale {hs['estimate']:.3f} [{hs['low']:.3f}, {hs['high']:.3f}], the judge's own mean "
            f"{hs['judge_mean']:.3f} [{hs['judge_low']:.3f}, {hs['judge_high']:.3f}]")


def calibration_text(metric: str, info: CalibrationInfo) -> str:
    """One metric's line, plain text (the caller escapes it for Markdown, or prints it)."""
    if info["status"] == "calibrated":
        return f"{metric}: calibrated ({_figures(info)}){_scale(info)}"
    if info["status"] == "none":
        return f"{metric}: not calibrated: {info['reason']}"
    return f"{metric}: {info['reason']} ({_figures(info)}){_scale(info)}"


def calibration_lines(stage: StageResult) -> list[str]:
    """The comment's lines: "Judge calibration" and one item per judged metric."""
    found = stage.get("calibration")
    if not found:
        return []
    lines = ["**Judge calibration** (people's labels against this judge):", ""]
    for metric, info in found.items():
        text = calibration_text(metric, info)
        lines.append(f"- {ICON.get(info['status'], '')} {code(metric, 60)}{cell(text[len(metric):], 500)}")
    return [*lines, ""]


def calibration_console(stage: StageResult) -> list[str]:
    return [f"judge calibration: {calibration_text(m, i)}" for m, i in (stage.get("calibration") or {}).items()]
