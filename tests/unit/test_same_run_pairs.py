"""Same-run paired judging, piece by piece: the gate rules on pairs (min_pairs, case_drop, NaN, direction), the
generation stage pairing a run with a reference run (real offline engine, real SQLite cache), and the history
keeping each answer and passage once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gate.core.catalog import higher_is_better
from gate.core.compare import same_run_comparison
from gate.core.gates import Comparison, Gated, decide
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.pairs import judge_change, paired_run, text_id
from gate.core.records import compact_texts, entry_from_report, text_table
from gate.core.stats import drop_test, paired_bootstrap
from gate.core.textmatch import token_f1
from gate.io.reports import appended_history, parse_history
from gate.judges import JudgeInput, JudgeSettings
from gate.judges.cache import JudgeCache
from gate.stages.context import StageContext
from gate.stages.generation import generation_stage
from tests.support import settings

# ------------------------------------------------------------------------------------------ the gate on pairs


def pairing(metric: str, n: int, changed: list[tuple[str, float | None, float | None]], confirmed: dict | None = None) -> dict:
    cases = []
    for cid, ref, cur in changed:
        case = {"id": cid, "reference": ref, "current": cur}
        if ref is None or cur is None:
            case["error"] = "judge timed out"
        if confirmed and cid in confirmed:
            case["confirmed"] = confirmed[cid]
        cases.append(case)
    return {"against": "baseline", "label": "the baseline (test)", "commit": None, "created_at": None, "method": "same run",
            "added": [], "removed": [], "judgings": 2 * len(changed),
            "metrics": {metric: {"pairs": n, "changed": len(changed), "errored": sum(1 for c in cases if "error" in c),
                                 "cases": cases}}}


def decided(gate: dict, value: float, p: dict, metric: str = "faithfulness"):
    return decide(Gated("generation", metric, higher_is_better(metric)), gate, value, same_run_comparison(p, metric, value))


def check(decision, kind: str):
    return next(c for c in decision.checks if c.kind == kind)


def test_one_changed_case_is_insufficient_evidence_not_a_fail():
    # the old rule: one case decides, p = 0.0005
    assert paired_bootstrap([0.9], [0.85]).p_value < 0.001
    d = decided({"max_drop": 0.03}, 0.85, pairing("faithfulness", 1, [("q1", 0.9, 0.85)]))
    c = check(d, "max_drop")
    assert c.status == "skipped" and c.detail.startswith("insufficient evidence: 1 changed pair(s)") and "min_pairs 10" in c.detail
    assert d.status == "skipped"


def test_four_cases_falling_hard_among_many_are_caught_by_case_drop_only():
    changed = [(f"q{i}", 0.9, 0.3) for i in range(4)]
    p = pairing("faithfulness", 150, changed, confirmed={f"q{i}": [0.9, 0.31] for i in range(4)})
    d = decided({"max_drop": 0.03, "case_drop": 0.5}, 0.86, p)
    assert check(d, "max_drop").status == "skipped"  # 4 changed pairs < min_pairs: no mean-drop verdict either way
    c = check(d, "case_drop")
    assert c.status == "fail" and "4 case(s) fell more than 0.5" in c.detail and "both sides judged twice" in c.detail
    assert d.status == "fail" and d.method == "same-run pairs"
    # the confirming judging undid it: a one-off judge wobble does not fail the gate
    calm = pairing("faithfulness", 150, changed, confirmed={f"q{i}": [0.9, 0.7] for i in range(4)})
    assert check(decided({"case_drop": 0.5}, 0.86, calm), "case_drop").status == "pass"
    # a drop above the limit that could not be confirmed is an error, never a pass
    unconfirmed = pairing("faithfulness", 150, changed)
    assert check(decided({"case_drop": 0.5}, 0.86, unconfirmed), "case_drop").status == "error"


def test_min_pairs_can_be_lowered_and_counts_judged_pairs_only():
    changed = [(f"q{i}", 0.9, 0.5) for i in range(3)] + [("q9", None, 0.5)]
    d = decided({"max_drop": 0.03, "min_pairs": 3}, 0.5, pairing("faithfulness", 4, changed))
    c = check(d, "max_drop")
    assert c.status == "fail" and "3 changed" in c.detail and "1 changed pair(s) could not be judged" in c.detail
    d = decided({"max_drop": 0.03, "min_pairs": 4}, 0.5, pairing("faithfulness", 4, changed))
    assert check(d, "max_drop").status == "skipped"  # the errored pair is no evidence


def test_no_changed_answer_passes_with_the_reason():
    d = decided({"max_drop": 0.03}, 0.8, pairing("faithfulness", 40, []))
    assert d.status == "pass" and "no judged answer changed since the baseline (test) (40 pairs)" in check(d, "max_drop").detail


def test_a_real_drop_on_every_case_fails_with_the_evidence():
    changed = [(f"q{i:02d}", 0.9, 0.9 - 0.06 + 0.01 * ((i % 5) - 2)) for i in range(40)]
    d = decided({"max_drop": 0.03}, 0.84, pairing("faithfulness", 40, changed))
    c = check(d, "max_drop")
    assert c.status == "fail" and "40 changed, both sides judged in this run" in c.detail and "significant at 0.99" in c.detail
    assert "smallest detectable drop" in c.detail
    assert d.delta == pytest.approx(-0.06, abs=1e-9) and d.baseline == pytest.approx(0.90, abs=1e-9)  # the baseline as judged today


def test_lower_is_better_fails_on_a_rise_and_passes_on_a_fall():
    metric = "noise_sensitivity_relevant"
    rise = [(f"q{i}", 0.10, 0.20) for i in range(12)]
    d = decided({"max_drop": 0.03}, 0.2, pairing(metric, 12, rise), metric)
    assert d.status == "fail" and "mean per-case rise 0.1" in check(d, "max_drop").detail
    fall = [(f"q{i}", 0.20, 0.10) for i in range(12)]
    assert decided({"max_drop": 0.03}, 0.1, pairing(metric, 12, fall), metric).status == "pass"
    # case_drop reads the direction too
    d = decided({"case_drop": 0.05}, 0.2, pairing(metric, 12, rise, confirmed={"q0": [0.1, 0.2]}), metric)
    assert check(d, "case_drop").status == "fail"


@pytest.mark.parametrize("where", ["value", "reference"])
def test_nan_is_an_error_never_a_pass(where):
    if where == "value":
        d = decide(Gated("generation", "faithfulness"), {"max_drop": 0.03}, math.nan, Comparison(0.9))
    else:
        d = decide(Gated("generation", "faithfulness"), {"trend": {"max_drop": 0.03}}, 0.9, None, trend=Comparison(math.nan, runs=3))
    assert d.status == "error"  # before: "drop nan (within 0.03)", a pass
    with pytest.raises(ValueError):
        drop_test([0.1, math.nan])


# ------------------------------------------------------------------------------------------ the stage, paired


def case(i: int, question: str | None = None) -> GoldenCase:
    return GoldenCase(id=f"q{i}", question=question or f"How long is loan {i}?", line=i + 1, ground_truth=f"loan {i} lasts {i} days")


def answered(i: int, answer: str) -> TargetOutput:
    return TargetOutput(case_id=f"q{i}", retrieved=[RetrievedDoc(f"d{i}", text=f"Loan {i} lasts {i} days.")], answer=answer)


class WordJudge:
    """An LLM judge's place taken by words: answer_correctness as the token F1 of the answer and the ground truth.
    Pairing is for a judge's scores (an offline metric is compared as it is stored), so the stage needs a judged
    metric; this one is deterministic, so each pair's figures are known exactly."""

    name, version = "ragas", "word-judge"

    def metrics(self) -> set[str]:
        return {"answer_correctness"}

    def needs(self, metric: str) -> set[str]:
        return {"ground_truth"}

    def prompt_fingerprint(self, metric: str) -> str:
        return "token f1"

    async def score(self, metric: str, item: JudgeInput) -> float:
        return token_f1(item.answer, item.ground_truth or "")

    def kept_steps(self, criterion: str) -> list[str] | None:
        return None

    async def aclose(self) -> None:
        return None


