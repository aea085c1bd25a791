"""Tokenizing and sentence splitting shared by the retriever and the answerer."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "content_terms", "split_sentences", "tokenize"]

STOPWORDS: frozenset[str] = frozenset(
    """
    a about after all also am an and any are as at be because been before being but by
    can could did do does doing for from had has have how i if in into is it its just me
    my no nor not of on once only or other our out over own same should so some such than
    that the their them then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    """.split()
)

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
# A sentence ends at . ! or ? followed by whitespace and a capital letter or a digit;
# decimal prices such as "$0.25" and e-mail addresses are therefore never split.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def tokenize(text: str) -> list[str]:
    """Lowercase ``text``, split it on non-alphanumerics and drop stopwords."""
    return [t for t in _NON_ALNUM.split(text.lower()) if t and t not in STOPWORDS]


def content_terms(text: str) -> set[str]:
    """The distinct non-stopword terms of ``text``."""
    return set(tokenize(text))


def split_sentences(text: str) -> list[str]:
    """Split a passage into sentences (non-empty, stripped)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
