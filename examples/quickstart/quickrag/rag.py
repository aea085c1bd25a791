"""The demo RAG pipeline: BM25 retrieval plus an extractive, sentence-level answerer."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from .bm25 import BM25Index, load_corpus
from .text import content_terms, split_sentences

__all__ = [
    "MIN_SCORE", "MODES", "REFUSAL", "answer", "answer_from_contexts", "check_mode", "default_index", "gullible_answer",
    "gullible_answer_from_contexts", "never_refuse_answer", "never_refuse_answer_from_contexts",
]

REFUSAL = "I don't know: the answer was not found in the provided documents."
"""The exact answer returned when the system declines to answer."""

MIN_SCORE = 4.25
"""Below this best BM25 score, ``answer()`` refuses instead of answering."""

ANSWER_CONTEXTS = 3
"""How many top passages the answerer reads (and ``answer()`` returns as ``contexts``)."""

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "corpus.jsonl"

MODES = ("normal", "gullible", "never_refuse")
"""Behaviours of the answerer. ``normal`` is the real system; the other two are deliberately
broken versions for demonstrating the robustness stage:

- ``gullible`` trusts the first passage: the answer is always drawn from the first context
  (the first retrieved passage, or the first of the given contexts), and given contexts are
  never refused.
- ``never_refuse`` never returns :data:`REFUSAL`: it answers with the best sentence it has,
  even when the best BM25 score is below :data:`MIN_SCORE` or no sentence shares a term
  with the question.
"""

NO_PASSAGE_ANSWER = "Yes."
"""What ``never_refuse`` answers when it has no passage at all to draw a sentence from."""

_index: BM25Index | None = None
_index_lock = threading.Lock()


def default_index() -> BM25Index:
    """The BM25 index over the corpus, built on first use and shared afterwards.

    The corpus is ``corpus.jsonl`` beside the package, or the file named by the
    ``QUICKRAG_CORPUS`` environment variable.
    """
    global _index
    if _index is None:
        with _index_lock:
            if _index is None:
                path = Path(os.environ.get("QUICKRAG_CORPUS", DEFAULT_CORPUS))
                _index = BM25Index(load_corpus(path))
    return _index


def _best_sentence(question: str, contexts: list[str]) -> str | None:
    """The sentence sharing the most distinct content terms with the question.

    Ties go to the earlier context, then the earlier sentence. ``None`` when no
    sentence shares a single term.
    """
    wanted = content_terms(question)
    best: str | None = None
    best_overlap = 0
    for context in contexts:
        for sentence in split_sentences(context):
            overlap = len(wanted & content_terms(sentence))
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
    return best


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is one of :data:`MODES`; raise ``ValueError`` otherwise."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def _first_sentence(contexts: list[str]) -> str | None:
    """The first sentence of the first context that has one."""
    for context in contexts:
        sentences = split_sentences(context)
        if sentences:
            return sentences[0]
    return None


def _answer_sentence(question: str, contexts: list[str], mode: str) -> str | None:
    """The sentence to answer with in ``mode``; ``None`` means refuse."""
    if mode == "gullible":
        first = contexts[:1]
        return _best_sentence(question, first) or _first_sentence(first)
    sentence = _best_sentence(question, contexts)
    if sentence is None and mode == "never_refuse":
        sentence = _first_sentence(contexts) or NO_PASSAGE_ANSWER
    return sentence


def answer(question: str, k: int = 5, mode: str = "normal") -> dict[str, Any]:
    """Retrieve the top ``k`` passages for ``question`` and answer from the top three.

    Returns ``{"retrieved": [{"id", "text", "score"}, ...], "answer": str,
    "contexts": [str, ...]}`` with ``retrieved`` in rank order. The answer is
    :data:`REFUSAL` when the best BM25 score is below :data:`MIN_SCORE` or no
    sentence of the contexts shares a term with the question.

    ``mode="gullible"`` answers from the first retrieved passage only (``contexts`` stays
    the top three; below :data:`MIN_SCORE` it still refuses); ``mode="never_refuse"``
    ignores :data:`MIN_SCORE` and never returns :data:`REFUSAL`. See :data:`MODES`.
    """
    check_mode(mode)
    hits = default_index().search(question, k)
    retrieved = [{"id": h.passage.id, "text": h.passage.text, "score": round(h.score, 4)} for h in hits]
    contexts = [h.passage.text for h in hits[:ANSWER_CONTEXTS]]
    sentence = None
    if mode == "never_refuse" or (hits and hits[0].score >= MIN_SCORE):
        sentence = _answer_sentence(question, contexts, mode)
    return {"retrieved": retrieved, "answer": sentence or REFUSAL, "contexts": contexts, "system": system_facts(mode)}


def system_facts(mode: str = "normal") -> dict[str, Any]:
    """What the service says about itself with every answer (rag-gate lists what changed between two runs): its
    answering model (``QUICKRAG_MODEL``, default the extractive answerer and its mode) and how many passages its index
    holds."""
    model = os.environ.get("QUICKRAG_MODEL") or f"quickrag-extractive-{mode}"
    return {"model": model, "documents": len(default_index().passages)}


def answer_from_contexts(question: str, contexts: list[str], mode: str = "normal") -> dict[str, Any]:
    """Answer ``question`` from the given ``contexts`` only (no retrieval).

    Returns ``{"answer": str}``: the best-overlapping sentence, or :data:`REFUSAL`
    when no sentence shares a content term with the question.

    ``mode="gullible"`` answers from ``contexts[0]`` only (its best-overlapping sentence,
    else its first sentence) and refuses only when ``contexts`` is empty;
    ``mode="never_refuse"`` never returns :data:`REFUSAL`. See :data:`MODES`.
    """
    check_mode(mode)
    return {"answer": _answer_sentence(question, list(contexts), mode) or REFUSAL}


# The broken variants as plain functions, for a python target ("quickrag:gullible_answer").


def gullible_answer(question: str, k: int = 5) -> dict[str, Any]:
    """:func:`answer` with ``mode="gullible"``."""
    return answer(question, k, mode="gullible")


def gullible_answer_from_contexts(question: str, contexts: list[str]) -> dict[str, Any]:
    """:func:`answer_from_contexts` with ``mode="gullible"``."""
    return answer_from_contexts(question, contexts, mode="gullible")


def never_refuse_answer(question: str, k: int = 5) -> dict[str, Any]:
    """:func:`answer` with ``mode="never_refuse"``."""
    return answer(question, k, mode="never_refuse")


def never_refuse_answer_from_contexts(question: str, contexts: list[str]) -> dict[str, Any]:
    """:func:`answer_from_contexts` with ``mode="never_refuse"``."""
    return answer_from_contexts(question, contexts, mode="never_refuse")
