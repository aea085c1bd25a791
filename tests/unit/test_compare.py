"""gate.core.compare: the faithfulness-recall trap, attribution, worse cases, per-case scores, references."""

from __future__ import annotations

from typing import Any

import pytest

from gate.core.catalog import higher_is_better
from gate.core.compare import attribute, baseline_comparison, case_scores, recall_trap, trend_comparison, worse_cases
from gate.core.errors import InputError
from gate.io.reports import check_document, upgrade


def stages(**metrics_by_stage: dict[str, float]) -> dict[str, dict[str, Any]]:
    return {name: {"status": "pass", "metrics": m} for name, m in metrics_by_stage.items()}


# --------------------------------------------------------------------------- the faithfulness-recall trap


def test_recall_trap_fires_on_the_seed_numbers_with_retrieval_recall():
    now = stages(retrieval={"context_recall@5": 0.71, "hit_rate@5": 0.9}, generation={"faithfulness": 0.90})
    ref = {"retrieval": {"context_recall@5": 0.83, "hit_rate@5": 0.9}, "generation": {"faithfulness": 0.87}}
    msg = recall_trap(now, ref)
    assert msg is not None
    for needle in ("faithfulness", "0.87", "0.90", "context_recall@5", "0.83", "0.71", "not an improvement"):
        assert needle in msg, (needle, msg)


def test_recall_trap_fires_with_generation_context_recall():
    now = stages(generation={"faithfulness": 0.90, "context_recall": 0.71})
    ref = {"generation": {"faithfulness": 0.87, "context_recall": 0.83}}
    msg = recall_trap(now, ref)
    assert msg is not None and "context_recall fell 0.83 → 0.71" in msg and "faithfulness rose 0.87 → 0.90" in msg


def test_recall_trap_prefers_the_generation_recall_when_both_exist():
    now = stages(retrieval={"context_recall@5": 0.71}, generation={"faithfulness": 0.90, "context_recall": 0.70})
    ref = {"retrieval": {"context_recall@5": 0.83}, "generation": {"faithfulness": 0.87, "context_recall": 0.80}}
    msg = recall_trap(now, ref)
    assert msg is not None and "context_recall fell 0.80 → 0.70" in msg


# (id, faithfulness ref -> now, recall ref -> now, fires)
TRAP_TABLE = [
    ("seed", (0.87, 0.90), (0.83, 0.71), True),
    ("both rise", (0.87, 0.90), (0.71, 0.83), False),
    ("both fall", (0.90, 0.87), (0.83, 0.71), False),
    ("faithfulness falls, recall rises", (0.90, 0.87), (0.71, 0.83), False),
    ("faithfulness unchanged, recall falls", (0.87, 0.87), (0.83, 0.71), False),
    ("faithfulness rises, recall unchanged", (0.87, 0.90), (0.83, 0.83), False),
]


@pytest.mark.parametrize(("faith", "recall", "fires"), [r[1:] for r in TRAP_TABLE], ids=[r[0] for r in TRAP_TABLE])
@pytest.mark.parametrize("faith_name", ["faithfulness", "deepeval/faithfulness"])
@pytest.mark.parametrize("recall_at", [("retrieval", "context_recall@5"), ("retrieval", "recall@5"), ("generation", "context_recall")])
def test_recall_trap_table(faith, recall, fires, faith_name, recall_at):
    rstage, rname = recall_at
    now: dict[str, dict[str, float]] = {"generation": {faith_name: faith[1]}}
    ref: dict[str, dict[str, float]] = {"generation": {faith_name: faith[0]}}
    now.setdefault(rstage, {})[rname] = recall[1]
    ref.setdefault(rstage, {})[rname] = recall[0]
    msg = recall_trap(stages(**now), ref)
    assert (msg is not None) is fires
    if fires:
        assert faith_name in msg and rname in msg


