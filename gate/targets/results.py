"""Target: a precomputed results file (JSONL) written by the user's own step."""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass, field, fields
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase, TargetOutput
from gate.io.golden import BOM as _BOM
from gate.io.golden import iter_lines, map_regular, parse_line, read_regular_bytes
from gate.io.golden import lines_and_utf8 as _lines_and_utf8
from gate.io.golden import python_lines_and_utf8 as _python_lines_and_utf8
from gate.io.jsonparse import ROW_FAST_DEPTH, depth, fast_as
from gate.targets import Beside, ShapeError, Target, output_from
from gate.targets.shapes import read_output

MAX_LATENCY_MS = 1e9  # about 11 days: anything larger is a unit mistake (or an attack on float arithmetic)


# What parse_output takes as it is: an empty id is an error, which parse_output words; a score beyond +-1e300 (a JSON
# integer of 301 digits, which msgspec reads as a float) is dropped. msgspec refuses such a line, which goes that way.
_Id = Annotated[str, msgspec.Meta(min_length=1)]
_Score = Annotated[float, msgspec.Meta(gt=-1e300, lt=1e300)]


class _Passage(msgspec.Struct, frozen=True, gc=False):
    """A retrieved passage of a results file, as msgspec decodes it (a Passage, like RetrievedDoc): a C struct,
    immutable, which the cyclic garbage collector does not track."""

    id: _Id
    text: str | None = None
    score: _Score | None = None
    # a framework's serialised document (LangChain's page_content, Haystack's content): no value is of this type, so
    # such a line is refused here and goes the dict way (gate.targets.shapes), at no cost to the others
    page_content: UnsetType = UNSET
    content: UnsetType = UNSET


class _RankedId(msgspec.Struct, frozen=True, gc=False):
    """A retrieved passage whose text no stage of the run reads: the text is skipped, not decoded (a results file
    of 10,000 cases x 20 passages holds 50 MB of them)."""

    id: _Id
    score: _Score | None = None
    text: ClassVar[None] = None
    page_content: UnsetType = UNSET
    content: UnsetType = UNSET


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
_BESIDE = attrgetter("contexts", "error", *_OPEN)  # what a line may hold beside its ranked list and answer
_NO_BESIDE = (None,) * 6
_TEXT = attrgetter("text")
_OPENS = attrgetter(*_OPEN)
_NO_OPEN = (None,) * len(_OPEN)
LINE_FIELDS = ("a results line holds id (or question), retrieved [{id, text, score}] in rank order, answer, contexts?, "
               "latency_ms; or a framework's serialised output: {context or source_documents, answer or result}, "
               "{response, source_nodes}, a Haystack pipeline's result")


def _read(path: Path, lineno: int, line: str, shape: type[_Line]) -> Any:
    """A line as a ``shape`` when it has the usual shape (the fast decoding then gives exactly what ``parse_output``
    would); else its JSON value (InputError naming the line if it is not JSON)."""
    fast = fast_as(line, shape, open_fields=_OPEN)
    return parse_line(path, lineno, line) if fast is None else fast


_WHOLE: dict[type, Callable[[bytes], list[Any]]] = {}  # one decoder per shape


def _whole_file(raw: bytes | mmap.mmap, shape: type[_Line], scanned: tuple[int | None, bool] | None = None) -> list[_Line] | None:
    """Every line of a results file decoded by msgspec in one call (row i is line i + 1), each exactly as ``_read``
    gives it line by line; None when that cannot be told for every line (the file is then read line by line, which
    words what is wrong and where). A raw newline cannot stand inside a JSON string, and ``}`` then ``{`` only between
    two values: a file whose every newline stands between ``}`` and ``{`` (or ends it) holds a value on each line."""
    lines, utf8 = _lines_and_utf8(raw) if scanned is None else scanned
    if lines is None or raw[:3] == _BOM or not utf8:  # msgspec does not check the UTF-8 of what it skips
        return None
    decode = _WHOLE.get(shape)
    if decode is None:
        decode = _WHOLE[shape] = msgspec.json.Decoder(shape).decode_lines
    try:
        rows: list[_Line] = decode(raw)  # type: ignore[arg-type]  # msgspec reads any buffer
    except (ValueError, RecursionError):
        return None
    if len(rows) != lines:
        return None
    for opens in map(_OPENS, rows):
        if opens != _NO_OPEN and any(map(_deep, opens)):
            return None
    return rows


