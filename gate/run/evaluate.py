"""From what a run measured to its report. Pure: the retrieval stage is measured here (it needs no I/O), the judged
stages come measured; every stage is gated the same way (gate.core.verdict.gate_stage) against what it is compared
with (the baseline's stage, the history entries measured the same way)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter

from gate import __version__
from gate.config.spec import Spec
from gate.core.cases import fingerprint as golden_fingerprint
from gate.core.cases import groups
from gate.core.changes import changes, stored_facts
from gate.core.changes import facts as run_facts_of
from gate.core.diagnosis import diagnosis_info
from gate.core.digest import digest_json
from gate.core.errors import EXIT_CODES
from gate.core.goldencheck import question_type
from gate.core.model import GoldenCase, TargetOutput
from gate.core.records import history_summary, mismatched
from gate.core.report import (
    SCHEMA_VERSION,
    BaselineInfo,
    CaseOutput,
    GoldenSetInfo,
    JudgeInfo,
    Report,
    RunInfo,
    StageMeasurement,
    StageResult,
    TargetInfo,
)
from gate.core.verdict import CompareWith, decide_verdict, gate_stage, run_errors, trap_warning
from gate.run.context import RunFacts
from gate.stages.retrieval import health_stage, retrieval_stage, stale_labels

Groups = Mapping[str, Mapping[str, Sequence[str]]]  # by -> group -> case ids
_ID = attrgetter("id")


def case_rows(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> list[CaseOutput]:
    """report["cases"]: each case's id and type, and what the target returned for it (the ids it retrieved)."""
    return [{"id": c.id, "type": c.type, "retrieved": list(map(_ID, o.retrieved)), "answer": o.answer, "latency_ms": o.latency_ms,
             "error": o.error}
            for c in cases for o in [outputs[c.id]]]  # (one output a case: a name, not a loop)


try:  # the same rows, built in C where gate.core._native is built
    from gate.core._native import report_cases as _case_rows
except ImportError:
    _case_rows = case_rows


def with_judge(fingerprint: str, judge: JudgeInfo) -> str:
    """A judged stage's fingerprint with the judge that measured it: engine versions and prompt fingerprints."""
    return digest_json([fingerprint, judge.get("engines", {}), judge.get("prompts", {})])


def skipped(reason: str) -> StageMeasurement:
    return {"skipped": reason, "metrics": {}, "samples": [], "not_evaluated": {}, "warnings": []}


def gate_stages(spec: Spec, measured: Mapping[str, StageMeasurement], facts: RunFacts, fingerprints: dict[str, str],
                questions: Mapping[str, str], case_groups: Groups | None = None) -> dict[str, StageResult]:
    """Every stage gated the same way, against the baseline's stage and the history entries measured the same way."""
    baseline = facts.baseline
    stages: dict[str, StageResult] = {}
    for name, stage in measured.items():
        differs = baseline is not None and bool(mismatched(baseline, fingerprints, name))
        # the stored-scores comparison needs runs measured the same way; same-run pairs do not (gate.core.pairs)
        history = [e for e in facts.history if not mismatched(e, fingerprints, name)]
        if spec.traces is not None:  # a traces window is compared with the windows before it, not the committed baseline
            history = [e for e in facts.history if e["fingerprints"].get("golden_set") == fingerprints["golden_set"]]
            baseline, differs = (history[-1] if history else None), False
        against = CompareWith(
            baseline=baseline["stages"].get(name) if baseline else None,
            history=history,
            mismatch_policy=spec.data["baseline"]["on_mismatch"] if differs else None,
            retrieval=stages.get("retrieval"),
            groups=case_groups,
        )
        stages[name] = gate_stage(name, stage, spec.stages.gates(name), against, questions)
    return stages


def measure_all(spec: Spec, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], case_groups: dict[str, dict[str, list[str]]],
                judged: Mapping[str, StageMeasurement] | None) -> dict[str, StageMeasurement]:
    """The retrieval stage measured (or why not), then the judged stages as they came."""
    measured: dict[str, StageMeasurement] = {"retrieval": skipped("not configured in the spec")}
    if spec.traces is not None:  # no relevance labels: the health of the production calls
        measured["retrieval"] = health_stage(cases, outputs, spec.stages.gates("retrieval") if spec.stages.retrieval else {})
    elif spec.stages.retrieval:
        measured["retrieval"] = retrieval_stage(spec.stages.retrieval, cases, outputs, case_groups, spec.cutoff)
    measured.update(judged or {})
    return measured


