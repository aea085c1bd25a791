"""ragas as a judge engine: ``ragas.metrics.collections`` metrics on the run's shared client.

    faithfulness        Faithfulness                     contexts             2 chat calls
    answer_relevancy    AnswerRelevancy (strictness 3)   (embeddings model)   3 chat + 2 embedding calls
    context_precision   ContextPrecisionWithReference    contexts, ground_truth  1 chat call per context
    context_recall      ContextRecall                    contexts, ground_truth  1 chat call
    answer_correctness  AnswerCorrectness (0.75/0.25)    ground_truth         3 chat + 2 embedding calls
    noise_sensitivity_relevant    NoiseSensitivity("relevant")    contexts, ground_truth  3 + 2 x contexts chat calls
    noise_sensitivity_irrelevant  NoiseSensitivity("irrelevant")  contexts, ground_truth  3 + 2 x contexts chat calls

NoiseSensitivity is claim-level and LOWER is better: the share of the answer's statements
that are wrong (not supported by the reference) yet supported by a relevant context
("relevant") or only by contexts that support no reference statement ("irrelevant"). Its
calls are sequential: statements of the reference and of the answer, then per context one
verdict call for each, then the answer's statements against the reference.

The LLM goes through ``llm_factory`` (instructor, JSON mode) with our temperature: ragas
would send 0.01 otherwise. instructor re-asks only for malformed or mis-shaped JSON (3
attempts); HTTP errors are left to the OpenAI SDK's retries, so one failing call costs
``max_retries + 1`` requests, not three times that. Metric objects hold no per-case state
and are shared by concurrent cases.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, cast

from gate.core.digest import digest_parts
from gate.judges import JudgeError, JudgeInput, JudgeSettings, checked_score, has_input, telemetry_off
from gate.judges.client import JudgeClient

_NEEDS: dict[str, set[str]] = {
    "faithfulness": {"contexts"},
    "answer_relevancy": set(),
    "context_precision": {"contexts", "ground_truth"},
    "context_recall": {"contexts", "ground_truth"},
    "answer_correctness": {"ground_truth"},
    "noise_sensitivity_relevant": {"contexts", "ground_truth"},
    "noise_sensitivity_irrelevant": {"contexts", "ground_truth"},
}
_NOISE_MODES: dict[str, Any] = {"noise_sensitivity_relevant": "relevant", "noise_sensitivity_irrelevant": "irrelevant"}
_NEEDS_EMBEDDINGS = ("answer_relevancy", "answer_correctness")
_JSON_ATTEMPTS = 3


class RagasEngine:
    name = "ragas"

    def __init__(self, client: JudgeClient, settings: JudgeSettings, *, max_tokens: int | None = None) -> None:
        """``max_tokens`` caps each judge reply (ragas's default is 1024)."""
        telemetry_off()
        try:
            import ragas
        except ImportError as exc:
            raise JudgeError(f"the ragas engine needs ragas installed (pip install ragas==0.4.3): {exc}") from None
        from ragas.llms import llm_factory
        from ragas.metrics import collections as rc

        self.version: str = ragas.__version__
        self._client = client
        self._fingerprints: dict[str, str] = {}
        self._settings = settings
        model_args: dict[str, Any] = {"temperature": settings.temperature, "max_retries": _json_retrying(_JSON_ATTEMPTS)}
        if max_tokens:
            model_args["max_tokens"] = max_tokens
        llm = llm_factory(settings.model, provider="openai", client=client.openai, **model_args)
        embeddings: Any = None
        if settings.embeddings_model:
            from ragas.embeddings.base import embedding_factory

            embeddings = embedding_factory("openai", model=settings.embeddings_model, client=client.openai, interface="modern")
        self._metrics: dict[str, Any] = {
            "faithfulness": rc.Faithfulness(llm=llm),
            "context_precision": rc.ContextPrecisionWithReference(llm=llm),
            "context_recall": rc.ContextRecall(llm=llm),
        }
        for metric, mode in _NOISE_MODES.items():
            self._metrics[metric] = rc.NoiseSensitivity(llm=llm, name=metric, mode=mode)
        if embeddings is not None:
            self._metrics["answer_relevancy"] = rc.AnswerRelevancy(llm=llm, embeddings=embeddings)
            self._metrics["answer_correctness"] = rc.AnswerCorrectness(llm=llm, embeddings=embeddings)

    def metrics(self) -> set[str]:
        return set(_NEEDS)

    def needs(self, metric: str) -> set[str]:
        self._check_known(metric)
        return set(_NEEDS[metric])

    def prompt_fingerprint(self, metric: str) -> str:
        """The metric's class, parameters and full prompt texts (instruction, examples, schemas, template)."""
        self._check_known(metric)
        known = self._fingerprints.get(metric)
        if known is None:  # rendered once per metric: every task's cache key includes it
            known = self._fingerprints[metric] = self._fingerprint(metric)
        return known

    def _fingerprint(self, metric: str) -> str:
        class_name, params, prompts = _recipe(metric, self._metrics.get(metric))
        parts = [f"ragas {self.version}", f"instructor {_instructor_version()}", class_name, json.dumps(params, sort_keys=True)]
        for attr, prompt in sorted(prompts, key=lambda pair: pair[0]):
            parts += [attr, *_prompt_parts(prompt)]
        digest = digest_parts(parts)
        return f"ragas/{class_name}/{digest}"

    async def score(self, metric: str, item: JudgeInput) -> float:
        self._check_known(metric)
        missing = [need for need in sorted(_NEEDS[metric]) if not has_input(item, need)]
        if missing:
            raise JudgeError(f"{metric} needs {' and '.join(missing)} for this case")
        if not item.answer.strip():
            raise JudgeError(f"{metric} cannot judge an empty answer")
        obj = self._metrics.get(metric)
        if obj is None:
            raise JudgeError(f"{metric} needs judge.embeddings_model (an embedding model served by judge.base_url)")
        self._client.check_budget()
        kwargs = _arguments(metric, item)
        try:
            result = await obj.ascore(**kwargs)
        except Exception as exc:  # every failure of the library or the judge becomes a JudgeError
            raise (_no_statements(exc) or self._client.judge_error(exc)) from None
        return _checked(metric, getattr(result, "value", None))

    def kept_steps(self, criterion: str) -> list[str] | None:
        return None  # no criteria here: GEval is deepeval's

    async def aclose(self) -> None:
        return None

    def _check_known(self, metric: str) -> None:
        if metric not in _NEEDS:
            raise JudgeError(f"ragas does not compute {metric!r}; it computes {', '.join(sorted(_NEEDS))}")


def _arguments(metric: str, item: JudgeInput) -> dict[str, Any]:
    contexts = [c for c in item.contexts if c.strip()]
    if metric == "faithfulness":
        return {"user_input": item.question, "response": item.answer, "retrieved_contexts": contexts}
    if metric == "answer_relevancy":
        return {"user_input": item.question, "response": item.answer}
    if metric in ("context_precision", "context_recall"):
        return {"user_input": item.question, "reference": item.ground_truth, "retrieved_contexts": contexts}
    if metric in _NOISE_MODES:
        return {"user_input": item.question, "response": item.answer, "reference": item.ground_truth, "retrieved_contexts": contexts}
    return {"user_input": item.question, "response": item.answer, "reference": item.ground_truth}


_NAN_REASONS = {
    "faithfulness": "judge found no statements in the answer",
    "context_recall": "judge found no statements in the reference",
    "noise_sensitivity_relevant": "judge found no statements in the answer",
    "noise_sensitivity_irrelevant": "judge found no statements in the answer",
}


def _no_statements(exc: BaseException) -> JudgeError | None:
    """NoiseSensitivity on an answer or reference the judge split into no statements: numpy's empty reduction."""
    text = str(exc)
    if isinstance(exc, ValueError) and "zero-size array" in text:
        return JudgeError("judge found no statements in the reference or the answer")
    return None


def _checked(metric: str, value: Any) -> float:
    if metric in _NEEDS_EMBEDDINGS and isinstance(value, (int, float)) and -1.0 <= value < 0.0:
        return 0.0  # a negative cosine similarity: unrelated texts
    return checked_score(value, metric, engine="ragas", no_score=_NAN_REASONS.get(metric, f"ragas returned no score for {metric}"))


def _source(func: Any) -> str:
    try:
        return inspect.getsource(func)  # the template that wraps instruction, examples and input
    except (OSError, TypeError):  # installed without sources
        return f"{func.__module__}.{func.__qualname__}"


def _instructor_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("instructor")  # its JSON-mode system message is part of every prompt
    except PackageNotFoundError:
        return "unknown"


def _prompts(obj: Any) -> list[tuple[str, Any]]:
    from ragas.prompt.metrics.base_prompt import BasePrompt

    return [(k, v) for k, v in vars(obj).items() if isinstance(v, BasePrompt)]


def _params(obj: Any) -> dict[str, Any]:
    return {k: getattr(obj, k) for k in ("strictness", "weights", "beta", "mode") if hasattr(obj, k)}


def _prompt_parts(prompt: Any) -> list[str]:
    """The texts that make up a prompt.

    Most ragas prompts are an instruction, examples and schemas wrapped by BasePrompt.to_string.
    Some (NoiseSensitivity's) have neither instruction nor examples: their to_string returns a
    fixed text from ragas.prompt.metrics.common, so the prompt rendered for placeholder input
    stands for it, with the source of the functions it calls.
    """
    parts = [
        type(prompt).__name__,
        json.dumps(prompt.input_model.model_json_schema(), sort_keys=True),
        json.dumps(prompt.output_model.model_json_schema(), sort_keys=True),
    ]
    if hasattr(prompt, "instruction"):
        parts.insert(1, prompt.instruction)
        parts += [prompt._generate_examples(), _source(type(prompt).to_string)]
        return parts
    parts += [_source(type(prompt).to_string), _rendered(prompt)]
    return parts


def _rendered(prompt: Any) -> str:
    """The prompt's full text for placeholder inputs ("<field>", or ["<field>"] for a list field)."""
    from typing import get_origin

    values: dict[str, Any] = {}
    for name, field in prompt.input_model.model_fields.items():
        values[name] = [f"<{name}>"] if get_origin(field.annotation) in (list, tuple, set) else f"<{name}>"
    try:
        return str(prompt.to_string(prompt.input_model(**values)))
    except Exception as exc:  # an input model this does not know how to fill: fall back to the code
        import sys

        module = sys.modules.get(type(prompt).__module__)
        return f"unrendered ({type(exc).__name__}): " + (_source(module) if module else type(prompt).__qualname__)


def _recipe(metric: str, obj: Any) -> tuple[str, dict[str, Any], list[tuple[str, Any]]]:
    """(class name, parameters, prompts) of a metric; without an instance (no embeddings model), of its defaults."""
    if obj is not None:
        return type(obj).__name__, _params(obj), _prompts(obj)
    if metric == "answer_relevancy":
        from ragas.metrics.collections.answer_relevancy.util import AnswerRelevancePrompt

        return "AnswerRelevancy", {"strictness": 3}, [("prompt", AnswerRelevancePrompt())]
    from ragas.metrics.collections.answer_correctness.util import CorrectnessClassifierPrompt, StatementGeneratorPrompt

    return "AnswerCorrectness", {"beta": 1.0, "weights": [0.75, 0.25]}, [
        ("correctness_classifier_prompt", CorrectnessClassifierPrompt()),
        ("statement_generator_prompt", StatementGeneratorPrompt()),
    ]


def _json_retrying(attempts: int) -> Any:
    """instructor's retry policy: re-ask only when the reply is not the JSON asked for.

    instructor retries every exception by default, which multiplies the SDK's own HTTP retries.
    tenacity keeps the attempt state on the Retrying object, so each call gets a copy.
    """
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

    class PerCallRetrying(AsyncRetrying):
        def __aiter__(self) -> Any:
            return AsyncRetrying.__aiter__(cast(AsyncRetrying, self.copy()))

    return PerCallRetrying(
        stop=stop_after_attempt(attempts),
        retry=retry_if_exception(lambda e: type(e).__name__ == "InstructorRetryException"),
        reraise=True,
    )
