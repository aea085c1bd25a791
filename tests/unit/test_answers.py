"""Answer checks with no model (gate.core.answers): keywords and phrases matched on normalised tokens, in order and
side by side; the format checks on the answer as written."""

from __future__ import annotations

import math

import pytest

from gate.core.answers import AnswerChecks, check_answer, holds
from gate.core.textmatch import squad_tokens


@pytest.mark.parametrize(("answer", "phrase", "found"), [
    ("Printed books can be borrowed for 21 days.", "21 days", True),
    ("Printed books can be borrowed for 21 days.", "days 21", False),  # two words in the wrong order
    ("21 loans in 3 days", "21 days", False),  # both words, not side by side
    ("The LOAN period is 21 DAYS!", "loan period", True),  # case and punctuation
    ("办理会员卡需要三个工作日。", "会员卡", True),  # Chinese, no spaces: one token per character
    ("办理会员卡需要三个工作日。", "卡会员", False),
    ("ＷｉＦｉ is free on floor ２", "wifi", True),  # full-width letters and digits: NFKC
    ("ＷｉＦｉ is free on floor ２", "floor 2", True),
    ("Renewals are allowed.", "", False),  # a phrase with no token never counts
])
def test_a_phrase_holds_when_its_tokens_appear_in_order_side_by_side(answer: str, phrase: str, found: bool) -> None:
    assert holds(squad_tokens(answer), phrase) is found


def test_keyword_coverage_equals_the_hand_computed_share() -> None:
    crafted = [  # (answer, keywords, share found)
        ("Printed books can be borrowed for 21 days and renewed twice online.", ["21 days", "renewed twice", "fine"], 2 / 3),
        ("办理会员卡需要带身份证，三个工作日内完成。", ["身份证", "三个工作日", "护照"], 2 / 3),
        ("Ｔｈｅ ｃａｆé opens at ９ am.", ["café", "9 am"], 1.0),
        ("Borrow days 21.", ["21 days"], 0.0),
    ]
    shares = []
    for answer, keywords, share in crafted:
        got = check_answer(answer, keywords, AnswerChecks())
        assert got.coverage == pytest.approx(share), (answer, got.missing)
        assert got.passed is None  # no check applies: not counted in check_pass_rate
        shares.append(got.coverage)
    assert math.fsum(shares) / len(shares) == pytest.approx((2 / 3 + 2 / 3 + 1 + 0) / 4)


def test_a_model_upgrade_that_changes_the_heading_form_fails_the_regex_with_the_line() -> None:
    checks = AnswerChecks(regex=r"^### ")
    before = check_answer("### Steps\n1. Open the portal.\n2. Pick a slot.", [], checks)
    after = check_answer("**Steps**\n1. Open the portal.\n2. Pick a slot.", [], checks)
    assert before.passed is True and before.failures == ()
    assert after.passed is False
    (failure,) = after.failures
    assert failure.check == "regex" and "'**Steps**'" in failure.evidence


def test_each_check_names_what_it_found() -> None:
    checks = AnswerChecks(must_contain=("21 days", "renew online"), must_not_contain=("as an AI", "guarantee"), max_words=8,
                          max_chars=40)
    got = check_answer("Loans last 21 days. As an AI I guarantee nothing about fines or fees.", [], checks)
    said = {f.check: f.evidence for f in got.failures}
    assert said == {"must_contain": "missing 'renew online'", "must_not_contain": "found 'as an AI'",
                    "max_words": "14 words, more than 8", "max_chars": "69 characters, more than 40"}
    assert check_answer(None, ["x"], checks).failures[0].check == "answer"  # no answer: fails, never passes


def test_the_specs_checks_and_a_cases_are_merged_the_cases_winning() -> None:
    spec = AnswerChecks(must_contain=("a",), regex="^#", max_words=100)
    case = AnswerChecks(must_contain=("b",), max_words=10)
    merged = spec.merged(case)
    assert merged.must_contain == ("a", "b") and merged.regex == "^#" and merged.max_words == 10
    assert not AnswerChecks() and merged


def test_a_json_check_uses_the_callers_validator() -> None:
    checks = AnswerChecks(json_schema="answer.schema.json")
    ok = check_answer('{"steps": ["a"]}', [], checks, lambda a: None)
    bad = check_answer("Steps: a", [], checks, lambda a: "not JSON (Expecting value at line 1 column 1)")
    assert ok.passed is True and bad.failures[0].check == "json_schema" and "not JSON" in bad.failures[0].evidence


def test_max_words_counts_exactly_as_rouge_does_at_the_boundary() -> None:
    """The word count is skipped only where it cannot exceed the limit: over random answers (ASCII with punctuation,
    CJK, and NFKC ligatures that grow into several words) the check fails exactly when rouge_l's tokens are more."""
    import random

    from gate.core.textmatch import rouge_tokens

    rng = random.Random(5)
    alphabet = list("ab c,d.-e 1") + ["中", "文", "ﷺ", "ﬁ", " "]
    for _ in range(3000):
        answer = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        most = rng.randrange(1, 16)
        failed = [f.check for f in check_answer(answer, (), AnswerChecks(max_words=most)).failures]
        assert ("max_words" in failed) == (len(rouge_tokens(answer)) > most), (answer, most)
