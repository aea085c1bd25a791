"""Answer-vs-ground-truth text measures that need no model: the maths of the offline engine. Pure.

    exact_match   1.0 when the normalised answer equals the normalised ground truth, else 0.0
    token_f1      SQuAD token-level F1 between the normalised answer and ground truth
    rouge_l       ROUGE-L F-measure (longest common subsequence of tokens), no stemming

``exact_match`` and ``token_f1`` follow the official SQuAD v2.0 evaluation script
(``normalize_answer``, ``compute_exact``, ``compute_f1``): lowercase, drop punctuation,
drop the English articles a/an/the, collapse whitespace, split on whitespace. ``rouge_l``
follows Google's ``rouge_score`` package with ``use_stemmer=False``: lowercase, keep runs
of letters and digits as tokens, F = 2PR / (P + R) on the LCS, 0.0 when either side has
no token. On ASCII English text all three give exactly what those references give
(tests/test_offline_metrics.py checks it against them).

Beyond ASCII, where the references do something unhelpful, the rules are:

* Text is NFKC-normalised first, so full-width letters and digits (``ＡＢＣ``, ``２０２３``)
  and compatibility forms (``ﬁ``, ``²``) compare equal to their plain forms.
* Punctuation is every ASCII ``string.punctuation`` character (as in SQuAD) plus every
  Unicode punctuation character (category P*: ``，。！？、「」“”’—``). SQuAD keeps the
  latter, so ``“Paris”`` would not match ``Paris`` there; here it does.
* Letters are Unicode letters, marks and numbers (categories L*, M*, N*), so ``café``
  and ``हिन्दी`` stay one token for rouge_l (rouge_score would cut them at each non-ASCII
  character).
* CJK ideographs, Hiragana and Katakana are one token per character: Chinese and Japanese
  are written without spaces, so a whole sentence would otherwise be a single token and
  token_f1 / rouge_l could only be 0 or 1. ``北京大学`` vs ``北京`` has token_f1 2/3;
  whitespace between CJK characters does not matter (``北京 大学`` matches ``北京大学``).
  Hangul is left as space-separated words (Korean uses spaces). Other scripts written
  without spaces (Thai, Lao, Khmer, ...) are one token per run and score poorly.

All three measures are symmetric in their two arguments. ``NORMALISATION_VERSION`` is part
of the offline engine's version and so of every cache key: bump it when any rule here changes.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from functools import lru_cache

NORMALISATION_VERSION = "1"

METRICS: dict[str, str] = {
    "exact_match": "SQuAD exact match on normalised text (NFKC, lowercase, no punctuation/articles, CJK per character)",
    "token_f1": "SQuAD token F1 on normalised text (NFKC, lowercase, no punctuation/articles, CJK per character)",
    "rouge_l": "ROUGE-L F-measure on lowercased letter/digit tokens, CJK per character, no stemming",
}

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# Han ideographs (with extensions and compatibility forms), the ideographic marks
# 々 〆 〇, Hiragana, Katakana and its phonetic extensions.
_CJK = re.compile(
    "(["
    "\u3005-\u3007"
    "\u3040-\u30ff"
    "\u31f0-\u31ff"
    "\u3400-\u4dbf"
    "\u4e00-\u9fff"
    "\uf900-\ufaff"
    "\U00020000-\U0002fa1f"
    "\U00030000-\U000323af"
    "])"
)


@lru_cache(maxsize=4096)
def _is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


@lru_cache(maxsize=4096)
def _is_word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


def _space_cjk(text: str) -> str:
    return _CJK.sub(r" \1 ", text)


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer`` extended to Unicode (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if not _is_punctuation(ch))
    text = _space_cjk(text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_tokens(text: str) -> list[str]:
    """Tokens for exact_match and token_f1: the normalised text split on whitespace."""
    return normalize_answer(text).split()


def rouge_tokens(text: str) -> list[str]:
    """Tokens for rouge_l: lowercased runs of letters/digits; each CJK character is a token."""
    text = _space_cjk(unicodedata.normalize("NFKC", text).lower())
    return "".join(ch if _is_word_char(ch) else " " for ch in text).split()


def exact_match(answer: str, reference: str) -> float:
    """1.0 when both texts normalise to the same string, else 0.0."""
    return 1.0 if normalize_answer(answer) == normalize_answer(reference) else 0.0


def token_f1(answer: str, reference: str) -> float:
    """SQuAD token F1. When either side has no token: 1.0 if both have none, else 0.0."""
    answer_tokens, reference_tokens = squad_tokens(answer), squad_tokens(reference)
    if not answer_tokens or not reference_tokens:
        return 1.0 if answer_tokens == reference_tokens else 0.0
    common = sum((Counter(answer_tokens) & Counter(reference_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(answer_tokens)
    recall = common / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def rouge_l(answer: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge_score's ``rougeL`` with ``use_stemmer=False``); 0.0 when either side has no token."""
    answer_tokens, reference_tokens = rouge_tokens(answer), rouge_tokens(reference)
    if not answer_tokens or not reference_tokens:
        return 0.0
    lcs = lcs_length(answer_tokens, reference_tokens)
    if lcs == 0:
        return 0.0
    precision = lcs / len(answer_tokens)
    recall = lcs / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists.

    Bit-parallel (Allison & Dix 1986; Crochemore et al. 2001): bit i of ``v`` stands for
    position i of ``a``, and each token of ``b`` updates all positions with one addition,
    so long Chinese answers (one token per character) stay fast. The LCS length is the
    number of zero bits left in ``v``.
    """
    if not a or not b:
        return 0
    positions: dict[str, int] = {}
    for i, token in enumerate(a):
        positions[token] = positions.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & positions.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


SCORERS = {"exact_match": exact_match, "token_f1": token_f1, "rouge_l": rouge_l}
