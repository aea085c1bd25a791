"""Two retrievers over the quickstart corpus (examples/quickstart/corpus.jsonl), as Python targets
``function(question, k) -> {"retrieved": [{id, text, score}], "answer"}``:

- ``bm25``: keyword-only Okapi BM25 over the passages' words: a user's own words the corpus does not use find
  nothing;
- ``semantic``: a stand-in for an embedding retriever: the same BM25 after each word of the question is mapped
  through ``SYNONYMS`` (everyday word -> the handbook's), so a colloquial question meets the corpus's vocabulary.

    target: {python: {function: "retrievers:semantic", path: ["<this folder>"]}}

The answer is the top passage's first sentence (the paraphrase test reads the retrieved ids only).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "corpus.jsonl"
STOPWORDS = frozenset("a an and are as at be by can do does for from how i if in is it me my of on or so the to what when "
                      "where which who why will with you your".split())

# everyday word -> the handbook's words for it
SYNONYMS = {
    "keep": "borrowed", "hang": "borrowed", "paperback": "printed books", "novel": "printed book", "novels": "books",
    "local": "resident", "set": "cost", "pricey": "cost", "charge": "charged", "penalised": "fines charged",
    "late": "overdue", "movie": "dvds", "disc": "dvds", "prolong": "renewed renewal", "color": "colour",
    "printout": "printing", "sheet": "page", "downtown": "central", "weekend": "sunday", "misplaced": "lost replacement",
    "grownup": "adults", "eat": "food", "lunch": "food", "workspace": "study room", "shipped": "interlibrary loan",
    "elsewhere": "another library", "singalong": "rhyme", "infants": "babies", "amazon": "kindle",
    "gadget": "e-readers", "drop": "delivers", "stuck": "cannot visit", "indoors": "illness", "pc": "public computers",
    "portable": "mobile", "wifi": "wi-fi hotspots", "router": "hotspot", "schoolbooks": "textbooks",
    "giveaway": "donated accept", "freeze": "suspend", "reservations": "holds", "vacation": "away",
    "printer": "3d printer", "plastic": "3d filament", "shut": "close early", "dec": "christmas", "24": "eve",
    "kiddos": "children junior", "little": "junior",
}


def tokenize(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOPWORDS]


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over the passages' texts."""

    def __init__(self, passages: list[dict[str, str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.passages, self.k1, self.b = passages, k1, b
        self.tf = [Counter(tokenize(p["text"])) for p in passages]
        self.lengths = [sum(tf.values()) for tf in self.tf]
        self.avg = sum(self.lengths) / len(passages)
        df = Counter(t for tf in self.tf for t in tf)
        n = len(passages)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def search(self, terms: list[str], k: int) -> list[tuple[float, dict[str, str]]]:
        scored = []
        for i, tf in enumerate(self.tf):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            s = sum(self.idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in set(terms) if tf.get(t))
            if s > 0:
                scored.append((s, self.passages[i]))
        scored.sort(key=lambda x: (-x[0], x[1]["id"]))
        return scored[:k]


@cache
def index() -> BM25:
    return BM25([json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()])


def _reply(terms: list[str], k: int) -> dict[str, Any]:
    hits = index().search(terms, k)
    answer = re.split(r"(?<=[.!?])\s+", hits[0][1]["text"])[0] if hits else "I don't know."
    return {"retrieved": [{"id": p["id"], "text": p["text"], "score": round(s, 4)} for s, p in hits], "answer": answer}


def bm25(question: str, k: int) -> dict[str, Any]:
    return _reply(tokenize(question), k)


def semantic(question: str, k: int) -> dict[str, Any]:
    return _reply([t for w in tokenize(question) for t in tokenize(SYNONYMS.get(w, w))], k)