def evaluate(spec: Spec, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], facts: RunFacts,
             judged: Mapping[str, StageMeasurement] | None = None, golden_print: str | None = None) -> Report:
    """The report for one run. ``judged`` holds the judged stages already measured (generation, robustness);
    ``golden_print``: the fingerprint of ``cases``, where it was made already (gate.run.load)."""
    if spec.traces is not None:  # a traces run (gate.run.traces): imported by it alone
        from gate.run.traces import traces_fingerprint

        fingerprints = spec.fingerprints(traces_fingerprint(spec))
    else:
        fingerprints = spec.fingerprints(golden_print or golden_fingerprint(cases))
    case_groups = groups(cases)
    measured = measure_all(spec, cases, outputs, case_groups, judged)
    texts: dict[str, str] = {}
    for name, stage in measured.items():
        texts.update(stage.get("texts", {}))
        if name in fingerprints and "judge" in stage:  # the judge's engines and prompts are part of how a stage measures
            fingerprints[name] = with_judge(fingerprints[name], stage["judge"])
    gated_by_type = any(g.get("by") == "question_type" for name in measured for g in spec.stages.gates(name).values())
    by_groups = {**case_groups, "question_type": question_groups(cases, spec)} if gated_by_type else case_groups
    stages = gate_stages(spec, measured, facts, fingerprints, {c.id: c.question for c in cases}, by_groups)
    trust = calibrated(stages, facts)
    errors, warnings = run_problems(spec, cases, outputs, stages, facts)
    warnings += trust
    verdict = decide_verdict((s["status"] for s in stages.values()), errors)
    report: Report = {
        "schema_version": SCHEMA_VERSION, "verdict": verdict, "exit_code": EXIT_CODES[verdict], "errors": errors,
        "warnings": warnings + list(facts.warnings), "tool": {"name": "rag-gate", "version": __version__},
        "run": run_info(spec, facts), "fingerprints": fingerprints, "golden_set": golden_set_info(spec, cases, case_groups),
        "target": target_info(spec, cases, outputs, facts), "baseline": baseline_info(spec, facts, fingerprints), "stages": stages,
        "cases": _case_rows(cases, outputs),
        "history": history_summary(facts.history),
    }
    if texts:
        report["texts"] = texts
    if facts.traces is not None:
        report["traces"] = facts.traces
    with_changes(report, facts)
    found = diagnosis_info(stages, facts.baseline["stages"] if facts.baseline else None, facts.corpus_ids, spec.cutoff)
    if found is not None:
        report["diagnosis"] = found
        codes = {c["id"]: c["code"] for c in found["cases"]}
        for gated in stages.values():  # each worse case's row says its code: a reader needs no join by id
            for w in gated.get("worse_cases", []):
                if w["id"] in codes:
                    w["diagnosis"] = codes[w["id"]]
    return report


def run_problems(spec: Spec, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], stages: dict[str, StageResult],
                 facts: RunFacts) -> tuple[list[str], list[str]]:
    """(why the run could not be completed, the warnings it has): the faithfulness-recall trap, the error rates, stale
    relevance labels (said first: every retrieval gate reads the same labels), the deadline."""
    warnings: list[str] = []
    trap = trap_warning(stages, facts.baseline, facts.history)
    if trap:
        warnings.append(trap)
        stages["generation"]["warnings"].append(trap)
    # a trace's failure happened in production: the health metric error_rate counts it, the run itself did not fail
    failed = [o.error for o in outputs.values() if o.error is not None] if spec.traces is None else []
    errors = run_errors(stages, len(cases), failed, float(spec.data["max_error_rate"]))
    retrieval = spec.stages.retrieval
    stale = stale_labels(cases, outputs, retrieval.match, spec.cutoff) if retrieval and spec.traces is None else None
    if stale and retrieval and retrieval.on_stale_labels == "error":
        errors.insert(0, stale)
    elif stale:
        warnings.insert(0, stale)
    if facts.deadline_note:
        errors.append(facts.deadline_note)
    return errors, warnings


