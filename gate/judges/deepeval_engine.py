"""deepeval as a judge engine: deepeval metrics on the run's shared client, plus GEval criteria.

    faithfulness        FaithfulnessMetric          contexts             3 chat calls
    answer_relevancy    AnswerRelevancyMetric       -                    2 chat calls
    context_precision   ContextualPrecisionMetric   contexts, ground_truth  1 chat call
    context_recall      ContextualRecallMetric      contexts, ground_truth  1 chat call
    context_relevancy   ContextualRelevancyMetric   contexts             1 chat call per context
    hallucination       HallucinationMetric         contexts             1 chat call
    <criterion name>    GEval(criteria=...)         contexts             1 chat call (+1 for the steps, once: then cached)

Calls are counted with include_reason=False: rag-gate reports scores, so deepeval's
"reason" call is skipped. hallucination is reported as deepeval 4 reports it: the share of
contexts the answer agrees with, so HIGHER is better (deepeval 3 reported the share of
contradictions, lower better; 4.x flipped it).

deepeval's built-in model classes open a new OpenAI client per call; ``SharedClientJudge``
sends every request through the run's one client, asks for a JSON object, validates it
against the schema deepeval passes, and re-asks twice when the reply is not that JSON
(deepeval itself gives up at once). Metric objects keep per-case state: one per call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import re
import warnings
from typing import TYPE_CHECKING, Any

from gate.core.digest import digest_parts
from gate.judges import JudgeError, JudgeInput, JudgeSettings, checked_score, has_input, telemetry_off
from gate.judges.client import JudgeClient

if TYPE_CHECKING:
    from gate.judges.cache import ScoreCache

_BUILTIN: dict[str, tuple[str, set[str]]] = {
    "faithfulness": ("FaithfulnessMetric", {"contexts"}),
    "answer_relevancy": ("AnswerRelevancyMetric", set()),
    "context_precision": ("ContextualPrecisionMetric", {"contexts", "ground_truth"}),
    "context_recall": ("ContextualRecallMetric", {"contexts", "ground_truth"}),
    "context_relevancy": ("ContextualRelevancyMetric", {"contexts"}),
    "hallucination": ("HallucinationMetric", {"contexts"}),
}
_JSON_ATTEMPTS = 3
_SYSTEM = "Reply with one JSON object and nothing else. It must conform to this JSON Schema:\n{schema}"


@functools.lru_cache(maxsize=64)
def _system_prompt(schema: type) -> str:
    """The system message for a reply schema (a pydantic model class): built once per class, not once per call
    (``model_json_schema`` costs more than the rest of a call's preparation)."""
    return _SYSTEM.format(schema=json.dumps(schema.model_json_schema()))  # type: ignore[attr-defined]
_CLASSES: dict[str, type] = {}


def prepare_environment() -> None:
    """Settings deepeval reads at import: no telemetry, no loading of the user's .env files or key file."""
    telemetry_off()
    os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
    os.environ.setdefault("DEEPEVAL_DISABLE_LEGACY_KEYFILE", "1")


def _uses_reference(criterion: str) -> bool:
    """A criterion that speaks of the expected output (ground truth, reference) is shown it too."""
    low = criterion.lower()
    return any(w in low for w in ("expected output", "ground truth", "reference answer"))


class DeepEvalEngine:
    name = "deepeval"

    def __init__(
        self, client: JudgeClient, settings: JudgeSettings, criteria: dict[str, str] | None = None,
        *, max_tokens: int | None = None, cache: ScoreCache | None = None,
    ) -> None:
        """``criteria``: name -> what a GEval judge checks. ``max_tokens`` caps each reply (default: the server's).
        ``cache``: where a criterion's evaluation steps are kept (as a judge text), so that every later run, and every
        shard of a run that restored the cache, scores on the same steps."""
        prepare_environment()
        try:
            import deepeval  # noqa: F401  (reads the environment prepared above)
        except ImportError as exc:
            raise JudgeError(f"the deepeval engine needs deepeval installed (pip install deepeval==4.3.1): {exc}") from None
        from importlib.metadata import version

        self.version: str = version("deepeval")
        self._client = client
        self._fingerprints: dict[str, str] = {}
        self._settings = settings
        self._criteria = dict(criteria or {})
        clash = sorted(set(self._criteria) & set(_BUILTIN))
        if clash:
            raise JudgeError(f"criterion name {clash[0]!r} is a deepeval metric already; give the criterion another name")
        empty = sorted(name for name, text in self._criteria.items() if not text or not text.strip())
        if empty:
            raise JudgeError(f"criterion {empty[0]!r} has no text: write what the judge should check")
        self._model = _model_class()(client, settings, max_tokens)
        self._steps: dict[str, list[str]] = {}
        self._steps_locks: dict[str, asyncio.Lock] = {}
        self._cache = cache

    def metrics(self) -> set[str]:
        return set(_BUILTIN) | set(self._criteria)

    def needs(self, metric: str) -> set[str]:
        self._check_known(metric)
        if metric in _BUILTIN:
            return set(_BUILTIN[metric][1])
        return {"contexts", "ground_truth"} if _uses_reference(self._criteria[metric]) else {"contexts"}

    def prompt_fingerprint(self, metric: str) -> str:
        """The metric's prompt templates (and the fragments they include), our JSON instruction, and criteria."""
        self._check_known(metric)
        known = self._fingerprints.get(metric)
        if known is None:  # rendered once per metric: every task's cache key includes it
            known = self._fingerprints[metric] = self._fingerprint(metric)
        return known

    def _fingerprint(self, metric: str) -> str:
        key = _BUILTIN[metric][0] if metric in _BUILTIN else "GEval"
        parts = [f"deepeval {self.version}", key, _SYSTEM, _templates_text(key)]
        if metric in self._criteria:
            params = "input, actual_output, retrieval_context" + (", expected_output" if _uses_reference(self._criteria[metric]) else "")
            parts += ["criteria", self._criteria[metric], f"params: {params}"]
        digest = digest_parts(parts)
        return f"deepeval/{key}/{digest}"

    async def score(self, metric: str, item: JudgeInput) -> float:
        self._check_known(metric)
        missing = [need for need in sorted(self.needs(metric)) if not has_input(item, need)]
        if missing:
            raise JudgeError(f"{metric} needs {' and '.join(missing)} for this case")
        if not item.answer.strip():
            raise JudgeError(f"{metric} cannot judge an empty answer")
        self._client.check_budget()
        case = _test_case(item)
        if metric in self._criteria:
            return await self._score_criterion(metric, case)
        return await self._measure(metric, self._builtin(metric), case)

    async def aclose(self) -> None:
        return None

    # -- internals ------------------------------------------------------------------------

    def _check_known(self, metric: str) -> None:
        if metric not in _BUILTIN and metric not in self._criteria:
            known = ", ".join(sorted(self.metrics()))
            raise JudgeError(f"deepeval does not compute {metric!r}; it computes {known} (custom criteria go under judge criteria)")

    def _builtin(self, metric: str) -> Any:
        import deepeval.metrics as dm

        cls = getattr(dm, _BUILTIN[metric][0])
        kwargs: dict[str, Any] = {
            "model": self._model, "threshold": 0.5, "include_reason": False,
            "async_mode": True, "strict_mode": False, "verbose_mode": False,
        }
        if "eval_mode" in inspect.signature(cls).parameters:
            kwargs["eval_mode"] = "llm"  # never the experimental "System One" model, whatever DEEPEVAL_EVAL_MODE says
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # HallucinationMetric's "score direction flipped" notice
            return cls(**kwargs)

    def _criterion(self, name: str, steps: list[str] | None) -> Any:
        from deepeval.metrics import GEval
        from deepeval.test_case import SingleTurnParams as P

        params = [P.INPUT, P.ACTUAL_OUTPUT, P.RETRIEVAL_CONTEXT]
        if _uses_reference(self._criteria[name]):
            params.append(P.EXPECTED_OUTPUT)
        return GEval(
            name=name,
            criteria=self._criteria[name],
            evaluation_steps=steps,  # None: GEval derives them from the criteria (one more call)
            evaluation_params=params,
            model=self._model, threshold=0.5, async_mode=True, strict_mode=False, verbose_mode=False,
        )

    async def _score_criterion(self, name: str, case: Any) -> float:
        """GEval turns the criterion into evaluation steps once (kept in the cache when there is one: later runs and
        other shards reuse them); every case is scored on the same steps."""
        if name in self._steps:
            return await self._measure(name, self._criterion(name, self._steps[name]), case)
        lock = self._steps_locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name not in self._steps:
                kept = self.kept_steps(name)
                if kept:
                    self._steps[name] = kept
                else:
                    metric = self._criterion(name, None)
                    value = await self._measure(name, metric, case)
                    if metric.evaluation_steps:
                        self._steps[name] = list(metric.evaluation_steps)
                        self._keep_steps(name, self._steps[name])
                    return value
        return await self._measure(name, self._criterion(name, self._steps[name]), case)

    def _steps_key(self, name: str) -> str | None:
        if self._cache is None:
            return None
        return self._cache.key_text("geval_steps", self.prompt_fingerprint(name), self._settings.model, self._settings.temperature,
                                    {"criterion": name})

    def kept_steps(self, name: str) -> list[str] | None:
        key = self._steps_key(name)
        text = self._cache.get_text(key) if self._cache is not None and key else None
        try:
            steps = json.loads(text) if text else None
        except ValueError:
            return None
        return [str(s) for s in steps] if isinstance(steps, list) and steps and all(isinstance(s, str) for s in steps) else None

    def _keep_steps(self, name: str, steps: list[str]) -> None:
        key = self._steps_key(name)
        if self._cache is not None and key and steps:
            redact = self._client.redactor  # a judge's text is stored only without the run's secrets
            self._cache.put_text(key, json.dumps([redact(s) for s in steps], ensure_ascii=False),
                                 {"kind": "geval_steps", "criterion": name})

    async def _measure(self, name: str, metric: Any, case: Any) -> float:
        try:
            await metric.a_measure(case, _show_indicator=False)
        except Exception as exc:  # every failure of the library or the judge becomes a JudgeError
            raise self._client.judge_error(exc) from None
        if getattr(metric, "error", None):
            raise JudgeError(self._client.error_reason(RuntimeError(str(metric.error))))
        return checked_score(metric.score, name, engine="deepeval")


def _test_case(item: JudgeInput) -> Any:
    from deepeval.test_case import LLMTestCase

    contexts: Any = [c for c in item.contexts if c.strip()] or None
    return LLMTestCase(
        input=item.question,
        actual_output=item.answer,
        expected_output=item.ground_truth or None,
        retrieval_context=contexts,
        context=contexts,  # HallucinationMetric reads `context`
    )


def _templates_text(key: str) -> str:
    """The raw Jinja templates deepeval renders for a metric class, with the shared fragments they use."""
    try:
        from importlib import resources

        bundle = json.loads(resources.files("deepeval.templates").joinpath("metrics", "templates.json").read_text("utf-8"))
        entry = bundle[key]
        fragments = bundle.get("_fragments", {})
        used = sorted(set(re.findall(r"_fragments\.(\w+)", json.dumps(entry))))
        return json.dumps({"templates": entry, "fragments": {k: fragments.get(k) for k in used}}, sort_keys=True)
    except (ModuleNotFoundError, FileNotFoundError, KeyError, ValueError, OSError):
        import deepeval.metrics as dm

        cls = getattr(dm, key)
        return inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]


