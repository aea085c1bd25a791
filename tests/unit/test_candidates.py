"""gate.core.candidates: which traces of a traces run become golden-case candidates, and the lines they become."""

from __future__ import annotations

from typing import Any

import pytest

from gate.core.candidates import (
    ID_PREFIX,
    ScoredTrace,
    candidate_id,
    choose,
    is_judged,
    metric_names,
    pick,
    scores_of,
    traces_of,
)
from gate.core.cases import parse_case
from gate.core.model import GoldenCase


def trace(tid: str, score: float | None = None, *, negative: bool | None = None, question: str | None = None,
          **scores: float) -> ScoredTrace:
    given = dict(scores) or ({"faithfulness": score} if score is not None else {})
    return ScoredTrace(id=tid, question=question or f"What does the library say about topic {tid} number {tid}?",
                       negative=negative, feedback=-1.0 if negative else None, scores=given)


def golden(cid: str, question: str) -> GoldenCase:
    case = parse_case({"id": cid, "question": question, "relevant_doc_ids": ["d"]})
    assert isinstance(case, GoldenCase)
    return case


def test_the_score_is_the_mean_of_the_judged_metrics_only() -> None:
    metrics = {"faithfulness": 0.4, "answer_relevancy": 0.8, "check_pass_rate": 0.0, "token_f1": 0.0, "exact_match": 1.0,
               "keyword_coverage": 0.0}
    assert scores_of(metrics) == {"answer_relevancy": 0.8, "faithfulness": 0.4}
    assert ScoredTrace("t", "q?", scores=scores_of(metrics)).score == pytest.approx(0.6)
    assert scores_of(metrics, "token_f1") == {"token_f1": 0.0}  # --metric: that one alone, judged or not
    assert scores_of(metrics, "context_recall") == {}
    assert scores_of({"faithfulness": True, "answer_relevancy": float("nan")}) == {}  # no number, no score
    assert is_judged("faithfulness") and not is_judged("check_pass_rate") and not is_judged("rouge_l")


def test_a_lower_is_better_metric_counts_as_one_minus_its_value() -> None:
    worse = ScoredTrace("a", "q?", scores={"noise_sensitivity_relevant": 0.9})
    better = ScoredTrace("b", "q?", scores={"noise_sensitivity_relevant": 0.1})
    assert worse.score == pytest.approx(0.1) and better.score == pytest.approx(0.9)
    assert [t.id for t, _ in pick([better, worse], 1, False)] == ["a"]


def test_the_worst_are_the_lowest_scored_ties_by_id_and_unscored_never_among_them() -> None:
    traces = [trace("t5", 0.5), trace("t3", 0.2), trace("t1", 0.2), trace("t9"), trace("t2", 0.9), trace("t0")]
    assert [(t.id, among) for t, among in pick(traces, 3, False)] == [("t1", True), ("t3", True), ("t5", True)]
    assert [t.id for t, _ in pick(traces, 10, False)] == ["t1", "t3", "t5", "t2"]  # fewer scored than asked: those


def test_negative_feedback_adds_each_negatively_rated_trace_once() -> None:
    traces = [trace("a", 0.1, negative=True), trace("b", 0.3), trace("c", 0.8, negative=True), trace("d", negative=True),
              trace("e", 0.05, negative=False)]
    both = pick(traces, 2, True)
    assert [(t.id, among) for t, among in both] == [("e", True), ("a", True), ("c", False), ("d", False)]
    assert [t.id for t, _ in pick(traces, None, True)] == ["a", "c", "d"]  # only the negatively rated
    assert pick(traces, None, False) == []


def test_near_duplicates_of_existing_cases_are_dropped_and_named() -> None:
    existing = [golden("q01", "How long can I borrow a printed book?"), golden("q02", "When is Central Library open on Sundays?")]
    traces = [trace("t1", 0.1, question="How long can I borrow a printed book for?"),
              trace("t2", 0.2, question="when is central library open on sundays??"),
              trace("t3", 0.3, question="Can I borrow a telescope from the library?")]
    choice = choose(traces, existing, 3, False)
    assert [r["id"] for r in choice.rows] == ["trace-t3"]
    assert [(d.trace_id, d.like, d.existing) for d in choice.dropped] == [("t1", "q01", True), ("t2", "q02", True)]
    assert choice.dropped[1].ratio == 1.0 and 0.85 <= choice.dropped[0].ratio < 1.0
    assert choice.worst == 3 and choice.negative == 0 and choice.scored == 3


def test_of_two_near_duplicate_candidates_the_worse_scored_is_kept() -> None:
    traces = [trace("t1", 0.4, question="Can I return books at any branch?"),
              trace("t2", 0.1, question="Can I return books to any branch?"),
              trace("t3", 0.2, question="Are dogs allowed inside the building?")]
    choice = choose(traces, [], 3, False)
    assert [r["metadata"]["trace_id"] for r in choice.rows] == ["t2", "t3"]
    assert [(d.trace_id, d.like, d.existing) for d in choice.dropped] == [("t1", "trace-t2", False)]


