"""What is kept of a run to compare later runs with: the baseline file and history entries. Pure.

A baseline carries the fingerprints of the golden set, the spec and k, so that a comparison
against a baseline made from something else is flagged rather than silently trusted. A history
entry holds each stage's metrics and, for judge stages, the per-case scores, so that a pull
request can be compared case by case with recent runs. Both keep cases in the report's shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.catalog import PER_CASE_STAGES
from gate.core.report import SCHEMA_VERSION, Baseline, CaseResult, HistoryEntry, HistorySummary, Reference, Report, StoredStage

# Which fingerprints a stage's comparison depends on.
STAGE_FINGERPRINTS = {"retrieval": ("golden_set", "spec", "k"), "generation": ("golden_set", "generation"),
                      "robustness": ("golden_set", "robustness")}


def stored_cases(samples: Sequence[CaseResult]) -> list[CaseResult]:
    """The cases worth keeping: those with scores (a judge-stage case keeps the scores it has even when another
    metric errored), with their figures only."""
    kept: list[CaseResult] = []
    for s in samples:
        if not s.get("metrics"):
            continue
        case: CaseResult = {"id": s["id"], "metrics": s["metrics"]}
        if "relevant_ranks" in s:
            case["relevant_ranks"] = s["relevant_ranks"]
        kept.append(case)
    return kept


def baseline_from_report(report: Report, *, created_at: str, tool_version: str) -> Baseline:
    """The baseline document for a report: stage metrics and per-case figures."""
    stages: dict[str, StoredStage] = {}
    for name, stage in report["stages"].items():
        if stage["status"] == "skipped" or not stage["metrics"]:
            continue
        stages[name] = {"metrics": stage["metrics"], "samples": stored_cases(stage["samples"])}
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": created_at,
        "tool_version": tool_version,
        "commit": report["run"]["commit"],
        "fingerprints": report["fingerprints"],
        "stages": stages,
    }


def entry_from_report(report: Report, *, branch: str | None = None, commit: str | None = None) -> HistoryEntry:
    """The history entry for a report; judge stages keep their per-case scores."""
    stages: dict[str, StoredStage] = {}
    for name, stage in report["stages"].items():
        if stage["status"] == "skipped" or not stage["metrics"]:
            continue
        stored: StoredStage = {"metrics": stage["metrics"]}
        if name in PER_CASE_STAGES:
            stored["samples"] = stored_cases(stage["samples"])
        stages[name] = stored
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": report["run"]["created_at"],
        "commit": commit or report["run"]["commit"],
        "branch": branch,
        "verdict": report["verdict"],
        "fingerprints": report["fingerprints"],
        "stages": stages,
    }


def mismatched(reference: Reference, fingerprints: dict[str, str], stage: str | None = None) -> list[str]:
    """Names of the fingerprints that differ between a reference run and this run (for one stage, or any).

    A fingerprint the reference does not have (a stage added since) is no mismatch: that stage
    simply has no baseline yet.
    """
    theirs = reference["fingerprints"]
    names = STAGE_FINGERPRINTS.get(stage, tuple(fingerprints)) if stage else tuple(fingerprints)
    return [k for k in names if k in fingerprints and k in theirs and theirs[k] != fingerprints[k]]


def window(entries: Sequence[HistoryEntry], size: int, fingerprints: dict[str, str] | None = None) -> list[HistoryEntry]:
    """The last ``size`` entries (oldest first), of runs that completed, measured the same way when
    ``fingerprints`` is given (same golden set and spec)."""
    usable = [e for e in entries if e["verdict"] != "error"]
    if fingerprints:
        usable = [e for e in usable if all(e["fingerprints"].get(k) == v for k, v in fingerprints.items() if k != "k")]
    return list(usable[-size:]) if size > 0 else []


def history_summary(entries: Sequence[HistoryEntry], keep: int = 10) -> HistorySummary:
    """The last runs' metrics for the trend chart (no per-case scores: the report stays small)."""
    return {
        "entries": len(entries),
        "runs": [
            {"commit": e["commit"], "created_at": e["created_at"],
             "metrics": {name: st["metrics"] for name, st in e["stages"].items() if name != "retrieval"}}
            for e in entries[-keep:]
        ],
    }


def _same_commit(a: str | None, b: str) -> bool:
    a, b = (a or "").lower(), b.lower()
    return bool(a) and bool(b) and (a == b or (min(len(a), len(b)) >= 7 and (a.startswith(b) or b.startswith(a))))


def baseline_entry(entries: Sequence[HistoryEntry], base_sha: str | None,
                   ancestors: Sequence[str] | None = None) -> tuple[HistoryEntry | None, str]:
    """The history entry to compare a pull request with, and which one it is in words.

    The newest entry of the PR's base commit; else the entry of the nearest ancestor that has one
    (``ancestors`` newest first, as GitHub lists commits; entries of runs that errored are not used);
    else None."""
    usable = [e for e in entries if e["verdict"] != "error"]

    def newest(sha: str) -> HistoryEntry | None:
        return next((e for e in reversed(usable) if _same_commit(e["commit"], sha)), None)

    if base_sha and (found := newest(base_sha)) is not None:
        return found, f"entry of base commit {base_sha[:7]}"
    for sha in ancestors or []:
        if (found := newest(sha)) is not None:
            return found, f"newest ancestor entry ({sha[:7]})"
    return None, "no history entry for the base commit"
