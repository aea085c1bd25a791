"""Offline answer metrics against independent references.

* exact_match / token_f1: the official SQuAD v2.0 evaluation script. Its three functions
  are re-typed below (``squad_*``) unchanged, and are the oracle on a seeded table of
  English pairs and on edge cases.
* rouge_l: Google's ``rouge_score`` (``RougeScorer(["rougeL"], use_stemmer=False)``) on
  ASCII English text, where our tokeniser must agree with its ``[a-z0-9]+`` one.
* Chinese and other non-ASCII behaviour, where we deliberately differ from both
  references, is checked on hand-computed examples.
"""

from __future__ import annotations

import asyncio
import collections
import random
import re
import string

import pytest

import gate
from gate.core.textmatch import exact_match, lcs_length, rouge_l, token_f1
from gate.judges import JudgeError, JudgeInput
from gate.judges.offline import OfflineEngine

SEED = 20250611
N_PAIRS = 300
APPROX = {"rel": 1e-12, "abs": 1e-12}


# --- The official SQuAD v2.0 evaluation script (evaluate-v2.0.py), re-typed as the oracle ---


def squad_normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_get_tokens(s):
    if not s:
        return []
    return squad_normalize_answer(s).split()


def squad_compute_exact(a_gold, a_pred):
    return int(squad_normalize_answer(a_gold) == squad_normalize_answer(a_pred))


def squad_compute_f1(a_gold, a_pred):
    gold_toks = squad_get_tokens(a_gold)
    pred_toks = squad_get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


# --- A seeded table of English (reference, answer) pairs ---

ASCII_WORDS = [
    "the", "The", "THE", "a", "A", "an", "An", "theatre", "another", "anthem", "Athens", "bathe",
    "Paris", "paris", "France", "capital", "city", "of", "is", "in", "1889", "3.14", "$5", "50%",
    "U.S.", "e-mail", "don't", "it's", "(1990)", "[note]", "well-known", "a.m.", "x_y", "C++",
    "Eiffel", "Tower", "tower", "built", "for", "World's", "Fair", "no", "yes", "N/A", "#1",
    "Dr.", "Smith", "smith's", "hello,world", "end.", "...", "--", "!", "?", "&", "100", "1,000",
]
ACCENTED_WORDS = ["café", "Café", "naïve", "résumé", "Zürich", "São", "Paulo", "El", "Niño", "piñata", "Ærø"]
SEPARATORS = [" ", " ", " ", "  ", "\t", "\n", ", ", " - "]


def _phrase(rng: random.Random, words: list[str], lo: int, hi: int) -> list[str]:
    return [rng.choice(words) for _ in range(rng.randint(lo, hi))]


def _join(rng: random.Random, tokens: list[str]) -> str:
    return "".join(t + rng.choice(SEPARATORS) for t in tokens).strip(" ") if tokens else rng.choice(["", " ", "\t"])


def _answer_for(rng: random.Random, reference: list[str], words: list[str]) -> list[str]:
    """An answer that overlaps the reference in one of several ways."""
    kind = rng.randrange(9)
    answer = list(reference)
    if kind == 0:  # identical tokens (possibly different separators)
        pass
    elif kind == 1:  # case change
        answer = [t.upper() if rng.random() < 0.5 else t.lower() for t in answer]
    elif kind == 2 and answer:  # drop some tokens
        answer = [t for t in answer if rng.random() < 0.6]
    elif kind == 3:  # insert tokens
        for _ in range(rng.randint(1, 4)):
            answer.insert(rng.randint(0, len(answer)), rng.choice(words))
    elif kind == 4:  # shuffle
        rng.shuffle(answer)
    elif kind == 5:  # add punctuation and articles
        answer = [rng.choice(["the ", "a ", "", "An "]) + t + rng.choice([".", ",", "!", "", "'s"]) for t in answer]
    elif kind == 6:  # repeat tokens
        answer = answer + [t for t in answer if rng.random() < 0.5]
    elif kind == 7:  # unrelated
        answer = _phrase(rng, words, 0, 8)
    else:  # substitute some tokens
        answer = [rng.choice(words) if rng.random() < 0.3 else t for t in answer]
    return answer


