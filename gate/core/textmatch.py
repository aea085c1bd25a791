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
(tests/unit/test_offline_metrics.py checks it against them).

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

``answer_bearing_f1`` also reads the question: it is the robustness noise test's offline
correctness (not a generation metric), token F1 on the words of the ground truth that the
question does not already give, with the ground truth's numbers required (see its docstring).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

NORMALISATION_VERSION = "1"

METRICS: dict[str, str] = {
    "exact_match": "SQuAD exact match on normalised text (NFKC, lowercase, no punctuation/articles, CJK per character)",
    "token_f1": "SQuAD token F1 on normalised text (NFKC, lowercase, no punctuation/articles, CJK per character)",
    "rouge_l": "ROUGE-L F-measure on lowercased letter/digit tokens, CJK per character, no stemming",
}

PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"  # string.punctuation (the string module is not imported for it)
_ASCII_PUNCTUATION = frozenset(PUNCTUATION)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# Han ideographs (with extensions and compatibility forms), the ideographic marks
# 々 〆 〇, Hiragana, Katakana and its phonetic extensions.
_CJK_CLASS = ("(["
              "\u3005-\u3007"
              "\u3040-\u30ff"
              "\u31f0-\u31ff"
              "\u3400-\u4dbf"
              "\u4e00-\u9fff"
              "\uf900-\ufaff"
              "\U00020000-\U0002fa1f"
              "\U00030000-\U000323af"
              "])")


@lru_cache(maxsize=1)
def _cjk() -> re.Pattern[str]:
    """The CJK pattern, compiled at its first use (its wide class takes milliseconds to compile, and an ASCII text
    never needs it)."""
    return re.compile(_CJK_CLASS)


@lru_cache(maxsize=4096)
def _is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


@lru_cache(maxsize=4096)
def _is_word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


def _space_cjk(text: str) -> str:
    return text if text.isascii() else _cjk().sub(r" \1 ", text)  # ASCII holds no CJK character: nothing to space


class _CharTable(dict[int, "int | None"]):
    """A ``str.translate`` table filled as characters are met: each code point's image by ``rule`` (its own code point,
    another, or None to drop it), worked out once. The same text as the per-character loop, in C. At most ``LIMIT``
    code points are kept (a text of every code point is still translated right, only not remembered)."""

    LIMIT = 1 << 16

    def __init__(self, rule: Callable[[str], int | None]) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, cp: int) -> int | None:
        image = self.rule(chr(cp))
        if len(self) < self.LIMIT:
            self[cp] = image
        return image


_NO_PUNCTUATION = _CharTable(lambda ch: None if _is_punctuation(ch) else ord(ch))
_WORDS_ONLY = _CharTable(lambda ch: ord(ch) if _is_word_char(ch) else 32)  # 32: a space


# ASCII text takes a byte-level path with the same result: NFKC leaves ASCII as it is, the ASCII punctuation is
# string.punctuation (every ASCII P* character is in it), the ASCII letters and digits are its L* and N* characters
_ASCII_PUNCTUATION_BYTES = PUNCTUATION.encode("ascii")
_ARTICLE_WORDS = frozenset({"a", "an", "the"})
_ASCII_ODD_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f]")  # ASCII that is neither a word character nor whitespace
_ASCII_WORD_BYTES = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer`` extended to Unicode (see the module docstring)."""
    return " ".join(squad_tokens(text))


def squad_tokens(text: str) -> list[str]:
    """Tokens for exact_match and token_f1: the normalised text split on whitespace."""
    if text.isascii():
        text = text.lower().encode("ascii").translate(None, _ASCII_PUNCTUATION_BYTES).decode("ascii")
        if not _ASCII_ODD_CONTROL.search(text):
            # what is left is letters, digits and whitespace: an article is a whole token, and dropping those tokens is
            # what the articles' regular expression does
            return [t for t in text.split() if t not in _ARTICLE_WORDS]
        return _ARTICLES.sub(" ", text).split()
    return _ARTICLES.sub(" ", _space_cjk(unicodedata.normalize("NFKC", text).lower().translate(_NO_PUNCTUATION))).split()


def rouge_tokens(text: str) -> list[str]:
    """Tokens for rouge_l: lowercased runs of letters/digits; each CJK character is a token."""
    if text.isascii():
        return text.lower().encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split()
    return _space_cjk(unicodedata.normalize("NFKC", text).lower()).translate(_WORDS_ONLY).split()


def exact_match(answer: str, reference: str) -> float:
    """1.0 when both texts normalise to the same string, else 0.0."""
    return 1.0 if normalize_answer(answer) == normalize_answer(reference) else 0.0


def token_f1(answer: str, reference: str) -> float:
    """SQuAD token F1. When either side has no token: 1.0 if both have none, else 0.0."""
    return _f1(squad_tokens(answer), squad_tokens(reference))


def _f1(answer_tokens: list[str], reference_tokens: list[str]) -> float:
    """F1 of the bags of tokens; when either side is empty: 1.0 if both are, else 0.0."""
    if not answer_tokens or not reference_tokens:
        return 1.0 if answer_tokens == reference_tokens else 0.0
    common = sum((Counter(answer_tokens) & Counter(reference_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(answer_tokens)
    recall = common / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def is_number(token: str) -> bool:
    """A token with a decimal digit in it (after normalisation): ``21``, ``050`` (from ``$0.50``), ``1200``
    (from ``12:00``), ``b12``."""
    return any(ch.isdecimal() for ch in token)


def answer_bearing_tokens(reference: str, question: str) -> list[str]:
    """The tokens of ``reference`` (with their repeats, in order) that are not among the question's tokens."""
    asked = set(squad_tokens(question))
    return [t for t in squad_tokens(reference) if t not in asked]


