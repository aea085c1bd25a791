"""The HTTP target's LangServe preset and its separate contexts call, against a stand-in on 127.0.0.1 that answers
exactly as LangServe's ``/invoke`` does (``{"output": ..., "metadata": {"run_id", "feedback_tokens"}}``, the output a
string or a chain's output with serialised LangChain Documents), and against a real LangServe app when langserve is
installed. The RAG behind every route is the quickstart's (BM25, in process), so a run through the preset must score
exactly as the same RAG behind the default protocol."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gate.core.model import GoldenCase
from gate.targets.http import HttpTarget
from tests.support.settings import http
from tests.support.standin import StandIn, StandInHandler, free_port

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
sys.path.insert(0, str(QUICKSTART))
import quickrag  # noqa: E402

K = 10


def document(hit: dict[str, Any]) -> dict[str, Any]:
    """A passage as LangServe serialises a LangChain Document (its own id unset: the id is in the metadata)."""
    return {"id": None, "metadata": {"id": hit["id"], "source": "corpus.jsonl"}, "page_content": hit["text"], "type": "Document"}


def invoked(output: Any) -> dict[str, Any]:
    """The body of LangServe's /invoke."""
    return {"output": output, "metadata": {"run_id": str(uuid.uuid4()), "feedback_tokens": []}}


class ChainService(StandIn):
    """The quickstart RAG behind several routes:

    /query               the default protocol ({"question", "k"} or {"question", "contexts"})
    /rag/invoke          LangServe, a chain whose output is {"answer", "context": [Document]}
    /plain/invoke        LangServe, a chain whose output is the answer string
    /answer/invoke       LangServe, a chain answering {"question", "contexts"} with a string
    /custom/invoke       LangServe, input {"query"}, output {"text", "docs"}
    /shape/invoke        LangServe, an output of no known shape
    /retriever/invoke    LangServe, a served retriever: the output is the list of Documents
    /loader/invoke       LangServe, Documents as a loader makes them: no id, only metadata.source (the file)

    LangServe answers a body without ``input`` with 422 and an unknown path with 404. Every request is recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []

    def handle(self, h: StandInHandler) -> None:
        body = json.loads(h.body() or b"null")
        with self._lock:
            self.calls.append((h.path, body))
        answer = self.route(h.path, body)
        if answer is None:
            h.reply(404, b'{"detail": "Not Found"}')
        elif isinstance(answer, int):
            h.reply(answer, b'{"detail": [{"type": "missing", "loc": ["body", "input"], "msg": "Field required"}]}')
        else:
            h.reply(200, json.dumps(answer).encode())

    def route(self, path: str, body: Any) -> Any:
        if path == "/query":
            if "contexts" in body:
                return quickrag.answer_from_contexts(body["question"], body["contexts"])
            out = quickrag.answer(body["question"], body["k"])
            return {"retrieved": out["retrieved"], "answer": out["answer"]}
        if not path.endswith("/invoke"):
            return None
        if not isinstance(body, dict) or "input" not in body:
            return 422
        given = body["input"]
        if path == "/rag/invoke":
            out = quickrag.answer(given, K)
            return invoked({"answer": out["answer"], "context": [document(h) for h in out["retrieved"]]})
        if path == "/plain/invoke":
            return invoked(quickrag.answer(given, K)["answer"])
        if path == "/answer/invoke":
            return invoked(quickrag.answer_from_contexts(given["question"], given["contexts"])["answer"])
        if path == "/custom/invoke":
            out = quickrag.answer(given["query"], K)
            return invoked({"text": out["answer"], "docs": [{"metadata": {"doc_id": h["id"]}, "page_content": h["text"]}
                                                            for h in out["retrieved"]]})
        if path == "/shape/invoke":
            return invoked({"reply": "21 days", "passages": []})
        if path == "/retriever/invoke":
            return invoked([document(h) for h in quickrag.answer(given, K)["retrieved"]])
        if path == "/loader/invoke":
            out = quickrag.answer(given, K)
            return invoked({"answer": out["answer"], "context": [{"metadata": {"source": "handbook.pdf"}, "page_content": h["text"],
                                                                  "type": "Document"} for h in out["retrieved"]]})
        return None

    def bodies(self, path: str) -> list[Any]:
        with self._lock:
            return [b for p, b in self.calls if p == path]


@pytest.fixture(scope="module")
def service() -> Iterator[ChainService]:
    with ChainService() as srv:
        yield srv


SPEC = """\
version: 1
golden_set: golden_set.jsonl
target:
  http: {target}
  k: 10
