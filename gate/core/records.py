"""What is kept of a run to compare later runs with: the baseline file and history entries. Pure.

A baseline carries the fingerprints of the golden set, the spec and k, so that a comparison
against a baseline made from something else is flagged rather than silently trusted. A history
entry holds each stage's metrics and, for judge stages, the per-case scores, so that a pull
request can be compared case by case with recent runs. Both keep cases in the report's shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gate.core.catalog import PER_CASE_STAGES
from gate.core.pairs import referenced
from gate.core.report import SCHEMA_VERSION, Baseline, CaseResult, HistoryEntry, HistorySummary, Report, StageResult, StoredRun, StoredStage

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
        if "output" in s:
            case["output"] = s["output"]
        kept.append(case)
    return kept


def _stored(stage_name: str, stage: StageResult, samples: bool) -> StoredStage:
    stored: StoredStage = {"metrics": stage["metrics"]}
    if samples:
        stored["samples"] = stored_cases(stage["samples"])
    if stage_name in PER_CASE_STAGES and "judge" in stage:
        stored["judge"] = stage["judge"]
    previous = stage.get("windows", {}).get("previous")
    known = {m: w for m, w in previous["metrics"].items() if w["delta"] is not None and w["se"] is not None
             and "insufficient" not in w} if previous else {}
    if known:  # a traces window's judge-corrected changes: the next windows' consecutive_decline reads them
        stored["window_deltas"] = {m: w["delta"] for m, w in known.items() if w["delta"] is not None}
        stored["window_se"] = {m: w["se"] for m, w in known.items() if w["se"] is not None}
    return stored


def _texts(report: Report, stages: Mapping[str, StoredStage]) -> dict[str, str]:
    """The report's texts that the kept cases refer to."""
    table = report.get("texts", {})
    ids = referenced(c for st in stages.values() for c in st.get("samples", []))
    return {i: table[i] for i in sorted(ids) if i in table}


def baseline_from_report(report: Report, *, created_at: str, tool_version: str) -> Baseline:
    """The baseline document for a report: stage metrics and per-case figures."""
    stages = {name: _stored(name, stage, True) for name, stage in report["stages"].items()
              if stage["status"] != "skipped" and stage["metrics"]}
    baseline: Baseline = {
        "schema_version": SCHEMA_VERSION,
        "created_at": created_at,
        "tool_version": tool_version,
        "commit": report["run"]["commit"],
        "fingerprints": report["fingerprints"],
        "stages": stages,
    }
    texts = _texts(report, stages)
    if texts:
        baseline["texts"] = texts
    if "system" in report["run"]:
        baseline["system"] = report["run"]["system"]
    return baseline


def entry_from_report(report: Report, *, branch: str | None = None, commit: str | None = None) -> HistoryEntry:
    """The history entry for a report; judge stages keep their per-case scores."""
    stages = {name: _stored(name, stage, name in PER_CASE_STAGES) for name, stage in report["stages"].items()
              if stage["status"] != "skipped" and stage["metrics"]}
    entry: HistoryEntry = {
        "schema_version": SCHEMA_VERSION,
        "created_at": report["run"]["created_at"],
        "commit": commit or report["run"]["commit"],
        "branch": branch,
        "verdict": report["verdict"],
        "fingerprints": report["fingerprints"],
        "stages": stages,
    }
    texts = _texts(report, stages)
    if texts:
        entry["texts"] = texts
    if "tool" in report:  # a report of rag-gate (the tests' hand-made ones may have none)
        entry["tool_version"] = report["tool"]["version"]
    run = report["run"]
    for key in ("kind", "url", "system"):
        if key in run:
            entry[key] = run[key]  # type: ignore[literal-required]
    if report.get("changes"):
        entry["changes"] = report["changes"]
    return entry


KIND_WORDS = {"schedule": "scheduled", "push": "push", "merge": "merge", "dispatch": "manual", "deployment": "deployment"}


def last_passing(kind: str | None = None) -> Callable[[list[HistoryEntry]], tuple[HistoryEntry | None, str] | None]:
    """A chooser (RunOptions.changes_from) of the newest passing history entry of ``kind`` (a scheduled run), else the
    newest passing entry of any kind; None when no entry passed."""

    def choose(entries: list[HistoryEntry]) -> tuple[HistoryEntry | None, str] | None:
        passed = [e for e in entries if e.get("verdict") == "pass"]
        own = [e for e in passed if kind is None or e.get("kind") == kind]
        found = (own or passed)[-1:]
        if not found:
            return None
        entry = found[0]
        words = KIND_WORDS.get(str(entry.get("kind")), "") if own else ""
        commit = (entry.get("commit") or "")[:7]
        return entry, f"the last passing {words + ' ' if words else ''}run" + (f" ({commit})" if commit else "")

    return choose


def text_table(*documents: StoredRun | None) -> dict[str, str]:
    """Every text the documents hold (history entries keep each text once, in the oldest entry that refers to it)."""
    table: dict[str, str] = {}
    for doc in documents:
        if doc is not None:
            table.update(doc.get("texts", {}))
    return table


def compact_texts(entries: Sequence[HistoryEntry], table: Mapping[str, str]) -> list[HistoryEntry]:
    """The entries (oldest first) with each text kept once, by the oldest entry that refers to it; texts no entry
    refers to any more are gone. ``table`` holds every text known (those of entries being dropped included)."""
    seen: set[str] = set()
    out: list[HistoryEntry] = []
    for entry in entries:
        ids = referenced(c for st in entry["stages"].values() for c in st.get("samples", []))
        own = sorted(i for i in ids - seen if i in table)
        seen |= ids
        kept: HistoryEntry = {**entry}
        kept.pop("texts", None)
        if own:
            kept["texts"] = {i: table[i] for i in own}
        out.append(kept)
    return out


def mismatched(reference: StoredRun, fingerprints: dict[str, str], stage: str | None = None) -> list[str]:
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