@pytest.mark.parametrize(
    ("now", "ref"),
    [
        (stages(retrieval={"context_recall@5": 0.71}, generation={"faithfulness": 0.90}), {}),  # no reference at all
        (stages(retrieval={"context_recall@5": 0.71}, generation={"faithfulness": 0.90}),
         {"retrieval": {"context_recall@5": 0.83}}),  # reference has no faithfulness
        (stages(retrieval={"context_recall@5": 0.71}, generation={"faithfulness": 0.90}),
         {"generation": {"faithfulness": 0.87}}),  # reference has no recall
        (stages(retrieval={"context_recall@5": 0.71}, generation={"answer_relevancy": 0.90}),
         {"retrieval": {"context_recall@5": 0.83}, "generation": {"answer_relevancy": 0.87}}),  # no faithfulness
        (stages(retrieval={"mrr": 0.5}, generation={"faithfulness": 0.90}),
         {"retrieval": {"mrr": 0.9}, "generation": {"faithfulness": 0.87}}),  # no recall metric
    ],
)
def test_recall_trap_needs_both_metrics_on_both_sides(now, ref):
    assert recall_trap(now, ref) is None


# --------------------------------------------------------------------------- worse cases (judge stages)


def worse_by_case(stage: dict[str, Any], reference: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Judge-stage cases against per-case reference scores given as metric -> id -> value."""
    ref_cases: dict[str, dict[str, float]] = {}
    for metric, by_id in reference.items():
        for cid, v in by_id.items():
            ref_cases.setdefault(cid, {})[metric] = v
    return worse_cases(stage["samples"], [{"id": cid, "metrics": m} for cid, m in ref_cases.items()], {})  # type: ignore[return-value]


def test_worse_by_case_respects_direction_and_sorts_worst_first():
    frr = "false_rejection_rate"  # lower is better
    assert not higher_is_better(frr)
    stage = {"samples": [
        {"id": "a", "metrics": {"faithfulness": 0.80, frr: 0.10}},  # faithfulness -0.10
        {"id": "b", "metrics": {"faithfulness": 0.90, frr: 0.40}},  # false rejections +0.30: worse
        {"id": "c", "metrics": {"faithfulness": 0.95, frr: 0.05}},  # both better
        {"id": "d", "metrics": {"faithfulness": 0.70, frr: 0.30}},  # both worse: 0.2 + 0.2
        {"id": "e", "metrics": {"faithfulness": 0.50}},  # no reference for e
        {"id": "f", "metrics": {"faithfulness": 0.90}},  # unchanged
    ]}
    reference = {
        "faithfulness": {"a": 0.90, "b": 0.90, "c": 0.90, "d": 0.90, "f": 0.90},
        frr: {"a": 0.10, "b": 0.10, "c": 0.10, "d": 0.10},
    }
    rows = worse_by_case(stage, reference)
    assert [r["id"] for r in rows] == ["d", "b", "a"]  # 0.4 in total, then 0.3, then 0.1
    assert rows[0]["drops"] == {"faithfulness": [0.90, 0.70], frr: [0.10, 0.30]}
    assert rows[1]["drops"] == {frr: [0.10, 0.40]}
    assert rows[2]["drops"] == {"faithfulness": [0.90, 0.80]}


def test_worse_by_case_breaks_ties_by_id_and_ignores_float_noise():
    stage = {"samples": [{"id": "z", "metrics": {"m": 0.5}}, {"id": "y", "metrics": {"m": 0.5}},
                         {"id": "x", "metrics": {"m": 0.9 - 1e-12}}]}
    rows = worse_by_case(stage, {"m": {"z": 0.6, "y": 0.6, "x": 0.9}})
    assert [r["id"] for r in rows] == ["y", "z"]


# --------------------------------------------------------------------------- attribute


RETRIEVAL = {"worse_cases": [
    {"id": "lost", "drops": {"hit_rate@5": [1.0, 0.0]}, "lost": [{"id": "d1", "from": 2, "to": None, "left_top_k": True}]},
    {"id": "lost2", "drops": {}, "lost": [{"id": "d9", "from": 3, "to": 8, "left_top_k": True}]},
]}


# (id, generation case id, metrics that dropped, expected cause)
ATTRIBUTION = [
    ("relevant doc left top k, relevancy fell", "lost", {"answer_relevancy": [0.9, 0.5]}, "retrieval miss"),
    ("relevant doc left top k, faithfulness fell", "lost", {"faithfulness": [0.9, 0.5]}, "both"),
    ("lost without metric drop, faithfulness fell", "lost2", {"faithfulness": [0.9, 0.5]}, "both"),
    ("retrieval fine, faithfulness fell", "fine", {"faithfulness": [0.9, 0.5]}, "unfaithful generation"),
    ("retrieval fine, deepeval faithfulness fell", "fine", {"deepeval/faithfulness": [0.9, 0.5]}, "unfaithful generation"),
    ("retrieval fine, hallucination score fell", "fine", {"hallucination": [0.9, 0.5]}, "unfaithful generation"),
    ("retrieval fine, deepeval hallucination fell", "fine", {"deepeval/hallucination": [0.9, 0.5]}, "unfaithful generation"),
    ("retrieval fine, relevancy fell", "fine", {"answer_relevancy": [0.9, 0.5]}, "answer quality"),
    ("retrieval fine, correctness fell", "fine", {"answer_correctness": [0.9, 0.5]}, "answer quality"),
]


@pytest.mark.parametrize(("case_id", "drops", "cause"), [r[1:] for r in ATTRIBUTION], ids=[r[0] for r in ATTRIBUTION])
def test_attribute_labels_the_cause(case_id, drops, cause):
    (row,) = attribute([{"id": case_id, "drops": drops}], RETRIEVAL)
    assert row["cause"] == cause
    assert row["drops"] == drops and row["id"] == case_id
    expected_lost = next((w["lost"] for w in RETRIEVAL["worse_cases"] if w["id"] == case_id), [])
    assert row["retrieval"] == expected_lost


def test_attribute_without_a_retrieval_stage_never_blames_retrieval():
    rows = attribute([{"id": "lost", "drops": {"answer_relevancy": [0.9, 0.5]}},
                      {"id": "x", "drops": {"faithfulness": [0.9, 0.5]}}], None)
    assert [r["cause"] for r in rows] == ["answer quality", "unfaithful generation"]
    assert attribute([], RETRIEVAL) == []


def test_attribute_keeps_the_order_it_was_given():
    rows = attribute([{"id": "b", "drops": {"m": [1, 0]}}, {"id": "a", "drops": {"m": [1, 0.5]}}], RETRIEVAL)
    assert [r["id"] for r in rows] == ["b", "a"]


# --------------------------------------------------------------------------- case_scores


def test_case_scores_reads_report_form():
    stage = {"samples": [
        {"id": "q1", "metrics": {"faithfulness": 0.9, "answer_relevancy": 0.8}, "error": None},
        {"id": "q2", "metrics": {"answer_relevancy": 0.7}, "error": "faithfulness: timeout"},
        {"id": "q3", "metrics": {"faithfulness": 1}, "error": None},
    ]}
    samples = stage["samples"]
    assert case_scores(samples, "faithfulness") == {"q1": 0.9, "q3": 1.0}
    assert isinstance(case_scores(samples, "faithfulness")["q3"], float)
    assert case_scores(samples, "answer_relevancy") == {"q1": 0.8, "q2": 0.7}
    assert case_scores(samples, "nope") == {}
    assert case_scores([], "faithfulness") == {}


@pytest.mark.parametrize(
    "samples",
    [
        {"q1": {"metrics": {"faithfulness": 0.9}}, "q2": {"metrics": {"answer_relevancy": 0.7}}, "q3": {"metrics": {"faithfulness": 0.5}}},
        {"q1": {"faithfulness": 0.9}, "q2": {"answer_relevancy": 0.7}, "q3": {"faithfulness": 0.5}},  # history form
    ],
    ids=["baseline form", "history form"],
)
def test_case_scores_reads_stored_form(samples):
    """Per-case scores stored as objects keyed by case id (before they had one shape) are read as the list form."""
    stored = upgrade({"stages": {"generation": {"samples": samples}}})["stages"]["generation"]["samples"]
    assert case_scores(stored, "faithfulness") == {"q1": 0.9, "q3": 0.5}


@pytest.mark.parametrize("bad", [{"faithfulness": None}, {"faithfulness": "n/a"}, "garbage"])
def test_non_numeric_stored_values_are_refused_at_the_door(bad):
    """A stored per-case value that is not a number makes the entry invalid (the reader skips it with a warning)."""
    samples = {"q1": bad, "q4": {"faithfulness": 0.25}}
    entry = {"schema_version": 1, "created_at": "2026-11-01T00:00:00+00:00", "commit": None, "branch": None, "verdict": "pass",
             "fingerprints": {}, "stages": {"generation": {"metrics": {"faithfulness": 0.5}, "samples": samples}}}
    with pytest.raises(InputError) as err:
        check_document(entry, "history_entry", file="history.jsonl", line=3)
    assert err.value.message.startswith("history.jsonl:3: stages.generation.samples[0].metrics")


# --------------------------------------------------------------------------- references


def _report_stage(scores: dict[str, float]) -> list[dict[str, Any]]:
    """The per-case samples of a report stage with these faithfulness scores."""
    return [{"id": k, "metrics": {"faithfulness": v}} for k, v in scores.items()]


def test_trend_reference_averages_per_case_over_the_entries():
    entries = [upgrade(e) for e in [
        {"stages": {"generation": {"metrics": {"faithfulness": 0.8}, "samples": {"a": {"faithfulness": 0.8}, "b": {"faithfulness": 0.8}}}}},
        {"stages": {"generation": {"metrics": {"faithfulness": 0.6}, "samples": {"a": {"faithfulness": 0.6}, "b": {"faithfulness": 0.6}}}}},
        {"stages": {"retrieval": {"metrics": {"mrr": 0.5}}}},  # an entry without the stage does not count
    ]]
    ref = trend_comparison("generation", _report_stage({"a": 0.7, "b": 0.7}), entries, "faithfulness")
    assert ref is not None
    assert ref.value == pytest.approx(0.7) and ref.runs == 2
    assert ref.paired is not None and ref.paired.n == 2
    assert ref.paired.mean_drop == pytest.approx(0.0, abs=1e-12)  # per-case means 0.7 vs today's 0.7


def test_trend_reference_none_without_values_and_no_pairs_for_retrieval():
    assert trend_comparison("generation", _report_stage({"a": 0.7}), [], "faithfulness") is None
    entries = [upgrade({"stages": {"retrieval": {"metrics": {"mrr": 0.5}, "samples": {"a": {"mrr": 1.0}}}}})]
    ref = trend_comparison("retrieval", [{"id": "a", "metrics": {"mrr": 0.5}}], entries, "mrr")
    assert ref is not None and ref.value == 0.5 and ref.paired is None


def test_baseline_reference_pairs_only_common_cases():
    base = {"metrics": {"faithfulness": 0.85}, "samples": [{"id": "a", "metrics": {"faithfulness": 0.9}},
                                                          {"id": "gone", "metrics": {"faithfulness": 0.1}}]}
    ref = baseline_comparison("generation", _report_stage({"a": 0.8, "new": 0.2}), base, "faithfulness")
    assert ref.value == 0.85
    assert ref.paired is not None and ref.paired.n == 1 and ref.paired.mean_drop == pytest.approx(0.1)
    assert baseline_comparison("generation", _report_stage({"a": 0.8}), None, "faithfulness").value is None
    no_overlap = baseline_comparison("generation", _report_stage({"new": 0.8}), base, "faithfulness")
    assert no_overlap.value == 0.85 and no_overlap.paired is None


# --------------------------------------------------------------------------- self-check verdict


@pytest.mark.parametrize(("on_unstable", "max_diff", "status", "warned"), [
    ("warn", 0.05, "pass", True),
    ("fail", 0.05, "fail", True),
    ("fail", 0.01, "pass", False),
])
def test_unstable_judge_warns_or_fails(on_unstable: str, max_diff: float, status: str, warned: bool) -> None:
    from gate.core.verdict import CompareWith, gate_stage

    unstable = ["faithfulness"] if max_diff > 0.02 else []
    stage = {
        "status": "pass", "metrics": {"faithfulness": 0.9}, "samples": [{"id": "a", "metrics": {"faithfulness": 0.9}}],
        "not_evaluated": {}, "warnings": [],
        "self_check": {"limit": 0.02, "on_unstable": on_unstable, "cases": 1, "errored": 0, "unstable": unstable,
                       "metrics": {"faithfulness": {"cases": 1, "max_diff": max_diff, "mean_diff": max_diff}}},
    }
    out = gate_stage("generation", stage, {"faithfulness": {"min": 0.5}}, CompareWith(), {"a": "q"})
    assert out["status"] == status
    assert any("judge unstable" in w for w in out["warnings"]) is warned