JUDGE = JudgeSettings(base_url="http://127.0.0.1:9/v1", model="word-judge-2026-01-01")
CFG = settings.generation(["answer_correctness"], gates={"answer_correctness": {"max_drop": 0.03, "case_drop": 0.5}})


def context(cases: list[GoldenCase], outputs: dict[str, TargetOutput], cache: JudgeCache) -> StageContext:
    return StageContext(cases, outputs, cache, judge=JUDGE, engines=lambda names, *_: ({"ragas": WordJudge()}, None))


def baseline_doc(cases: list[GoldenCase], outputs: dict[str, TargetOutput], tmp_path: Path) -> dict:
    """A baseline written the way `rag-gate baseline update` writes it, from a real stage measurement."""
    with JudgeCache(tmp_path / "base.sqlite") as cache:
        stage = generation_stage(CFG, context(cases, outputs, cache))
    report = {"run": {"created_at": "2026-11-01T00:00:00+00:00", "commit": "b" * 40}, "verdict": "pass", "fingerprints": {},
              "stages": {"generation": {**stage, "status": "pass", "gates": []}}, "texts": stage["texts"]}
    return entry_from_report(report)  # type: ignore[arg-type]


def test_the_stage_pairs_on_shared_ids_and_lists_added_and_removed_cases(tmp_path):
    base_cases = [case(i) for i in range(5)]
    base_out = {f"q{i}": answered(i, f"Loan {i} lasts {i} days.") for i in range(5)}
    doc = baseline_doc(base_cases, base_out, tmp_path)
    ref = paired_run("baseline", "the baseline", doc, "generation", text_table(doc))
    assert ref is not None and set(ref.outputs) == {f"q{i}" for i in range(5)}
    # the PR: q0 removed from the golden set, q5 added, q1 answered worse, q2 reworded, q3 and q4 unchanged
    cases = [case(i) for i in range(1, 6)]
    outputs = {f"q{i}": answered(i, f"Loan {i} lasts {i} days.") for i in range(1, 6)}
    outputs["q1"] = answered(1, "No idea.")
    outputs["q2"] = answered(2, f"It lasts {2} days, loan {2}.")
    with JudgeCache(tmp_path / "pr.sqlite") as cache:
        stage = generation_stage(CFG, context(cases, outputs, cache), [ref])
    p = stage["pairing"]["baseline"]
    assert p["method"] == "same run" and p["added"] == ["q5"] and p["removed"] == ["q0"]
    pairs = p["metrics"]["answer_correctness"]
    assert (pairs["pairs"], pairs["changed"], pairs["errored"]) == (4, 2, 0)  # q1..q4 shared; q1 and q2 changed
    by_id = {c["id"]: c for c in pairs["cases"]}
    assert set(by_id) == {"q1", "q2"} and by_id["q1"]["reference"] == 1.0 and by_id["q1"]["current"] == 0.0
    assert by_id["q1"]["confirmed"] == [1.0, 0.0]  # above case_drop 0.5: judged twice on both sides
    assert "confirmed" not in by_id["q2"]
    assert {s["id"]: s["output"]["answer"] for s in stage["samples"]}["q1"] == text_id("No idea.")


