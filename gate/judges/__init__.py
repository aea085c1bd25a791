"""Judges: engines that score one (question, answer, contexts, ground truth) for one metric.

    ragas      gate.judges.ragas_engine.RagasEngine        LLM metrics through ragas.metrics.collections
    deepeval   gate.judges.deepeval_engine.DeepEvalEngine  LLM metrics through deepeval.metrics (+ GEval criteria)
    offline    gate.judges.offline.OfflineEngine           exact_match, token_f1, rouge_l: no model at all

Every LLM call of a run goes through one ``JudgeClient`` (gate.judges.client): one
AsyncOpenAI client, one concurrency limit, one call/token/cost counter, one budget.
Scores are cached by content (gate.judges.cache). Nothing here is imported by a
retrieval-only run: ragas and deepeval are imported only when an engine is built.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gate.core.settings import NO_JUDGE


@dataclass(frozen=True, slots=True)
class JudgeInput:
    """What one metric judges for one case."""

    question: str
    answer: str
    contexts: tuple[str, ...] = ()
    ground_truth: str | None = None  # the golden case's


class JudgeError(Exception):
    """A metric could not be computed for one case; the message is the reason shown to the user."""


class JudgeBudgetExceeded(JudgeError):
    """max_judge_calls was reached: the run stops with a clear message (exit 3)."""


@dataclass(frozen=True)
class JudgeSettings:
    """The spec's ``judge:`` block, resolved (api_key read from the environment variable it names)."""

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_retries: int = 3
    concurrency: int = 16
    embeddings_model: str | None = None
    max_judge_calls: int | None = None
    max_tokens: int | None = None  # cap on each judge reply (None: the engine's default)
    prices: dict[str, float] = field(default_factory=dict)  # input_per_million, output_per_million
    secrets: tuple[str, ...] = ()  # every secret of the run (the key included): no judge error may show one



def resolve_judge(judge: Mapping[str, Any] | None, env: Mapping[str, str], secrets: Sequence[str] = ()) -> tuple[JudgeSettings | None, str]:
    """The spec's ``judge:`` block (validated, defaults filled) as the settings a run uses, with its key read from the
    environment variable it names: (settings, ""), or (None, why the judge cannot be used in this run). The one place
    a judge block is read: every stage of a run, ``plan``, ``validate --ping`` and ``golden generate`` come here."""
    if not judge:
        return None, NO_JUDGE
    key = None
    if judge.get("api_key_env"):
        key = env.get(judge["api_key_env"]) or None
        if key is None:
            return None, f"the judge's key {judge['api_key_env']} is not set in this run (a fork's pull request has no secrets)"
    return JudgeSettings(
        base_url=judge["base_url"], model=judge["model"], api_key=key, temperature=float(judge["temperature"]),
        timeout_s=float(judge["timeout_s"]), max_retries=int(judge["max_retries"]), concurrency=int(judge["concurrency"]),
        embeddings_model=judge.get("embeddings_model"), max_judge_calls=judge.get("max_judge_calls"),
        prices=dict(judge.get("prices", {})), max_tokens=judge.get("max_tokens"), secrets=tuple(secrets),
    ), ""


def judge_cost(prices: Mapping[str, float], prompt: int, completion: int, embedding: int = 0) -> float | None:
    """What the tokens cost at ``judge.prices`` (per million tokens); None when no price is set."""
    if "input_per_million" not in prices and "output_per_million" not in prices:
        return None
    return (prompt * float(prices.get("input_per_million", 0.0)) + completion * float(prices.get("output_per_million", 0.0))
            + embedding * float(prices.get("embeddings_per_million", 0.0))) / 1_000_000


class Engine(Protocol):
    name: str  # "ragas" | "deepeval" | "offline"
    version: str  # library version: part of every cache key

    def metrics(self) -> set[str]:
        """Metric names this engine computes (report names, without the engine prefix)."""

    def needs(self, metric: str) -> set[str]:
        """Inputs the metric requires besides question and answer: a subset of {"contexts", "ground_truth"}."""

    def prompt_fingerprint(self, metric: str) -> str:
        """Text that changes when the metric's prompt or criteria change (hashed into the cache key)."""

    async def score(self, metric: str, item: JudgeInput) -> float:
        """The score in [0, 1]. Raises JudgeError with the reason when it cannot be computed."""

    def kept_steps(self, criterion: str) -> list[str] | None:
        """A GEval criterion's evaluation steps as the cache keeps them; None when none are kept (or the engine has no
        criteria)."""

    async def aclose(self) -> None: ...


def has_input(item: JudgeInput, need: str) -> bool:
    """Whether ``item`` carries what a metric needs besides question and answer ("contexts" or "ground_truth")."""
    if need == "contexts":
        return any(c.strip() for c in item.contexts)
    return bool(item.ground_truth and item.ground_truth.strip())


def checked_score(value: Any, metric: str, *, engine: str, no_score: str | None = None) -> float:
    """An engine's score as a float in [0, 1], or JudgeError: None, NaN or a non-number is "no score" (``no_score`` says
    why, when the engine knows), a value outside [0, 1] beyond float noise is refused. Every engine's score passes here
    once, so a NaN is never cached, averaged or gated."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise JudgeError(no_score or f"{engine} returned no score for {metric}")
    value = float(value)
    if -1e-9 <= value < 0.0 or 1.0 < value <= 1.0 + 1e-9:
        return min(1.0, max(0.0, value))
    if not 0.0 <= value <= 1.0:
        raise JudgeError(f"{engine} returned {value:g} for {metric}, outside [0, 1]")
    return value


def telemetry_off() -> None:
    """Turn off ragas's and deepeval's telemetry unless the user turned it on themselves.

    ragas honours only the string "true" ("1" does not turn it off); deepeval takes DEEPEVAL_TELEMETRY_OPT_OUT.
    """
    if os.environ.get("RAG_GATE_JUDGE_TELEMETRY", "").lower() not in ("1", "true", "yes"):
        os.environ["RAGAS_DO_NOT_TRACK"] = "true"
        os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] = "1"
        os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "0")
    # `import deepeval` would otherwise load the user's .env files and key file into os.environ
    os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
    os.environ.setdefault("DEEPEVAL_DISABLE_LEGACY_KEYFILE", "1")
