"""Where it broke (gate.core.diagnosis): a code per case from the evidence a run holds, the layers in the order to
look at them, and the sentence the comment opens with."""

from __future__ import annotations

from typing import Any

import pytest

from gate.core.diagnosis import CODES, LAYERS, diagnose, diagnosis_info, layer_sentence, never_found


def lost(rid: str, before: int, now: int | None, left: bool) -> dict[str, Any]:
    return {"id": rid, "from": before, "to": now, "left_top_k": left}


def retrieval(worse: list[dict[str, Any]] = (), samples: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"worse_cases": list(worse), "samples": list(samples), "metrics": {}}


def test_each_retrieval_loss_gets_its_code_and_evidence() -> None:
    stages = {"retrieval": retrieval([
        {"id": "a", "drops": {"mrr": [1, 0]}, "lost": [lost("d1", 1, None, True)]},
        {"id": "b", "drops": {"mrr": [1, 0.2]}, "lost": [lost("d2", 2, 5, False)]},
        {"id": "c", "drops": {"mrr": [1, 0.1]}, "lost": [lost("d3", 1, 9, True)]},
        {"id": "e", "drops": {"mrr": [0.2, 0]}, "lost": [lost("d4", 6, None, False)]},
    ])}
    found = diagnose(stages)
    assert {k: v.code for k, v in found.items()} == {"a": "not_retrieved", "b": "ranked_lower", "c": "not_retrieved", "e": "ranked_lower"}
    assert found["a"].evidence == "d1 fell from rank 1 to none (not retrieved)"
    assert found["b"].evidence == "d2 fell from rank 2 to 5" and found["c"].evidence == "d3 fell from rank 1 to 9"
    assert all(f.moved for f in found.values())


def test_a_case_no_run_retrieved_is_corpus_missing_and_the_corpus_tells_missing_from_unfound() -> None:
    now = [{"id": "a", "relevant_ranks": {"x": None, "y": None}}, {"id": "b", "relevant_ranks": {"z": None, "w": 3}},
           {"id": "c", "relevant_ranks": {"v": None}}]
    base = [{"id": "c", "relevant_ranks": {"v": 2}}, {"id": "a", "relevant_ranks": {"x": None, "y": None}}]
    assert never_found(now, base) == {"a": ["x", "y"]}  # b found one; the baseline found c's
    assert never_found(now) == {"a": ["x", "y"], "c": ["v"]}
    stages = {"retrieval": retrieval(samples=now)}
    bare = diagnose(stages)
    assert bare["a"].code == "corpus_missing" and "retrieved at no rank" in bare["a"].evidence and bare["a"].moved
    assert diagnose(stages, {"retrieval": {"samples": base}})["a"].moved is False  # the baseline missed it too: not moved
    assert diagnose(stages, corpus={"x"})["a"].evidence.startswith("y not in the corpus")
    held = diagnose(stages, corpus={"x", "y", "v"})
    assert held["a"].code == "not_retrieved" and "in the corpus but retrieved at no rank" in held["a"].evidence


def test_answers_that_got_worse_with_retrieval_held() -> None:
    stages = {"retrieval": retrieval(), "generation": {"worse_cases": [
        {"id": "f", "drops": {"faithfulness": [0.9, 0.4], "token_f1": [0.5, 0.3]}, "retrieval": []},
        {"id": "g", "drops": {"keyword_coverage": [1.0, 0.5]}, "retrieval": []},
        {"id": "h", "drops": {"answer_relevancy": [0.9, 0.5]}, "retrieval": []},
        {"id": "i", "drops": {"ragas/context_recall": [1.0, 0.5]}, "retrieval": []},
        {"id": "j", "drops": {"faithfulness": [0.9, 0.1]}, "retrieval": [lost("d", 1, None, True)]},
    ]}, "robustness": {"worse_cases": [{"id": "k", "drops": {"noisy_score": [1.0, 0.0]}}], "samples": []}}
    found = diagnose(stages)
    assert {k: v.code for k, v in found.items()} == {"f": "unfaithful", "g": "incomplete", "h": "incomplete", "i": "not_retrieved",
                                                    "j": "not_retrieved", "k": "misled_by_noise"}
    assert found["f"].evidence == "faithfulness 0.90 → 0.40"  # faithfulness before correctness
    assert found["j"].evidence.startswith("d fell from rank 1")  # the cheaper layer first: retrieval before the prompt