max_error_rate: 0
cache: {{path: .rag-gate/cache.sqlite}}
stages:
  retrieval:
    metrics: [hit_rate@5, mrr, recall@5, ndcg@10]
  generation:
    metrics: [token_f1, rouge_l]
  robustness:
    noise:
      distractors: 2
      source: corpus
      position: front
      sample: {{size: 10, seed: 7}}
      correctness: {{method: offline, threshold: 0.3}}
    rejection: {{}}
"""


def run(ws: Path, target: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    ws.mkdir(parents=True)
    shutil.copy(QUICKSTART / "golden_set.jsonl", ws / "golden_set.jsonl")
    (ws / "rag-eval.yml").write_text(SPEC.format(target=target), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress"],
                          cwd=ws, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (ws / "report.json").exists(), proc.stdout + proc.stderr
    return proc, json.loads((ws / "report.json").read_text(encoding="utf-8"))


def scores(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every stage's metrics but the timings (two services never take the same time)."""
    return {name: {m: v for m, v in stage["metrics"].items() if "latency" not in m}
            for name, stage in report["stages"].items()}


def case(question: str = "How long can I borrow a book?") -> GoldenCase:
    return GoldenCase(id="c1", question=question, line=1, relevant={"d1": 1})


def target(url: str, **cfg: Any) -> HttpTarget:
    return HttpTarget(http(url, **{"retries": 0, "timeout_s": 5, **cfg}))


# --- the preset scores as the default protocol -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def default_report(service: ChainService, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    proc, report = run(tmp_path_factory.mktemp("default") / "ws", f'{{url: "{service.base_url}/query"}}')
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert report["target"]["errors"] == 0
    return report


def test_the_preset_scores_exactly_as_the_default_protocol(service: ChainService, default_report: dict[str, Any],
                                                           tmp_path: Path) -> None:
    before = len(service.bodies("/answer/invoke"))
    proc, report = run(tmp_path / "ws", f'{{url: "{service.base_url}/rag", preset: langserve, '
                                        f'contexts: {{url: "{service.base_url}/answer"}}}}')
    assert report["target"]["errors"] == 0, proc.stdout + proc.stderr
    assert scores(report) == scores(default_report)
    assert scores(report)["retrieval"]["hit_rate@5"] > 0.5 and "noise_robustness" in scores(report)["robustness"]
    questions = {json.loads(line)["question"] for line in (QUICKSTART / "golden_set.jsonl").read_text().splitlines() if line}
    asked = service.bodies("/rag/invoke")
    assert all(b == {"input": b["input"]} for b in asked)  # LangServe's request: the input, no k, no config
    assert questions <= {b["input"] for b in asked}
    # the noise test's calls went to the separate contexts URL, the clean one with the case's own passages in rank order
    calls = service.bodies("/answer/invoke")[before:]
    assert len(calls) == 2 * 10 and all(set(b) == {"input"} and set(b["input"]) == {"question", "contexts"} for b in calls)
    first = calls[0]["input"]
    own = [h["text"] for h in quickrag.answer(first["question"], K)["retrieved"]]
    clean = [c["input"]["contexts"] for c in calls if c["input"]["question"] == first["question"]]
    assert own in clean and any(len(c) == len(own) + 2 and c[2:] == own for c in clean)  # two distractors in front
    assert all(isinstance(t, str) for c in calls for t in c["input"]["contexts"])