def golden_set_info(spec: Spec, cases: Sequence[GoldenCase], case_groups: Groups) -> GoldenSetInfo:
    info: GoldenSetInfo = {
        "path": facts_path(spec),
        "n": len(cases),
        "by_type": {t: len(ids) for t, ids in case_groups["type"].items()},
        "by_category": {t: len(ids) for t, ids in case_groups["category"].items()},
        "by_tag": {t: len(ids) for t, ids in case_groups["tag"].items()},
    }
    if any(c.question_type for c in cases):
        info["by_question_type"] = question_mix(cases, spec)
    return info


def facts_path(spec: Spec) -> str:
    """The golden set's path; a traces run's trace file (its cases are the sampled traces)."""
    return str(spec.resolve(spec.traces["path"])) if spec.traces is not None else str(spec.golden_set_path)


def target_info(spec: Spec, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], facts: RunFacts) -> TargetInfo:
    failed = sum(1 for o in outputs.values() if o.error is not None)
    return {"kind": facts.target_kind, "k": spec.target_k, "calls": len(cases), "errors": failed,
            "error_rate": failed / len(cases) if cases else 0.0, "max_error_rate": float(spec.data["max_error_rate"]),
            "notes": list(facts.target_notes)}


def question_groups(cases: Sequence[GoldenCase], spec: Spec) -> dict[str, list[str]]:
    """Case ids by question type (its own, else derived: gate.core.goldencheck.question_type)."""
    to_doc = spec.stages.match.to_id()
    out: dict[str, list[str]] = {}
    for c in cases:
        out.setdefault(question_type(c, to_doc), []).append(c.id)
    return out


def question_mix(cases: Sequence[GoldenCase], spec: Spec) -> dict[str, int]:
    """Cases by question type, most frequent first."""
    counts = {kind: len(ids) for kind, ids in question_groups(cases, spec).items()}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def run_info(spec: Spec, facts: RunFacts) -> RunInfo:
    run: RunInfo = {
        "created_at": facts.created_at,
        "config": str(spec.path),
        "commit": facts.commit,
        "duration_s": None if facts.duration_s is None else round(facts.duration_s, 3),
        "comment_id": spec.data["report"]["comment_id"],
        "max_cases": spec.data["report"]["max_cases"],
    }
    if facts.pull_request is not None:
        run["pr"], run["head_sha"] = facts.pull_request
    if facts.run_url:
        run["url"] = facts.run_url
    if facts.system is not None:
        run["system"] = facts.system
    if facts.kind:
        run["kind"] = facts.kind
    return run


def calibrated(stages: dict[str, StageResult], facts: RunFacts) -> list[str]:
    """Each judged stage's calibration against people's labels (judge.calibration), and the warnings it gives."""
    if facts.calibration is None:
        return []
    from gate.core.calibration import apply_calibration  # judge.calibration's run only

    settings, doc = facts.calibration
    return [w for stage in stages.values() for w in apply_calibration(stage, doc, settings, facts.created_at)]


def with_changes(report: Report, facts: RunFacts) -> None:
    """``changes``: what differs between the reference run (``facts.changes_from``) and this one."""
    if facts.changes_from is None:
        return
    reference, source = facts.changes_from
    now = run_facts_of(report["fingerprints"], report["stages"], commit=report["run"]["commit"],
                       tool_version=__version__, system=report["run"].get("system"))
    report["changes"] = changes(stored_facts(reference), now)
    report["changes_from"] = {"source": source, "created_at": reference.get("created_at"), "commit": reference.get("commit")}


def baseline_info(spec: Spec, facts: RunFacts, fingerprints: dict[str, str]) -> BaselineInfo:
    baseline = facts.baseline
    return {
        "path": str(spec.baseline_path),
        "found": baseline is not None,
        "created_at": baseline["created_at"] if baseline else None,
        "commit": baseline["commit"] if baseline else None,
        "fingerprints": baseline["fingerprints"] if baseline else None,
        "mismatch": mismatched(baseline, fingerprints) if baseline else [],
        "on_mismatch": spec.data["baseline"]["on_mismatch"],
        "source": facts.baseline_source if baseline else None,
    }
