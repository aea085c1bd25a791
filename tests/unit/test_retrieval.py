"""The retrieval stage: which cases count, id matching, errored cases, breakdowns, health."""

from __future__ import annotations

import pytest

from gate.core.cases import groups
from gate.core.catalog import parse_metric
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.ranking import map_relevant
from gate.stages.retrieval import retrieval_stage
from tests.support.settings import match, retrieval

NAMES = ["hit_rate@1", "recall@2", "mrr", "context_recall@2"]
METRICS = [parse_metric(m) for m in NAMES]


def case(cid: str, relevant: dict[str, int] | None = None, ctype: str = "answerable", **kw) -> GoldenCase:
    return GoldenCase(id=cid, question=f"question {cid}", line=1, relevant=relevant or {}, type=ctype, **kw)


def out(cid: str, ids: list[str], latency: float = 10.0, error: str | None = None) -> TargetOutput:
    return TargetOutput(case_id=cid, retrieved=[RetrievedDoc(i) for i in ids], latency_ms=latency, error=error)


@pytest.mark.parametrize(
    ("level", "raw", "expected"),
    [("exact", "doc#chunk_1", "doc#chunk_1"), ("document", "doc#chunk_1", "doc"), ("document", "doc", "doc"),
     ("document", "a#b#c", "a")],
)
def test_id_mapper(level: str, raw: str, expected: str) -> None:
    assert match(level=level, separator="#").to_id()(raw) == expected


def test_document_level_keeps_best_grade() -> None:
    to_doc = match(level="document", separator="#").to_id()
    assert map_relevant({"p#1": 1, "p#2": 3, "q#1": 2}, to_doc) == {"p": 3, "q": 2}


def test_document_level_matching_changes_the_score() -> None:
    cases = [case("a", {"policy#chunk_7": 1})]
    outputs = {"a": out("a", ["policy#chunk_2", "other#chunk_1"])}
    exact = retrieval_stage(retrieval(NAMES, match={"level": "exact"}), cases, outputs)
    doc = retrieval_stage(retrieval(NAMES, match={"level": "document", "separator": "#"}), cases, outputs)
    assert exact["metrics"]["hit_rate@1"] == 0.0
    assert doc["metrics"]["hit_rate@1"] == 1.0
    # two chunks of one document count once (repeated ids dropped after mapping)
    outputs = {"a": out("a", ["x#1", "x#2", "policy#chunk_1"])}
    assert retrieval_stage(retrieval(NAMES, match={"level": "document"}), cases, outputs)["metrics"]["recall@2"] == 1.0


def test_only_answerable_scored_and_errors_left_out() -> None:
    cases = [
        case("a", {"d1": 1}, category="c1", tags=("badcase",)),
        case("b", {"d2": 1, "d3": 1}, category="c1"),
        case("c", {"d4": 1}, category="c2"),
        case("oos", ctype="out_of_scope"),
        case("adv", ctype="adversarial"),
    ]
    outputs = {
        "a": out("a", ["d1", "x"], latency=10),
        "b": out("b", ["x", "d2"], latency=30),
        "c": out("c", [], error="HTTP 503 after 4 attempts"),
        "oos": out("oos", ["d1"], latency=20),
        "adv": out("adv", ["d9"], latency=40),
    }
    stage = retrieval_stage(retrieval(NAMES), cases, outputs, groups(cases))
    assert stage["n"] == 2 and stage["errored"] == 1
    assert stage["excluded"] == {"out_of_scope": 1, "adversarial": 1}
    m = stage["metrics"]
    assert m["hit_rate@1"] == 0.5
    assert m["recall@2"] == pytest.approx((1.0 + 0.5) / 2)
    assert m["context_recall@2"] == pytest.approx(2 / 3)  # micro: (1 + 1) / (1 + 2)
    assert m["mrr"] == pytest.approx((1.0 + 0.5) / 2)
    assert m["error_rate"] == pytest.approx(1 / 5)
    assert m["p50_latency_ms"] == pytest.approx(25.0)  # over the 4 successful calls: 10, 20, 30, 40
    errored = [s for s in stage["samples"] if s["error"]]
    assert errored == [{"id": "c", "metrics": {}, "error": "HTTP 503 after 4 attempts"}]
    ranks = {s["id"]: s["relevant_ranks"] for s in stage["samples"] if not s["error"]}
    assert ranks == {"a": {"d1": 1}, "b": {"d2": 2, "d3": None}}
    by_cat = stage["breakdown"]["category"]
    assert by_cat["c1"]["n"] == 2 and "c2" not in by_cat  # c2's only case errored
    assert stage["breakdown"]["tag"]["badcase"]["metrics"]["hit_rate@1"] == 1.0


def test_no_scored_case_marks_metrics_not_evaluated() -> None:
    cases = [case("a", {"d1": 1})]
    stage = retrieval_stage(retrieval(NAMES), cases, {"a": out("a", [], error="boom")})
    assert "hit_rate@1" not in stage["metrics"]
    assert set(stage["not_evaluated"]) == {m.name for m in METRICS}