def test_the_url_may_be_the_chains_base_or_its_invoke(service: ChainService) -> None:
    for url in (f"{service.base_url}/rag", f"{service.base_url}/rag/", f"{service.base_url}/rag/invoke"):
        with target(url, preset="langserve") as t:
            assert t.url == f"{service.base_url}/rag/invoke"
            out = t.ask(case(), K)
        assert out.error is None and len(out.retrieved) == K and out.answer
        assert out.retrieved[0].id == quickrag.answer(case().question, K)["retrieved"][0]["id"]  # metadata.id
        assert out.contexts == [d.text for d in out.retrieved]  # page_content


def test_a_string_output_is_the_answer_with_no_passages(service: ChainService) -> None:
    with target(f"{service.base_url}/plain", preset="langserve") as t:
        out = t.ask(case(), K)
    assert out.error is None and t.wrong_shape is None
    assert out.answer == quickrag.answer(case().question, K)["answer"] and out.retrieved == [] and out.contexts == []


def test_explicit_mappings_override_the_preset(service: ChainService) -> None:
    cfg = {"preset": "langserve", "request": {"question": "input.query"},
           "response": {"retrieved": "output.docs", "id": "metadata.doc_id", "answer": "output.text"}}
    with target(f"{service.base_url}/custom", **cfg) as t:
        out = t.ask(case(), K)
        body = service.bodies("/custom/invoke")[-1]
    expected = quickrag.answer(case().question, K)
    assert body == {"input": {"query": case().question}}
    assert out.error is None and [d.id for d in out.retrieved] == [h["id"] for h in expected["retrieved"]]
    assert out.answer == expected["answer"] and out.contexts == [h["text"] for h in expected["retrieved"]]  # text: the preset's


def test_without_a_contexts_url_the_preset_posts_the_contexts_to_the_main_chain(service: ChainService) -> None:
    with target(f"{service.base_url}/answer", preset="langserve") as t:
        got = t.answer_from(case(), ["Books are lent for 21 days.", "A second passage."])
    assert got.error is None and got.text
    assert service.bodies("/answer/invoke")[-1] == {"input": {"question": case().question,
                                                               "contexts": ["Books are lent for 21 days.", "A second passage."]}}


def test_the_contexts_call_has_its_own_url_body_and_mappings(service: ChainService) -> None:
    contexts = {"url": f"{service.base_url}/answer/invoke", "body": {"config": {"tags": ["noise"]}},
                "request": {"question": "input.question", "contexts": "input.contexts"}, "response": {"answer": "output"}}
    with target(f"{service.base_url}/query", contexts=contexts) as t:
        assert t.ask(case(), K).error is None  # the main call: the default protocol
        got = t.answer_from(case(), ["Books are lent for 21 days.", "Renewals: twice."])
    path, body = service.calls[-1]
    assert path == "/answer/invoke"
    assert body == {"config": {"tags": ["noise"]}, "input": {"question": case().question,
                                                             "contexts": ["Books are lent for 21 days.", "Renewals: twice."]}}
    assert got.error is None and got.text == quickrag.answer_from_contexts(case().question, ["Books are lent for 21 days.",
                                                                                              "Renewals: twice."])["answer"]


# --- the wrong shape -------------------------------------------------------------------------------------------------------

def test_a_langserve_body_without_the_preset_names_its_keys_and_the_mapping(service: ChainService) -> None:
    with target(f"{service.base_url}/rag/invoke", request={"question": "input"}) as t:
        out = t.ask(case(), K)
        assert out.error is not None and t.wrong_shape == out.error
        error = out.error
    assert error.startswith(f"{service.base_url}/rag/invoke: returned the wrong shape: ")
    assert "an object with keys 'output', 'metadata'" in error
    assert "target.http.response.retrieved" in error and "preset: langserve" in error


def test_a_wrong_output_names_where_the_preset_looked(service: ChainService) -> None:
    with target(f"{service.base_url}/shape", preset="langserve") as t:
        out = t.ask(case(), K)
    assert out.error is not None and t.wrong_shape == out.error
    assert "'output' holds an object with keys 'reply', 'passages'" in out.error
    assert "set target.http.response.retrieved to where retrieved is" in out.error
    assert "output.context, output.source_documents" in out.error


