"""What the frameworks really return, built as their docs show (BM25, no model download), run through the real CLI:
LangChain's LCEL and create_retrieval_chain outputs (a StrOutputParser's str subclass, an AIMessage of content blocks,
Documents without their own id and with integer metadata ids, a retriever's tuple), a LlamaIndex query engine's
Response (and its StreamingResponse) over NodeWithScore of Document nodes without a score, a Haystack Pipeline's
run() with a ranker and an AnswerBuilder. Each scores exactly as the dicts of the usual shape a user writes by hand
from the same objects; a shape that cannot be read stops after one case, saying what was received."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "frameworks"
K = 5
METRICS = {"retrieval": ("mrr", "recall@5"), "generation": ("token_f1",)}

COUNTED = '''
import functools
from pathlib import Path

HERE = Path(__file__).parent


def counted(fn):  # each call noted in calls.txt: a wrong shape must stop the run after one
    @functools.wraps(fn)
    def call(*args):
        with (HERE / "calls.txt").open("a", encoding="utf-8") as f:
            f.write(fn.__name__ + "\\n")
        return fn(*args)
    return call
'''

LANGCHAIN = COUNTED + '''
import json

from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

passages = [json.loads(line) for line in (HERE / "corpus.jsonl").open(encoding="utf-8")]
bm25 = BM25Retriever.from_documents([Document(page_content=p["text"], metadata={"id": p["id"]}) for p in passages], k=5)
numbered = BM25Retriever.from_documents([Document(page_content=p["text"], id=None, metadata={"id": n})
                                         for n, p in enumerate(passages)], k=5)


def first(docs):
    return docs[0].page_content.split(". ")[0] if docs else ""


def chat_model(prompt):  # a chat model's stand-in: the first sentence of the context its prompt holds
    return AIMessage(content=prompt.to_messages()[0].content.split("\\n\\n")[0].split(". ")[0])


sources = RunnableParallel({"context": bm25, "question": RunnablePassthrough()})
lcel_chain = sources.assign(answer=RunnableLambda(lambda d: AIMessage(content=first(d["context"]))) | StrOutputParser())
blocks_chain = sources.assign(answer=RunnableLambda(lambda d: AIMessage(content=[
    {"type": "thinking", "thinking": "the top passage says it"}, {"type": "text", "text": first(d["context"])}])))
prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{input}")])
retrieval_chain = create_retrieval_chain(bm25, create_stuff_documents_chain(RunnableLambda(chat_model), prompt))
formatted_chain = RunnableParallel({"context": bm25 | (lambda docs: "\\n\\n".join(d.page_content for d in docs)),
                                    "question": RunnablePassthrough()}).assign(answer=lambda d: d["context"].split(". ")[0])


def lcel(question, k):
    return lcel_chain.invoke(question)


def blocks(question, k):
    return blocks_chain.invoke(question)


def chain(question, k):
    return retrieval_chain.invoke({"input": question})


def retrieve_tuple(question, k):
    return tuple(numbered.invoke(question)[:k])


def answer_message(question, documents):
    return AIMessage(content=first(documents))


def message_pair(question, k):
    docs = bm25.invoke(question)[:k]
    return AIMessage(content=first(docs)), docs


def usual_message(question, k):
    docs = bm25.invoke(question)[:k]
    return {"retrieved": docs, "answer": AIMessage(content=first(docs))}


@counted
def streamed(question, k):  # what chain.stream() gives: the output in pieces, one key each
    return lcel_chain.stream(question)


@counted
def formatted(question, k):
    return formatted_chain.invoke(question)
'''

LLAMAINDEX = COUNTED + '''
import json

from llama_index.core import Document
import time

from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import ChatMessage, CompletionResponse, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.retrievers.bm25 import BM25Retriever

passages = [json.loads(line) for line in (HERE / "corpus.jsonl").open(encoding="utf-8")]
bm25 = BM25Retriever.from_defaults(nodes=[TextNode(id_=p["id"], text=p["text"]) for p in passages], similarity_top_k=5)
engine = RetrieverQueryEngine.from_args(bm25, llm=MockLLM())  # MockLLM echoes its prompt
streaming_engine = RetrieverQueryEngine.from_args(bm25, llm=MockLLM(), streaming=True)
documents = {p["id"]: Document(text=p["text"], metadata={"doc_id": p["id"]}) for p in passages}  # ids made up: doc_id is ours


def query(question, k):
    return engine.query(question)


@counted
def streaming(question, k):
    return streaming_engine.query(question)


def streamed(question, k):
    return streaming_engine.query(question).get_response()


def retrieve_unscored(question, k):
    return [NodeWithScore(node=documents[n.node.node_id], score=None) for n in bm25.retrieve(question)[:k]]


def answer(question, nodes):
    return nodes[0].node.get_content().split(". ")[0] if nodes else ""


def retrieve(question, k):
    return bm25.retrieve(question)[:k]


def chat_answer(question, nodes):  # what llm.chat() returns: a ChatResponse (MockLLM echoes the messages)
    return MockLLM().chat([ChatMessage(role="user", content=answer(question, nodes))])


class SlowLLM(MockLLM):  # streams its prompt back after half a second: the stream is still running when the call returns
    def stream_complete(self, prompt, formatted=False, **kwargs):
        def gen():
            time.sleep(0.5)
            yield CompletionResponse(text=prompt, delta=prompt)
        return gen()


def chat_engine():  # a new one each call: a chat engine keeps the conversation
    return ContextChatEngine.from_defaults(retriever=bm25, llm=SlowLLM())


@counted
def chat_stream(question, k):
    return chat_engine().stream_chat(question)


def chat_stream_read(question, k):
    reply = chat_engine().stream_chat(question)
    "".join(reply.response_gen)
    return reply
'''

HAYSTACK = COUNTED + '''
import json

from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder
from haystack.components.rankers import LostInTheMiddleRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

passages = [json.loads(line) for line in (HERE / "corpus.jsonl").open(encoding="utf-8")]
store = InMemoryDocumentStore()
store.write_documents([Document(id=p["id"], content=p["text"]) for p in passages])


@component
class FirstSentence:  # a chat generator's stand-in: replies with the first sentence of the top document
    @component.output_types(replies=list[ChatMessage])
    def run(self, documents: list[Document]):
        return {"replies": [ChatMessage.from_assistant(documents[0].content.split(". ")[0] if documents else "")]}


def pipeline(ranked, answers=False):
    p = Pipeline()
    p.add_component("retriever", InMemoryBM25Retriever(document_store=store))
    p.add_component("llm", FirstSentence())
    last = "retriever"
    if ranked:
        p.add_component("ranker", LostInTheMiddleRanker())
        p.connect("retriever.documents", "ranker.documents")
        last = "ranker"
    p.connect(f"{last}.documents", "llm.documents")
    if answers:
        p.add_component("answers", AnswerBuilder())
        p.connect("llm.replies", "answers.replies")
        p.connect(f"{last}.documents", "answers.documents")
    return p


plain, ranked, answered = pipeline(False), pipeline(True), pipeline(True, answers=True)


def run(question, k):
    return plain.run({"retriever": {"query": question, "top_k": k}}, include_outputs_from={"retriever"})


@counted
def leaves_only(question, k):
    return plain.run({"retriever": {"query": question, "top_k": k}})


@counted
def two_rankings(question, k):
    return ranked.run({"retriever": {"query": question, "top_k": k}}, include_outputs_from={"retriever", "ranker"})


def with_answers(question, k):
    return answered.run({"retriever": {"query": question, "top_k": k}, "answers": {"query": question}},
                        include_outputs_from={"retriever", "ranker"})


def ranked_pair(question, k):
    result = two_rankings.__wrapped__(question, k)
    return result["llm"]["replies"][0], result["ranker"]["documents"]
'''

MODULES = {"lc_rag": LANGCHAIN, "li_rag": LLAMAINDEX, "hs_rag": HAYSTACK}


def lc_docs(docs: Any, id_of: Callable[[Any], Any] = lambda d: d.metadata["id"]) -> list[dict[str, Any]]:
    return [{"id": str(id_of(d)), "text": d.page_content} for d in docs]


def li_nodes(nodes: Any, id_of: Callable[[Any], Any] = lambda n: n.node.node_id) -> list[dict[str, Any]]:
    return [{"id": id_of(n), "text": n.node.get_content(), **({} if n.score is None else {"score": float(n.score)})} for n in nodes]


def hs_docs(docs: Any) -> list[dict[str, Any]]:
    return [{"id": d.id, "text": d.content, "score": d.score} for d in docs]


def usual(retrieved: list[dict[str, Any]], answer: Any) -> dict[str, Any]:
    assert type(answer) is str or isinstance(answer, str), answer  # what the user's hand conversion gives: the text
    return {"retrieved": retrieved, "answer": str(answer)}


def numbered(m: ModuleType, q: str) -> dict[str, Any]:
    docs = m.retrieve_tuple(q, K)
    return usual(lc_docs(docs, lambda d: d.metadata["id"]), m.answer_message(q, docs).text)


def unscored(m: ModuleType, q: str) -> dict[str, Any]:
    nodes = m.retrieve_unscored(q, K)
    assert all(n.score is None and type(n.node).__name__ == "Document" for n in nodes)
    return usual(li_nodes(nodes, lambda n: n.node.metadata["doc_id"]), m.answer(q, nodes))


def answered(m: ModuleType, q: str) -> dict[str, Any]:
    found = m.with_answers(q, K)["answers"]["answers"][0]
    return usual(hs_docs(found.documents), found.data)


# a scenario: its module, its target, the golden set it is scored on, and the usual shape a user writes from its objects
SCENARIOS: dict[str, tuple[str, dict[str, Any], str, Callable[[ModuleType, str], dict[str, Any]]]] = {
    "lcel_str_parser": ("lc_rag", {"function": "lc_rag:lcel"}, "golden.jsonl",
                        lambda m, q: usual(lc_docs((o := m.lcel(q, K))["context"]), o["answer"])),
    "lcel_content_blocks": ("lc_rag", {"function": "lc_rag:blocks"}, "golden.jsonl",
                            lambda m, q: usual(lc_docs((o := m.blocks(q, K))["context"]), o["answer"].text)),
    "create_retrieval_chain": ("lc_rag", {"function": "lc_rag:chain"}, "golden.jsonl",
                               lambda m, q: usual(lc_docs((o := m.chain(q, K))["context"]), o["answer"])),
    "tuple_of_int_ids": ("lc_rag", {"retriever": "lc_rag:retrieve_tuple", "answerer": "lc_rag:answer_message"},
                         "golden_numbers.jsonl", numbered),
    "message_pair": ("lc_rag", {"function": "lc_rag:message_pair"}, "golden.jsonl",
                     lambda m, q: usual(lc_docs((o := m.message_pair(q, K))[1]), o[0].text)),
    "usual_shape_message_answer": ("lc_rag", {"function": "lc_rag:usual_message"}, "golden.jsonl",
                                   lambda m, q: usual(lc_docs((o := m.usual_message(q, K))["retrieved"]), o["answer"].text)),
    "chat_response_answer": ("li_rag", {"retriever": "li_rag:retrieve", "answerer": "li_rag:chat_answer"}, "golden.jsonl",
                             lambda m, q: usual(li_nodes(n := m.retrieve(q, K)), m.chat_answer(q, n).message.content)),
    "query_engine": ("li_rag", {"function": "li_rag:query"}, "golden.jsonl",
                     lambda m, q: usual(li_nodes((o := m.query(q, K)).source_nodes), o.response)),
    "streamed_response": ("li_rag", {"function": "li_rag:streamed"}, "golden.jsonl",
                          lambda m, q: usual(li_nodes((o := m.streamed(q, K)).source_nodes), o.response)),
    "chat_stream_read": ("li_rag", {"function": "li_rag:chat_stream_read"}, "golden.jsonl",
                         lambda m, q: usual(li_nodes((o := m.chat_stream_read(q, K)).source_nodes), o.response)),
    "unscored_document_nodes": ("li_rag", {"retriever": "li_rag:retrieve_unscored", "answerer": "li_rag:answer", "id_key": "doc_id"},
                                "golden.jsonl", unscored),
    "pipeline_run": ("hs_rag", {"function": "hs_rag:run"}, "golden.jsonl",
                     lambda m, q: usual(hs_docs((o := m.run(q, K))["retriever"]["documents"]), o["llm"]["replies"][0].text)),
    "answer_builder": ("hs_rag", {"function": "hs_rag:with_answers"}, "golden.jsonl", answered),
    "chat_message_pair": ("hs_rag", {"function": "hs_rag:ranked_pair"}, "golden.jsonl",
                          lambda m, q: usual(hs_docs((o := m.ranked_pair(q, K))[1]), o[0].text)),
}


def project(tmp: Path) -> Path:
    """The example's corpus, its first four golden cases (and the same cases by the passages' line numbers), the modules."""
    corpus = (EXAMPLE / "corpus.jsonl").read_text(encoding="utf-8")
    (tmp / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    number = {json.loads(line)["id"]: str(n) for n, line in enumerate(corpus.splitlines())}
    golden = [json.loads(line) for line in (EXAMPLE / "golden_set.jsonl").read_text(encoding="utf-8").splitlines()[:4]]
    (tmp / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    by_number = [{**g, "relevant_doc_ids": [number[i] for i in g["relevant_doc_ids"]]} for g in golden]
    (tmp / "golden_numbers.jsonl").write_text("".join(json.dumps(g) + "\n" for g in by_number), encoding="utf-8")
    for name, text in MODULES.items():
        (tmp / f"{name}.py").write_text(text, encoding="utf-8")
    return tmp


def rag_gate(work: Path, target: dict[str, Any], golden: str) -> subprocess.CompletedProcess[str]:
    spec = {"version": 1, "golden_set": golden, "target": {**target, "k": K},
            "stages": {stage: {"metrics": list(names)} for stage, names in METRICS.items()}}
    (work / "rag-eval.yml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    (work / "report.json").unlink(missing_ok=True)
    env = {**{k: v for k, v in __import__("os").environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))},
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress"],
                          cwd=work, capture_output=True, text=True, timeout=300, env=env)


def scored(work: Path, target: dict[str, Any], golden: str) -> dict[str, Any]:
    proc = rag_gate(work, target, golden)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((work / "report.json").read_text(encoding="utf-8"))
    stages = report["stages"]
    return {stage: ({s["id"]: (s["metrics"], s.get("error")) for s in stages[stage]["samples"]},
                    {m: stages[stage]["metrics"][m] for m in names}) for stage, names in METRICS.items()}


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_real_framework_output_scores_as_the_dicts_a_user_writes_from_it(tmp_path: Path, name: str) -> None:
    module, target, golden, by_hand = SCENARIOS[name]
    work = project(tmp_path)
    native = scored(work, {"python": target}, golden)

    m = load(work / f"{module}.py", f"real_{module}_{name}")  # the same objects, in this process, converted by hand
    cases = [json.loads(line) for line in (work / golden).read_text(encoding="utf-8").splitlines()]
    lines = [{"id": c["id"], **by_hand(m, c["question"])} for c in cases]
    (work / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    written = scored(work, {"results": "results.jsonl"}, golden)

    assert native == written
    samples, metrics = native["retrieval"]
    assert len(samples) == len(cases) and all(error is None for _, error in samples.values())
    assert metrics["mrr"] > 0.5  # the ids read are the golden set's
    assert all(error is None and scores["token_f1"] > 0 for scores, error in native["generation"][0].values())  # answers read


WRONG = {  # a target whose output cannot be read: what the run says of it, and the start of its hint
    "lc_rag:formatted": ("the chain's output's 'context' must be a list of documents, got a str",
                         "keep the retriever's documents in 'context'"),
    "li_rag:streaming": ("got a StreamingResponse whose answer is still a stream (response_gen, not yet read)",
                         "return response.get_response()"),
    "li_rag:chat_stream": ("got a StreamingAgentChatResponse whose answer is still a stream (a chat engine's stream_chat()",
                           "return chat_engine.chat(question); or read the stream first"),
    "lc_rag:streamed": ("the returned list holds 3 objects of one key each (", "return chain.invoke(...), not chain.stream(...)"),
    "hs_rag:leaves_only": ("the pipeline's result has no documents (components: an object with key 'llm')",
                           "run the pipeline with include_outputs_from="),
    "hs_rag:two_rankings": ("the pipeline's result has documents from several components ('retriever', 'ranker')",
                            "return (answer, result[name]['documents'])"),
}


@pytest.mark.parametrize("function", list(WRONG))
def test_an_output_that_cannot_be_read_stops_after_one_case_saying_what_it_is(tmp_path: Path, function: str) -> None:
    said, hint = WRONG[function]
    work = project(tmp_path)
    proc = rag_gate(work, {"python": {"function": function, "concurrency": 4}}, "golden.jsonl")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-2].startswith(f"rag-gate: the target returned the wrong shape for case g01: {said}"), lines[-2]
    if function == "lc_rag:streamed":  # the parallel branches' pieces come in any order
        keys, rest = lines[-2].split(" each (", 1)[1].split("): ", 1)
        assert sorted(keys.split(", ")) == ["'answer'", "'context'", "'question'"], lines[-2]
        assert rest == "a chain's output streamed in pieces (chain.stream()), not the output", lines[-2]
    assert lines[-1].startswith(f"hint: {hint}") and lines[-1].endswith("no other case was asked")
    assert (work / "calls.txt").read_text(encoding="utf-8").splitlines() == [function.split(":")[1]]  # no second call
    assert not (work / "report.json").exists() and "Traceback" not in proc.stderr