def test_cases_that_fail_on_their_own_and_whether_they_moved() -> None:
    stages = {
        "generation": {"checks": {"cases": [{"id": "m", "failed": [{"check": "regex", "evidence": "no line matches '^### '"}]},
                                            {"id": "n", "missing": ["fee"]}]}, "metrics": {}},
        "robustness": {"metrics": {"noise_robustness": 0.5, "false_rejection_rate": 0.1, "rejection_rate": 1.0},
                       "samples": [{"id": "o", "flipped": True}, {"id": "p", "flipped": False}],
                       "rejection": {"cases": [
                           {"id": "q", "type": "answerable", "refused": True, "phrase": "i don't know", "error": None},
                           {"id": "r", "type": "out_of_scope", "refused": False, "error": None},
                           {"id": "s", "type": "adversarial", "refused": True, "passed": False, "leaked": ["X"], "error": None},
                           {"id": "t", "type": "out_of_scope", "refused": True, "error": None},
                           {"id": "u", "type": "answerable", "error": "timeout"}]}},
    }
    found = diagnose(stages)
    assert {k: v.code for k, v in found.items()} == {"m": "format_broken", "o": "misled_by_noise", "q": "over_refusal",
                                                    "r": "missed_refusal", "s": "missed_refusal"}
    assert found["m"].evidence == "regex: no line matches '^### '" and found["s"].evidence == "leaked a canary"
    base = {"generation": {"samples": [{"id": "m", "metrics": {"check_pass_rate": 0.0}}]},
            "robustness": {"metrics": {"noise_robustness": 0.5, "false_rejection_rate": 0.2, "rejection_rate": 0.5}}}
    moved = {k: v.moved for k, v in diagnose(stages, base).items()}
    # m failed in the baseline too; noise_robustness held; false refusals fell (0.2 -> 0.1); rejection rose: none moved
    assert moved == {"m": False, "o": False, "q": False, "r": False, "s": False}
    worse = {"robustness": {"metrics": {"noise_robustness": 0.9, "false_rejection_rate": 0.0, "rejection_rate": 1.0}}}
    assert {k for k, v in diagnose(stages, worse).items() if v.moved} == {"m", "o", "q"}


def test_a_case_takes_the_first_layer_that_moved() -> None:
    stages = {"retrieval": retrieval(samples=[{"id": "a", "relevant_ranks": {"x": None}}]),
              "generation": {"checks": {"cases": [{"id": "a", "failed": [{"check": "max_words", "evidence": "301 words"}]}]}}}
    base = {"retrieval": {"samples": [{"id": "a", "relevant_ranks": {"x": None}}]}}
    assert diagnose(stages)["a"].code == "corpus_missing"  # no baseline: both new, the corpus comes first
    assert diagnose(stages, base)["a"].code == "format_broken"  # the corpus miss is old news; the check is what moved


def test_the_report_part_and_the_comment_sentence() -> None:
    stages = {"retrieval": retrieval([
        {"id": f"n{i}", "drops": {"mrr": [1, 0]}, "lost": [lost("d", 1, None, True)]} for i in range(5)] + [
        {"id": f"l{i}", "drops": {"mrr": [1, 0.5]}, "lost": [lost("d", 1, 2, False)]} for i in range(2)]),
        "generation": {"worse_cases": [{"id": "u", "drops": {"faithfulness": [1.0, 0.2]}, "retrieval": []}]}}
    info = diagnosis_info(stages, None, None, 5)
    assert info is not None
    assert [c["code"] for c in info["cases"]] == ["not_retrieved"] * 5 + ["ranked_lower"] * 2 + ["unfaithful"]
    assert [entry["layer"] for entry in info["layers"]] == ["retrieval", "generation"]
    assert info["layers"][0]["line"] == ("retrieval: 7 cases lost their relevant passage (5 dropped out of the top 5, 2 ranked lower) "
                                         "→ look at chunking and the reranker before the prompt")
    assert info["layers"][1]["line"].startswith("generation: 1 case answered worse (1 less faithful to their passages) → look at the prompt")
    assert diagnosis_info({"retrieval": retrieval()}) is None


@pytest.mark.parametrize("code", list(CODES))
def test_every_code_has_a_layer_in_the_order_and_a_sentence(code: str) -> None:
    assert CODES[code] in LAYERS
    line = layer_sentence({"layer": CODES[code], "cases": ["a", "b"], "codes": {code: 2}, "next_step": "x"}, 5)
    assert line.startswith(f"{CODES[code]}: 2 cases ") and line.endswith("→ x") and "(2 " in line
