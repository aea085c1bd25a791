"""The baseline: the figures a pull request is compared with (default eval/baseline.json).

Written by ``rag-gate baseline update`` from a report. It carries the fingerprints of the
golden set, the spec and k, so that a comparison against a baseline made from something
else is flagged rather than silently trusted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate import __version__
from gate.errors import InputError

SCHEMA_VERSION = 1


def baseline_from_report(report: dict[str, Any]) -> dict[str, Any]:
    """The baseline document for a report: stage metrics and per-case figures. Pure."""
    stages: dict[str, Any] = {}
    for name, stage in report.get("stages", {}).items():
        if stage.get("status") == "skipped" or not stage.get("metrics"):
            continue
        samples = {}
        for s in stage.get("samples", []):
            if s.get("metrics"):  # judge stages keep the scores a case has even when another metric errored
                entry: dict[str, Any] = {"metrics": s.get("metrics", {})}
                if "relevant_ranks" in s:
                    entry["relevant_ranks"] = s["relevant_ranks"]
                samples[s["id"]] = entry
        stages[name] = {"metrics": stage["metrics"], "samples": samples}
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tool_version": __version__,
        "commit": report.get("run", {}).get("commit"),
        "fingerprints": report.get("fingerprints", {}),
        "stages": stages,
    }


def load_baseline(path: Path) -> dict[str, Any] | None:
    """The baseline at ``path``; None if there is none. InputError if it is unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot read the baseline: {exc.strerror}", file=str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno,
                         hint="write it again with `rag-gate baseline update`") from None
    if not isinstance(data, dict) or not isinstance(data.get("stages"), dict):
        raise InputError("not a rag-gate baseline (no 'stages' object)", file=str(path), key="stages")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"baseline schema_version {data.get('schema_version')!r} is not {SCHEMA_VERSION}", file=str(path), key="schema_version")
    return data


# Which fingerprints a stage's comparison depends on.
STAGE_FINGERPRINTS = {"retrieval": ("golden_set", "spec", "k"), "generation": ("golden_set", "generation"),
                      "robustness": ("golden_set", "robustness")}


def mismatched(baseline: dict[str, Any], fingerprints: dict[str, str], stage: str | None = None) -> list[str]:
    """Names of the fingerprints that differ between baseline and run (for one stage, or any).

    A fingerprint the baseline does not have (a stage added since) is no mismatch: that stage
    simply has no baseline yet.
    """
    theirs = baseline.get("fingerprints", {})
    names = STAGE_FINGERPRINTS.get(stage, tuple(fingerprints)) if stage else tuple(fingerprints)
    return [k for k in names if k in fingerprints and k in theirs and theirs[k] != fingerprints[k]]
