"""Judge calls of the robustness stage, run for real against tests/support/judge_server.py.

- ragas's claim-level NoiseSensitivity (relevant / irrelevant) through RagasEngine;
- rag-gate's own prompts (gate/judges/prompts.py): generate_distractor and classify_refusal,
  on the shared JudgeClient, with the text cache used the way the stage uses it.

Nothing in rag-gate or the libraries is mocked: the judge is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gate.judges import JudgeBudgetExceeded, JudgeError, JudgeInput, JudgeSettings
from gate.judges import prompts as P
from gate.judges.cache import JudgeCache, NullCache

try:
    from tests.support.judge_server import JudgeServer, always, first, malformed, status
except ImportError:  # tests/ itself on sys.path
    from judge_server import JudgeServer, always, first, malformed, status  # type: ignore[no-redef]

KEY = "sk-rag-gate-TEST-robust-41c9"
MODEL = "judge-model-2024-11-20"

ragas_installed = pytest.mark.skipif(importlib.util.find_spec("ragas") is None, reason="ragas is not installed")

QUESTION = "When was the Eiffel Tower completed?"
REFERENCE = "The Eiffel Tower was completed in 1889."
RELEVANT = "The Eiffel Tower was completed in 1889. It was the tallest structure in the world until 1930."
IRRELEVANT = "The Statue of Liberty was dedicated in 1886 in New York Harbor."
CONTEXTS = (RELEVANT, IRRELEVANT)

CLEAN = JudgeInput(QUESTION, "The Eiffel Tower was completed in 1889.", CONTEXTS, REFERENCE)
# misled by the irrelevant passage: a wrong claim that only the irrelevant context supports
NOISY_IRRELEVANT = JudgeInput(QUESTION, "The Statue of Liberty was dedicated in 1886.", CONTEXTS, REFERENCE)
# misled inside a relevant passage: a wrong (off-reference) claim that the relevant context supports
NOISY_RELEVANT = JudgeInput(QUESTION, "The Eiffel Tower was the tallest structure in the world until 1930.", CONTEXTS, REFERENCE)


def settings(url: str, **overrides: Any) -> JudgeSettings:
    values: dict[str, Any] = {"base_url": url, "model": MODEL, "api_key": KEY, "max_retries": 1, "timeout_s": 10.0}
    values.update(overrides)
    return JudgeSettings(**values)


@contextlib.asynccontextmanager
async def judge_client(url: str, **overrides: Any) -> AsyncIterator[tuple[Any, JudgeSettings]]:
    from gate.judges.client import JudgeClient

    s = settings(url, **overrides)
    client = JudgeClient(s)
    try:
        yield client, s
    finally:
        await client.aclose()


def run(url: str, make: Any, **overrides: Any) -> Any:
    """Run ``make(client, settings)`` (a coroutine) on a fresh client; return its value or the JudgeError."""

    async def main() -> Any:
        async with judge_client(url, **overrides) as (client, s):
            try:
                return await make(client, s)
            except JudgeError as exc:
                return exc

    return asyncio.run(main())


@pytest.fixture(scope="module")
def judge() -> Any:
    with JudgeServer() as server:
        yield server


# -- ragas NoiseSensitivity --------------------------------------------------------------------------


def ns_scores(url: str, metric: str, items: list[JudgeInput]) -> list[float | JudgeError]:
    from gate.judges.ragas_engine import RagasEngine

    async def make(client: Any, s: JudgeSettings) -> list[float | JudgeError]:
        engine = RagasEngine(client, s)
        out: list[float | JudgeError] = []
        for item in items:
            try:
                out.append(await engine.score(metric, item))
            except JudgeError as exc:
                out.append(exc)
        return out

    return run(url, make)


@ragas_installed
@pytest.mark.parametrize("metric,noisy,other", [
    ("noise_sensitivity_irrelevant", NOISY_IRRELEVANT, NOISY_RELEVANT),
    ("noise_sensitivity_relevant", NOISY_RELEVANT, NOISY_IRRELEVANT),
])
def test_noise_sensitivity_scores_a_misled_answer_worse_than_a_clean_one(
    judge: Any, metric: str, noisy: JudgeInput, other: JudgeInput
) -> None:
    before = judge.count("/chat/completions"), len(judge.requests)
    clean, misled, other_kind = ns_scores(judge.url, metric, [CLEAN, noisy, other])
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in (clean, misled, other_kind)), (clean, misled, other_kind)
    assert misled - clean >= 0.5, (clean, misled)  # lower is better: the misled answer is clearly worse
    assert other_kind == 0.0  # each mode counts its own kind of noise only
    # 2 statement calls + 2 verdict calls per context + 1 (answer vs reference), for each of the three cases
    assert judge.count("/chat/completions") - before[0] == 3 * (3 + 2 * len(CONTEXTS))
    kinds = [r.prompt_kind for r in judge.requests[before[1]:before[1] + 3 + 2 * len(CONTEXTS)]]
    assert kinds == ["ragas/statements"] * 2 + ["ragas/nli"] * (2 * len(CONTEXTS) + 1)
    assert judge.unknown_prompts == []


@ragas_installed
def test_noise_sensitivity_calls_grow_with_the_contexts(judge: Any) -> None:
    five = JudgeInput(QUESTION, CLEAN.answer, CONTEXTS + ("Paris is in France.", "Bananas are yellow.", "Rome is old."), REFERENCE)
    before = judge.count("/chat/completions")
    [value] = ns_scores(judge.url, "noise_sensitivity_irrelevant", [five])
    assert value == 0.0
    assert judge.count("/chat/completions") - before == 3 + 2 * 5


@ragas_installed
def test_noise_sensitivity_is_a_lower_is_better_ragas_metric_needing_contexts_and_reference(judge: Any) -> None:
    from gate.core.catalog import RAGAS_METRICS, engine_metrics, higher_is_better
    from gate.judges.ragas_engine import RagasEngine

    names = ["noise_sensitivity_relevant", "noise_sensitivity_irrelevant"]
    assert set(names) <= RAGAS_METRICS
    assert not any(higher_is_better(n) for n in names) and higher_is_better("faithfulness")
    plans = engine_metrics({"engine": "deepeval", "metrics": ["ragas/noise_sensitivity_relevant", "faithfulness"]})
    assert [(p.name, p.engine, p.metric) for p in plans][0] == ("noise_sensitivity_relevant", "ragas", "noise_sensitivity_relevant")
    with pytest.raises(ValueError, match="not a deepeval metric"):
        engine_metrics({"metrics": ["deepeval/noise_sensitivity_irrelevant"]})

    async def make(client: Any, s: JudgeSettings) -> Any:
        engine = RagasEngine(client, s)
        assert set(names) <= engine.metrics()
        assert all(engine.needs(n) == {"contexts", "ground_truth"} for n in names)
        no_reference = JudgeInput(QUESTION, CLEAN.answer, CONTEXTS, None)
        no_contexts = JudgeInput(QUESTION, CLEAN.answer, (" ",), REFERENCE)
        errors = []
        for item in (no_reference, no_contexts):
            with pytest.raises(JudgeError) as caught:
                await engine.score("noise_sensitivity_relevant", item)
            errors.append(str(caught.value))
        return errors

    calls = judge.calls
    assert run(judge.url, make) == ["noise_sensitivity_relevant needs ground_truth for this case",
                                    "noise_sensitivity_relevant needs contexts for this case"]
    assert judge.calls == calls  # refused before any judge call


@ragas_installed
def test_noise_sensitivity_fingerprints_follow_mode_and_prompt_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from gate.judges.client import JudgeClient
    from gate.judges.ragas_engine import RagasEngine

    def fingerprints() -> dict[str, str]:
        s = settings("http://127.0.0.1:9/v1")
        engine = RagasEngine(JudgeClient(s), s)  # builds no connection
        return {m: engine.prompt_fingerprint(m) for m in ("noise_sensitivity_relevant", "noise_sensitivity_irrelevant",
                                                           "faithfulness")}

    before = fingerprints()
    assert before == fingerprints()  # stable
    assert before["noise_sensitivity_relevant"] != before["noise_sensitivity_irrelevant"]  # the mode is part of it
    import ragas.metrics.collections.noise_sensitivity.util as ns_util

    original = ns_util.nli_statement_prompt
    monkeypatch.setattr(ns_util, "nli_statement_prompt", lambda c, s: original(c, s).replace("faithfulness", "truthfulness"))
    after = fingerprints()
    assert after["noise_sensitivity_relevant"] != before["noise_sensitivity_relevant"]
    assert after["noise_sensitivity_irrelevant"] != before["noise_sensitivity_irrelevant"]
    assert after["faithfulness"] == before["faithfulness"]  # another metric's prompt did not change


@ragas_installed
def test_noise_sensitivity_with_malformed_json_always_is_a_judge_error() -> None:
    with JudgeServer(faults=[always(malformed("{not json"))]) as server:
        [error] = ns_scores(server.url, "noise_sensitivity_irrelevant", [CLEAN])
        assert server.calls == 3  # the first statement call, asked three times
    assert isinstance(error, JudgeError)
    assert str(error) == "judge returned malformed JSON 3 times"


@ragas_installed
@pytest.mark.parametrize("empty_at,reason", [
    ({2}, "judge found no statements in the answer"),  # the second call splits the answer
    (set(range(1, 100)), "judge found no statements in the reference or the answer"),
])
def test_noise_sensitivity_without_statements_says_so(empty_at: set[int], reason: str) -> None:
    def no_statements(n: int, kind: str) -> Any:
        return malformed('{"statements": []}') if n in empty_at else None

    with JudgeServer(faults=[no_statements]) as server:
        [error] = ns_scores(server.url, "noise_sensitivity_relevant", [CLEAN])
    assert isinstance(error, JudgeError)
    assert str(error) == reason


# -- rag-gate's prompts: generate_distractor ------------------------------------------------------------

PRINTING_Q = "How much does colour printing cost per page?"
PRINTING_GT = "Colour printing costs $0.50 per page."
PRINTING_CTX = "Black-and-white printing and photocopying cost $0.15 per page, and colour costs $0.50 per page."


def distractor(url: str, context: str | None = PRINTING_CTX, avoid: tuple[str, ...] = (), **overrides: Any) -> Any:
    return run(url, lambda c, s: P.generate_distractor(c, s, PRINTING_Q, PRINTING_GT, context, avoid=avoid), **overrides)


def refusal(url: str, answer: str, **overrides: Any) -> Any:
    return run(url, lambda c, s: P.classify_refusal(c, s, PRINTING_Q, answer), **overrides)


def _supported() -> Any:
    try:
        from tests.support.judge_server import supported
    except ImportError:
        from judge_server import supported  # type: ignore[no-redef]
    return supported


def test_generate_distractor_writes_a_conflicting_passage_and_the_text_cache_saves_the_second_call(tmp_path: Path) -> None:
    supported = _supported()

    async def cached_distractor(client: Any, s: JudgeSettings, cache: JudgeCache) -> str:
        key = cache.key_text(P.DISTRACTOR, P.prompt_fingerprint(P.DISTRACTOR), s.model, s.temperature,
                             P.distractor_payload(PRINTING_Q, PRINTING_GT, PRINTING_CTX))
        passage = cache.get_text(key)
        if passage is None:
            passage = await P.generate_distractor(client, s, PRINTING_Q, PRINTING_GT, PRINTING_CTX)
            cache.put_text(key, passage, {"kind": P.DISTRACTOR, "model": s.model})
        return passage

    path = tmp_path / "judge-cache.sqlite"
    with JudgeServer() as server:
        with JudgeCache(path) as cache:
            first_passage = run(server.url, lambda c, s: cached_distractor(c, s, cache))
            assert server.calls == 1
            second = run(server.url, lambda c, s: cached_distractor(c, s, cache))
            assert server.calls == 1  # served from the text cache: no judge call
        with JudgeCache(path) as next_run:  # a later run on the same file
            third = run(server.url, lambda c, s: cached_distractor(c, s, next_run))
            assert server.calls == 1 and next_run.text_stats().hits == 1
        assert [r.prompt_kind for r in server.requests] == ["rag-gate/distractor"]
        assert server.unknown_prompts == []
    assert isinstance(first_passage, str) and first_passage.strip()
    assert first_passage == second == third
    assert first_passage != PRINTING_GT and PRINTING_GT not in first_passage
    assert not supported(first_passage.split(". ")[0], PRINTING_GT)  # its claim conflicts with the ground truth
    assert "$1.50" in first_passage  # the judge server's conflicting number


def test_without_a_cache_every_distractor_is_asked_again() -> None:
    with JudgeServer() as server:
        cache = NullCache()
        for _ in range(2):
            key = cache.key_text(P.DISTRACTOR, P.prompt_fingerprint(P.DISTRACTOR), MODEL, 0.0,
                                 P.distractor_payload(PRINTING_Q, PRINTING_GT, None))
            assert cache.get_text(key) is None
            passage = distractor(server.url, context=None)
            cache.put_text(key, passage, {})
        assert server.calls == 2


def test_a_second_distractor_for_the_same_case_differs(judge: Any) -> None:
    one = distractor(judge.url)
    two = distractor(judge.url, avoid=(one,))
    assert isinstance(one, str) and isinstance(two, str)
    assert one != two and two != PRINTING_GT
    payloads = [P.distractor_payload(PRINTING_Q, PRINTING_GT, PRINTING_CTX, avoid) for avoid in ((), (one,))]
    keys = {NullCache().key_text(P.DISTRACTOR, P.prompt_fingerprint(P.DISTRACTOR), MODEL, 0.0, p) for p in payloads}
    assert len(keys) == 2  # cached apart


@pytest.mark.parametrize("temperature,max_tokens", [(0.0, None), (0.4, 300)])
def test_request_carries_model_temperature_max_tokens_and_json_mode(temperature: float, max_tokens: int | None) -> None:
    with JudgeServer() as server:
        assert isinstance(distractor(server.url, temperature=temperature, max_tokens=max_tokens), str)
        assert refusal(server.url, "I don't know.", temperature=temperature, max_tokens=max_tokens) is True
        bodies = server.chat_bodies
    assert len(bodies) == 2
    for body in bodies:
        assert body["model"] == MODEL
        assert body["temperature"] == temperature
        assert body["response_format"] == {"type": "json_object"}
        assert body.get("max_tokens") == max_tokens
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert "JSON" in body["messages"][0]["content"]
    assert PRINTING_CTX in bodies[0]["messages"][1]["content"] and PRINTING_GT in bodies[0]["messages"][1]["content"]


def test_empty_passage_is_asked_again_then_a_judge_error() -> None:
    with JudgeServer(faults=[always(malformed('{"passage": "   "}'))]) as server:
        error = distractor(server.url)
        assert server.calls == 3
    assert isinstance(error, JudgeError)
    assert str(error) == "judge output did not match the expected JSON schema 3 times (the passage is empty)"


def test_one_empty_passage_then_a_good_one_recovers() -> None:
    with JudgeServer(faults=[first(1, malformed('{"text": "wrong key"}'))]) as server:
        passage = distractor(server.url)
        assert server.calls == 2
    assert isinstance(passage, str) and "$1.50" in passage


def test_distractor_needs_a_ground_truth(judge: Any) -> None:
    calls = judge.calls
    error = run(judge.url, lambda c, s: P.generate_distractor(c, s, PRINTING_Q, "  ", None))
    assert isinstance(error, JudgeError) and "ground_truth" in str(error)
    assert judge.calls == calls


# -- rag-gate's prompts: classify_refusal ---------------------------------------------------------------


@pytest.mark.parametrize("answer,refuses", [
    ("I don't know: the answer was not found in the provided documents.", True),
    ("依据不足，无法回答该问题。", True),
    ("Black-and-white printing costs $0.15 per page, and colour costs $0.50 per page.", False),
    ("Yes.", False),
])
def test_classify_refusal(judge: Any, answer: str, refuses: bool) -> None:
    assert refusal(judge.url, answer) is refuses
    assert judge.requests[-1].prompt_kind == "rag-gate/refusal"
    assert answer in judge.requests[-1].body["messages"][1]["content"]


@pytest.mark.parametrize("content,expected", [
    ('```json\n{"refuses": true}\n```', True),  # some servers fence JSON even in JSON mode
    ('{"refuses": "false"}', False),
    ('{"refuses": 1}', True),
])
def test_refusal_reply_variants_are_read(content: str, expected: bool) -> None:
    with JudgeServer(faults=[always(malformed(content))]) as server:
        assert refusal(server.url, "whatever") is expected
        assert server.calls == 1


# -- failures of both helpers -----------------------------------------------------------------------------


HELPERS = {
    "distractor": lambda url, **kw: distractor(url, **kw),
    "refusal": lambda url, **kw: refusal(url, "I cannot say.", **kw),
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_malformed_json_always_is_a_judge_error_after_three_tries(helper: str) -> None:
    with JudgeServer(faults=[always(malformed("Sure! Here it is: {not json"))]) as server:
        error = HELPERS[helper](server.url)
        assert server.calls == 3  # asked, then at most two more times
    assert isinstance(error, JudgeError) and not isinstance(error, JudgeBudgetExceeded)
    assert str(error) == "judge returned malformed JSON 3 times"


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_malformed_json_once_is_asked_again_and_recovers(helper: str) -> None:
    with JudgeServer(faults=[first(1, malformed("{not json"))]) as server:
        value = HELPERS[helper](server.url)
        assert server.calls == 2
    assert not isinstance(value, JudgeError)


def test_wrong_shape_always_names_the_schema() -> None:
    with JudgeServer(faults=[always(malformed('{"refuses": "maybe"}'))]) as server:
        error = refusal(server.url, "I cannot say.")
    assert isinstance(error, JudgeError)
    assert str(error) == 'judge output did not match the expected JSON schema 3 times ("refuses" is not true or false)'


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_http_500_always_is_a_judge_error_without_the_key(helper: str) -> None:
    with JudgeServer(faults=[always(status(500, retry_after=0.01, echo_auth=True))]) as server:
        error = HELPERS[helper](server.url, max_retries=1)
        assert server.calls == 2  # the SDK's retry; malformed-JSON re-asks do not multiply HTTP errors
    assert isinstance(error, JudgeError)
    assert str(error).startswith("HTTP 500 from the judge after 2 attempts")
    assert KEY not in str(error)


def test_calls_count_against_the_shared_budget_and_usage() -> None:
    async def make(client: Any, s: JudgeSettings) -> tuple[Any, Any, dict[str, Any]]:
        ok = await P.classify_refusal(client, s, PRINTING_Q, "I don't know.")
        try:
            await P.generate_distractor(client, s, PRINTING_Q, PRINTING_GT, None)
            over: Any = None
        except JudgeBudgetExceeded as exc:
            over = exc
        return ok, over, client.usage()

    with JudgeServer() as server:
        ok, over, usage = run(server.url, make, max_judge_calls=1)
        assert server.calls == 1
    assert ok is True
    assert isinstance(over, JudgeBudgetExceeded) and "max_judge_calls" in str(over)
    assert usage["chat_calls"] == 1 and usage["budget_exceeded"] is True


# -- prompt versioning ---------------------------------------------------------------------------------


def test_prompt_fingerprint_hashes_version_and_text(monkeypatch: pytest.MonkeyPatch) -> None:
    fp = {name: P.prompt_fingerprint(name) for name in (P.DISTRACTOR, P.REFUSAL)}
    assert fp[P.DISTRACTOR] != fp[P.REFUSAL]
    assert all(len(v) == 64 and int(v, 16) >= 0 for v in fp.values())
    assert fp[P.DISTRACTOR] != hashlib.sha256(P.DISTRACTOR_PROMPT.encode()).hexdigest()  # the version is in it too
    monkeypatch.setattr(P, "PROMPT_VERSION", "999")
    assert P.prompt_fingerprint(P.DISTRACTOR) != fp[P.DISTRACTOR]
    monkeypatch.undo()
    monkeypatch.setitem(P.PROMPTS, P.REFUSAL, P.REFUSAL_PROMPT.replace("declines", "refuses"))
    assert P.prompt_fingerprint(P.REFUSAL) != fp[P.REFUSAL]
    assert P.prompt_fingerprint(P.DISTRACTOR) == fp[P.DISTRACTOR]
    with pytest.raises(KeyError, match="no rag-gate prompt named"):
        P.prompt_fingerprint("summarise")
