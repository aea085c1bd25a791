"""The paraphrase test's arithmetic (gate.core.paraphrase) and its stage (gate.stages.paraphrase) on in-memory
targets: which rewrites are usable, the figures from per-rewrite scores, failed calls, and why the test cannot run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gate.core.catalog import parse_metric, robustness_metric_names
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.paraphrase import (
    CaseScores,
    figures,
    metric_names,
    normalise,
    review_lines,
    scored_metrics,
    shortfall,
    usable_rewrites,
)
from gate.core.settings import ParaphraseSettings
from gate.judges.cache import NullCache
from gate.stages.context import StageContext
from gate.stages.paraphrase import avoid_passages, merged_part, paraphrase_part
from gate.targets import Target
from gate.targets.fake import FakeTarget
from tests.support.settings import match, robustness

HIT5 = parse_metric("hit_rate@5")
MRR = parse_metric("mrr")


def scores(hit: float, mrr: float = 0.0) -> dict[str, float]:
    return {"hit_rate@5": hit, "mrr": mrr}


# ---------------------------------------------------------------------------------- usable rewrites


def test_normalise_folds_case_space_and_end_punctuation() -> None:
    assert normalise("  How long   can I\tborrow a book? ") == normalise("how long can i borrow a book") == "how long can i borrow a book"
    assert normalise("¿Qué hora es?") == "qué hora es"
    assert normalise("?!") == ""


def test_usable_rewrites_drop_the_question_repeats_and_blanks() -> None:
    question = "How long can I borrow a book?"
    got = usable_rewrites(question, ["how long can I borrow a book", "  book loan length  ", "", "   ", "Book loan LENGTH?",
                                     "how many days for a book"])
    assert got == ["book loan length", "how many days for a book"]
    assert usable_rewrites(question, ["a", "b", "c"], limit=2) == ["a", "b"]
    assert usable_rewrites(question, [question, question.upper()]) == []


def test_scored_metrics_add_the_hit_rates_the_figures_need() -> None:
    recall10 = parse_metric("recall@10")
    names = [m.name for m in scored_metrics([recall10, MRR], 10)]
    assert names == ["recall@10", "mrr", "hit_rate@10"]
    names = [m.name for m in scored_metrics([HIT5, recall10], 5)]
    assert names == ["hit_rate@5", "recall@10", "hit_rate@10"]
    assert [m.name for m in scored_metrics([MRR], 10)] == ["mrr", "hit_rate@10"]


def test_metric_names_agree_with_the_catalog() -> None:
    for metrics in (["hit_rate@5", "mrr"], ["recall@10", "ndcg@3", "mrr"], ["mrr"]):
        stage = {"paraphrase": {"metrics": metrics}}
        ours = set(metric_names([parse_metric(m) for m in metrics]))
        assert ours == {n for n in robustness_metric_names(stage) if n.startswith("paraphrase")}


# ---------------------------------------------------------------------------------- figures


def test_robustness_is_the_share_of_found_cases_kept_on_every_rewrite() -> None:
    cases = [
        CaseScores("kept", scores(1, 1), [scores(1, 1), scores(1, 0.5)]),
        CaseScores("lost", scores(1, 0.5), [scores(1, 1), scores(0)]),
        CaseScores("missed", scores(0), [scores(1, 0.25)]),  # not found on the original: outside the ratio
        CaseScores("none", scores(1, 1), []),  # no rewrite: left out of everything
    ]
    fig = figures(cases, [HIT5, MRR], 5)
    assert fig.metrics["paraphrase_robustness"] == 0.5
    # originals of the three counted cases: 2/3; their four rewrites: 4 found of 5 rewrites
    assert fig.metrics["paraphrase_gap@5"] == pytest.approx(2 / 3 - 4 / 5)
    assert fig.table["hit_rate@5"] == {"original": pytest.approx(2 / 3), "rewrites": pytest.approx(0.8), "gap": pytest.approx(2 / 3 - 0.8)}
    assert fig.table["mrr"]["original"] == pytest.approx(0.5)
    assert fig.table["mrr"]["rewrites"] == pytest.approx((1 + 0.5 + 1 + 0 + 0.25) / 5)
    assert fig.outcomes == {"kept": 1, "lost": 1, "missed": 1, "no rewrite": 1}


def test_a_failed_rewrite_is_never_a_loss() -> None:
    cases = [
        CaseScores("undecided", scores(1), [scores(1), None]),  # kept on the answered one, the other failed: left out
        CaseScores("lost anyway", scores(1), [scores(0), None]),  # lost on an answered rewrite whatever the other did
        CaseScores("all failed", scores(1), [None, None]),
        CaseScores("original failed", None, [scores(0)]),
        CaseScores("kept", scores(1), [scores(1)]),
    ]
    fig = figures(cases, [HIT5], 5)
    assert [c.outcome(5) for c in cases] == ["errored", "lost", "errored", "errored", "kept"]
    assert fig.metrics["paraphrase_robustness"] == 0.5
    # counted: the first, second and last (an answered original and rewrite); failed rewrites are in no mean
    assert fig.table["hit_rate@5"]["original"] == 1.0
    assert fig.table["hit_rate@5"]["rewrites"] == pytest.approx(2 / 3)


def test_every_gap_k_and_the_reasons_when_nothing_counts() -> None:
    recall10 = parse_metric("recall@10")
    row = {"hit_rate@5": 1.0, "recall@10": 1.0, "hit_rate@10": 1.0}
    fig = figures([CaseScores("a", row, [{**row, "hit_rate@5": 0.0}])], [HIT5, recall10], 5)
    assert fig.metrics == {"paraphrase_robustness": 0.0, "paraphrase_gap@5": 1.0, "paraphrase_gap@10": 0.0}
    assert set(fig.table) == {"hit_rate@5", "recall@10"}

    fig = figures([CaseScores("a", scores(1), [None])], [HIT5], 5)
    assert not fig.metrics
    assert fig.not_evaluated["paraphrase_robustness"] == fig.not_evaluated["paraphrase_gap@5"]
    assert "answered on a rewrite" in fig.not_evaluated["paraphrase_robustness"]

    fig = figures([CaseScores("a", scores(0), [scores(0)])], [HIT5], 5)
    assert fig.metrics == {"paraphrase_gap@5": 0.0}
    assert "found within the top 5" in fig.not_evaluated["paraphrase_robustness"]


# ---------------------------------------------------------------------------------- the record


def rewrite(text: str, source: str = "generated", error: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"text": text, "source": source, "found": None if error else True, "metrics": {}}
    if error:
        row["error"] = error
    return row


def test_shortfall_and_review_lines() -> None:
    info = {"cases": [
        {"id": "a", "rewrites": [rewrite("a one"), rewrite("a two")]},
        {"id": "b", "rewrites": [rewrite("b one")]},
        {"id": "c", "rewrites": []},
        {"id": "d", "rewrites": [rewrite("d one", "golden", error="HTTP 500")]},
    ]}
    notes = shortfall(info, 2)
    assert len(notes) == 3
    assert "fewer than 2 usable rewrites for 1 case (b)" in notes[0]
    assert "no rewrite for 1 case (c)" in notes[1]
    assert notes[2].startswith("1 rewrite call failed")
    lines = [json.loads(line) for line in review_lines(info).splitlines()]
    assert lines == [{"id": "a", "paraphrases": ["a one", "a two"]}, {"id": "b", "paraphrases": ["b one"]},
                     {"id": "d", "paraphrases": ["d one"]}]
    assert shortfall({"cases": [{"id": "a", "rewrites": [rewrite("x")]}]}, 1) == []


# ---------------------------------------------------------------------------------- the stage, on in-memory targets


CASES = [
    GoldenCase("c1", "How long can I borrow a printed book?", 0, relevant={"lending#1": 1}, paraphrases=("how long for a paperback",
                                                                                                         "book loan length")),
    GoldenCase("c2", "What is the fine for a late DVD?", 0, relevant={"fines#1": 1}, paraphrases=("movie late fee",)),
    GoldenCase("c3", "When is the library open?", 0, relevant={"hours#1": 1}),  # no paraphrases
    GoldenCase("c4", "What is the capital of France?", 0, type="out_of_scope"),
    GoldenCase("c5", "Unlabelled question?", 0),  # answerable, no relevance labels: not sampled
]


def output(cid: str, *ids: str) -> TargetOutput:
    return TargetOutput(cid, [RetrievedDoc(i, f"text of {i}") for i in ids], "an answer")


OUTPUTS = {"c1": output("c1", "x", "lending#1"), "c2": output("c2", "fines#1"), "c3": output("c3", "hours#1"),
           "c4": output("c4"), "c5": output("c5", "x")}


def row(*ids: str) -> dict[str, Any]:
    return {"retrieved": [{"id": i, "text": f"text of {i}"} for i in ids], "answer": "an answer"}


def settings(**keys: Any) -> ParaphraseSettings:
    s = robustness(paraphrase={"sample": {"size": "all", "seed": 7}, **keys}).paraphrase
    assert s is not None
    return s


def run(target: Target | None, outputs: dict[str, TargetOutput] | None = None, **keys: Any) -> Any:
    return paraphrase_part(settings(**keys), StageContext(CASES, outputs or OUTPUTS, NullCache()), target, match())


def test_the_stage_asks_each_golden_rewrite_and_scores_it() -> None:
    target = FakeTarget({"how long for a paperback": row("lending#1"), "book loan length": row("a", "b", "c", "d", "e", "lending#1"),
                         "movie late fee": {"error": "HTTP 503"}})
    part = run(target)
    assert part.key == "paraphrase" and part.target_calls == 3 and part.usage is None
    assert target.asked == ["c1", "c1", "c2"]  # the originals are never asked again
    info = part.info
    assert info["sample"] == {"size": 3, "of": 3, "ids": ["c1", "c2", "c3"]}
    assert (info["given"], info["generated"], info["cached"], info["k"]) == (3, 0, 0, 5)
    c1, c2, c3 = info["cases"]
    assert c1["found"] and c1["lost"]
    assert [(r["text"], r["found"], r["metrics"]["mrr"]) for r in c1["rewrites"]] == [
        ("how long for a paperback", True, 1.0), ("book loan length", False, pytest.approx(1 / 6))]
    assert c2["rewrites"][0]["found"] is None and c2["rewrites"][0]["error"] == "HTTP 503" and not c2["lost"]
    assert c3["rewrites"] == []
    assert part.metrics["paraphrase_robustness"] == 0.0  # c1 lost; c2 undecided (its one call failed)
    assert part.metrics["paraphrase_gap@5"] == pytest.approx(1 - 0.5)
    assert info["metrics"]["mrr"]["original"] == pytest.approx(0.5)  # c1 only: c2 had no answered rewrite


def test_shards_merge_into_the_whole_runs_test() -> None:
    rows = {"how long for a paperback": row("lending#1"), "book loan length": row("x"), "movie late fee": row("y", "fines#1")}
    whole = run(FakeTarget(rows))
    stages = []
    for only in ({"c1", "c4"}, {"c2", "c3", "c5"}):
        ctx = StageContext(CASES, {c: o for c, o in OUTPUTS.items() if c in only}, NullCache(), only=only)
        part = paraphrase_part(settings(), ctx, FakeTarget(rows), match())
        stages.append({"paraphrase": part.info, "not_evaluated": part.not_evaluated} if part.info else {"not_evaluated": part.not_evaluated})
    merged = merged_part(settings(), match(), CASES, OUTPUTS, stages)
    assert merged.metrics == whole.metrics and merged.info == whole.info
    assert merged.target_calls == 0 and merged.usage is None  # the shards' stage totals hold them
    none = merged_part(settings(), match(), CASES, OUTPUTS, [{"not_evaluated": {"paraphrase_robustness": "why", "rejection_rate": "x"}}])
    assert none.info is None and none.not_evaluated == {"paraphrase_robustness": "why"}


def test_the_stage_does_not_ask_rewrites_of_a_failed_original() -> None:
    target = FakeTarget({"how long for a paperback": row("lending#1"), "book loan length": row("lending#1"),
                         "movie late fee": row("fines#1")})
    outputs = {**OUTPUTS, "c2": TargetOutput.failed("c2", "timeout")}
    part = run(target, outputs)
    assert part.target_calls == 2
    c2 = part.info["cases"][1]
    assert c2["found"] is None and c2["rewrites"][0]["error"].startswith("not asked")
    assert part.metrics["paraphrase_robustness"] == 1.0


def test_no_target_is_said() -> None:
    part = run(None)
    assert part.info is None and not part.metrics and part.target_calls == 0
    assert set(part.not_evaluated) == {"paraphrase_robustness", "paraphrase_gap@5"}
    assert "no target answers only the golden questions" in part.not_evaluated["paraphrase_robustness"]


def test_results_targets_and_missing_judge_are_said() -> None:
    class Results(FakeTarget):
        kind = "results"

    part = run(Results({}))
    assert "a results target answers only the golden questions" in part.not_evaluated["paraphrase_robustness"]
    no_golden = [GoldenCase("c3", "When is the library open?", 0, relevant={"hours#1": 1})]
    part = paraphrase_part(settings(), StageContext(no_golden, OUTPUTS, NullCache(), no_judge="JUDGE_KEY is not set"),
                           FakeTarget({}), match())
    assert part.not_evaluated["paraphrase_robustness"].endswith("needs the judge and JUDGE_KEY is not set")
    part = paraphrase_part(settings(generate=0), StageContext(no_golden, OUTPUTS, NullCache()), FakeTarget({}), match())
    assert "generate is 0" in part.not_evaluated["paraphrase_robustness"]


def test_avoid_passages_are_the_relevant_texts_the_run_has() -> None:
    case = GoldenCase("c", "q?", 0, relevant={"doc#1": 1}, relevant_texts=("A key sentence.",))
    pool = {"doc#1": "The relevant passage.", "doc#2": "Another passage of the same document.", "other#1": "Unrelated."}
    assert avoid_passages(case, pool, match()) == ["A key sentence.", "The relevant passage."]
    assert avoid_passages(case, pool, match(level="document")) == ["A key sentence.", "The relevant passage.",
                                                                    "Another passage of the same document."]
