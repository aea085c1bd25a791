"""gate.core.verdict: the verdict, the error-rate policy and gate_stage as decision tables (in the spirit of
coverage.py's should_fail_under table), and the fake target driving a whole run without a server."""

from __future__ import annotations

from typing import Any

import pytest

from gate.core.model import GoldenCase
from gate.core.report import StageMeasurement
from gate.core.verdict import CompareWith, decide_verdict, gate_stage, run_errors
from gate.targets.fake import FakeTarget

# (id, stage statuses, run errors, verdict)
VERDICTS = [
    ("all pass", ["pass", "pass", "pass"], [], "pass"),
    ("skipped stages pass", ["pass", "skipped", "skipped"], [], "pass"),
    ("nothing ran", [], [], "pass"),
    ("one fail", ["pass", "fail", "skipped"], [], "fail"),
    ("a run error wins over a fail", ["fail", "pass"], ["target down"], "error"),
    ("a run error with passing stages", ["pass"], ["target down"], "error"),
    ("an errored stage alone is not a verdict: run_errors says why", ["error"], [], "pass"),
]


@pytest.mark.parametrize(("statuses", "errors", "verdict"), [r[1:] for r in VERDICTS], ids=[r[0] for r in VERDICTS])
def test_decide_verdict(statuses, errors, verdict):
    assert decide_verdict(statuses, errors) == verdict


def stage(status: str = "pass", **extra: Any) -> dict[str, Any]:
    return {"status": status, "metrics": {}, "gates": [], "samples": [], "not_evaluated": {}, "warnings": [], **extra}


# (id, calls, failed calls, stages, max_error_rate, expected substrings (one per error))
ERRORS = [
    ("no failures", 10, [], {}, 0.0, []),
    ("within the allowed rate", 10, ["timeout"], {}, 0.1, []),
    ("above the allowed rate", 10, ["timeout", "timeout", "HTTP 500"], {}, 0.1,
     ["3 of 10 target calls failed (error rate 30.0%, above max_error_rate 10.0%); most common: timeout (2 cases)"]),
    ("a tie names the first seen", 4, ["b", "a"], {}, 0.0, ["most common: b (1 case)"]),
    ("a gated metric that could not be computed", 1, [], {"generation": stage("error")}, 0.0,
     ["stage generation: a gated metric could not be computed"]),
    ("judge scores above the rate", 1, [], {"generation": stage(scores={"attempted": 10, "errored": 2, "error_rate": 0.2},
                                                                 judge={"model": "m-2024-01-01", "temperature": 0, "engines": {}})}, 0.1,
     ["stage generation: 2 of 10 judge scores could not be computed (error rate 20.0%, above max_error_rate 10.0%)"]),
    ("no judge: the scores are not called judge scores", 1, [],
     {"generation": stage(scores={"attempted": 4, "errored": 4, "error_rate": 1.0}, judge={"model": None, "temperature": None,
                                                                                             "engines": {"offline": "1"}})}, 0.1,
     ["stage generation: 4 of 4 scores (of the metrics that need no model) could not be computed"]),
    ("the judge budget", 1, [], {"robustness": stage(budget_exceeded=True)}, 0.0, ["judge.max_judge_calls was reached"]),
    ("no calls at all", 0, [], {}, 0.0, []),
]


@pytest.mark.parametrize(("calls", "failed", "stages", "rate", "said"), [r[1:] for r in ERRORS], ids=[r[0] for r in ERRORS])
def test_run_errors(calls, failed, stages, rate, said):
    errors = run_errors(stages, calls, failed, rate)
    assert len(errors) == len(said)
    for error, needle in zip(errors, said, strict=True):
        assert needle in error


def measured(metrics: dict[str, float], **extra: Any) -> StageMeasurement:
    return {"metrics": metrics, "samples": [], "not_evaluated": {}, "warnings": [], **extra}  # type: ignore[typeddict-item]


def entry(commit: str, stage_name: str, metrics: dict[str, float]) -> dict[str, Any]:
    return {"schema_version": 1, "created_at": "2026-11-01T00:00:00+00:00", "commit": commit, "branch": "main", "verdict": "pass",
            "fingerprints": {}, "stages": {stage_name: {"metrics": metrics}}}