def _deep(value: Any) -> bool:
    """``fast_as``'s rule for an open field: nested too deep for the fast path (the line is one level more)."""
    return isinstance(value, (dict, list)) and depth(value, ROW_FAST_DEPTH) >= ROW_FAST_DEPTH


Read = tuple["bytes | mmap.mmap", "tuple[int | None, bool] | None", Any]
"""A results file as read ahead: its bytes (or its mapping), ``_lines_and_utf8`` of them (None: not yet told), and
gate.core._native's scan of its ranked ids (None: not scanned, or not of the plain shape it takes)."""

try:  # a results file of ranked ids read in C where gate.core._native is built (msgspec decodes any other)
    from gate.core._native import RankedPassages, build_ranked, ranked_outputs, scan_ranked
except ImportError:
    build_ranked = ranked_outputs = scan_ranked = None
else:  # the outputs ranked_outputs makes hold their passages in one: a sequence of _RankedId, each made when read
    Sequence.register(RankedPassages)


def _output_slots() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """TargetOutput's slots (their member descriptors, in field order) and the defaults of the fields after the five a
    results line gives (case_id, retrieved, answer, contexts, latency_ms): what ranked_outputs builds an output of."""
    given = ("case_id", "retrieved", "answer", "contexts", "latency_ms")
    names = [f.name for f in fields(TargetOutput)]
    assert tuple(names[:5]) == given, "TargetOutput's first fields are no longer a results line's"
    rest = fields(TargetOutput)[5:]
    assert all(f.default_factory is MISSING for f in rest), "a field after latency_ms made by a factory: build it per output"
    return tuple(getattr(TargetOutput, n) for n in names), tuple(f.default for f in rest)


_OUTPUT_SLOTS, _OUTPUT_REST = _output_slots()

_DECODE_STR = msgspec.json.Decoder(str).decode  # a string with an escape, in a line gate.core._native reads


def _read_now(path: Path, ranked: bool = False) -> Read:
    """The file, mapped where gate.core._native scans it (mapped memory has none of bytes' methods), else read;
    ``ranked``: its lines of ranked ids scanned in C where they have the plain shape (no texts kept)."""
    if _lines_and_utf8 is _python_lines_and_utf8:
        data = read_regular_bytes(path)
        return data, _lines_and_utf8(data), None
    raw = map_regular(path)
    scan = scan_ranked(raw) if ranked and scan_ranked is not None else None
    return raw, None if scan is not None else _lines_and_utf8(raw), scan


def prefetch(path: Path, ranked: bool = False) -> Callable[[], Read]:
    """Start reading ``path`` (its bytes and ``_lines_and_utf8`` of them, or with ``ranked`` its scan: without the
    GIL, where gate.core._native is built) in a thread, while the run reads its golden set; the function returned
    gives what was read, or raises what reading raised (InputError: not found, unreadable...), when the results are
    read. ``ranked``: the run reads the passages' ids, not their texts (``read_results``' texts False, no id_key)."""
    box: list[Read | BaseException] = []

    def work() -> None:
        try:
            box.append(_read_now(path, ranked))
        except BaseException as exc:  # said where the file is read, as without the thread
            box.append(exc)

    thread = threading.Thread(target=work, name="rag-gate: read the results file", daemon=True)
    thread.start()

    def result() -> Read:  # what was read; a second call reads the file again
        thread.join()
        got = box.pop() if box else _read_now(path, ranked)
        if isinstance(got, BaseException):
            raise got
        return got

    return result


def _rows(path: Path, shape: type[_Line] | None, read: Callable[[], Read] | None = None) -> Iterable[tuple[int, Any]]:
    """(line number, the line as ``_read`` gives it) of every non-blank line: made from gate.core._native's scan (the
    rows msgspec would decode), or decoded in one call when it can be (``_whole_file``), else line by line; ``shape``
    None: every line as its JSON value. ``read``: the file as ``prefetch`` read it."""
    raw, scanned, scan = read() if read is not None else (read_regular_bytes(path), None, None)
    if shape is None:
        return ((lineno, parse_line(path, lineno, line)) for lineno, line in iter_lines(path, raw))
    rows = build_ranked(scan, _LineOfIds, _RankedId, _DECODE_STR) if scan is not None and shape is _LineOfIds else None
    if rows is None:
        rows = _whole_file(raw, shape, scanned)
    if rows is not None:
        return enumerate(rows, 1)
    return ((lineno, _read(path, lineno, line, shape)) for lineno, line in iter_lines(path, raw))


