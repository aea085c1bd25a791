"""Target: a precomputed results file (JSONL) written by the user's own step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase, Passage, TargetOutput
from gate.io.golden import iter_lines, parse_line
from gate.io.jsonparse import fast_as
from gate.targets import Beside, Target, output_from, parse_output

MAX_LATENCY_MS = 1e9  # about 11 days: anything larger is a unit mistake (or an attack on float arithmetic)


class _Passage(msgspec.Struct, frozen=True, gc=False):
    """A retrieved passage of a results file, as msgspec decodes it (a Passage, like RetrievedDoc): a C struct,
    immutable, which the cyclic garbage collector does not track."""

    id: str
    text: str | None = None
    score: float | None = None


class _RankedId(msgspec.Struct, frozen=True, gc=False):
    """A retrieved passage whose text no stage of the run reads: the text is skipped, not decoded (a results file
    of 10,000 cases x 20 passages holds 50 MB of them)."""

    id: str
    score: float | None = None
    text: ClassVar[None] = None


class _Line(msgspec.Struct, gc=False):
    """A results line of the usual shape, decoded straight into its passages (``fast_as``): every retrieved item an
    object with a string id, an optional string text and an optional number score; id, question, answer and error
    strings; contexts a list of strings. Any other line is parsed into dicts and read by ``parse_output``, which says
    what is wrong with it. A missing key reads as None, as ``dict.get`` gives it."""

    retrieved: list[_Passage]
    id: str | None = None
    question: str | None = None
    answer: str | None = None
    contexts: list[str] | None = None
    latency_ms: int | float | None = None
    error: str | None = None
    noise: Any = None
    usage: Any = None
    cached: Any = None
    system: Any = None

    get = object.__getattribute__  # row.get(key), as for a dict row: the field (in C)


class _LineOfIds(_Line):
    retrieved: list[_RankedId]  # type: ignore[assignment]


_OPEN = ("noise", "usage", "cached", "system")  # the fields that hold any JSON value
_ID, _SCORE = attrgetter("id"), attrgetter("score")


def _read(path: Path, lineno: int, line: str, shape: type[_Line]) -> Any:
    """A line as a ``shape`` when it has the usual shape and the fast decoding gives exactly what ``parse_output``
    would; else its JSON value (InputError naming the line if it is not JSON)."""
    fast = fast_as(line, shape, open_fields=_OPEN)
    # an empty id is an error, which parse_output words; msgspec reads an integer score as a float, where parse_output
    # drops one beyond +-1e300: such lines go parse_output's way
    if fast is not None and all(map(_ID, fast.retrieved)) and _scores_in_range(fast.retrieved):
        return fast
    return parse_line(path, lineno, line)


def _scores_in_range(docs: Sequence[Passage]) -> bool:
    try:  # in C: min/max over the scores, unless a score is None (TypeError)
        return -1e300 < min(map(_SCORE, docs), default=0.0) and max(map(_SCORE, docs), default=0.0) < 1e300
    except TypeError:
        scores = [x for x in map(_SCORE, docs) if x is not None]
        return not scores or (-1e300 < min(scores) and max(scores) < 1e300)


@dataclass
class Results:
    """A results file as read: an answer per case, the lines that match no golden case, and the precomputed
    noise-test answers."""

    path: Path
    outputs: dict[str, TargetOutput] = field(default_factory=dict)
    unmatched: list[int] = field(default_factory=list)  # lines that match no golden case
    noise: dict[str, dict[str, Any]] = field(default_factory=dict)  # precomputed noise-test answers, by case id


def read_results(path: Path, cases: Sequence[GoldenCase], texts: bool = True) -> Results:
    """Read a results file: one line per case, matched by ``id`` (or by ``question``). ``texts`` False: no stage reads
    the passages' texts (nor the contexts made of them), which are then not kept. InputError (InputErrors) naming
    every bad line."""
    by_question = {c.question: c.id for c in cases}
    known = {c.id for c in cases}
    results = Results(path)
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    shape = _Line if texts else _LineOfIds
    for lineno, line in iter_lines(path):
        row = _read(path, lineno, line, shape)
        readable = isinstance(row, (dict, _Line))
        case_id = row.get("id") if readable else None
        if case_id is None and readable and isinstance(row.get("question"), str):
            case_id = by_question.get(row.get("question"))
            if case_id is None:
                results.unmatched.append(lineno)
                continue
        if not isinstance(case_id, str):
            errors.append(InputError("each line needs an 'id' (string) or the 'question' of a golden case", file=str(path), line=lineno))
            continue
        if case_id not in known:
            results.unmatched.append(lineno)
            continue
        if case_id in seen:
            errors.append(InputError(f"second line for case {case_id!r} (first at line {seen[case_id]})", file=str(path), line=lineno))
            continue
        seen[case_id] = lineno
        errors += _read_row(results, case_id, row, lineno)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    return results


def _read_row(results: Results, case_id: str, row: Any, lineno: int) -> list[InputError]:
    """One matched line into ``results``; what is wrong with it, if anything."""
    path = results.path
    latency = row.get("latency_ms")
    if latency is not None and not (isinstance(latency, (int, float)) and not isinstance(latency, bool) and 0 <= latency <= MAX_LATENCY_MS):
        shown = repr(latency) if len(repr(latency)) <= 40 else f"a number of {len(str(latency))} digits"
        return [InputError(f"'latency_ms' must be a number of milliseconds from 0 to {MAX_LATENCY_MS:g}, got {shown}",
                           file=str(path), line=lineno)]
    error = row.get("error")
    if error:
        results.outputs[case_id] = TargetOutput.failed(case_id, f"results file: {error}", latency)
        return []
    errors = []
    try:
        if isinstance(row, _Line):
            beside = Beside(row.answer, row.contexts, row.usage, row.cached, row.system)
            results.outputs[case_id] = output_from(case_id, row.retrieved, beside, latency_ms=latency)
        else:
            results.outputs[case_id] = parse_output(case_id, row, latency_ms=latency)
    except ValueError as exc:
        errors.append(InputError(str(exc), file=str(path), line=lineno))
    noise = row.get("noise")
    if noise is not None:
        problem = _noise_problem(noise)
        if problem:
            errors.append(InputError(problem, file=str(path), line=lineno, key="noise"))
        else:
            results.noise[case_id] = noise
    return errors


class ResultsFileTarget(Target):
    """Answers read from a results file (``read_results``)."""

    kind = "results"

    def __init__(self, results: Results) -> None:
        self.results = results
        self.outputs = results.outputs
        self.unmatched = results.unmatched
        self.precomputed_noise = results.noise

    @classmethod
    def read(cls, path: Path, cases: Sequence[GoldenCase], texts: bool = True) -> ResultsFileTarget:
        return cls(read_results(path, cases, texts))

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        out = self.outputs.get(case.id)
        if out is None:
            return TargetOutput.failed(case.id, f"no line for this case in {self.results.path.name}")
        return out


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