@pytest.mark.parametrize("name", ["retrieval", "generation", "robustness"])
def test_every_stage_is_gated_the_same_way(name):
    """The same measurement and gates give the same decisions in every stage (min, max_drop against the baseline,
    trend against history): one function gates them all."""
    gates = {"m": {"min": 0.5, "max_drop": 0.05, "trend": {"window": 3, "max_drop": 0.05}}}
    history = [entry(f"c{i}", name, {"m": 0.9}) for i in range(3)]
    refs = CompareWith(baseline={"metrics": {"m": 0.9}}, history=history)
    result = gate_stage(name, measured({"m": 0.8}), gates, refs, {})
    (g,) = result["gates"]
    assert result["status"] == "fail" and g["status"] == "fail"
    assert [(c["kind"], c["status"]) for c in g["checks"]] == [("min", "pass"), ("max_drop", "fail"), ("trend", "fail")]
    assert "mean of last 3 runs" in next(c["detail"] for c in g["checks"] if c["kind"] == "trend")


def test_a_skipped_measurement_is_a_skipped_stage_with_its_reason_and_skipped_gates():
    result = gate_stage("generation", measured({}, skipped="no judge configured"), {"faithfulness": {"min": 0.5}},
                        CompareWith(), {})
    assert result["status"] == "skipped" and result["reason"] == "no judge configured"
    assert [g["status"] for g in result["gates"]] == ["skipped"]
    assert "skipped" not in result  # the measurement's field becomes the stage's reason


def test_gate_stage_copies_the_measurement_and_does_not_change_it():
    m = measured({"m": 0.8}, n=3)
    result = gate_stage("retrieval", m, {"m": {"min": 0.9}}, CompareWith(), {})
    assert result["n"] == 3 and result["metrics"] == {"m": 0.8} and result["status"] == "fail"
    result["warnings"].append("x")
    assert m["warnings"] == [] and "status" not in m


def test_the_fake_target_runs_the_whole_pipeline_without_a_server(tmp_path):
    """The fake target (gate/targets/fake.py) answers from a table: a stage test needs no server."""
    from gate.config.loader import load_spec
    from gate.run.ask import collect_outputs
    from gate.run.context import RunFacts
    from gate.run.evaluate import evaluate
    from gate.stages.context import StageContext
    from gate.stages.robustness import robustness_stage

    (tmp_path / "golden.jsonl").write_text(
        '{"id": "q1", "question": "Loan period?", "ground_truth": "21 days", "relevant_doc_ids": ["loans"]}\n'
        '{"id": "q2", "question": "Weather in Paris?", "type": "out_of_scope"}\n', encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text(
        "version: 1\ngolden_set: golden.jsonl\ntarget: {results: unused.jsonl}\n"
        "stages:\n  retrieval: {metrics: [hit_rate@1], gates: {hit_rate@1: {min: 1.0}}}\n"
        "  robustness:\n    noise: {distractors: 1, source: corpus}\n    gates: {rejection_rate: {min: 1.0}}\n", encoding="utf-8")
    spec = load_spec(tmp_path / "rag-eval.yml")
    cases = [GoldenCase("q1", "Loan period?", 1, "21 days", {"loans": 1}), GoldenCase("q2", "Weather in Paris?", 2, type="out_of_scope")]
    target = FakeTarget({
        "q1": {"retrieved": [{"id": "loans", "text": "Books are lent for 21 days."}], "answer": "21 days"},
        "q2": {"retrieved": [{"id": "fees", "text": "Late fees are 10 cents a day."}], "answer": "I don't know."},
    }, contexts_answer=lambda q, ctx: "21 days" if "21 days" in ctx[-1] else "unsure")
    outputs = collect_outputs(target, cases, 1)
    assert target.asked == ["q1", "q2"]
    from gate.judges.cache import NullCache

    assert spec.stages.robustness is not None
    rob = robustness_stage(spec.stages.robustness, StageContext(cases, outputs, NullCache()), target)
    report = evaluate(spec, cases, outputs, RunFacts(created_at="2026-11-30T00:00:00+00:00"), {"robustness": rob})
    assert report["verdict"] == "pass", report["errors"]
    assert report["stages"]["robustness"]["metrics"]["rejection_rate"] == 1.0
    assert report["stages"]["robustness"]["metrics"]["noise_robustness"] == 1.0  # the answer reads the last passage
    (noisy,) = [ctx for cid, ctx in target.answered_from if ctx[0] == "Late fees are 10 cents a day."]
    assert noisy == ["Late fees are 10 cents a day.", "Books are lent for 21 days."]  # the distractor went in front
