"""The Python target takes what real user code hands it: ``async def`` functions (run to their result), a retriever
that yields its documents (the list kept for the answerer too), and an answerer the noise test gives strings to
(its failure then says why, and what to set)."""

from __future__ import annotations

from typing import Any

from gate.core.model import GoldenCase
from gate.targets.python import PythonTarget

CASE = GoldenCase(id="q1", question="How long is a loan?", line=1, relevant={"loans": 1})
DOCS = [{"id": "loans", "text": "Books are lent for 21 days."}, {"id": "fees", "text": "10 cents a day."}]


async def async_function(question: str, k: int) -> dict[str, Any]:
    return {"retrieved": DOCS[:k], "answer": "21 days"}


async def async_retriever(question: str, k: int) -> list[dict[str, Any]]:
    return DOCS[:k]


async def async_answerer(question: str, documents: list[Any]) -> str:
    return f"{len(documents)} passages"


def test_async_functions_are_run_to_their_result() -> None:
    out = PythonTarget(async_function, 1).ask(CASE, 2)
    assert out.error is None and [d.id for d in out.retrieved] == ["loans", "fees"] and out.answer == "21 days"
    pair = PythonTarget(None, 1, retriever=async_retriever, answerer=async_answerer)
    out = pair.ask(CASE, 1)
    assert out.error is None and [d.id for d in out.retrieved] == ["loans"] and out.answer == "1 passages"
    assert pair.answer_from(CASE, ["a", "b"]).text == "2 passages"


def test_a_retriever_that_yields_its_documents() -> None:
    seen: list[Any] = []

    def retriever(question: str, k: int) -> Any:
        yield from DOCS[:k]

    def answerer(question: str, documents: list[Any]) -> str:
        seen.append(documents)
        return documents[0]["text"]

    out = PythonTarget(None, 1, retriever=retriever, answerer=answerer).ask(CASE, 2)
    assert out.error is None and [d.id for d in out.retrieved] == ["loans", "fees"] and out.answer == DOCS[0]["text"]
    assert seen == [DOCS[:2]]


def test_an_answerer_that_reads_documents_is_told_the_noise_test_gives_strings() -> None:
    def answerer(question: str, documents: list[Any]) -> str:
        return documents[0].page_content

    got = PythonTarget(None, 1, retriever=lambda q, k: DOCS[:k], answerer=answerer).answer_from(CASE, ["Books are lent for 21 days."])
    assert got.text is None and got.error is not None
    assert got.error.startswith("answerer (given the contexts as strings): AttributeError:")
    assert "take strings too, or set target.python.contexts_function" in got.error
