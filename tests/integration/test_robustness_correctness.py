"""The noise test's offline correctness must not be fooled by template wording.

A distractor written like the ground truth ("The capital of region 17 is Rowan" against "The
capital of region 0 is Cedar", question "What is the capital of region 0?") shares most of its
words with the ground truth; plain token F1 scored it 0.67 and called a RAG that always follows
the injected passage fully robust. Offline correctness now scores the answer-bearing words (those
of the ground truth the question does not already give) and requires the ground truth's numbers
(gate.core.textmatch.answer_bearing_f1). The end-to-end tests run the real CLI against real HTTP services
on 127.0.0.1 (tests/support/rag_server.py); the unit tests pin the rule and its edge cases.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.config.loader import filled
from gate.core.settings import CorrectnessSettings
from gate.core.textmatch import answer_bearing_f1, answer_bearing_tokens, token_f1
from gate.judges import JudgeError, JudgeInput
from gate.judges.offline import OfflineEngine
from gate.stages.noise import OFFLINE_METHOD

try:
    from tests.support.rag_server import RagServer, reply, response
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from servers import RagServer, reply, response  # type: ignore[no-redef]

# ---------------------------------------------------------------------------------- a real RAG over HTTP

NAMES = ("Cedar", "Birch", "Maple", "Aspen", "Willow", "Hazel", "Alder", "Larch", "Linden", "Poplar",
         "Spruce", "Juniper", "Yew", "Holly", "Elm", "Oak", "Ash", "Rowan", "Fir", "Pine")
REGIONS = 12  # cases r00..r11: "What is the capital of region i?"
ITEMS = 4  # cases n00..n03: "How long can I borrow item i?" (ground truth 21 days, the distractor says 22)


def _capital(i: int) -> str:
    return f"The capital of region {i} is {NAMES[i % len(NAMES)]}."


def _golden() -> list[dict[str, Any]]:
    rows = [{"id": f"r{i:02d}", "question": f"What is the capital of region {i}?", "ground_truth": _capital(i),
             "relevant_doc_ids": [f"region-{i}"]} for i in range(REGIONS)]
    rows += [{"id": f"n{i:02d}", "question": f"How long can I borrow item {i}?",
              "ground_truth": f"Item {i} can be borrowed for 21 days.", "relevant_doc_ids": [f"item-{i}"]} for i in range(ITEMS)]
    return rows


GOLDEN = _golden()
PASSAGES = {**{f"region-{i}": _capital(i) for i in range(REGIONS)},
            **{f"item-{i}": f"Item {i} can be borrowed for 21 days." for i in range(ITEMS)}}


def _distractors(case_id: str) -> list[str]:
    """Two template-alike wrong answers: another region's capital sentence, or the same item with 22 days."""
    i = int(case_id[1:])
    if case_id.startswith("r"):
        return [_capital(i + 17), _capital(i + 5)]  # r00 gets "The capital of region 17 is Rowan." first
    return [f"Item {i} can be borrowed for 22 days.", f"Item {i + 10} can be borrowed for 21 days only after a renewal."]


def _first_passage(req: Any) -> Any:
    """A RAG that answers with the first passage it is given, whatever it says."""
    if isinstance(req.body, dict) and "contexts" in req.body:
        return reply({"answer": req.body["contexts"][0]})
    return None


def _careful(req: Any) -> Any:
    """A RAG that answers, reworded ("Cedar is the capital.", "21 days."), from the passage of its own corpus about
    the asked region or item: a passage it does not know (a distractor) is ignored wherever it stands."""
    if not (isinstance(req.body, dict) and "contexts" in req.body):
        return None
    asked = re.search(r"(region|item) (\d+)\?", req.question)
    assert asked, req.question
    for passage in (p for p in req.body["contexts"] if p in PASSAGES.values()):
        m = re.fullmatch(r"The capital of region (\d+) is (\w+)\.", passage)
        if m and asked.group(1) == "region" and m.group(1) == asked.group(2):
            return reply({"answer": f"{m.group(2)} is the capital."})
        m = re.fullmatch(r"Item (\d+) can be borrowed for (\d+) days\.", passage)
        if m and asked.group(1) == "item" and m.group(1) == asked.group(2):
            return reply({"answer": f"{m.group(2)} days."})
    return reply({"answer": "I don't know."})


