"""The stability test's arithmetic (gate.core.stability) and the cases its stage leaves out or cannot measure."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gate.core.model import GoldenCase
from gate.core.report import StabilityCase
from gate.core.settings import CorrectnessSettings, SampleSettings, StabilitySettings
from gate.core.stability import flipped, jaccard, pairwise_mean, summarise, unstable, wilson_interval
from gate.core.textmatch import token_f1
from gate.judges.cache import NullCache
from gate.judges.prompts import answers_payload
from gate.stages.context import StageContext
from gate.stages.stability import ALL_CACHED, CANNOT_ASK, stability_part
from gate.targets import parse_output
from gate.targets.fake import FakeTarget
from gate.targets.results import ResultsFileTarget


def test_jaccard_of_top_k_ids() -> None:
    assert jaccard(["a", "b", "c"], ["c", "b", "a"]) == 1.0  # order within the top k does not count
    assert jaccard(["a", "b", "c", "d", "e"], ["x", "b", "c", "d", "e"]) == pytest.approx(4 / 6)
    assert jaccard(["a"], ["b"]) == 0.0
    assert jaccard([], []) == 1.0 and jaccard(["a"], []) == 0.0
    assert jaccard(["a", "a", "b"], ["a", "b"]) == 1.0  # sets of ids


def test_pairwise_mean_over_every_unordered_pair() -> None:
    sets = [["a", "b"], ["a", "b"], ["a", "c"]]  # pairs: 1, 1/3, 1/3
    assert pairwise_mean(sets, jaccard) == pytest.approx((1 + 1 / 3 + 1 / 3) / 3)
    answers = ["Cedar is the capital.", "Cedar is the capital.", "Rowan is the capital."]
    assert pairwise_mean(answers, token_f1) == pytest.approx((1 + 2 * token_f1(answers[0], answers[2])) / 3)
    calls: list[tuple[int, int]] = []
    pairwise_mean([1, 2, 3, 4], lambda a, b: calls.append((a, b)) or 1.0)
    assert calls == [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]  # n(n-1)/2 pairs, each once
    assert pairwise_mean(["only one"], token_f1) is None and pairwise_mean([], jaccard) is None
    assert pairwise_mean(["a", "b", "c"], lambda a, b: None if "c" in (a, b) else 1.0) is None  # an undecided pair


def test_flip_needs_every_ask_decided() -> None:
    assert flipped([True, True, True, True]) is False
    assert flipped([False, False]) is False  # wrong every time is stable, not a flip
    assert flipped([True, False, True]) is True
    assert flipped([True, None, False]) is None and flipped([True]) is None and flipped([]) is None


# Newcombe (1998), Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score, no continuity correction)
NEWCOMBE = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)), ((0, 20), (0.0, 0.1611)), ((1, 29), (0.0061, 0.1718))]


@pytest.mark.parametrize(("counts", "expected"), NEWCOMBE)
def test_wilson_interval_against_published_values(counts: tuple[int, int], expected: tuple[float, float]) -> None:
    low, high = wilson_interval(*counts)
    assert (round(low, 4), round(high, 4)) == expected


def test_wilson_interval_properties_and_scipy() -> None:
    assert wilson_interval(5, 10) == pytest.approx((1 - wilson_interval(5, 10)[1], wilson_interval(5, 10)[1]))  # symmetric at 1/2
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
    low, high = wilson_interval(3, 30)
    assert low < 0.1 < high and low > 0  # the observed rate lies inside, and never below 0
    assert wilson_interval(30, 300)[1] - wilson_interval(30, 300)[0] < high - low  # more cases, a narrower interval
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval(4, 3)
    stats = pytest.importorskip("scipy.stats")
    for x, n in [(0, 30), (7, 30), (18, 60), (59, 60)]:
        ci = stats.binomtest(x, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(x, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def row(cid: str, jac: float | None, agreement: float | None, correct: list[bool | None]) -> StabilityCase:
    return {"id": cid, "question": f"q {cid}", "answers": ["a"] * len(correct), "retrieved": [[]] * len(correct),
            "jaccard": jac, "agreement": agreement, "correct": correct, "flipped": flipped(correct)}


def test_summary_means_flip_rate_interval_and_unstable_cases() -> None:
    cases = [row("same", 1.0, 1.0, [True] * 4), row("flip", 0.5, 0.8, [True, False, True, True]),
             row("reworded", 1.0, 0.6, [True] * 4), row("no-truth", 0.9, 1.0, [None] * 4),
             row("errored", None, None, [None] * 4)]
    s = summarise(cases, 5)
    assert s.metrics["retrieval_stability@5"] == pytest.approx((1.0 + 0.5 + 1.0 + 0.9) / 4)
    assert s.metrics["answer_stability"] == pytest.approx((1.0 + 0.8 + 0.6 + 1.0) / 4)
    assert s.metrics["correctness_flip_rate"] == pytest.approx(1 / 3)  # decided on every ask: same, flip, reworded
    assert s.flip_interval == pytest.approx(list(wilson_interval(1, 3)))
    assert s.unstable == ["flip", "reworded"] and not s.not_evaluated
    assert unstable(row("x", 1.0, 1.0 - 1e-15, [True, True])) is False  # rounding is no disagreement


def test_summary_says_why_a_metric_is_missing() -> None:
    s = summarise([row("errored", None, None, [None, None])], 3)
    assert set(s.not_evaluated) == {"retrieval_stability@3", "answer_stability", "correctness_flip_rate"}
    assert s.metrics == {} and s.flip_interval == [] and s.unstable == []


def test_answers_payload_is_symmetric() -> None:
    assert answers_payload("q", "b", "a") == answers_payload("q", "a", "b") == {"question": "q", "answer_1": "a", "answer_2": "b"}


# ---------------------------------------------------------------------------------- the stage's own refusals


CASES = [GoldenCase(f"c{i}", f"What is the capital of region {i}?", i, ground_truth=f"The capital of region {i} is Oak{i}.")
         for i in range(6)]


def settings(method: str = "token_f1", correctness: str = "offline", repeats: int = 2) -> StabilitySettings:
    return StabilitySettings(repeats, SampleSettings("all", 7, ()), method, CorrectnessSettings(correctness, "ragas", 0.5))


def answer_row(i: int, **extra: Any) -> dict[str, Any]:
    return {"retrieved": [{"id": f"d{i}"}, {"id": "g1"}, {"id": "g2"}], "answer": f"The capital of region {i} is Oak{i}.", **extra}


def context(target: FakeTarget, **kw: Any) -> StageContext:
    outputs = {c.id: target.ask(c, 10) for c in CASES}
    target.asked.clear()
    return StageContext(CASES, outputs, NullCache(), cutoff=3, **kw)


def test_repeats_from_the_target_cache_measure_nothing() -> None:
    target = FakeTarget({c.id: answer_row(i, cached=True) for i, c in enumerate(CASES)})
    part = stability_part(settings(), context(target), target)
    assert part.metrics == {} and set(part.not_evaluated.values()) == {ALL_CACHED}
    assert part.target_calls == 2 * len(CASES) == len(target.asked) and part.info is not None


def test_a_shard_asks_only_its_own_sampled_cases() -> None:
    target = FakeTarget({c.id: answer_row(i) for i, c in enumerate(CASES)}, concurrency=3)
    part = stability_part(settings(repeats=3), context(target, only={"c1", "c4"}), target)
    assert sorted(target.asked) == ["c1"] * 3 + ["c4"] * 3 and part.target_calls == 6
    assert part.info is not None and [c["id"] for c in part.info["cases"]] == ["c1", "c4"]
    assert part.info["sample"]["size"] == len(CASES)  # drawn from every case, as every shard draws it
    assert part.metrics == {"retrieval_stability@3": 1.0, "answer_stability": 1.0, "correctness_flip_rate": 0.0}


def test_without_a_judge_only_the_judged_metrics_are_missing() -> None:
    target = FakeTarget({c.id: answer_row(i) for i, c in enumerate(CASES)})
    part = stability_part(settings(method="judge", correctness="judge"), context(target, no_judge="--no-judge was given"), target)
    assert part.metrics == {"retrieval_stability@3": 1.0}
    assert "--no-judge was given" in part.not_evaluated["answer_stability"]
    assert "--no-judge was given" in part.not_evaluated["correctness_flip_rate"]
    assert part.usage is None


def test_a_results_file_cannot_be_asked_again(tmp_path: Any) -> None:
    (tmp_path / "results.jsonl").write_text("".join(f'{{"id": "{c.id}", "retrieved": ["d"], "answer": "x"}}\n' for c in CASES))
    target = ResultsFileTarget.read(tmp_path / "results.jsonl", CASES)
    outputs = {c.id: target.ask(c, 10) for c in CASES}
    part = stability_part(settings(), StageContext(CASES, outputs, NullCache(), cutoff=3), target)
    assert part.target_calls == 0 and part.info is None and set(part.not_evaluated.values()) == {CANNOT_ASK}
    assert stability_part(settings(), StageContext(CASES, outputs, NullCache(), cutoff=3), None).not_evaluated == part.not_evaluated


def test_an_answer_missing_is_not_a_failed_call() -> None:
    rows = {c.id: answer_row(i) for i, c in enumerate(CASES)}
    target = FakeTarget({**rows, "c0": {"retrieved": [{"id": "d0"}]}})  # passages alone, no answer
    part = stability_part(settings(), context(target), target)
    assert part.info is not None
    c0 = part.info["cases"][0]
    assert c0["jaccard"] == 1.0 and c0["agreement"] is None and c0["flipped"] is None and c0["correct"] == [None] * 3
    assert part.metrics["correctness_flip_rate"] == 0.0 and math.isclose(part.metrics["answer_stability"], 1.0)
    assert parse_output("c0", {"retrieved": [{"id": "d0"}]}).error is None  # a valid output, not a failure
