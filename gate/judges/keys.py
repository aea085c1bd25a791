"""The judge cache's keys: a score's key hashes everything that can change the score, a judge-written text's everything
that can change the text (gate.judges.cache keeps both)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from gate.judges import JudgeInput

KEY_FORMAT = 1  # part of every key: bump when the canonical JSON below changes


@dataclass(frozen=True, slots=True)
class ScoreSource:
    """What makes a score besides the case: the engine and its version, the metric, the judge's model and temperature
    (empty and 0 for an engine with no model) and the metric's prompt fingerprint."""

    engine: str
    engine_version: str
    metric: str
    model: str | None
    temperature: float | None
    prompt_fingerprint: str


def _number(temperature: float | None) -> float | None:
    """A temperature compared as a number: 0, 0.0 and -0.0 the same; ValueError for NaN or infinity."""
    if temperature is None:
        return None
    temperature = float(temperature) + 0.0  # int -> float, -0.0 -> 0.0
    if not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number, not {temperature}")
    return temperature


def cache_key(source: ScoreSource, item: JudgeInput) -> str:
    """sha256 (hex) of a canonical JSON of every input that can change a score."""
    payload = {
        "format": KEY_FORMAT,
        "engine": source.engine,
        "engine_version": source.engine_version,
        "metric": source.metric,
        "model": source.model,
        "temperature": _number(source.temperature),
        "prompt_fingerprint": source.prompt_fingerprint,
        "question": item.question,
        "answer": item.answer,
        "contexts": list(item.contexts),
        "reference": item.ground_truth,  # the key keeps its original field name: cached scores stay valid
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def text_cache_key(kind: str, prompt_fingerprint: str, model: str | None, temperature: float | None, payload: dict[str, Any]) -> str:
    """sha256 (hex) of a canonical JSON of everything that can change a judge-written text.

    ``kind`` names the task (e.g. "distractor", "refusal"); ``payload`` holds its inputs
    (JSON-serialisable, compared after canonical encoding: key order does not matter).
    """
    canonical = json.dumps(
        {
            "format": KEY_FORMAT,
            "namespace": "text",  # never collides with a score key, whose JSON has no such field
            "kind": kind,
            "prompt_fingerprint": prompt_fingerprint,
            "model": model,
            "temperature": _number(temperature),
            "payload": payload,
        },
        sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
