"""The generation stage's answer checks: every answerable case's answer against its expected keywords, the spec's
checks (``stages.generation.checks``) and its own (``checks``), with no model (gate.core.answers does the matching;
here the answers' JSON is validated against the schemas the checks name). Deterministic: gated as exact numbers.

    keyword_coverage  the mean, over the cases with expected_keywords, of the share of them the answer holds
    check_pass_rate   the share of the checked answers that pass every check that applies to them
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from gate.core.answers import AnswerChecks, AnswerResult, check_answer
from gate.core.errors import InputError
from gate.core.model import GoldenCase, TargetOutput
from gate.core.report import AnswerCheckCase, AnswersInfo, CaseResult


@cache
def _validator(path: str) -> Any:
    """The JSON Schema validator of the file at ``path`` (read once a run); InputError (exit 2) naming it otherwise."""
    import jsonschema

    try:
        schema = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot be read as a JSON Schema for the answers: {exc}", file=path, key="checks.json_schema") from None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InputError(f"is not a valid JSON Schema: {exc.message[:200]}", file=path, key="checks.json_schema") from None
    return cls(schema)


def json_problem(path: str) -> Callable[[str], str | None]:
    """What is wrong with an answer against the JSON Schema at ``path`` (never quoting the answer), None if nothing."""
    from gate.io.schema import describe

    validator = _validator(path)

    def problem(answer: str) -> str | None:
        try:
            value = json.loads(answer)
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        except ValueError:  # a number too long to convert, say
            return "not JSON that can be read"
        error = next(iter(validator.iter_errors(value)), None)
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path) or "the answer"
        return f"{where} {describe(error)} (schema {Path(path).name})"

    return problem


@dataclass
class AnswersPart:
    """The answer checks of a stage: per case, what they found; the metrics, or why each could not be computed."""

    cases: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    not_evaluated: dict[str, str] = field(default_factory=dict)

    def record(self) -> AnswersInfo:
        """What the report keeps: the cases with something to say (a missing keyword, a failed check), and the counts."""
        found: list[AnswerCheckCase] = []
        for c in self.cases:
            if "missing" in c or "failed" in c:
                row: AnswerCheckCase = {"id": c["id"]}
                if "missing" in c:
                    row["missing"] = c["missing"]
                if "failed" in c:
                    row["failed"] = c["failed"]
                found.append(row)
        return {"cases": found, "keywords": sum(1 for c in self.cases if "keyword_coverage" in c["metrics"]),
                "checked": sum(1 for c in self.cases if "check_pass_rate" in c["metrics"])}


def _row(case: GoldenCase, out: TargetOutput, checks: AnswerChecks) -> dict[str, Any] | None:
    """One case's row (its metrics, and what was missing or failed), or None when nothing applies to it."""
    if not case.expected_keywords and not checks:
        return None
    if out.error is not None:
        return {"id": case.id, "metrics": {}, "error": "the target call failed for this case"}
    found: AnswerResult = check_answer(out.answer, case.expected_keywords, checks,
                                       json_problem(checks.json_schema) if checks.json_schema else None)
    metrics: dict[str, float] = {}
    if found.coverage is not None:
        metrics["keyword_coverage"] = found.coverage
    if found.passed is not None:
        metrics["check_pass_rate"] = 1.0 if found.passed else 0.0
    row: dict[str, Any] = {"id": case.id, "metrics": metrics, "error": None}
    if found.missing:
        row["missing"] = list(found.missing)
    if found.failures:
        row["failed"] = [{"check": f.check, "evidence": f.evidence} for f in found.failures]
    return row


def answer_checks(checks: AnswerChecks | None, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
                  golden_dir: Path | None = None) -> AnswersPart:
    """The answer checks of every answerable case of ``cases`` (``checks``: the spec's, for every answer, its json_schema
    resolved; a case's json_schema is relative to ``golden_dir``, the golden set's folder)."""
    spec_checks = checks or AnswerChecks()
    everyone = spec_checks.merged(AnswerChecks())  # the checks of a case with none of its own (most cases)
    merged: dict[AnswerChecks, AnswerChecks] = {}  # a case's own checks -> with the spec's

    def checks_of(own: AnswerChecks) -> AnswerChecks:
        if own not in merged:
            located = own
            if own.json_schema and golden_dir is not None and not Path(own.json_schema).is_absolute():
                located = replace(own, json_schema=str(golden_dir / own.json_schema))
            merged[own] = spec_checks.merged(located)
        return merged[own]

    part = AnswersPart()
    for case in cases:
        if case.answerable:
            row = _row(case, outputs[case.id], everyone if case.checks is None else checks_of(case.checks))
            if row is not None:
                part.cases.append(row)
    return finish_answers(part)


def finish_answers(part: AnswersPart) -> AnswersPart:
    """The metrics of the rows (a run's, or a merge's of its shards' rows), or why not."""
    for metric, none in (("keyword_coverage", "no answered case has expected_keywords"),
                         ("check_pass_rate", "no answer check applies (stages.generation.checks, or a case's checks)")):
        values = [c["metrics"][metric] for c in part.cases if metric in c["metrics"]]
        if values:
            part.metrics[metric] = math.fsum(values) / len(values)
        else:
            part.not_evaluated[metric] = none
    return part


def joined(samples: list[CaseResult], checked: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[CaseResult]:
    """The judged rows with the checks' values joined in, and a row of its own for each other checked case; in golden
    order (``order``: the case ids)."""
    own: list[CaseResult] = [{"id": a["id"], "metrics": dict(a["metrics"]), "error": None} for a in checked if a["metrics"]]
    if not samples:  # nothing judged to join (the checks' rows are in golden order already)
        return own
    rows = {s["id"]: s for s in samples}
    for row in own:
        if row["id"] in rows:
            rows[row["id"]]["metrics"].update(row["metrics"])
        else:
            rows[row["id"]] = row
    place = {cid: i for i, cid in enumerate(order)}
    return sorted(rows.values(), key=lambda s: place.get(s["id"], len(place)))