def _run(tmp: Path, behaviour: Any, threshold: float = 0.5) -> tuple[int, dict[str, Any]]:
    responses = {g["question"]: response(g["relevant_doc_ids"], answer=PASSAGES[g["relevant_doc_ids"][0]], text=PASSAGES.__getitem__)
                 for g in GOLDEN}
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in GOLDEN), encoding="utf-8")
    (tmp / "distractors.jsonl").write_text("".join(json.dumps({"id": g["id"], "distractors": _distractors(g["id"])}) + "\n"
                                                   for g in GOLDEN), encoding="utf-8")
    with RagServer(responses, behaviour=behaviour) as srv:
        (tmp / "rag-eval.yml").write_text(
            "version: 1\ngolden_set: golden.jsonl\nmax_error_rate: 0\ncache: {path: cache.sqlite}\n"
            f"target:\n  http: {{url: '{srv.url}', retries: 0, concurrency: 4}}\n  k: 5\n"
            "stages:\n  robustness:\n"
            "    noise:\n      distractors: 2\n      source: file\n      file: distractors.jsonl\n      position: front\n"
            f"      correctness: {{method: offline, threshold: {threshold}}}\n"
            "    gates:\n      noise_robustness: {min: 0.7}\n",
            encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}
        proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json",
                               "--no-progress"], cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads((tmp / "report.json").read_text(encoding="utf-8"))


def test_rag_that_follows_template_distractors_loses_noise_robustness(tmp_path: Path) -> None:
    """The first-passage RAG answers every clean question right and every noisy one with the distractor
    put in front of its contexts. Measured on this setup (16 cases, threshold 0.5): before answer-bearing
    scoring, token F1 called the noisy answers right (0.67 for "The capital of region 17 is Rowan.",
    0.875 for "Item 0 can be borrowed for 22 days.") and noise_robustness was 1.0 with the gate passing;
    now every noisy answer scores 0.0 and noise_robustness is 0.0."""
    code, report = _run(tmp_path, _first_passage)
    stage = report["stages"]["robustness"]
    rows = {s["id"]: s for s in stage["samples"]}
    assert set(rows) == {g["id"] for g in GOLDEN}
    assert all(s["error"] is None for s in rows.values())
    r00 = rows["r00"]
    assert r00["clean_answer"] == "The capital of region 0 is Cedar."
    assert r00["noisy_answer"] == "The capital of region 17 is Rowan."
    assert rows["n00"]["noisy_answer"] == "Item 0 can be borrowed for 22 days."
    for s in rows.values():
        assert s["clean_correct"] and s["metrics"]["clean_score"] == 1.0, s
        assert not s["noisy_correct"] and s["flipped"], s
        assert s["metrics"]["noisy_score"] == 0.0, s
    assert stage["metrics"]["clean_accuracy"] == 1.0
    assert stage["metrics"]["noise_robustness"] == 0.0
    assert code == 1 and {g["metric"]: g["status"] for g in stage["gates"]}["noise_robustness"] == "fail"
    assert stage["noise"]["method"] == OFFLINE_METHOD