def _model_class() -> type:
    if "model" not in _CLASSES:
        from deepeval.models import DeepEvalBaseLLM
        from pydantic import ValidationError

        class SharedClientJudge(DeepEvalBaseLLM):
            """A deepeval model that sends every request through the run's JudgeClient."""

            def __init__(self, client: JudgeClient, settings: JudgeSettings, max_tokens: int | None = None) -> None:
                self._client = client
                self._settings = settings
                self._max_tokens = max_tokens
                super().__init__(settings.model)

            def load_model(self, *args: Any, **kwargs: Any) -> Any:
                return self._client.openai

            def get_model_name(self, *args: Any, **kwargs: Any) -> str:
                return self._settings.model

            def generate(self, *args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError("rag-gate runs deepeval metrics with async_mode=True only")

            async def a_generate(self, prompt: Any, schema: Any = None, **kwargs: Any) -> Any:
                text = prompt if isinstance(prompt, str) else str(prompt)
                messages: list[dict[str, str]] = [{"role": "user", "content": text}]
                extra: dict[str, Any] = {"max_tokens": self._max_tokens} if self._max_tokens else {}
                if schema is not None:
                    messages.insert(0, {"role": "system", "content": _system_prompt(schema)})
                    extra["response_format"] = {"type": "json_object"}
                asked = list(messages)
                malformed, cut_off = True, False
                for _attempt in range(_JSON_ATTEMPTS):
                    response = await self._client.chat(
                        {"model": self._settings.model, "messages": messages, "temperature": self._settings.temperature, **extra})
                    choice = response.choices[0] if response.choices else None
                    content = (choice.message.content or "") if choice else ""
                    cut_off = getattr(choice, "finish_reason", None) == "length"
                    if schema is None:
                        return content
                    try:
                        return schema.model_validate_json(_json_text(content))
                    except ValidationError as exc:
                        malformed = any(e.get("type") == "json_invalid" for e in exc.errors())
                        problem = "it was not valid JSON" if malformed else f"it did not match the schema ({_first_error(exc)})"
                        messages = asked + [
                            {"role": "assistant", "content": content},
                            {"role": "user", "content": f"Your reply could not be used: {problem}. Reply again with only the JSON object."},
                        ]
                if cut_off:
                    raise JudgeError(f"judge reply was cut off by its token limit (finish_reason=length) {_JSON_ATTEMPTS} times: "
                                     "raise judge.max_tokens")
                what = "malformed JSON" if malformed else "JSON that did not match the expected schema"
                raise JudgeError(f"judge returned {what} {_JSON_ATTEMPTS} times")

        _CLASSES["model"] = SharedClientJudge
    return _CLASSES["model"]


def _json_text(content: str) -> str:
    """The JSON object in a reply, without Markdown fences or words around it."""
    start, end = content.find("{"), content.rfind("}")
    return content[start : end + 1] if start != -1 and end > start else content


def _first_error(exc: Any) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "reply"
    return f"{where}: {err.get('msg', 'invalid')}"