def answer_bearing_f1(answer: str, reference: str, question: str) -> float:
    """How well ``answer`` gives what ``reference`` (the ground truth) answers to ``question``, in [0, 1].

    Plain token F1 is fooled by template wording: against "The capital of region 0 is Cedar" (question
    "What is the capital of region 0?") the wrong "The capital of region 17 is Rowan" shares the
    tokens capital, of, region, is and scores 0.67. The words the question already gives say nothing
    about whether the answer is right, so they are left out of both sides:

    1. Tokens are ``squad_tokens`` (NFKC, lower case, no punctuation, no articles, CJK one token per
       character). The answer-bearing tokens are the ground truth's tokens that are not question
       tokens (``answer_bearing_tokens``: {cedar} above); the answer's tokens that are question tokens
       are dropped the same way ("Cedar is the capital." keeps {cedar}).
    2. F1 between the two bags: recall asks that the answer give the answer-bearing tokens, precision
       that it add little else, so an answer listing candidates ("Cedar, Rowan, Oak, Elm": 0.4) or
       repeating a template with another name (0.0 above) scores low.
    3. Numbers decide answers that one changed token leaves otherwise alike: "Printed books can be
       borrowed for 22 days." against "Printed books can be borrowed for 21 days." (question "How long
       can I borrow a printed book?") has F1 5/6 on step 2. The number share is the share of the
       answer-bearing number tokens (any token with a digit, ``is_number``: ``21``, ``050`` from
       ``$0.50``, ``1200`` from ``12:00``) that the answer has, and 0.0 when the answer lacks one of
       them and has a number of its own (not in the ground truth nor the question) in its place:
       "12:00 to 17:00" against "12:00 to 16:00" contradicts it, while "$1 per day" against "$1 per
       day, up to $15" is half of it (0.5). An answer with all of them may add other numbers.

    The score is the smaller of step 2's F1 and step 3's share (1.0 when the ground truth has no
    number the question lacks). An empty answer, or one that only repeats question words, scores 0.0.
    When the question holds every token of the ground truth (nothing answer-bearing is left, as in
    "Saturday or Sunday?" answered "Sunday"), the score is plain ``token_f1(answer, reference)``.

    Known limits, as for any token overlap: a deciding word the question itself names ("Is it open on
    Saturday or Sunday?" answered "It is open on Saturday." against "It is open on Sunday.") cannot
    be seen; nor a negation or a number written in words; wording a wrong answer shares with the
    ground truth but not with the question still counts for it; a CJK name sharing a character with
    the question loses that character. A judge (``method: judge``) reads the meaning instead.
    """
    reference_tokens = answer_bearing_tokens(reference, question)
    if not reference_tokens:
        return token_f1(answer, reference)
    answer_tokens = answer_bearing_tokens(answer, question)
    score = _f1(answer_tokens, reference_tokens)
    numbers = Counter(t for t in reference_tokens if is_number(t))
    if numbers:
        given = Counter(t for t in answer_tokens if is_number(t))
        found = sum((numbers & given).values())
        share = found / sum(numbers.values())
        if share < 1 and set(given) - set(numbers):  # another number where one of the ground truth's is missing
            share = 0.0
        score = min(score, share)
    return score


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

# Measures that also read the question: the noise test's offline correctness, not generation metrics. The
# description is part of the cache key (the engine's prompt fingerprint): change it when the rule changes.
QUESTION_METRICS: dict[str, str] = {
    "answer_bearing_f1": "token F1 on the ground truth's tokens not in the question (and the answer's), at most the share of "
                         "those that are numbers found in the answer (0 if another number replaces a missing one); plain token "
                         "F1 when the question holds every token",
}
QUESTION_SCORERS = {"answer_bearing_f1": answer_bearing_f1}


def text_matches(relevant: str, passage: str, min_overlap: float) -> bool:
    """Whether a retrieved passage is the relevant text (match.level: text): on normalised text (as for exact_match),
    one contains the other, or the passage holds at least ``min_overlap`` of the relevant text's distinct words and
    every number in it. A passage cut differently by a new chunker still matches the passage or sentence it holds."""
    rel, pas = squad_tokens(relevant), squad_tokens(passage)
    if not rel or not pas:
        return False
    r, p = " " + " ".join(rel) + " ", " " + " ".join(pas) + " "
    if r in p or (p in r and len(pas) >= min(5, len(rel))):  # a piece of the relevant text, not a stray word of it
        return True
    words, held = set(rel), set(pas)
    numbers = {w for w in words if any(ch.isdigit() for ch in w)}
    # the numbers too: passages written from one template ("Branch 3 opens at 9" / "Branch 4 opens at 10") share
    # most of their words and differ in exactly the facts that make one of them the relevant one
    return numbers <= held and len(words & held) / len(words) >= min_overlap - 1e-12