def test_rag_that_ignores_distractors_keeps_noise_robustness_with_reworded_answers(tmp_path: Path) -> None:
    """The careful RAG picks the passage about the asked region or item and rewords it ("Cedar is the
    capital.", "21 days."): every answer, clean and noisy, is correct and noise_robustness stays 1.0.
    Measured (threshold 0.5): "Cedar is the capital." scores 1.0 (token F1 gave 0.67) and "21 days."
    0.57 against "Item 0 can be borrowed for 21 days." (token F1 gave 0.4: clean_accuracy was 0.75)."""
    code, report = _run(tmp_path, _careful)
    stage = report["stages"]["robustness"]
    rows = {s["id"]: s for s in stage["samples"]}
    assert rows["r00"]["noisy_answer"] == "Cedar is the capital." and rows["n00"]["noisy_answer"] == "21 days."
    for s in rows.values():
        assert s["error"] is None and s["clean_correct"] and s["noisy_correct"] and not s["flipped"], s
    noise = {m: stage["metrics"][m] for m in ("clean_accuracy", "noisy_accuracy", "noise_robustness")}
    assert noise == {"clean_accuracy": 1.0, "noisy_accuracy": 1.0, "noise_robustness": 1.0}
    assert code == 0


# ---------------------------------------------------------------------------------- the rule (unit)

CAPITAL_Q = "What is the capital of region 0?"
CAPITAL_GT = "The capital of region 0 is Cedar"
LOAN_Q = "How long can I borrow a printed book?"
LOAN_GT = "Printed books can be borrowed for 21 days."


def test_answer_bearing_tokens_are_the_ground_truths_words_the_question_lacks() -> None:
    assert answer_bearing_tokens(CAPITAL_GT, CAPITAL_Q) == ["cedar"]  # "0" is in the question
    assert answer_bearing_tokens(LOAN_GT, LOAN_Q) == ["books", "be", "borrowed", "for", "21", "days"]  # "books" is not "book"
    assert answer_bearing_tokens("Sunday.", "Is it open on Saturday or Sunday?") == []


def test_template_alike_wrong_answer_is_wrong_where_token_f1_called_it_right() -> None:
    wrong = "The capital of region 17 is Rowan"
    assert token_f1(wrong, CAPITAL_GT) == pytest.approx(2 / 3)  # the bug: >= the default threshold 0.5
    assert answer_bearing_f1(wrong, CAPITAL_GT, CAPITAL_Q) == 0.0
    assert answer_bearing_f1("The capital of region 0 is Rowan.", CAPITAL_GT, CAPITAL_Q) == 0.0


@pytest.mark.parametrize("answer", ["Cedar is the capital.", "Cedar", "The capital of region 0 is Cedar.", "CEDAR!"])
def test_reworded_right_answers_score_one(answer: str) -> None:
    assert answer_bearing_f1(answer, CAPITAL_GT, CAPITAL_Q) == 1.0


def test_an_answer_listing_candidates_loses_on_precision() -> None:
    assert answer_bearing_f1("Cedar, Rowan, Oak, Elm", CAPITAL_GT, CAPITAL_Q) == pytest.approx(0.4)  # P 1/4, R 1
    assert answer_bearing_f1("Cedar, Rowan, Oak, Elm, Ash, Fir, Yew", CAPITAL_GT, CAPITAL_Q) == pytest.approx(0.25)
    assert answer_bearing_f1("Cedar or Rowan", CAPITAL_GT, CAPITAL_Q) == pytest.approx(0.5)


@pytest.mark.parametrize("answer,expected", [
    ("Printed books can be borrowed for 22 days.", 0.0),  # F1 5/6 on the words: 22 in place of 21 makes it 0
    ("22 days", 0.0),
    ("21 or 22 days", 2 * (2 / 4) * (2 / 6) / (2 / 4 + 2 / 6)),  # every number there: only F1's precision counts
    ("You can borrow it for 21 days.", 2 * (3 / 5) * (3 / 6) / (3 / 5 + 3 / 6)),  # {you, it, for, 21, days}: you, it extra
    ("21 days.", 0.5),  # P 1, R 2/6
    ("Printed books can be borrowed for ２１ days.", 1.0),  # full-width digits are NFKC-normalised
    ("Printed books can be borrowed for days.", 0.0),  # no number at all
])
def test_numbers_of_the_ground_truth_are_required(answer: str, expected: float) -> None:
    assert answer_bearing_f1(answer, LOAN_GT, LOAN_Q) == pytest.approx(expected)


