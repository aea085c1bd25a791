"""An Okapi BM25 index over a JSONL corpus of passages."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .text import tokenize

__all__ = ["BM25Index", "Passage", "ScoredPassage", "load_corpus"]


@dataclass(frozen=True)
class Passage:
    """One corpus line: ``{"id": "<doc>#chunk_<n>", "title": str, "text": str}``."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class ScoredPassage:
    """A passage with its BM25 score for one query."""

    passage: Passage
    score: float


def load_corpus(path: Path) -> list[Passage]:
    """Read a JSONL corpus; raise ``ValueError`` naming the line at fault."""
    passages: list[Passage] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                passages.append(Passage(id=str(row["id"]), title=str(row.get("title", "")), text=str(row["text"])))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a corpus line with 'id' and 'text' ({exc})") from exc
    return passages


class BM25Index:
    """Okapi BM25 (k1=1.5, b=0.75 by default) over passage title + text.

    IDF is the non-negative form ``ln(1 + (N - n + 0.5) / (n + 0.5))``.
    """

    def __init__(self, passages: list[Passage], k1: float = 1.5, b: float = 0.75) -> None:
        self.passages = passages
        self.k1 = k1
        self.b = b
        self._term_freqs = [Counter(tokenize(f"{p.title} {p.text}")) for p in passages]
        self._lengths = [sum(tf.values()) for tf in self._term_freqs]
        self._avg_length = sum(self._lengths) / len(passages) if passages else 0.0
        doc_freq: Counter[str] = Counter()
        for tf in self._term_freqs:
            doc_freq.update(tf.keys())
        n = len(passages)
        self.idf: dict[str, float] = {
            term: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for term, df in doc_freq.items()
        }

    def score(self, query: str) -> list[float]:
        """BM25 score of every passage for ``query``, in corpus order."""
        terms = set(tokenize(query))
        scores = [0.0] * len(self.passages)
        for i, tf in enumerate(self._term_freqs):
            norm = self.k1 * (1.0 - self.b + self.b * self._lengths[i] / self._avg_length)
            total = 0.0
            for term in terms:
                f = tf.get(term, 0)
                if f:
                    total += self.idf[term] * f * (self.k1 + 1.0) / (f + norm)
            scores[i] = total
        return scores

    def search(self, query: str, k: int) -> list[ScoredPassage]:
        """The top ``k`` passages by score; ties keep corpus order (deterministic)."""
        scores = self.score(query)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: max(k, 0)]
        return [ScoredPassage(self.passages[i], scores[i]) for i in order]
