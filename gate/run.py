"""One run, as data flows: spec -> golden set -> target outputs -> stages -> gates -> report.

``evaluate`` is the pure core (outputs, baseline and spec in, report dict out);
``collect_outputs`` asks the target once per case; ``run`` ties them together.
"""

from __future__ import annotations

import gc
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from gate import __version__
from gate.baseline import load_baseline, mismatched
from gate.compare import recall_trap
from gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS
from gate.gates import GateDecision, decide, stage_status
from gate.golden import fingerprint as golden_fingerprint
from gate.golden import groups, load_golden_set
from gate.history import HistoryStore, LocalHistoryStore, window
from gate.judged import finish_judged_stage
from gate.metrics import HEALTH_METRICS, higher_is_better
from gate.model import GoldenCase, TargetOutput
from gate.retrieval import retrieval_stage
from gate.spec import Spec, load_spec
from gate.targets import Target, make_target

SCHEMA_VERSION = 1
LATER_STAGES: dict[str, str] = {}  # stages a spec may name that this version cannot run yet


def collect_outputs(
    target: Target, cases: Sequence[GoldenCase], k: int, on_done: Callable[[TargetOutput], None] | None = None
) -> dict[str, TargetOutput]:
    """Ask the target once per case (``target.concurrency`` at a time). Never raises per case."""

    def ask(case: GoldenCase) -> TargetOutput:
        try:
            out = target.ask(case, k)
        except Exception as exc:  # a bug in a target must not lose the other cases
            out = TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}")
        if on_done:
            on_done(out)
        return out

    if target.concurrency <= 1 or len(cases) <= 1:
        return {c.id: ask(c) for c in cases}
    with ThreadPoolExecutor(max_workers=min(target.concurrency, len(cases)), thread_name_prefix="rag-gate-target") as pool:
        return {out.case_id: out for out in pool.map(ask, cases)}


def _reference_k(spec: Spec) -> int:
    ks = [m.k for m in spec.retrieval_metrics() if m.k]
    return min(ks) if ks else spec.target_k


def worse_cases(
    stage: dict[str, Any], base_stage: dict[str, Any], by_id: dict[str, GoldenCase], k_ref: int
) -> list[dict[str, Any]]:
    """Cases whose per-case metrics fell against the baseline, worst first, with the relevant ids that lost rank."""
    base_samples = base_stage.get("samples", {})
    rows = []
    for s in stage["samples"]:
        base = base_samples.get(s["id"])
        if s["error"] is not None or base is None:
            continue
        drops = {
            name: [base["metrics"][name], v]
            for name, v in s["metrics"].items()
            if name in base.get("metrics", {}) and v < base["metrics"][name] - 1e-12
        }
        lost = []
        for rid, rank in s.get("relevant_ranks", {}).items():
            before = base.get("relevant_ranks", {}).get(rid)
            if before is not None and (rank is None or rank > before):
                lost.append({"id": rid, "from": before, "to": rank, "left_top_k": before <= k_ref and (rank is None or rank > k_ref)})
        if drops or any(x["left_top_k"] for x in lost):
            size = sum(b - v for b, v in drops.values())
            rows.append({"id": s["id"], "question": by_id[s["id"]].question, "drops": drops, "lost": lost, "_size": size})
    rows.sort(key=lambda r: (-r["_size"], r["id"]))
    for r in rows:
        del r["_size"]
    return rows


def _gates(
    stage_name: str, stage: dict[str, Any], gates: dict[str, Any], base_stage: dict[str, Any] | None, policy: str | None
) -> list[GateDecision]:
    base_metrics = (base_stage or {}).get("metrics", {})
    return [
        decide(stage_name, metric, gate, stage["metrics"].get(metric), base_metrics.get(metric), higher_is_better(metric), policy)
        for metric, gate in gates.items()
    ]