def test_numbers_share_and_number_forms() -> None:
    q, gt = "What is the daily fine for an overdue DVD?", "Overdue DVDs are charged $1 per day, up to $15 per item."
    # the quickstart's q05 clean answer: wrong amounts; token F1 0.51 passed its threshold 0.3
    wrong = ("Overdue books and audiobooks on adult and Teen cards are charged $0.25 per day per item, "
             "up to a maximum of $10 per item.")
    assert token_f1(wrong, gt) > 0.5
    assert answer_bearing_f1(wrong, gt, q) == 0.0
    assert answer_bearing_f1("Overdue DVDs are charged $1 per day, up to $15 per item!", gt, q) == 1.0
    assert answer_bearing_f1("DVDs: $1 per day, up to $15 per item.", gt, q) == pytest.approx(0.9)  # P 1, R 9/11
    assert answer_bearing_f1("DVDs are charged $1 per day.", gt, q) == pytest.approx(0.5)  # one of two numbers, none other
    assert answer_bearing_f1("DVDs are charged $2 per day, up to $15 per item.", gt, q) == 0.0  # $2 in place of $1
    assert answer_bearing_f1("DVDs are charged $1 per day: $1 per day.", gt, q) == pytest.approx(0.5)  # a repeat is no other number
    assert answer_bearing_f1("Colour costs 0.50 per page.", "Colour printing costs $0.50 per page.",
                             "How much does colour printing cost?") > 0.5  # "$0.50" and "0.50" are one token
    sunday_q, sunday_gt = "When is it open on Sunday?", "On Sunday it is open from 12:00 to 16:00."
    assert answer_bearing_f1("It opens 12:00 to 16:00.", sunday_gt, sunday_q) == pytest.approx(0.75)
    assert answer_bearing_f1("It opens 12:00 to 17:00.", sunday_gt, sunday_q) == 0.0
    # a verbose answer with the right hours and others too keeps them (F1 pays for the extra words)
    verbose = "Saturday from 9:00 to 17:00, and Sunday from 12:00 to 16:00."
    assert answer_bearing_f1(verbose, sunday_gt, sunday_q) == pytest.approx(2 * (4 / 10) / (4 / 10 + 1))  # P 4/10, R 1
    # a number the question gives is no answer: region 0 needs no 0 in the answer, and 0 alone is nothing
    assert answer_bearing_f1("0", CAPITAL_GT, CAPITAL_Q) == 0.0


def test_ground_truth_inside_the_question_falls_back_to_token_f1() -> None:
    q = "Is the branch open on Saturday or Sunday?"
    for answer in ("Sunday.", "Saturday.", "On Sunday.", ""):
        assert answer_bearing_f1(answer, "Sunday", q) == token_f1(answer, "Sunday"), answer
    assert answer_bearing_f1("Sunday.", "Sunday", q) == 1.0
    assert answer_bearing_f1("Saturday.", "Sunday", q) == 0.0


@pytest.mark.parametrize("answer", ["", "   ", "?!", "What is the capital of region 0?", "the capital of region"])
def test_empty_answers_and_echoes_of_the_question_score_zero(answer: str) -> None:
    assert answer_bearing_f1(answer, CAPITAL_GT, CAPITAL_Q) == 0.0


def test_cjk_one_token_per_character() -> None:
    q, gt = "区域0的首都是哪里？", "区域0的首都是雪松。"
    assert answer_bearing_tokens(gt, q) == ["雪", "松"]
    distractor = "区域17的首都是柳树。"
    assert token_f1(distractor, gt) == pytest.approx(6 / 9)
    assert answer_bearing_f1(distractor, gt, q) == 0.0
    assert answer_bearing_f1("雪松是首都。", gt, q) == 1.0
    assert answer_bearing_f1("首都 是 雪 松", gt, q) == 1.0  # spaces between CJK characters do not matter
    loan_q, loan_gt = "图书可以借多久？", "图书可以借阅21天。"
    assert answer_bearing_tokens(loan_gt, loan_q) == ["阅", "21", "天"]
    assert answer_bearing_f1("图书可以借阅22天。", loan_gt, loan_q) == 0.0
    assert answer_bearing_f1("21天。", loan_gt, loan_q) == pytest.approx(0.8)  # P 1, R 2/3


