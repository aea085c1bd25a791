"""quickrag: a tiny, standard-library-only RAG system used by the rag-gate quickstart.

Public surface (a contract the gate calls):

- :func:`answer` -- BM25 retrieval over ``corpus.jsonl`` plus an extractive answer.
- :func:`answer_from_contexts` -- the same answerer restricted to given contexts.
- :data:`REFUSAL` -- the answer text used when the system declines to answer.
- :data:`MODES` -- ``normal`` and two deliberately broken behaviours (``gullible``,
  ``never_refuse``) for demonstrating the robustness stage; both functions take ``mode=``,
  and ``gullible_answer``, ``never_refuse_answer`` (and their ``*_from_contexts``) fix it.

Run ``python -m quickrag --help`` for the HTTP service and the ``ask`` command.
"""

from __future__ import annotations

from .rag import (
    MODES,
    REFUSAL,
    answer,
    answer_from_contexts,
    gullible_answer,
    gullible_answer_from_contexts,
    never_refuse_answer,
    never_refuse_answer_from_contexts,
)

__all__ = [
    "MODES", "REFUSAL", "answer", "answer_from_contexts", "gullible_answer", "gullible_answer_from_contexts",
    "never_refuse_answer", "never_refuse_answer_from_contexts",
]