def test_a_candidate_line_is_a_pending_case_with_no_invented_labels() -> None:
    t = ScoredTrace(id="t7", question="Can I print from my phone?", timestamp="2025-03-04T10:00:00Z", feedback=-1.0,
                    negative=True, answer="Yes, with the app.", retrieved=("printing#2", "printing#1"),
                    scores={"answer_relevancy": 0.3, "faithfulness": 0.2})
    (row,) = choose([t], [], 1, True, "2025-03-05T00:00:00+00:00").rows
    assert row == {
        "id": "trace-t7", "question": "Can I print from my phone?", "type": "answerable",
        "metadata": {"review": "pending", "source": "traces", "trace_id": "t7", "timestamp": "2025-03-04T10:00:00Z",
                     "scores": {"answer_relevancy": 0.3, "faithfulness": 0.2}, "feedback": -1.0,
                     "answer": "Yes, with the app.", "suggested_relevant_ids": ["printing#2", "printing#1"],
                     "report": "2025-03-05T00:00:00+00:00"},
    }
    case = parse_case(row)  # a valid golden case, left out of runs until reviewed
    assert isinstance(case, GoldenCase) and case.pending_review and not case.relevant and case.ground_truth is None
    approved = {**row, "metadata": {**row["metadata"], "review": "approved"}}
    assert "needs a non-empty 'relevant_doc_ids'" in str(parse_case(approved))  # approving it takes labels


@pytest.mark.parametrize(("trace_id", "taken", "expected"), [
    ("abc-123", set(), "trace-abc-123"),
    ("abc-123", {"trace-abc-123"}, "trace-abc-123-" + "a00eada80f974d9446d54719567f67349cdc2d34"[:8]),
    ("a/b c", set(), None),
    ("日本", set(), None),
    ("x" * 200, set(), None),
])
def test_candidate_ids_are_safe_and_unique(trace_id: str, taken: set[str], expected: str | None) -> None:
    cid = candidate_id(trace_id, taken)
    if expected is not None:
        assert cid == expected
    assert cid.startswith(ID_PREFIX) and cid not in taken and len(cid) <= 80
    assert all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in cid)
    assert candidate_id(trace_id, taken) == cid  # stable


def test_ids_that_sanitise_alike_stay_apart() -> None:
    first = candidate_id("a/b", set())
    assert candidate_id("a b", {first}) != first and candidate_id("a b", set()) != first


def report_of(traces: list[dict[str, Any]], cases: list[dict[str, Any]], samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {"traces": {"cases": traces}, "cases": cases, "stages": {"generation": {"samples": samples}}}


def test_traces_are_joined_with_their_answers_and_scores() -> None:
    report = report_of(
        [{"id": "a", "question": "qa?", "line": 1, "timestamp": None, "feedback": 1.0, "negative": False},
         {"id": "b", "question": "qb?", "line": 2, "timestamp": "2025-01-01T00:00:00Z", "feedback": None, "negative": None}],
        [{"id": "a", "type": "answerable", "retrieved": ["d2", "d1"], "answer": "A", "latency_ms": 1.0, "error": None}],
        [{"id": "b", "metrics": {"faithfulness": 0.5, "check_pass_rate": 1.0}, "error": None}])
    a, b = traces_of(report)
    assert (a.answer, a.retrieved, a.scores, a.score, a.feedback) == ("A", ("d2", "d1"), {}, None, 1.0)
    assert (b.answer, b.retrieved, b.scores, b.timestamp) == (None, (), {"faithfulness": 0.5}, "2025-01-01T00:00:00Z")
    assert traces_of(report, "check_pass_rate")[1].scores == {"check_pass_rate": 1.0}
    assert metric_names(report["stages"]["generation"]["samples"]) == ["check_pass_rate", "faithfulness"]
    assert traces_of({"traces": {"cases": []}}) == []  # no cases, no generation stage: nothing to join


def test_choosing_is_deterministic_whatever_the_order() -> None:
    traces = [trace(f"t{i:02d}", (i * 37 % 11) / 10, negative=i % 4 == 0) for i in range(20)]
    first = choose(traces, [], 6, True)
    again = choose(list(reversed(traces)), [], 6, True)
    assert first.rows == again.rows and first.rows
    assert [r["metadata"]["scores"]["faithfulness"] for r in first.rows[:6]] == sorted(
        r["metadata"]["scores"]["faithfulness"] for r in first.rows[:6])


def test_golden_check_counts_candidates_as_pending_and_says_what_they_lack() -> None:
    from gate.core.goldencheck import check
    from tests.support.settings import stages

    (row,) = choose([trace("t1", 0.1, question="Can I print from my phone?")], [], 1, False).rows
    candidate = parse_case(row)
    assert isinstance(candidate, GoldenCase)
    labelled = parse_case({"id": "q1", "question": "Where is the reading room?", "relevant_doc_ids": ["d"],
                           "ground_truth": "Upstairs."})
    assert isinstance(labelled, GoldenCase)
    findings, counts = check([labelled, candidate], stages(retrieval={"metrics": ["mrr"]}, generation={"metrics": ["token_f1"]}))
    codes = {f["code"]: f for f in findings}
    assert "missing_ground_truth" not in codes  # runs leave it out: it is the reviewer's to complete, not an error
    assert codes["pending_review"]["cases"] == ["trace-t1"] and counts["pending_review"] == 1
    assert "(1 from production traces)" in codes["pending_review"]["message"]
    assert "1 without relevant_doc_ids, 1 without ground_truth" in codes["pending_review"]["message"]
    approved = parse_case({**row, "relevant_doc_ids": ["d"], "metadata": {**row["metadata"], "review": "approved"}})
    assert isinstance(approved, GoldenCase)
    findings, _ = check([labelled, approved], stages(retrieval={"metrics": ["mrr"]}, generation={"metrics": ["token_f1"]}))
    assert [f["cases"] for f in findings if f["code"] == "missing_ground_truth"] == [["trace-t1"]]