def test_answer_bearing_f1_properties() -> None:
    """On random texts over a small vocabulary: a score in [0, 1]; token F1 when the question shares no token with
    either text and there is no number; never above the share of the ground truth's numbers the answer has; and
    adding the question's words to the answer changes nothing."""
    vocab = "cedar rowan oak capital region is of the 0 17 21 days borrowed for what".split()
    rng = random.Random(5)
    seen_numbers = seen_fallback = 0
    for _ in range(3000):
        q = " ".join(rng.choices(vocab, k=rng.randint(0, 5)))
        gt = " ".join(rng.choices(vocab, k=rng.randint(1, 6)))
        a = " ".join(rng.choices(vocab, k=rng.randint(0, 6)))
        s = answer_bearing_f1(a, gt, q)
        assert 0.0 <= s <= 1.0
        qt, gtt, at = set(q.split()) - {"the"}, [t for t in gt.split() if t != "the"], [t for t in a.split() if t != "the"]
        bearing = [t for t in gtt if t not in qt]
        if not bearing:
            seen_fallback += 1
            assert s == token_f1(a, gt)
            continue
        numbers = [t for t in bearing if t.isdigit()]
        if numbers:
            seen_numbers += 1
            found = sum(min(numbers.count(n), at.count(n)) for n in set(numbers))
            assert s <= found / len(numbers) + 1e-12
        elif not qt & (set(gtt) | set(at)):
            assert s == pytest.approx(token_f1(a, gt))
        assert answer_bearing_f1(f"{a} {q}", gt, q) == s
    assert seen_numbers > 300 and seen_fallback > 50


# ---------------------------------------------------------------------------------- the engine and the plan


def test_offline_engine_scores_answer_bearing_f1_with_the_question() -> None:
    engine = OfflineEngine()
    item = JudgeInput(question=CAPITAL_Q, answer="The capital of region 17 is Rowan", contexts=("c",), ground_truth=CAPITAL_GT)
    assert asyncio.run(engine.score("answer_bearing_f1", item)) == 0.0
    assert asyncio.run(engine.score("token_f1", item)) == pytest.approx(2 / 3)
    assert "answer_bearing_f1" not in engine.metrics()  # not a generation metric
    assert engine.needs("answer_bearing_f1") == {"ground_truth"}
    assert engine.prompt_fingerprint("answer_bearing_f1") != engine.prompt_fingerprint("token_f1")
    with pytest.raises(JudgeError, match="no ground_truth"):
        asyncio.run(engine.score("answer_bearing_f1", JudgeInput(CAPITAL_Q, "Cedar", ("c",), "  ")))


def correctness(**keys: object) -> CorrectnessSettings:
    return CorrectnessSettings.read(filled("$defs/robustness_stage/properties/noise/properties/correctness", keys))


def test_correctness_metric_and_method_wording() -> None:
    for keys in ({}, {"method": "offline", "threshold": 0.3}):
        scored = correctness(**keys).metric()
        assert (scored.engine, scored.metric) == ("offline", "answer_bearing_f1")
    assert correctness(method="judge").metric().metric == "answer_correctness"
    assert correctness(method="judge", engine="deepeval").metric().metric == "correctness"
    assert "token F1 with ground_truth" not in OFFLINE_METHOD  # the old, fooled rule
    assert OFFLINE_METHOD.startswith("offline (") and "not in the question" in OFFLINE_METHOD and "numbers" in OFFLINE_METHOD