def test_a_good_answer_clears_wrong_shape(service: ChainService) -> None:
    with target(f"{service.base_url}/rag", preset="langserve") as t:
        t.url = f"{service.base_url}/shape/invoke"
        assert t.ask(case(), K).error is not None and t.wrong_shape is not None
        t.url = f"{service.base_url}/rag/invoke"
        assert t.ask(case(), K).error is None and t.wrong_shape is None


def test_a_wrong_contexts_answer_names_the_contexts_mapping(service: ChainService) -> None:
    with target(f"{service.base_url}/query", contexts={"url": f"{service.base_url}/rag/invoke",
                                                       "request": {"question": "input"}}) as t:
        got = t.answer_from(case(), ["Books are lent for 21 days."])
    assert got.error is not None and got.error.startswith(f"{service.base_url}/rag/invoke: returned the wrong shape: ")
    assert "target.http.contexts.response.answer" in got.error and "`contexts: {response: {answer: data.text}}`" in got.error


# --- a real LangServe app ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def langserve_app() -> Iterator[str]:
    pytest.importorskip("langserve")
    uvicorn = pytest.importorskip("uvicorn")
    from fastapi import FastAPI
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda
    from langserve import add_routes

    def chain(question: str) -> dict[str, Any]:
        out = quickrag.answer(question, K)
        return {"answer": out["answer"], "context": [Document(page_content=h["text"], metadata={"id": h["id"]})
                                                     for h in out["retrieved"]]}

    def from_contexts(given: dict[str, Any]) -> str:
        return quickrag.answer_from_contexts(given["question"], given["contexts"])["answer"]

    app = FastAPI()
    add_routes(app, RunnableLambda(chain), path="/rag")
    add_routes(app, RunnableLambda(from_contexts), path="/answer")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.05)
        assert server.started, "the LangServe app did not start"
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_real_langserve_app_scores_as_the_default_protocol(langserve_app: str, default_report: dict[str, Any],
                                                             tmp_path: Path) -> None:
    proc, report = run(tmp_path / "ws", f'{{url: "{langserve_app}/rag", preset: langserve, contexts: {{url: "{langserve_app}/answer"}}}}')
    assert report["target"]["errors"] == 0, proc.stdout + proc.stderr
    assert scores(report) == scores(default_report)


def test_the_keys_received_are_shortened_and_their_secrets_masked() -> None:
    from tests.support.rag_server import RagServer, reply

    secret = "tok-5ecr3t-9q8w7e6r5t4y3u2i1o"
    body = {f"key-{secret}": 1, "x" * 500: 2, **{f"k{i}": i for i in range(12)}}
    with RagServer(default=reply(body)) as srv:
        t = HttpTarget(http(srv.url, retries=0, headers={"Authorization": f"Bearer {secret}"}), secrets=[secret])
        out = t.ask(case(), K)
        t.close()
    assert out.error is not None and secret not in out.error and "'key-***'" in out.error
    assert "x" * 41 not in out.error and "'k7' and 4 more" in out.error  # the first 10 keys, each cut to 40 characters


def test_a_served_retriever_gives_the_documents_and_no_answer(service: ChainService) -> None:
    with target(f"{service.base_url}/retriever", preset="langserve") as t:
        out = t.ask(case(), K)
    expected = quickrag.answer(case().question, K)["retrieved"]
    assert out.error is None and t.wrong_shape is None and out.answer is None
    assert [d.id for d in out.retrieved] == [h["id"] for h in expected]


def test_a_loaders_source_path_is_not_taken_for_an_id(service: ChainService) -> None:
    """Every chunk of one file has the same metadata.source: read as ids they would all be one passage."""
    with target(f"{service.base_url}/loader", preset="langserve") as t:
        out = t.ask(case(), K)
    assert out.error is not None and t.wrong_shape == out.error
    assert "set target.http.response.id to where id is, e.g. `response: {id: metadata.doc_id}`" in out.error
