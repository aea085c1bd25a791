"""Framework objects read by their attributes (gate.targets.shapes), without the frameworks: small classes with the
same attributes, and the serialised forms, each read exactly as the usual shape with the same ids, texts, scores and
answer; a wrong shape stops the run after the first case with what was received."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gate.core.errors import InputError, RunError
from gate.core.model import GoldenCase, TargetOutput
from gate.run.ask import collect_outputs
from gate.targets import DEFAULT_FIELDS, ShapeError, parse_output
from gate.targets import results as results_module
from gate.targets.python import PythonTarget
from gate.targets.results import ResultsFileTarget
from gate.targets.shapes import read_output

DOCS = [("d1", "First passage. More.", 0.9), ("d2", "Second passage.", 0.5), ("d3", "Third one.", 0.25)]
USUAL = {"retrieved": [{"id": i, "text": t, "score": s} for i, t, s in DOCS], "answer": "First passage"}


def seen(out: TargetOutput) -> tuple[Any, ...]:
    """What the stages read of an output."""
    return ([(d.id, d.text, d.score) for d in out.retrieved], out.answer, out.contexts, out.error)


EXPECTED = seen(parse_output("q1", USUAL))


# --------------------------------------------------------------------------- stand-ins with the frameworks' attributes


@dataclass
class LcDocument:  # langchain_core.documents.Document
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class LiNode:  # llama_index.core.schema.TextNode
    id_: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def node_id(self) -> str:
        return self.id_

    def get_content(self) -> str:
        return self.text


@dataclass
class NodeWithScore:
    node: LiNode
    score: float | None = None


@dataclass
class Response:  # llama_index.core.base.response.schema.Response
    response: str | None
    source_nodes: list[NodeWithScore]


@dataclass
class HsDocument:  # haystack.Document
    id: str
    content: str | None
    score: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class GeneratedAnswer:
    data: str
    documents: list[HsDocument]


@dataclass
class ChatMessage:
    text: str


class Float32:
    """A number of another type (numpy's float32), which JSON would write as the float it is."""

    def __init__(self, x: float) -> None:
        self.x = x

    def __float__(self) -> float:
        return self.x


def lc_docs(**kw: Any) -> list[LcDocument]:
    return [LcDocument(t, {"id": i, "score": s, **kw}) for i, t, s in DOCS]


def li_nodes() -> list[NodeWithScore]:
    return [NodeWithScore(LiNode(i, t), s) for i, t, s in DOCS]


def hs_docs() -> list[HsDocument]:
    return [HsDocument(i, t, s) for i, t, s in DOCS]


ANSWER = "First passage"
SHAPES = {
    "usual with LangChain documents": {"retrieved": lc_docs(), "answer": ANSWER},
    "LangChain create_retrieval_chain": {"input": "q", "context": lc_docs(), "answer": ANSWER},
    "LangChain RetrievalQA": {"query": "q", "source_documents": lc_docs(), "result": ANSWER},
    "LangChain own ids": {"context": [LcDocument(t, {"score": s}, id=i) for i, t, s in DOCS], "answer": ANSWER},
    "LlamaIndex Response": Response(ANSWER, li_nodes()),
    "LlamaIndex float32 scores": Response(ANSWER, [NodeWithScore(LiNode(i, t), Float32(s)) for i, t, s in DOCS]),  # type: ignore[arg-type]
    "Haystack pipeline replies": {"retriever": {"documents": hs_docs()}, "llm": {"replies": [ANSWER]}},
    "Haystack pipeline chat replies": {"retriever": {"documents": hs_docs()}, "llm": {"replies": [ChatMessage(ANSWER)]}},
    "Haystack pipeline answers": {"answer_builder": {"answers": [GeneratedAnswer(ANSWER, hs_docs())]}},
    "pair": (ANSWER, hs_docs()),
    "pair reversed": [li_nodes(), ANSWER],
}
SERIALISED = {
    "LangChain model_dump": {"context": [{"id": None, "metadata": {"id": i, "score": s}, "page_content": t, "type": "Document"}
                                         for i, t, s in DOCS], "answer": ANSWER},
    "LangChain dumpd": {"context": [{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"],
                                     "kwargs": {"id": i, "page_content": t, "metadata": {"score": s}}} for i, t, s in DOCS],
                        "answer": ANSWER},
    "LlamaIndex": {"response": ANSWER, "source_nodes": [{"node": {"id_": i, "text": t, "metadata": {}}, "score": s} for i, t, s in DOCS]},
    "Haystack nested meta": {"retriever": {"documents": [{"id": i, "content": t, "score": s, "meta": {}} for i, t, s in DOCS]},
                             "llm": {"replies": [ANSWER]}},
    "usual with Haystack documents": {"retrieved": [{"id": i, "content": t, "score": s} for i, t, s in DOCS], "answer": ANSWER},
    "usual with LangChain documents": {"retrieved": [{"id": i, "page_content": t, "metadata": {"score": s}} for i, t, s in DOCS],
                                       "answer": ANSWER},
}


@pytest.mark.parametrize("name", list(SHAPES) + [f"json: {n}" for n in SERIALISED])
def test_every_shape_reads_as_the_usual_one(name: str) -> None:
    obj = SHAPES[name] if name in SHAPES else json.loads(json.dumps(SERIALISED[name.removeprefix("json: ")]))
    assert seen(read_output("q1", obj)) == EXPECTED


def test_a_list_of_documents_is_retrieval_only() -> None:
    out = read_output("q1", lc_docs())
    assert seen(out)[0] == EXPECTED[0] and out.answer is None


def test_id_key_reads_the_metadata_and_nothing_else() -> None:
    docs = [LcDocument(t, {"doc": i, "score": s}, id=f"uuid-{n}") for n, (i, t, s) in enumerate(DOCS)]
    assert seen(read_output("q1", {"context": docs, "answer": ANSWER}, id_key="doc")) == EXPECTED
    hs = [HsDocument(f"hash{n}", t, s, {"doc": i}) for n, (i, t, s) in enumerate(DOCS)]
    assert seen(read_output("q1", (ANSWER, hs), id_key="doc")) == EXPECTED
    flat = [{"id": f"hash{n}", "content": t, "score": s, "doc": i} for n, (i, t, s) in enumerate(DOCS)]  # to_dict() flattened
    assert seen(read_output("q1", {"retrieved": flat, "answer": ANSWER}, id_key="doc")) == EXPECTED
    with pytest.raises(ShapeError) as err:
        read_output("q1", {"context": docs, "answer": ANSWER}, id_key="source")
    assert "context[0] (a LangChain Document): its metadata has no 'source'" in str(err.value)
    assert "'doc', 'score'" in str(err.value) and "id_key" in (err.value.hint or "")


def test_a_document_without_an_id_says_to_set_id_key() -> None:
    with pytest.raises(ShapeError) as err:
        read_output("q1", {"context": [LcDocument("text", {"source": "a.txt"})], "answer": "x"})
    assert str(err.value) == "context[0] (a LangChain Document): it has no id and its metadata no 'id'; metadata: an object with key 'source'"
    assert err.value.hint is not None and "target.python.id_key" in err.value.hint


@pytest.mark.parametrize(("obj", "needle"), [
    ({"output": {"context": []}, "input": "q"}, "no 'retrieved' field (got an object with keys 'output', 'input')"),
    ({}, "no 'retrieved' field (got an empty object)"),
    (42, "got an int, which is none of the accepted shapes"),
    ({"retrieved": [object()]}, "retrieved[0] is not a document"),
    ({"retrieved": [{"text": "no id"}]}, "retrieved[0] is not a document"),
    ({"context": lc_docs(), "answer": 7}, "the answer must be a string, got an int"),
    ({"a": {"documents": hs_docs()}, "b": {"documents": hs_docs()}}, "documents from several components ('a', 'b')"),
    ({"llm": {"replies": ["x"]}}, "the pipeline's result has no documents"),
])
def test_a_wrong_shape_names_what_was_received(obj: Any, needle: str) -> None:
    with pytest.raises(ShapeError) as err:
        read_output("q1", obj, hint="return one of the shapes")
    assert needle in str(err.value), str(err.value)
    assert err.value.hint


def test_keys_shown_are_few_and_short() -> None:
    obj = {("k" * 100 if n == 0 else f"key{n}"): n for n in range(25)}
    with pytest.raises(ShapeError) as err:
        parse_output("q1", obj)
    message = str(err.value)
    assert "'" + "k" * 40 + "...'" in message and "k" * 41 not in message
    assert "'key9'" in message and "'key10'" not in message and "and 15 more" in message


def test_the_usual_shape_keeps_its_old_wording() -> None:
    for obj, needle in [({"answer": "x"}, "no 'retrieved' field"), ([{"id": "d1"}], "expected a JSON object, got list"),
                        ({"retrieved": [{"text": "no id"}]}, "retrieved[0].id must be a non-empty string"),
                        ({"retrieved": [3]}, "retrieved[0] must be an object with 'id', got an int")]:
        with pytest.raises(ShapeError) as err:
            parse_output("q1", obj)
        assert needle in str(err.value)


# --------------------------------------------------------------------------- the Python target and the run


CASES = [GoldenCase(id=f"g{n:02d}", question=f"question {n}?", line=n + 1, relevant={"d1": 1}) for n in range(1, 29)]


def test_retriever_and_answerer_get_k_and_the_documents_as_they_were() -> None:
    calls: list[Any] = []

    def retriever(question: str, k: int) -> list[LcDocument]:
        calls.append(k)
        return lc_docs()[:k]

    def answerer(question: str, documents: list[Any]) -> str:
        calls.append(documents)
        return documents[0].page_content.split(". ")[0]

    target = PythonTarget(None, retriever=retriever, answerer=answerer, concurrency=4)
    outputs = collect_outputs(target, CASES[:5], 3)
    assert seen(outputs["g03"]) == EXPECTED and calls.count(3) == 5
    assert all(isinstance(c, list) and isinstance(c[0], LcDocument) for c in calls if c != 3)
    alone = PythonTarget(None, retriever=retriever).ask(CASES[0], 2)
    assert alone.answer is None and [d.id for d in alone.retrieved] == ["d1", "d2"]


def test_the_noise_test_gives_the_answerer_the_contexts_as_strings() -> None:
    target = PythonTarget(None, retriever=lambda q, k: [], answerer=lambda q, docs: f"{len(docs)}:{docs[0]}")
    assert target.answers_from_contexts
    assert target.answer_from(CASES[0], ["one", "two"]).text == "2:one"
    broken = PythonTarget(None, retriever=lambda q, k: [], answerer=lambda q, docs: docs[0].page_content)
    error = broken.answer_from(CASES[0], ["one"]).error
    assert error is not None and error.startswith("answerer (given the contexts as strings): AttributeError")


def test_a_wrong_shape_stops_the_run_after_one_case_with_the_keys_received() -> None:
    calls = []

    def function(question: str, k: int) -> dict[str, Any]:
        calls.append(question)
        return {"input": question, "output": {"answer": "x"}}

    target = PythonTarget(function, concurrency=4)
    with pytest.raises(RunError) as err:
        collect_outputs(target, CASES, 5)
    assert len(calls) == 1  # no second call
    assert err.value.message == ("the target returned the wrong shape for case g01: no 'retrieved' field "
                                 "(got an object with keys 'input', 'output')")
    assert err.value.hint is not None and err.value.hint.startswith("return one of:") and "no other case was asked" in err.value.hint


def test_a_document_without_an_id_stops_the_run_with_the_id_key_hint() -> None:
    calls = []

    def retriever(question: str, k: int) -> list[LcDocument]:
        calls.append(k)
        return [LcDocument("text", {"source": "a.txt"})]

    with pytest.raises(RunError) as err:
        collect_outputs(PythonTarget(None, retriever=retriever), CASES, 5)
    assert len(calls) == 1
    assert "retriever(question, k)[0] (a LangChain Document): it has no id" in err.value.message
    assert err.value.hint is not None and "target.python.id_key" in err.value.hint


def test_a_case_that_raises_is_no_wrong_shape_and_the_run_goes_on() -> None:
    def function(question: str, k: int) -> Any:
        if question == CASES[0].question:
            raise RuntimeError("boom")
        return (ANSWER, lc_docs())

    outputs = collect_outputs(PythonTarget(function), CASES[:3], 5)
    assert outputs["g01"].error == "RuntimeError: boom" and seen(outputs["g02"]) == EXPECTED


# --------------------------------------------------------------------------- results lines


GOLDEN = [GoldenCase(id=f"q{n}", question=f"Q{n}?", line=n + 1, relevant={"d1": 1}) for n in range(len(SERIALISED) + 1)]


def test_serialised_results_lines_read_as_the_usual_ones_fast_or_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": "q0", **USUAL}] + [{"id": f"q{n + 1}", **obj} for n, obj in enumerate(SERIALISED.values())]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for texts in (True, False):
        fast = ResultsFileTarget.read(path, GOLDEN, texts=texts)
        with monkeypatch.context() as m:
            m.setattr(results_module, "fast_as", lambda *_, **__: None)
            slow = ResultsFileTarget.read(path, GOLDEN, texts=texts)
        assert len(fast.outputs) == len(rows)
        for cid in fast.outputs:
            if texts:
                assert seen(fast.outputs[cid]) == seen(slow.outputs[cid]) == EXPECTED, cid
            else:  # a texts-free run: the ids and scores are what the stages read (the dict path may keep texts)
                ranked = [[(d.id, d.score) for d in t.outputs[cid].retrieved] for t in (fast, slow)]
                assert ranked[0] == ranked[1] == [(i, s) for i, _, s in DOCS], cid


def test_a_results_line_of_the_wrong_shape_names_its_keys_and_the_fields(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"id": "q0", "docs": [], "reply": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        ResultsFileTarget.read(path, GOLDEN)
    assert err.value.line == 1
    assert err.value.message.endswith("the line has the wrong shape: no 'retrieved' field (got an object with keys 'id', 'docs', 'reply')")
    assert err.value.hint is not None and "retrieved [{id, text, score}]" in err.value.hint


@pytest.mark.parametrize(("python", "needle"), [
    ('{function: "m:f", retriever: "m:r"}', "target.python: give exactly one of function, retriever (found function, retriever)"),
    ('{function: "m:f", answerer: "m:a"}', "target.python.answerer: 'answerer' goes with 'retriever', which is not set"),
    ('{path: ["."]}', "target.python: needs one of function, retriever"),
])
def test_the_spec_takes_a_function_or_a_retriever(tmp_path: Path, python: str, needle: str) -> None:
    from gate.config.loader import load_spec

    (tmp_path / "golden.jsonl").write_text('{"id": "q1", "question": "Q?", "relevant_doc_ids": ["d1"]}\n', encoding="utf-8")
    spec = tmp_path / "rag-eval.yml"
    spec.write_text(f"version: 1\ngolden_set: golden.jsonl\ntarget:\n  python: {python}\nstages:\n  retrieval: {{metrics: [mrr]}}\n",
                    encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_spec(spec)
    assert err.value.line == 4 and needle in err.value.message
    spec.write_text(spec.read_text(encoding="utf-8").replace(python, '{retriever: "m:r", answerer: "m:a", id_key: doc}'), encoding="utf-8")
    assert load_spec(spec).target["python"] == {"retriever": "m:r", "answerer": "m:a", "id_key": "doc", "concurrency": 1}


@pytest.mark.parametrize(("given", "said"), [(None, "got null"), ("", "got an empty string"), (2.5, "got a float (2.5)"),
                                             (True, "got a bool (True)"), ([1], "got a list")])
def test_an_id_given_but_not_an_id_is_named_by_its_value(given: object, said: str) -> None:
    """The id's own value is said (null, an empty string, a float), not the keys of the object that holds it; an
    object with no id at all is said by its keys."""
    with pytest.raises(ShapeError) as err:
        parse_output("q1", {"retrieved": [{"id": given, "text": "t"}]})
    assert str(err.value) == f"retrieved[0].id must be a non-empty string, {said}"
    with pytest.raises(ShapeError) as err:
        parse_output("q1", {"retrieved": [{"doc": "d1"}]}, {**DEFAULT_FIELDS, "id": "meta.id"})
    assert "got an object with key 'doc'" in str(err.value)


def test_a_returned_list_names_its_item_in_words() -> None:
    """A list returned by a function (retrieval only) has no name of its own: its bad item is 'item 1 of the
    returned list', not 'the list[1]'."""
    from gate.targets.shapes import read_output

    with pytest.raises(ShapeError) as err:
        read_output("q1", [{"id": "d1", "text": "t"}, {"text": "no id"}])
    assert str(err.value).startswith("item 1 of the returned list is not a document"), str(err.value)
    assert "got an object with key 'text'" in str(err.value)