def make_table(seed: int, words: list[str], n: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        reference = _phrase(rng, words, 0, 12)
        answer = _answer_for(rng, reference, words)
        pairs.append((_join(rng, reference), _join(rng, answer)))
    return pairs


ENGLISH = make_table(SEED, ASCII_WORDS, N_PAIRS)
ACCENTED = make_table(SEED + 1, ASCII_WORDS + ACCENTED_WORDS, 100)

EDGE_CASES = [
    ("", ""),
    ("", "Paris"),
    ("Paris", ""),
    (" ", "\t\n"),
    ("!!!", ""),
    ("...", "?!"),
    ("!!!", "Paris"),
    ("the", ""),
    ("a an the", "The"),
    ("The", "Paris"),
    ("the the", "a"),
    ("Paris.", "paris"),
    ("the Eiffel Tower", "Eiffel tower!"),
    ("theatre", "atre"),
    ("anthem", "them"),
    ("hello,world", "hello world"),
    ("e-mail", "email"),
    ("x_y", "x y"),
    ("Paris Paris Paris", "Paris"),
    ("1,000", "1000"),
    ("$5", "5"),
    ("a", "a"),
]


def _mismatches(ours, reference, pairs):
    """(gold, pred, ours, reference) for every pair where we differ from the reference (gold, pred) -> score."""
    results = [(gold, pred, ours(pred, gold), reference(gold, pred)) for gold, pred in pairs]
    return [row for row in results if row[2] != pytest.approx(row[3], **APPROX)]


def test_the_table_exercises_every_outcome():
    em = [squad_compute_exact(g, p) for g, p in ENGLISH]
    f1 = [squad_compute_f1(g, p) for g, p in ENGLISH]
    assert 30 < sum(em) < N_PAIRS - 30
    assert sum(1 for v in f1 if 0 < v < 1) > 100
    assert sum(1 for g, p in ENGLISH if not squad_get_tokens(g) or not squad_get_tokens(p)) >= 5


@pytest.mark.parametrize("table", [ENGLISH, ACCENTED, EDGE_CASES], ids=["english", "accented", "edge"])
def test_exact_match_equals_squad(table):
    assert _mismatches(exact_match, squad_compute_exact, table) == []


@pytest.mark.parametrize("table", [ENGLISH, ACCENTED, EDGE_CASES], ids=["english", "accented", "edge"])
def test_token_f1_equals_squad(table):
    assert _mismatches(token_f1, squad_compute_f1, table) == []


@pytest.mark.parametrize("gold,pred", EDGE_CASES)
def test_edge_cases_one_by_one(gold, pred):
    assert exact_match(pred, gold) == squad_compute_exact(gold, pred)
    assert token_f1(pred, gold) == pytest.approx(squad_compute_f1(gold, pred), **APPROX)


def test_results_are_floats():
    for value in (exact_match("a", "b"), exact_match("x", "x"), token_f1("x", "y"), token_f1("", ""), rouge_l("", "x")):
        assert type(value) is float


# --- rouge_l against rouge_score ---


@pytest.fixture(scope="module")
def rouge_reference():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    return lambda target, prediction: scorer.score(target, prediction)["rougeL"].fmeasure


def _small_vocabulary_table(seed: int, n: int) -> list[tuple[str, str]]:
    """Long sequences over 4 words: many partial matches, LCS over more than 64 positions."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta"]
    return [(" ".join(_phrase(rng, words, 0, 150)), " ".join(_phrase(rng, words, 0, 150))) for _ in range(n)]


@pytest.mark.parametrize(
    "table",
    [ENGLISH, EDGE_CASES, _small_vocabulary_table(SEED + 2, 60)],
    ids=["english", "edge", "long-small-vocabulary"],
)
def test_rouge_l_equals_rouge_score(rouge_reference, table):
    assert _mismatches(rouge_l, rouge_reference, table) == []


def test_rouge_l_is_symmetric_and_order_sensitive(rouge_reference):
    assert rouge_l("the cat sat", "sat the cat") == pytest.approx(rouge_reference("sat the cat", "the cat sat"), **APPROX)
    assert rouge_l("the cat sat", "sat the cat") == pytest.approx(2 / 3)  # LCS "the cat"
    assert token_f1("cat sat", "sat cat") == 1.0  # bag of tokens: order does not matter


def _textbook_lcs(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
    return table[len(a)][len(b)]


def test_lcs_length_equals_dynamic_programming():
    rng = random.Random(SEED + 3)
    cases = [([], []), ([], ["x"]), (["x"], [])]
    for _ in range(200):
        vocabulary = [str(i) for i in range(rng.randint(1, 6))]
        cases.append(([rng.choice(vocabulary) for _ in range(rng.randint(0, 200))], [rng.choice(vocabulary) for _ in range(rng.randint(0, 200))]))
    assert [lcs_length(a, b) for a, b in cases] == [_textbook_lcs(a, b) for a, b in cases]


# --- Chinese and other non-ASCII text: hand-checked ---


@pytest.mark.parametrize(
    "answer,reference,expected",
    [
        ("北京大学", "北京大学。", 1.0),  # full-width punctuation is removed
        ("北京 大学", "北京大学", 1.0),  # spaces between CJK characters do not matter
        ("「北京」", "北京", 1.0),
        ("GPT-4 发布于2023年", "gpt4 发布于 2023 年", 1.0),
        ("２０２３年", "2023年", 1.0),  # full-width digits (NFKC)
        ("北京", "北京大学", 0.0),
        ("东京", "とうきょう", 0.0),
        ("“Paris”", "Paris", 1.0),  # Unicode quotes are punctuation (SQuAD would say 0)
    ],
)
def test_exact_match_beyond_ascii(answer, reference, expected):
    assert exact_match(answer, reference) == expected


@pytest.mark.parametrize(
    "answer,reference,expected",
    [
        # 4 vs 2 characters, 2 shared: P = 2/2, R = 2/4, F1 = 2/3
        ("北京", "北京大学", 2 / 3),
        # answer 天安门 (3) inside 我爱北京天安门 (7): P = 1, R = 3/7, F1 = (6/7)/(10/7) = 0.6
        ("天安门", "我爱北京天安门", 0.6),
        # same 8 characters in another order: a bag of tokens matches fully
        ("中国的首都是北京", "北京是中国的首都", 1.0),
        # 今天天气很好 / 今天天气不好: 5 of 6 characters shared each way
        ("今天天气很好", "今天天气不好", 5 / 6),
        # mixed: tokens [答, 案, 是, 42] vs [42]: P = 1/4, R = 1, F1 = 0.4
        ("答案是42。", "42", 0.4),
        ("东京", "上海", 0.0),
        # Japanese kana are one token each: とうきょう (5) vs きょう (3): P = 3/5, R = 1, F1 = 0.75
        ("とうきょう", "きょう", 0.75),
    ],
)
def test_token_f1_chinese(answer, reference, expected):
    assert token_f1(answer, reference) == pytest.approx(expected, **APPROX)
    assert token_f1(reference, answer) == pytest.approx(expected, **APPROX)


@pytest.mark.parametrize(
    "answer,reference,expected",
    [
        # LCS 今天天气好 = 5 of 6 on both sides
        ("今天天气很好", "今天天气不好", 5 / 6),
        # LCS 中国的首都 = 5 of 8 on both sides (order matters, unlike token_f1)
        ("中国的首都是北京", "北京是中国的首都", 5 / 8),
        # [北, 京] vs [北, 京, 大, 学]: LCS 2, P = 1, R = 1/2
        ("北京", "北京大学", 2 / 3),
        # [2023, 年, 发, 布] vs [发, 布, 于, 2023, 年]: LCS 2 (发布 or 2023年), P = 2/4, R = 2/5
        ("2023年发布", "发布于2023年", 2 * (2 / 4) * (2 / 5) / (2 / 4 + 2 / 5)),
        # rouge_score would drop the non-ASCII letters: here café and lait stay words
        ("café au lait", "caf au lait", 2 / 3),
        ("。！？", "北京", 0.0),
    ],
)
def test_rouge_l_beyond_ascii(answer, reference, expected):
    assert rouge_l(answer, reference) == pytest.approx(expected, **APPROX)
    assert rouge_l(reference, answer) == pytest.approx(expected, **APPROX)


# --- The engine ---


def _score(metric: str, answer: str, reference: str | None) -> float:
    item = JudgeInput(question="Where?", answer=answer, contexts=("ctx",), ground_truth=reference)
    return asyncio.run(OfflineEngine().score(metric, item))


def test_engine_identity_and_needs():
    engine = OfflineEngine()
    assert engine.name == "offline"
    assert engine.version.startswith(gate.__version__ + "+norm")
    assert engine.metrics() == {"exact_match", "token_f1", "rouge_l"}
    for metric in engine.metrics():
        assert engine.needs(metric) == {"ground_truth"}
    assert len({engine.prompt_fingerprint(m) for m in engine.metrics()}) == 3


@pytest.mark.parametrize(
    "metric,expected",
    [("exact_match", 0.0), ("token_f1", 2 * (2 / 2) * (2 / 3) / (2 / 2 + 2 / 3)), ("rouge_l", 2 * (2 / 3) * (2 / 3) / (2 / 3 + 2 / 3))],
)
def test_engine_scores_answer_against_reference(metric, expected):
    # answer "The Eiffel Tower" -> squad [eiffel, tower], rouge [the, eiffel, tower]
    # reference "Eiffel Tower, Paris" -> squad [eiffel, tower, paris], rouge [eiffel, tower, paris]
    assert _score(metric, "The Eiffel Tower", "Eiffel Tower, Paris") == pytest.approx(expected, **APPROX)


@pytest.mark.parametrize("reference", [None, "", "   \n"])
@pytest.mark.parametrize("metric", ["exact_match", "token_f1", "rouge_l"])
def test_engine_without_reference_is_a_judge_error(metric, reference):
    with pytest.raises(JudgeError, match="no ground_truth for this case"):
        _score(metric, "Paris", reference)


def test_engine_refuses_unknown_metric():
    engine = OfflineEngine()
    with pytest.raises(ValueError, match="faithfulness"):
        engine.needs("faithfulness")
    with pytest.raises(ValueError, match="faithfulness"):
        _score("faithfulness", "a", "b")


def test_the_fast_paths_tokenise_exactly_as_the_per_character_rules() -> None:
    """ASCII text goes through bytes.translate and other text through memoised translate tables: the tokens are the
    per-character rules' (NFKC, lowercase, punctuation, CJK spacing, articles; letters/digits for rouge_l) on 20,000
    random strings of ASCII (control characters too) and of mixed scripts."""
    import random
    import unicodedata

    from gate.core import textmatch as t

    def squad(text: str) -> list[str]:
        text = "".join(ch for ch in unicodedata.normalize("NFKC", text).lower() if not t._is_punctuation(ch))
        return t._ARTICLES.sub(" ", t._cjk().sub(r" \1 ", text)).split()

    def rouge(text: str) -> list[str]:
        text = t._cjk().sub(r" \1 ", unicodedata.normalize("NFKC", text).lower())
        return "".join(ch if t._is_word_char(ch) else " " for ch in text).split()

    rng = random.Random(20261201)
    ascii_chars = [chr(c) for c in range(128)]
    mixed = ascii_chars + list("éü北京大学，。“”ＡＢ２０ﬁ²—ひカ한국\u0301\u00a0\u2028")
    for i in range(20_000):
        text = "".join(rng.choice(mixed if i % 2 else ascii_chars) for _ in range(rng.randrange(60)))
        assert t.squad_tokens(text) == squad(text), text
        assert t.rouge_tokens(text) == rouge(text), text
        assert t.normalize_answer(text) == " ".join(squad(text)), text


def test_the_punctuation_is_string_punctuation() -> None:
    import string

    from gate.core.textmatch import PUNCTUATION

    assert PUNCTUATION == string.punctuation