@dataclass
class Results:
    """A results file as read: an answer per case, the lines that match no golden case, and the precomputed
    noise-test answers."""

    path: Path
    id_key: str | None = None  # target.results.id_key
    outputs: dict[str, TargetOutput] = field(default_factory=dict)
    unmatched: list[int] = field(default_factory=list)  # lines that match no golden case
    near: dict[str, tuple[int, str]] = field(default_factory=dict)  # (line, id) of those lines, by the id stripped and casefolded
    noise: dict[str, dict[str, Any]] = field(default_factory=dict)  # precomputed noise-test answers, by case id


def read_results(path: Path, cases: Sequence[GoldenCase], texts: bool = True, id_key: str | None = None,
                 read: Callable[[], Read] | None = None) -> Results:
    """Read a results file: one line per case, matched by ``id`` (or by ``question``). ``texts`` False: no stage reads
    the passages' texts (nor the contexts made of them), which are then not kept. ``id_key``: every document's id is
    its ``metadata[id_key]`` (target.results.id_key; the lines are then read as the frameworks' forms, not decoded
    into the usual shape). ``read``: the file as ``prefetch`` read it. InputError (InputErrors) naming every bad line."""
    known = {c.id: c.id for c in cases}  # (ranked_outputs keys the outputs by the cases' own strs: found at once)
    results = Results(path, id_key=id_key)
    shape = None if id_key is not None else _Line if texts else _LineOfIds
    if shape is _LineOfIds and read is not None and ranked_outputs is not None:
        got = read()
        if got[2] is not None:  # scanned in C: the outputs made there when every line is a plain one
            outputs = ranked_outputs(got[2], _RankedId, _DECODE_STR, known, TargetOutput, _OUTPUT_SLOTS, _OUTPUT_REST, MAX_LATENCY_MS)
            if outputs is not None:
                results.outputs = outputs
                return results
        read = lambda: got  # noqa: E731  (read once: the loop below takes the same)
    by_question = {c.question: c.id for c in cases}
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    for lineno, row in _rows(path, shape, read):
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
            results.near.setdefault(near_key(case_id), (lineno, case_id))
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
    if isinstance(row, _Line) and _BESIDE(row) == _NO_BESIDE:  # a ranked list and an answer (a str, or None) alone: the usual
        retrieved = row.retrieved                               # line, as output_from reads it
        contexts = [] if type(row) is _LineOfIds else list(filter(None, map(_TEXT, retrieved)))
        results.outputs[case_id] = TargetOutput(case_id, retrieved, row.answer, contexts, latency)
        return []
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
            results.outputs[case_id] = read_output(case_id, row, latency_ms=latency, id_key=results.id_key)
    except ShapeError as exc:
        errors.append(InputError(f"the line has the wrong shape: {exc}", file=str(path), line=lineno, hint=exc.hint or LINE_FIELDS))
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
    in_memory = True

    def __init__(self, results: Results) -> None:
        self.results = results
        self.outputs = results.outputs
        self.unmatched = results.unmatched
        self.precomputed_noise = results.noise

    @classmethod
    def read(cls, path: Path, cases: Sequence[GoldenCase], texts: bool = True, id_key: str | None = None,
             prefetched: Callable[[], Read] | None = None) -> ResultsFileTarget:
        return cls(read_results(path, cases, texts, id_key, prefetched))

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        out = self.outputs.get(case.id)
        if out is None:
            lineno, near = self.results.near.get(near_key(case.id), (0, None))
            hint = f" (line {lineno} has the id {near!r}, which differs from {case.id!r} only in spaces or case: fix it)" if near else ""
            return TargetOutput.failed(case.id, f"no line for this case in {self.results.path.name}{hint}")
        return out


def near_key(case_id: str) -> str:
    """An id as compared for a near miss: without its surrounding spaces, casefolded ('Q1 ' and 'q1' alike)."""
    return case_id.strip().casefold()


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