def test_a_reference_without_answers_falls_back_on_its_stored_scores_and_says_so(tmp_path):
    cases = [case(i) for i in range(3)]
    outputs = {f"q{i}": answered(i, f"Loan {i} lasts {i} days.") for i in range(3)}
    doc = baseline_doc(cases, outputs, tmp_path)
    for s in doc["stages"]["generation"]["samples"]:
        del s["output"]  # as an older rag-gate wrote it
    doc.pop("texts")
    ref = paired_run("baseline", "the baseline", doc, "generation", {})
    assert ref is not None and not ref.outputs and ref.scores["q0"]["answer_correctness"] == 1.0
    with JudgeCache(tmp_path / "pr.sqlite") as cache:
        stage = generation_stage(CFG, context(cases, outputs, cache), [ref])
    p = stage["pairing"]["baseline"]
    assert p["method"] == "stored scores" and p["metrics"] == {} and "kept no answers" in p["note"]


# ------------------------------------------------------------------------------------------ history: texts once


def entry(n: int, answers: dict[str, str]) -> dict:
    texts = {text_id(a): a for a in answers.values()}
    samples = [{"id": cid, "metrics": {"faithfulness": 0.9}, "output": {"answer": text_id(a), "contexts": []}} for cid, a in answers.items()]
    return {"schema_version": 1, "created_at": f"2026-11-{n:02d}T00:00:00+00:00", "commit": f"{n:040x}", "branch": "main",
            "verdict": "pass", "fingerprints": {}, "stages": {"generation": {"metrics": {"faithfulness": 0.9}, "samples": samples}},
            "texts": texts}


def test_each_text_is_kept_once_by_the_oldest_entry_and_moves_when_it_is_dropped():
    text = ""
    for n in range(1, 5):  # q1's answer never changes; q2's changes every run
        text = appended_history(text, entry(n, {"q1": "Loans last 21 days.", "q2": f"Answer {n}."}), max_entries=3)
    lines = text.splitlines()
    assert len(lines) == 3  # entries 2, 3, 4
    kept = [json.loads(ln) for ln in lines]
    assert kept[0]["texts"] == {text_id("Loans last 21 days."): "Loans last 21 days.", text_id("Answer 2."): "Answer 2."}
    assert kept[1]["texts"] == {text_id("Answer 3."): "Answer 3."} and kept[2]["texts"] == {text_id("Answer 4."): "Answer 4."}
    warnings: list[str] = []
    entries = parse_history(text, "history.jsonl", warnings)
    table = text_table(*entries)
    assert warnings == [] and all(ref.outputs["q1"].answer == "Loans last 21 days."
                                  for e in entries if (ref := paired_run("trend:7", "x", e, "generation", table)))
    # the moved text made the first kept line change; the others are kept byte for byte on the next append
    again = appended_history(text + "this line is not JSON\n", entry(5, {"q1": "Loans last 21 days."}), max_entries=10)
    assert again.splitlines()[:3] == lines and "this line is not JSON" in again


def test_compact_texts_drops_texts_no_entry_refers_to():
    a, b = entry(1, {"q1": "one"}), entry(2, {"q1": "two"})
    b["stages"]["generation"]["samples"] = []  # b refers to nothing
    out = compact_texts([a, b], text_table(a, b))
    assert out[0]["texts"] == {text_id("one"): "one"} and "texts" not in out[1]


def test_judge_change_says_what_changed():
    before = {"model": "m-2024-01-01", "temperature": 0.0, "engines": {"ragas": "0.4.2"}, "prompts": {"faithfulness": "a"}}
    now = {"model": "m-2024-01-01", "temperature": 0.0, "engines": {"ragas": "0.4.3"}, "prompts": {"faithfulness": "b"}}
    assert judge_change(before, now) == "ragas 0.4.2 → 0.4.3; prompt of faithfulness"
    assert judge_change(before, before) is None and judge_change(None, now) is None