def evaluate(
    spec: Spec,
    cases: Sequence[GoldenCase],
    outputs: dict[str, TargetOutput],
    baseline: dict[str, Any] | None,
    *,
    target_kind: str,
    target_notes: Sequence[str] = (),
    duration_s: float | None = None,
    judged: Mapping[str, dict[str, Any]] | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report for one run. Pure: no I/O.

    ``judged`` holds the judge stages already run (generation, robustness), without gates;
    ``history`` the usable history entries, oldest first.
    """
    fingerprints = spec.fingerprints(golden_fingerprint(cases))
    mismatch = mismatched(baseline, fingerprints) if baseline else []

    def policy_for(stage: str) -> str | None:
        return spec.data["baseline"]["on_mismatch"] if baseline and mismatched(baseline, fingerprints, stage) else None

    by_id = {c.id: c for c in cases}
    case_groups = groups(cases)

    stages: dict[str, Any] = {}
    cfg = spec.retrieval
    if cfg:
        stage = retrieval_stage(cases, outputs, spec.retrieval_metrics(), cfg.get("match", {}), case_groups)
        base_stage = (baseline or {}).get("stages", {}).get("retrieval")
        decisions = _gates("retrieval", stage, cfg.get("gates", {}), base_stage, policy_for("retrieval"))
        stage["gates"] = [d.to_dict() for d in decisions]
        stage["status"] = stage_status(decisions)
        stage["baseline_metrics"] = {m: v for m, v in (base_stage or {}).get("metrics", {}).items() if m in stage["metrics"]}
        stage["worse_cases"] = worse_cases(stage, base_stage, by_id, _reference_k(spec)) if base_stage else []
        stage["reference_k"] = _reference_k(spec)
        stages["retrieval"] = {"status": stage.pop("status"), **stage}
    else:
        stages["retrieval"] = {"status": "skipped", "reason": "not configured in the spec", "metrics": {}, "gates": [], "samples": []}
    questions = {c.id: c.question for c in cases}
    warnings: list[str] = []
    for name, stage in (judged or {}).items():
        base_stage = (baseline or {}).get("stages", {}).get(name)
        gates_cfg = spec.data["stages"].get(name, {}).get("gates", {})
        same = [e for e in history if e.get("fingerprints", {}).get(name) == fingerprints.get(name)]
        stages[name] = finish_judged_stage(name, stage, gates_cfg, base_stage, same, policy_for(name), stages.get("retrieval"), questions)
    for name, reason in LATER_STAGES.items():
        if name in spec.data["stages"] and name not in stages:
            stages[name] = {"status": "skipped", "reason": reason, "metrics": {}, "gates": [], "samples": []}
    trap = _trap(stages, baseline, history)
    if trap:
        warnings.append(trap)
        stages["generation"].setdefault("warnings", []).append(trap)

    calls = len(cases)
    errors = sum(1 for o in outputs.values() if o.error is not None)
    error_rate = errors / calls if calls else 0.0
    max_error_rate = float(spec.data["max_error_rate"])
    run_errors = []
    if error_rate > max_error_rate + 1e-12:
        reasons = Counter(o.error for o in outputs.values() if o.error is not None)
        top, count = reasons.most_common(1)[0]
        run_errors.append(
            f"{errors} of {calls} target calls failed (error rate {error_rate:.1%}, above max_error_rate {max_error_rate:.1%}); "
            f"most common: {top} ({count} case{'s' if count != 1 else ''})"
        )
    for name, stage in stages.items():
        if stage["status"] == "error":
            run_errors.append(f"stage {name}: a gated metric could not be computed")
        scores = stage.get("scores")
        if scores and scores["error_rate"] > max_error_rate + 1e-12:
            run_errors.append(
                f"stage {name}: {scores['errored']} of {scores['attempted']} judge scores could not be computed "
                f"(error rate {scores['error_rate']:.1%}, above max_error_rate {max_error_rate:.1%})"
            )
        if stage.get("budget_exceeded"):
            run_errors.append(f"stage {name}: judge.max_judge_calls was reached; the remaining scores were not computed")
    statuses = {s["status"] for s in stages.values()}
    verdict = "error" if run_errors else "fail" if "fail" in statuses else "pass"

    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": verdict,
        "exit_code": {"pass": EXIT_PASS, "fail": EXIT_FAIL, "error": EXIT_ERROR}[verdict],
        "errors": run_errors,
        "warnings": warnings,
        "tool": {"name": "rag-gate", "version": __version__},
        "run": {
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "config": str(spec.path),
            "commit": os.environ.get("GITHUB_SHA"),
            "duration_s": None if duration_s is None else round(duration_s, 3),
            "comment_id": spec.data["report"]["comment_id"],
            "max_cases": spec.data["report"]["max_cases"],
        },
        "fingerprints": fingerprints,
        "golden_set": {
            "path": str(spec.golden_set_path),
            "n": len(cases),
            "by_type": {t: len(ids) for t, ids in case_groups["type"].items()},
            "by_category": {t: len(ids) for t, ids in case_groups["category"].items()},
            "by_tag": {t: len(ids) for t, ids in case_groups["tag"].items()},
        },
        "target": {"kind": target_kind, "k": spec.target_k, "calls": calls, "errors": errors,
                   "error_rate": error_rate, "max_error_rate": max_error_rate, "notes": list(target_notes)},
        "baseline": {
            "path": str(spec.baseline_path),
            "found": baseline is not None,
            "created_at": (baseline or {}).get("created_at"),
            "commit": (baseline or {}).get("commit"),
            "fingerprints": (baseline or {}).get("fingerprints"),
            "mismatch": mismatch,
            "on_mismatch": spec.data["baseline"]["on_mismatch"],
        },
        "stages": stages,
        "cases": [
            {"id": c.id, "type": c.type, "retrieved": [d.id for d in outputs[c.id].retrieved],
             "answer": outputs[c.id].answer, "latency_ms": outputs[c.id].latency_ms, "error": outputs[c.id].error}
            for c in cases
        ],
    }


def _trap(stages: Mapping[str, Any], baseline: Mapping[str, Any] | None, history: Sequence[Mapping[str, Any]]) -> str | None:
    """The faithfulness-recall trap against the baseline, else against the last history entry."""
    if "generation" not in stages or stages["generation"]["status"] == "skipped":
        return None
    ref_stages = (baseline or {}).get("stages") or (history[-1].get("stages") if history else None)
    if not ref_stages:
        return None
    return recall_trap(stages, {n: s.get("metrics", {}) for n, s in ref_stages.items()})


BaselineChooser = Callable[[list[dict[str, Any]]], tuple[dict[str, Any] | None, str] | None]


def run(config: str, *, on_start: Callable[[int, str], None] | None = None,
        on_done: Callable[[TargetOutput], None] | None = None, use_cache: bool = True,
        history_store: HistoryStore | None = None, choose_baseline: BaselineChooser | None = None) -> dict[str, Any]:
    """Load, ask, judge, evaluate. Raises InputError (exit 2) for bad input; everything else is in the report.

    ``history_store`` replaces the spec's local history file (the action passes the repository-backed
    store; it keeps the spec's history.max_entries); ``choose_baseline(entries)`` may pick the baseline from the history (the entry of the PR's
    base commit) and say which, or return None to use the committed baseline file.
    """
    started = time.perf_counter()
    spec = load_spec(config)
    with gc_paused():  # millions of small, acyclic JSON objects: the cyclic GC would only rescan them
        cases = load_golden_set(spec.golden_set_path)
        store = history_store or LocalHistoryStore(spec.history_path, int(spec.data["history"]["max_entries"]))
        if history_store is not None and hasattr(history_store, "max_entries"):
            history_store.max_entries = int(spec.data["history"]["max_entries"])
        entries = store.read()
        baseline, baseline_source = load_baseline(spec.baseline_path), "the committed baseline file"
        chosen = choose_baseline(entries) if choose_baseline else None
        if chosen is not None and chosen[0] is not None:
            baseline, baseline_source = chosen
        elif chosen is not None:
            baseline_source = f"{chosen[1]}; the committed baseline file" if baseline else chosen[1]
        target = make_target(spec, cases)
        try:
            if on_start:
                on_start(len(cases), target.kind)
            outputs = collect_outputs(target, cases, spec.target_k, on_done)
            unmatched = getattr(target, "unmatched", [])
            notes = [f"{len(unmatched)} lines of the results file match no golden case (first at line {unmatched[0]})"] if unmatched else []
            judged = _judge_stages(spec, cases, outputs, target, use_cache)  # robustness asks the target again
        finally:
            target.close()
        fingerprints = {"golden_set": golden_fingerprint(cases)}
        history = window(entries, int(spec.data["history"]["max_entries"]), fingerprints)
        report = evaluate(spec, cases, outputs, baseline, target_kind=target.kind, target_notes=notes,
                          duration_s=time.perf_counter() - started, judged=judged, history=history)
        report["warnings"] += getattr(store, "warnings", [])
        report["baseline"]["source"] = baseline_source if baseline else None
        report["history"] = history_summary(history)
        return report


def _judge_stages(spec: Spec, cases: Sequence[GoldenCase], outputs: dict[str, TargetOutput], target: Any,
                  use_cache: bool) -> dict[str, dict[str, Any]]:
    """Run the generation and robustness stages the spec configures (they share one judge cache)."""
    stages_cfg = spec.data["stages"]
    judged: dict[str, dict[str, Any]] = {}
    if not stages_cfg.get("generation") and not stages_cfg.get("robustness"):
        return judged
    cache = open_cache(spec, use_cache)
    try:
        if stages_cfg.get("generation"):
            from gate.generation import generation_stage

            judged["generation"] = generation_stage(stages_cfg["generation"], spec.data.get("judge"), cases, outputs, cache,
                                                    secrets=spec.secrets)
        if stages_cfg.get("robustness"):
            from gate.robustness import load_distractor_file, robustness_stage

            cfg = stages_cfg["robustness"]
            noise = cfg.get("noise") or {}
            files = load_distractor_file(spec.resolve(noise["file"])) if noise.get("source") == "file" and noise.get("file") else {}
            judged["robustness"] = robustness_stage(
                cfg, spec.data.get("judge"), cases, outputs, target, cache, match=(spec.retrieval or {}).get("match", {}),
                precomputed=getattr(target, "noise", None), file_distractors=files,
            )
    finally:
        cache.close()  # folds the WAL back into the one file that CI caches carry
    return judged


def history_summary(entries: Sequence[Mapping[str, Any]], keep: int = 10) -> dict[str, Any]:
    """The last runs' metrics for the trend chart (no per-case scores: the report stays small)."""
    runs = [
        {"commit": e.get("commit"), "created_at": e.get("created_at"),
         "metrics": {name: st.get("metrics", {}) for name, st in e.get("stages", {}).items() if name != "retrieval"}}
        for e in entries[-keep:]
    ]
    return {"entries": len(entries), "runs": runs}


def open_cache(spec: Spec, use_cache: bool) -> Any:
    """The judge cache the spec names, or a cache that stores nothing (--no-cache, cache.enabled: false)."""
    from gate.judges.cache import JudgeCache, NullCache

    if not use_cache or not spec.data["cache"]["enabled"]:
        return NullCache()
    return JudgeCache(spec.resolve(spec.data["cache"]["path"]))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting still frees memory)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["run", "evaluate", "collect_outputs", "worse_cases", "HEALTH_METRICS"]
