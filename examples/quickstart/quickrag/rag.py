"""The demo RAG pipeline: BM25 retrieval plus an extractive, sentence-level answerer."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from .bm25 import BM25Index, load_corpus
from .text import content_terms, split_sentences

__all__ = ["MIN_SCORE", "REFUSAL", "answer", "answer_from_contexts", "default_index"]

REFUSAL = "I don't know: the answer was not found in the provided documents."
"""The exact answer returned when the system declines to answer."""

MIN_SCORE = 4.25
"""Below this best BM25 score, ``answer()`` refuses instead of answering."""

ANSWER_CONTEXTS = 3
"""How many top passages the answerer reads (and ``answer()`` returns as ``contexts``)."""

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "corpus.jsonl"

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


def answer(question: str, k: int = 5) -> dict[str, Any]:
    """Retrieve the top ``k`` passages for ``question`` and answer from the top three.

    Returns ``{"retrieved": [{"id", "text", "score"}, ...], "answer": str,
    "contexts": [str, ...]}`` with ``retrieved`` in rank order. The answer is
    :data:`REFUSAL` when the best BM25 score is below :data:`MIN_SCORE` or no
    sentence of the contexts shares a term with the question.
    """
    hits = default_index().search(question, k)
    retrieved = [{"id": h.passage.id, "text": h.passage.text, "score": round(h.score, 4)} for h in hits]
    contexts = [h.passage.text for h in hits[:ANSWER_CONTEXTS]]
    sentence = None
    if hits and hits[0].score >= MIN_SCORE:
        sentence = _best_sentence(question, contexts)
    return {"retrieved": retrieved, "answer": sentence or REFUSAL, "contexts": contexts}


def answer_from_contexts(question: str, contexts: list[str]) -> dict[str, Any]:
    """Answer ``question`` from the given ``contexts`` only (no retrieval).

    Returns ``{"answer": str}``: the best-overlapping sentence, or :data:`REFUSAL`
    when no sentence shares a content term with the question.
    """
    return {"answer": _best_sentence(question, contexts) or REFUSAL}
