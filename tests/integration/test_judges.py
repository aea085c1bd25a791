"""The ragas and deepeval engines and the shared JudgeClient, run for real against tests/support/judge_server.py.

The real metric code of ragas 0.4 and deepeval 4 talks HTTP to a real OpenAI-compatible server
on 127.0.0.1 that answers their prompts with a deterministic word-overlap heuristic, so a
supported answer scores high and an unsupported one low. Faults (429, 500, malformed JSON,
slowness) are scripted in that server; nothing in rag-gate is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gate.judges import JudgeBudgetExceeded, JudgeError, JudgeInput, JudgeSettings
from gate.judges.models import is_floating_model

try:
    from tests.support.judge_server import JudgeServer, always, first, malformed, slow, status
except ImportError:  # tests/ itself on sys.path
    from judge_server import JudgeServer, always, first, malformed, slow, status  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-rag-gate-TEST-7f3a9c1e5b"
MODEL = "judge-model-2024-11-20"
CRITERIA = {"grounded": "Every sentence of the actual output is supported by the retrieval context."}

GOOD = JudgeInput(
    question="When was the Eiffel Tower completed?",
    answer="The Eiffel Tower was completed in 1889.",
    contexts=(
        "The Eiffel Tower was completed in 1889 for the World's Fair.",
        "Located in Paris, the Eiffel Tower was completed in 1889 after two years of work.",
    ),
    ground_truth="The Eiffel Tower was completed in 1889.",
)
BAD = JudgeInput(  # off topic, unsupported, and retrieved from the wrong documents
    question="When was the Eiffel Tower completed?",
    answer="The Great Wall of China stretches across northern China.",
    contexts=("Bananas are rich in potassium and grow in tropical climates.",),
    ground_truth="The Eiffel Tower was completed in 1889.",
)

RAGAS_METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "answer_correctness",
                 "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"]  # the last two: tests/integration/test_robustness_judges.py
DEEPEVAL_METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevancy",
                    "hallucination", "grounded"]

engines_installed = pytest.mark.skipif(
    importlib.util.find_spec("ragas") is None or importlib.util.find_spec("deepeval") is None,
    reason="ragas and deepeval are not installed (pip install ragas==0.4.3 deepeval==4.3.1 langchain-community==0.4.1)",
)


def settings(url: str, **overrides: Any) -> JudgeSettings:
    values: dict[str, Any] = {
        "base_url": url, "model": MODEL, "api_key": KEY, "embeddings_model": "hashed-bow-64", "max_retries": 1,
        "timeout_s": 10.0,
    }
    values.update(overrides)
    return JudgeSettings(**values)


@contextlib.asynccontextmanager
async def judges(url: str, **overrides: Any) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    from gate.judges.client import JudgeClient
    from gate.judges.deepeval_engine import DeepEvalEngine
    from gate.judges.ragas_engine import RagasEngine

    s = settings(url, **overrides)
    client = JudgeClient(s)
    try:
        yield client, {"ragas": RagasEngine(client, s), "deepeval": DeepEvalEngine(client, s, criteria=CRITERIA)}
    finally:
        await client.aclose()


async def outcome(engine: Any, metric: str, item: JudgeInput) -> float | JudgeError:
    try:
        return await engine.score(metric, item)
    except JudgeError as exc:
        return exc


@pytest.fixture(scope="module")
def judge() -> Any:
    with JudgeServer() as server:
        yield server


# -- scores mean something -----------------------------------------------------------------------


# (chat, embeddings) requests for GOOD (two contexts), as the libraries make them; a change means an upgrade
# changed the cost of a metric. deepeval's counts are without its "reason" call (include_reason=False).
CALLS = {
    ("ragas", "faithfulness"): (2, 0), ("ragas", "answer_relevancy"): (3, 2), ("ragas", "context_precision"): (2, 0),
    ("ragas", "context_recall"): (1, 0), ("ragas", "answer_correctness"): (3, 2),
    ("deepeval", "faithfulness"): (3, 0), ("deepeval", "answer_relevancy"): (2, 0), ("deepeval", "context_precision"): (1, 0),
    ("deepeval", "context_recall"): (1, 0), ("deepeval", "context_relevancy"): (2, 0), ("deepeval", "hallucination"): (1, 0),
    ("deepeval", "grounded"): (2, 0),  # the GEval steps, then the score
}


@engines_installed
@pytest.mark.parametrize("engine,metric", sorted(CALLS))
def test_supported_answer_scores_clearly_higher_than_unsupported(judge: Any, engine: str, metric: str) -> None:
    async def main() -> tuple[float, tuple[int, int], float]:
        async with judges(judge.url) as (_, engines):
            before = judge.count("/chat/completions"), judge.count("/embeddings")
            good = await engines[engine].score(metric, GOOD)
            calls = judge.count("/chat/completions") - before[0], judge.count("/embeddings") - before[1]
            return good, calls, await engines[engine].score(metric, BAD)

    good, calls, bad = asyncio.run(main())
    assert 0.0 <= bad <= 1.0 and 0.0 <= good <= 1.0
    # deepeval 4 scores hallucination like every other metric: 1 = agrees with every context.
    assert good - bad >= 0.5, (good, bad)
    assert calls == CALLS[(engine, metric)]
    assert judge.unknown_prompts == []


@engines_installed
def test_geval_derives_the_steps_once_per_run() -> None:
    cases = [JudgeInput(f"Where is tower {i}?", f"Tower {i} is in Paris.", (f"Tower {i} is in Paris.",)) for i in range(4)]

    async def main(url: str) -> list[float]:
        async with judges(url) as (_, engines):
            return list(await asyncio.gather(*[engines["deepeval"].score("grounded", c) for c in cases]))

    with JudgeServer() as server:
        assert asyncio.run(main(server.url)) == [1.0] * 4
        kinds = [r.prompt_kind for r in server.requests]
    assert kinds.count("deepeval/geval_steps") == 1 and kinds.count("deepeval/geval_score") == 4


@engines_installed
def test_geval_steps_are_kept_in_the_judge_cache_for_later_runs_and_other_shards(tmp_path: Path) -> None:
    """The steps a criterion was turned into are a judge text in the cache: a later run (or another shard that restored
    the cache) scores on the same steps without asking for them; another criterion text gets its own steps."""
    from gate.judges.cache import JudgeCache
    from gate.judges.client import JudgeClient
    from gate.judges.deepeval_engine import DeepEvalEngine

    case = JudgeInput("Where is tower 1?", "Tower 1 is in Paris.", ("Tower 1 is in Paris.",))

    async def one_run(url: str, criteria: dict[str, str]) -> float:
        s = settings(url)
        client = JudgeClient(s)
        try:
            with JudgeCache(tmp_path / "cache.sqlite") as cache:
                return await DeepEvalEngine(client, s, criteria=criteria, cache=cache).score("grounded", case)
        finally:
            await client.aclose()

    kinds = []
    for criteria in (CRITERIA, CRITERIA, {"grounded": CRITERIA["grounded"] + " Numbers must match."}):
        with JudgeServer() as server:
            assert asyncio.run(one_run(server.url, criteria)) == 1.0
            kinds.append([r.prompt_kind for r in server.requests])
    assert [k.count("deepeval/geval_steps") for k in kinds] == [1, 0, 1]
    assert [k.count("deepeval/geval_score") for k in kinds] == [1, 1, 1]
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        assert cache.text_stats().entries == 2


@engines_installed
@pytest.mark.parametrize("temperature", [0.0, 0.3])
def test_configured_temperature_reaches_the_judge(temperature: float) -> None:
    async def main(url: str) -> None:
        async with judges(url, temperature=temperature) as (_, engines):
            await engines["ragas"].score("faithfulness", GOOD)
            await engines["deepeval"].score("faithfulness", GOOD)

    with JudgeServer() as server:
        asyncio.run(main(server.url))
        bodies = server.chat_bodies
    assert len(bodies) == 2 + 3
    assert [b["temperature"] for b in bodies] == [temperature] * 5  # ragas alone would send 0.01


@engines_installed
def test_concurrency_limit_is_shared_by_both_libraries_and_counts_match_the_server() -> None:
    cases = [JudgeInput(f"When was tower {i} completed?", f"Tower {i} was completed in 1889.",
                        (f"Tower {i} was completed in 1889 in Paris.",)) for i in range(30)]

    async def main(url: str) -> dict[str, Any]:
        async with judges(url, concurrency=3) as (client, engines):
            results = await asyncio.gather(
                *[engines["ragas"].score("faithfulness", c) for c in cases],
                *[engines["deepeval"].score("answer_relevancy", c) for c in cases],
            )
            assert all(0.0 <= r <= 1.0 for r in results)
            return client.usage()

    with JudgeServer(latency=0.05) as server:
        usage = asyncio.run(main(server.url))
        assert 2 <= server.max_in_flight <= 3
        assert usage["calls"] == server.calls == 30 * 2 + 30 * 2
        assert usage["chat_calls"] == server.count("/chat/completions")
        assert usage["embedding_calls"] == server.count("/embeddings") == 0
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == server.tokens()
        assert usage["cost"] is None


@engines_installed
def test_usage_counts_embeddings_and_prices_the_tokens() -> None:
    async def main(url: str) -> dict[str, Any]:
        prices = {"input_per_million": 2.0, "output_per_million": 8.0}
        async with judges(url, prices=prices) as (client, engines):
            await engines["ragas"].score("answer_relevancy", GOOD)
            return client.usage()

    with JudgeServer() as server:
        usage = asyncio.run(main(server.url))
        prompt, completion = server.tokens()
        assert (usage["chat_calls"], usage["embedding_calls"]) == (3, 2) == (
            server.count("/chat/completions"), server.count("/embeddings"))
        assert usage["embedding_tokens"] > 0
        assert usage["cost"] == pytest.approx((prompt * 2.0 + completion * 8.0) / 1e6)


# -- the budget ------------------------------------------------------------------------------------


@engines_installed
@pytest.mark.parametrize("engine", ["ragas", "deepeval"])
def test_max_judge_calls_stops_further_calls(engine: str) -> None:
    async def main(url: str) -> tuple[list[Any], Any, dict[str, Any]]:
        async with judges(url, max_judge_calls=5, concurrency=2) as (client, engines):
            first_round = await asyncio.gather(
                *[outcome(engines[engine], "faithfulness", GOOD) for _ in range(6)])
            later = await outcome(engines[engine], "faithfulness", GOOD)
            return first_round, later, client.usage()

    with JudgeServer() as server:
        first_round, later, usage = asyncio.run(main(server.url))
        assert server.calls == 5
    assert any(isinstance(r, JudgeBudgetExceeded) for r in first_round)
    assert isinstance(later, JudgeBudgetExceeded) and "max_judge_calls" in str(later)
    assert usage["calls"] == 5 and usage["budget_exceeded"] is True


# -- faults ----------------------------------------------------------------------------------------


@engines_installed
@pytest.mark.parametrize("engine", ["ragas", "deepeval"])
def test_one_429_with_retry_after_is_retried_and_recovers(engine: str) -> None:
    async def main(url: str) -> tuple[Any, dict[str, Any]]:
        async with judges(url) as (client, engines):
            return await outcome(engines[engine], "faithfulness", GOOD), client.usage()

    with JudgeServer(faults=[first(1, status(429, retry_after=0.01))]) as server:
        value, usage = asyncio.run(main(server.url))
        statuses = [r.status for r in server.requests]
    assert value == 1.0
    assert statuses.count(429) == 1 and usage["retried"] == 1
    assert usage["calls"] == len(statuses)


def _attempts_each(server: JudgeServer, most: int) -> int:
    """The tries of the request tried most often, checking that none was tried more than ``most`` times. deepeval sends
    two requests at once: when one has used its tries and failed, the other is cancelled, so on a busy machine it may
    not reach its last try; the request that failed always has."""
    tries = Counter(json.dumps((body.get("messages") or [None])[0], sort_keys=True) for body in server.chat_bodies)  # a re-ask appends
    assert tries and max(tries.values()) <= most, tries
    return max(tries.values())


@engines_installed
@pytest.mark.parametrize("engine,calls", [("ragas", 2), ("deepeval", 4)])
def test_500_always_is_a_judge_error_naming_the_status(engine: str, calls: int) -> None:
    async def main(url: str) -> Any:
        async with judges(url, max_retries=1) as (_, engines):
            return await outcome(engines[engine], "faithfulness", GOOD)

    with JudgeServer(faults=[always(status(500, retry_after=0.01, echo_auth=True))]) as server:
        error = asyncio.run(main(server.url))
        assert _attempts_each(server, 2) == 2  # max_retries + 1 per request; instructor does not multiply them
        assert server.calls <= calls
    assert isinstance(error, JudgeError)
    assert "HTTP 500 from the judge after 2 attempts" in str(error)
    assert KEY not in str(error)


@engines_installed
@pytest.mark.parametrize("engine,calls", [("ragas", 3), ("deepeval", 6)])
def test_malformed_json_always_is_a_judge_error_after_three_tries(engine: str, calls: int) -> None:
    async def main(url: str) -> Any:
        async with judges(url) as (_, engines):
            return await outcome(engines[engine], "faithfulness", GOOD)

    with JudgeServer(faults=[always(malformed("{not json"))]) as server:
        error = asyncio.run(main(server.url))
        assert _attempts_each(server, 3) == 3  # 3 tries per request (deepeval asks for truths and claims at once)
        assert server.calls <= calls
    assert isinstance(error, JudgeError)
    assert str(error) == "judge returned malformed JSON 3 times"


@engines_installed
@pytest.mark.parametrize("engine,calls", [("ragas", 2 + 1), ("deepeval", 3 + 1)])
def test_malformed_json_once_is_asked_again_and_recovers(engine: str, calls: int) -> None:
    async def main(url: str) -> Any:
        async with judges(url) as (_, engines):
            return await outcome(engines[engine], "faithfulness", GOOD)

    with JudgeServer(faults=[first(1, malformed("Sure! Here is the JSON you asked for"))]) as server:
        assert asyncio.run(main(server.url)) == 1.0
        assert server.calls == calls  # one extra call for the re-ask


@engines_installed
@pytest.mark.parametrize("engine", ["ragas", "deepeval"])
def test_slow_judge_times_out_with_a_judge_error(engine: str) -> None:
    async def main(url: str) -> Any:
        async with judges(url, timeout_s=0.3, max_retries=0) as (_, engines):
            return await outcome(engines[engine], "faithfulness", GOOD)

    with JudgeServer(faults=[always(slow(5))]) as server:
        error = asyncio.run(main(server.url))
    assert isinstance(error, JudgeError)
    assert "did not answer within 0.3 s" in str(error)


@engines_installed
@pytest.mark.parametrize("engine", ["ragas", "deepeval"])
def test_rejected_key_is_not_retried_and_never_shown(engine: str) -> None:
    async def main(url: str) -> Any:
        async with judges(url, max_retries=3) as (_, engines):
            return await outcome(engines[engine], "faithfulness", GOOD)

    with JudgeServer(faults=[always(status(401, echo_auth=True))]) as server:
        error = asyncio.run(main(server.url))
        assert server.count("/chat/completions") <= 2  # 401 is final: one request per concurrent step
        assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    assert isinstance(error, JudgeError)
    assert str(error).startswith("HTTP 401 from the judge: scripted HTTP 401")
    assert KEY not in str(error) and "***" in str(error)


@engines_installed
@pytest.mark.parametrize("engine", ["ragas", "deepeval"])
def test_unreachable_judge_is_a_judge_error(engine: str) -> None:
    with socket.socket() as sock:  # a port that nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"

    async def main() -> Any:
        async with judges(url, max_retries=0) as (_, engines):
            return await outcome(engines[engine], "faithfulness", GOOD)

    error = asyncio.run(main())
    assert isinstance(error, JudgeError)
    assert str(error) == f"cannot reach the judge at {url} (1 attempts)"


# -- inputs, needs and fingerprints ----------------------------------------------------------------


@engines_installed
def test_needs_and_missing_inputs() -> None:
    async def main(url: str) -> None:
        async with judges(url, embeddings_model=None) as (_, engines):
            ragas, deepeval = engines["ragas"], engines["deepeval"]
            assert ragas.metrics() == set(RAGAS_METRICS)
            assert deepeval.metrics() == set(DEEPEVAL_METRICS)
            assert ragas.needs("faithfulness") == {"contexts"}
            assert ragas.needs("answer_relevancy") == set()
            assert ragas.needs("context_precision") == ragas.needs("context_recall") == {"contexts", "ground_truth"}
            assert ragas.needs("answer_correctness") == {"ground_truth"}
            assert ragas.needs("noise_sensitivity_relevant") == ragas.needs("noise_sensitivity_irrelevant") == {"contexts", "ground_truth"}
            assert deepeval.needs("hallucination") == deepeval.needs("grounded") == {"contexts"}
            assert deepeval.needs("context_recall") == {"contexts", "ground_truth"}
            with pytest.raises(JudgeError, match="answer_relevancy needs judge.embeddings_model"):
                await ragas.score("answer_relevancy", GOOD)
            with pytest.raises(JudgeError, match="faithfulness needs contexts"):
                await deepeval.score("faithfulness", JudgeInput("q?", "An answer."))
            with pytest.raises(JudgeError, match="context_recall needs ground_truth"):
                await ragas.score("context_recall", JudgeInput("q?", "An answer.", ("A context.",)))
            with pytest.raises(JudgeError, match="does not compute 'bleu'"):
                ragas.needs("bleu")

    with JudgeServer() as server:
        asyncio.run(main(server.url))
        assert server.calls == 0


@engines_installed
def test_prompt_fingerprints_follow_the_prompt_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from gate.judges.client import JudgeClient
    from gate.judges.deepeval_engine import DeepEvalEngine
    from gate.judges.ragas_engine import RagasEngine

    s = settings("http://127.0.0.1:9/v1")
    ragas = RagasEngine(JudgeClient(s), s)
    deepeval = DeepEvalEngine(JudgeClient(s), s, criteria=CRITERIA)
    prints = {(e.name, m): e.prompt_fingerprint(m) for e in (ragas, deepeval) for m in e.metrics()}
    assert len(set(prints.values())) == len(prints)
    assert RagasEngine(JudgeClient(s), s).prompt_fingerprint("faithfulness") == prints[("ragas", "faithfulness")]
    no_embeddings = settings("http://127.0.0.1:9/v1", embeddings_model=None)
    for metric in ("answer_relevancy", "answer_correctness"):  # same prompts, whether or not it can run
        assert RagasEngine(JudgeClient(no_embeddings), no_embeddings).prompt_fingerprint(metric) == prints[("ragas", metric)]

    from ragas.metrics.collections.faithfulness.util import NLIStatementPrompt

    monkeypatch.setattr(NLIStatementPrompt, "instruction", NLIStatementPrompt.instruction + " Be strict.")
    edited = RagasEngine(JudgeClient(s), s)  # the next run's engine (one engine renders each prompt once)
    assert edited.prompt_fingerprint("faithfulness") != prints[("ragas", "faithfulness")]
    assert edited.prompt_fingerprint("context_recall") == prints[("ragas", "context_recall")]

    reworded = DeepEvalEngine(JudgeClient(s), s, criteria={"grounded": CRITERIA["grounded"] + " Cite it."})
    assert reworded.prompt_fingerprint("grounded") != prints[("deepeval", "grounded")]
    assert reworded.prompt_fingerprint("faithfulness") == prints[("deepeval", "faithfulness")]
    assert ragas.version.startswith("0.") and deepeval.version.count(".") >= 2


# -- model names and imports -----------------------------------------------------------------------


@pytest.mark.parametrize("name,floating", [
    ("gpt-4o", True), ("gpt-4.1", True), ("gpt-4o-mini", True), ("claude-3-5-sonnet-latest", True),
    ("chatgpt-4o-latest", True), ("llama3", True), ("llama3.1:8b", True), ("openai/gpt-4o", True),
    ("text-embedding-3-small", True), ("o1", True), ("mixtral-8x7b-32768", True),
    ("gpt-4o-2024-11-20", False), ("gpt-4o-mini-2024-07-18", False), ("claude-3-5-sonnet-20241022", False),
    ("gpt-4-0613", False), ("gpt-3.5-turbo-0125", False), ("gemini-1.5-pro-002", False),
    ("mistral-large-2407", False), ("command-r-plus-08-2024", False), ("mistral-7b-instruct-v0.3", False),
    ("anthropic.claude-3-haiku-20240307-v1:0", False), ("claude-3-haiku@20240307", False),
    ("llama3@sha256:0123456789abcdef", False), ("llama3:365fb6b4f1a8", False), ("qwen2.5:7b-instruct-q4_K_M", True),
    ("openai/gpt-4o-2024-08-06", False),
])
def test_is_floating_model(name: str, floating: bool) -> None:
    assert is_floating_model(name) is floating


def test_importing_the_judges_package_imports_no_judge_library() -> None:
    code = textwrap.dedent("""
        import sys
        import gate.judges, gate.judges.client, gate.judges.ragas_engine, gate.judges.deepeval_engine
        print(sorted(m for m in ("ragas", "deepeval", "openai", "instructor", "langchain_core") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.replace("'", '"')) == []


@engines_installed
def test_deepeval_leaves_the_working_directory_untouched(tmp_path: Path, judge: Any) -> None:
    (tmp_path / ".env").write_text("RAG_GATE_DOTENV_PROBE=loaded\n")
    code = textwrap.dedent(f"""
        import asyncio, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from gate.judges import JudgeInput, JudgeSettings
        from gate.judges.client import JudgeClient
        from gate.judges.deepeval_engine import DeepEvalEngine

        async def main():
            s = JudgeSettings(base_url={judge.url!r}, model="m", api_key="k")
            client = JudgeClient(s)
            value = await DeepEvalEngine(client, s).score("faithfulness", JudgeInput("q?", "Paris is big.", ("Paris is big.",)))
            await client.aclose()
            return value

        print(asyncio.run(main()), os.environ.get("RAG_GATE_DOTENV_PROBE"))
    """)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("DEEPEVAL_", "RAGAS_"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["1.0", "None"]  # scored, and the user's .env was not loaded
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]
