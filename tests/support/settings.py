"""Typed stage settings built in a test the way the loader builds them from a spec: the schema's defaults filled in
(gate.config.loader.filled), so a test writes only the keys it is about."""

from __future__ import annotations

from typing import Any

from gate.config.loader import filled, read_settings
from gate.core.settings import GenerationSettings, MatchSettings, RejectionSettings, RetrievalSettings, RobustnessSettings, StageSettings


def match(**keys: Any) -> MatchSettings:
    return MatchSettings.read(filled("$defs/retrieval_stage/properties/match", keys))


def retrieval(metrics: list[str], **keys: Any) -> RetrievalSettings:
    return RetrievalSettings.read(filled("$defs/retrieval_stage", {"metrics": metrics, **keys}))


def generation(metrics: list[str], **keys: Any) -> GenerationSettings:
    return GenerationSettings.read(filled("$defs/generation_stage", {"metrics": metrics, **keys}))


def robustness(match_keys: dict[str, Any] | None = None, **keys: Any) -> RobustnessSettings:
    return RobustnessSettings.read(filled("$defs/robustness_stage", keys), match(**(match_keys or {})))


def http(url: str, **keys: Any) -> dict[str, Any]:
    """A target.http block as the loader fills it."""
    return filled("$defs/http_target", {"url": url, **keys})


def rejection(**keys: Any) -> RejectionSettings:
    return RejectionSettings.read(filled("$defs/robustness_stage/properties/rejection", keys))


def stages(**blocks: Any) -> StageSettings:
    """The typed settings of a spec whose ``stages:`` holds ``blocks`` (each filled with the schema's defaults)."""
    return read_settings({"stages": {name: filled(f"$defs/{name}_stage", block) for name, block in blocks.items()}})
