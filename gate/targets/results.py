"""Target: a precomputed results file (JSONL) written by the user's own step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase, TargetOutput
from gate.io.golden import iter_jsonl
from gate.targets import parse_output

MAX_LATENCY_MS = 1e9  # about 11 days: anything larger is a unit mistake (or an attack on float arithmetic)


class ResultsFileTarget:
    """Answers from a JSONL file: one line per case, matched by ``id`` (or by ``question``)."""

    kind = "results"
    concurrency = 1

    def __init__(self, path: Path, cases: list[GoldenCase]) -> None:
        self.path = path
        by_question = {c.question: c.id for c in cases}
        known = {c.id for c in cases}
        self.outputs: dict[str, TargetOutput] = {}
        self.unmatched: list[int] = []  # lines that match no golden case
        self.noise: dict[str, dict[str, Any]] = {}  # precomputed noise-test answers, by case id
        errors: list[InputError] = []
        seen: dict[str, int] = {}
        for lineno, row in iter_jsonl(path):
            case_id = row.get("id") if isinstance(row, dict) else None
            if case_id is None and isinstance(row, dict) and isinstance(row.get("question"), str):
                case_id = by_question.get(row["question"])
                if case_id is None:
                    self.unmatched.append(lineno)
                    continue
            if not isinstance(case_id, str):
                errors.append(InputError("each line needs an 'id' (string) or the 'question' of a golden case", file=str(path), line=lineno))
                continue
            if case_id not in known:
                self.unmatched.append(lineno)
                continue
            if case_id in seen:
                errors.append(InputError(f"second line for case {case_id!r} (first at line {seen[case_id]})", file=str(path), line=lineno))
                continue
            seen[case_id] = lineno
            latency = row.get("latency_ms")
            if latency is not None and not (isinstance(latency, (int, float)) and not isinstance(latency, bool)
                                            and 0 <= latency <= MAX_LATENCY_MS):
                shown = repr(latency) if len(repr(latency)) <= 40 else f"a number of {len(str(latency))} digits"
                errors.append(InputError(f"'latency_ms' must be a number of milliseconds from 0 to {MAX_LATENCY_MS:g}, got {shown}",
                                         file=str(path), line=lineno))
                continue
            error = row.get("error")
            if error:
                self.outputs[case_id] = TargetOutput.failed(case_id, f"results file: {error}", latency)
                continue
            try:
                self.outputs[case_id] = parse_output(case_id, row, latency_ms=latency)
            except ValueError as exc:
                errors.append(InputError(str(exc), file=str(path), line=lineno))
            noise = row.get("noise")
            if noise is not None:
                problem = _noise_problem(noise)
                if problem:
                    errors.append(InputError(problem, file=str(path), line=lineno, key="noise"))
                else:
                    self.noise[case_id] = noise
        if errors:
            raise errors[0] if len(errors) == 1 else InputErrors(errors)

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        out = self.outputs.get(case.id)
        if out is None:
            return TargetOutput.failed(case.id, f"no line for this case in {self.path.name}")
        return out

    def close(self) -> None:
        pass


def _noise_problem(noise: Any) -> str | None:
    """What is wrong with a line's precomputed noise test, if anything."""
    if not isinstance(noise, dict):
        return "'noise' must be an object {noisy_answer, clean_answer?, distractors?}"
    if not isinstance(noise.get("noisy_answer"), str):
        return "'noise.noisy_answer' (the answer given with distractors injected) must be a string"
    if "clean_answer" in noise and not isinstance(noise["clean_answer"], str):
        return "'noise.clean_answer' must be a string"
    d = noise.get("distractors", [])
    if not isinstance(d, list) or not all(isinstance(x, str) for x in d):
        return "'noise.distractors' must be a list of strings"
    return None
