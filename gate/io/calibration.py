"""The calibration files: people's labels (labels.jsonl, one label a line) and what `rag-gate calibrate` made of them
(calibration.json), read with errors that name the file, the line and the key."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate.core.errors import InputError
from gate.io.files import not_regular

LABEL_KEYS = ("case_id", "metric", "score", "labeler", "labelled_at", "answer_id")


def read_text_file(path: Path, what: str) -> str:
    """A file's UTF-8 text; InputError naming it when it is missing, not a regular file, or unreadable."""
    odd = not_regular(path) if path.exists() else None
    if odd:
        raise InputError(f"the {what} is {odd}, not a file", file=str(path))
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the {what}: {getattr(exc, 'strerror', None) or exc}", file=str(path)) from None


def read_labels(path: Path) -> list[dict[str, Any]]:
    """Every label of the file, checked: an object with case_id, metric, score in [0, 1], labeler, labelled_at (ISO
    8601) and answer_id (the content id of the answer the label was given to)."""
    text = read_text_file(path, "labels")
    if path.suffix.lower() == ".csv":
        return _csv_labels(text, str(path))
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", file=str(path), line=lineno) from None
        out.append(_label(row, str(path), lineno))
    if not out:
        raise InputError("holds no label", file=str(path), hint="fill the sheet of `rag-gate label` and download its labels")
    return out


def _csv_labels(text: str, where: str) -> list[dict[str, Any]]:
    """The rows of a filled CSV sheet (`rag-gate label --format csv`) whose score is filled in."""
    import csv
    import io

    reader = csv.DictReader(io.StringIO(text))
    missing = [k for k in LABEL_KEYS if k not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"the CSV's header lacks {', '.join(missing)} (the sheet of `rag-gate label --format csv` has them)", file=where, line=1)
    out = []
    for lineno, row in enumerate(reader, 2):
        if not (row.get("score") or "").strip():
            continue
        try:
            score: Any = float(row["score"])
        except ValueError:
            score = row["score"]
        label = {k: _unquoted(row.get(k) or "") for k in LABEL_KEYS}
        label["score"] = score
        label["labeler"] = label["labeler"] or "anonymous"
        label["labelled_at"] = label["labelled_at"] or datetime.now(UTC).isoformat(timespec="seconds")
        out.append(_label(label, where, lineno))
    if not out:
        raise InputError("no row has a score filled in", file=where)
    return out


def _unquoted(value: str) -> str:
    """A cell as the sheet wrote it, without the apostrophe that kept a formula-like text as text."""
    return value[1:] if value.startswith("'") and value[1:2] in ("=", "+", "-", "@", "\t", "\r") else value


def _label(row: Any, where: str, lineno: int) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise InputError(f"each line must be a JSON object, got {type(row).__name__}", file=where, line=lineno)
    missing = [k for k in LABEL_KEYS if k not in row]
    if missing:
        raise InputError(f"a label needs {', '.join(LABEL_KEYS)}; this one lacks {', '.join(missing)}", file=where, line=lineno)
    for key in ("case_id", "metric", "labeler", "answer_id"):
        if not isinstance(row[key], str) or not row[key].strip() or len(row[key]) > 200:
            raise InputError(f"'{key}' must be a non-empty string of at most 200 characters, got {row[key]!r:.60}", file=where,
                             line=lineno)
    score = row["score"]
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score) or not 0 <= score <= 1:
        raise InputError(f"'score' must be a number from 0 to 1, got {score!r:.60}", file=where, line=lineno)
    try:
        datetime.fromisoformat(str(row["labelled_at"]))
    except ValueError:
        raise InputError(f"'labelled_at' must be an ISO 8601 time, got {row['labelled_at']!r:.60}", file=where, line=lineno) from None
    return {k: row[k] for k in LABEL_KEYS}


def read_calibration(path: Path) -> dict[str, Any] | None:
    """The calibration file, checked; None when there is none."""
    if not path.exists():
        return None
    try:
        doc = json.loads(read_text_file(path, "calibration file"))
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}", file=str(path), hint="write it again with `rag-gate calibrate`") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict) or not isinstance(doc.get("judge"), dict):
        raise InputError("is not a calibration file (an object with metrics and judge)", file=str(path),
                         hint="write it with `rag-gate calibrate`")
    for metric, found in doc["metrics"].items():
        if not isinstance(found, dict):
            raise InputError(f"metrics.{metric} must be an object", file=str(path), key=f"metrics.{metric}")
        kappa = found.get("kappa")
        if kappa is not None and (isinstance(kappa, bool) or not isinstance(kappa, int | float) or not -1 <= kappa <= 1):
            raise InputError(f"kappa must be a number from -1 to 1 or null, got {kappa!r:.40}", file=str(path), key=f"metrics.{metric}.kappa")
        for i, case in enumerate(found.get("cases") or []):
            if not isinstance(case, dict) or not all(isinstance(case.get(k), int | float) and not isinstance(case.get(k), bool)
                                                     for k in ("judge", "human")):
                raise InputError("each case needs numbers judge and human", file=str(path), key=f"metrics.{metric}.cases[{i}]")
    return doc
