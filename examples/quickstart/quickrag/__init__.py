"""quickrag: a tiny, standard-library-only RAG system used by the rag-gate quickstart.

Public surface (a contract the gate calls):

- :func:`answer` -- BM25 retrieval over ``corpus.jsonl`` plus an extractive answer.
- :func:`answer_from_contexts` -- the same answerer restricted to given contexts.
- :data:`REFUSAL` -- the answer text used when the system declines to answer.

Run ``python -m quickrag --help`` for the HTTP service and the ``ask`` command.
"""

from __future__ import annotations

from .rag import REFUSAL, answer, answer_from_contexts

__all__ = ["REFUSAL", "answer", "answer_from_contexts"]
