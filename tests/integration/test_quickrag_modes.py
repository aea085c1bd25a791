"""The quickstart RAG's deliberately broken modes (--gullible, --never-refuse), served for real over HTTP.

Each server is a real ``python -m quickrag serve`` process on a free port; the requests are the
rag-gate HTTP protocol (``{"question", "k"}`` and the robustness stage's ``{"question", "contexts"}``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
REFUSAL = "I don't know: the answer was not found in the provided documents."

GOLDEN = [json.loads(line) for line in (QUICKSTART / "golden_set.jsonl").read_text().splitlines() if line.strip()]
CORPUS = {row["id"]: row["text"] for row in map(json.loads, (QUICKSTART / "corpus.jsonl").read_text().splitlines()) if row}

PRINTING_Q = "How much does colour printing cost per page?"
PRINTING_SENTENCE = "colour costs $0.50 per page"


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def sentences(text: str) -> list[str]:
    import re

    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", text) if s.strip()]


def printing_passage() -> str:
    return next(text for text in CORPUS.values() if PRINTING_SENTENCE in text)


def off_topic_passage() -> str:
    """A corpus passage that shares some words with the printing question but does not answer it."""
    return next(text for text in CORPUS.values() if "cost" in text.lower() and PRINTING_SENTENCE not in text
                and "print" not in text.lower())


# -- gullible ----------------------------------------------------------------------------------------


def test_gullible_answers_from_the_first_context_even_when_a_later_one_matches_better(normal: str, gullible: str) -> None:
    contexts = [off_topic_passage(), printing_passage()]
    clean = post(normal, {"question": PRINTING_Q, "contexts": contexts})["answer"]
    fooled = post(gullible, {"question": PRINTING_Q, "contexts": contexts})["answer"]
    assert PRINTING_SENTENCE in clean and clean in sentences(contexts[1])
    assert fooled in sentences(contexts[0]) and PRINTING_SENTENCE not in fooled
    # with the right passage first, the gullible one is right too
    assert post(gullible, {"question": PRINTING_Q, "contexts": contexts[::-1]})["answer"] == clean


def test_gullible_never_refuses_given_contexts(normal: str, gullible: str) -> None:
    contexts = ["Zebras graze on the savanna. They live in herds.", printing_passage()]
    question = "What does the weather forecast say?"  # no sentence shares a term with it
    assert post(normal, {"question": question, "contexts": contexts})["answer"] == REFUSAL
    assert post(gullible, {"question": question, "contexts": contexts})["answer"] == "Zebras graze on the savanna."
    assert post(gullible, {"question": question, "contexts": []})["answer"] == REFUSAL  # nothing to trust


def test_gullible_question_path_answers_from_the_first_retrieved_passage(normal: str, gullible: str) -> None:
    answerable = [c for c in GOLDEN if c["type"] == "answerable"]
    changed = 0
    for case in answerable:
        good = post(normal, {"question": case["question"], "k": 5})
        bad = post(gullible, {"question": case["question"], "k": 5})
        assert bad["retrieved"] == good["retrieved"] and bad["contexts"] == good["contexts"]  # same retrieval
        if good["answer"] == REFUSAL:  # below the BM25 threshold both refuse
            assert bad["answer"] == REFUSAL
            continue
        assert bad["answer"] in sentences(bad["retrieved"][0]["text"]), case["id"]
        if good["answer"] not in bad["retrieved"][0]["text"]:
            changed += 1
            assert bad["answer"] != good["answer"]
    assert changed >= 1  # some golden answers come from a lower-ranked passage, so gullible differs on them


# -- never refuse ------------------------------------------------------------------------------------


def test_never_refuse_answers_out_of_scope_questions_that_normal_refuses(normal: str, never_refuse: str) -> None:
    out_of_scope = [c for c in GOLDEN if c["type"] == "out_of_scope"]
    refused = [c for c in out_of_scope if post(normal, {"question": c["question"], "k": 5})["answer"] == REFUSAL]
    assert len(refused) >= 3, [c["id"] for c in refused]
    for case in refused:
        reply = post(never_refuse, {"question": case["question"], "k": 5})
        assert reply["answer"] != REFUSAL and reply["answer"].strip(), case["id"]
        assert any(reply["answer"] in c for c in reply["contexts"])  # a sentence it has, not an invented one


def test_never_refuse_refuses_nothing_in_the_golden_set_and_normal_matches_the_readme(normal: str, never_refuse: str) -> None:
    refusals: dict[str, dict[str, int]] = {"normal": {}, "never_refuse": {}}
    for case in GOLDEN:
        for name, url in (("normal", normal), ("never_refuse", never_refuse)):
            if post(url, {"question": case["question"], "k": 5})["answer"] == REFUSAL:
                refusals[name][case["type"]] = refusals[name].get(case["type"], 0) + 1
    # README: answerable cases refused 2 of 32; should-refuse cases refused 6 of 8 (both adversarial, 4 of 6 out of scope)
    assert refusals["normal"] == {"answerable": 2, "out_of_scope": 4, "adversarial": 2}
    assert refusals["never_refuse"] == {}


def test_never_refuse_answers_from_contexts_that_share_no_term(normal: str, never_refuse: str) -> None:
    contexts = ["Zebras graze on the savanna. They live in herds."]
    question = "What does the weather forecast say?"
    assert post(normal, {"question": question, "contexts": contexts})["answer"] == REFUSAL
    assert post(never_refuse, {"question": question, "contexts": contexts})["answer"] == "Zebras graze on the savanna."
    assert post(never_refuse, {"question": question, "contexts": []})["answer"] != REFUSAL


# -- the python functions and the command line ---------------------------------------------------------


@pytest.fixture()
def quickrag(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(QUICKSTART))
    import quickrag as module

    return module


def test_python_functions_take_the_same_modes(quickrag: Any) -> None:
    contexts = [off_topic_passage(), printing_passage()]
    normal_answer = quickrag.answer_from_contexts(PRINTING_Q, contexts)["answer"]
    assert normal_answer == quickrag.answer_from_contexts(PRINTING_Q, contexts, mode="normal")["answer"]
    assert PRINTING_SENTENCE in normal_answer
    gullible: Callable[..., Any] = quickrag.gullible_answer_from_contexts
    assert gullible(PRINTING_Q, contexts) == quickrag.answer_from_contexts(PRINTING_Q, contexts, mode="gullible")
    assert gullible(PRINTING_Q, contexts)["answer"] in sentences(contexts[0])
    question = "What is the capital of Australia?"
    assert quickrag.answer(question)["answer"] == quickrag.REFUSAL
    assert quickrag.never_refuse_answer(question)["answer"] != quickrag.REFUSAL
    assert quickrag.never_refuse_answer(question) == quickrag.answer(question, 5, mode="never_refuse")
    assert quickrag.gullible_answer(PRINTING_Q, 3) == quickrag.answer(PRINTING_Q, 3, mode="gullible")
    with pytest.raises(ValueError, match="unknown mode 'sloppy'"):
        quickrag.answer_from_contexts(PRINTING_Q, contexts, mode="sloppy")
    with pytest.raises(ValueError, match="unknown mode"):
        quickrag.answer(PRINTING_Q, mode="never-refuse")  # the flag's spelling is not a mode


def test_the_two_flags_exclude_each_other() -> None:
    proc = subprocess.run([sys.executable, "-m", "quickrag", "serve", "--gullible", "--never-refuse", "--port", "0"],
                          cwd=QUICKSTART, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr


def test_ask_takes_the_flags_too() -> None:
    def ask(*flags: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "quickrag", "ask", *flags, "What is the capital of Australia?"],
                              cwd=QUICKSTART, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["answer"]

    assert ask() == REFUSAL
    assert ask("--never-refuse") != REFUSAL
