"""A results file decoded in one call (``_whole_file``) gives exactly what reading it line by line gives: the same
outputs, unmatched lines and noise answers, or the same errors on the same lines; any file it cannot vouch for is
read line by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase
from gate.targets import results as results_module
from gate.targets.results import Results, read_results

CASES = [GoldenCase(id=f"c{i}", question=f"question {i}?", line=i, relevant={f"d{i}": 1}) for i in range(1, 6)]


def row(case_id: str, *ids: str, **extra: Any) -> str:
    retrieved = [{"id": d, "text": f"passage {d}", "score": 1.0 - n / 10} for n, d in enumerate(ids)]
    return json.dumps({"id": case_id, "retrieved": retrieved, "answer": "an answer", **extra})


GOOD = [row("c1", "d1", "x"), row("c2", "x", "d2"), row("c3", "d3")]


def outcome(path: Path, texts: bool, prefetched: bool = False) -> tuple[str, Any]:
    """What read_results gives: ("ok", outputs, unmatched, noise) or ("error", every error's message, line, key).
    ``prefetched``: the file read as a run reads it (in a thread, mapped into memory where gate.core._native is built;
    without texts, its ranked ids scanned in C)."""
    try:
        got: Results = read_results(path, CASES, texts, read=results_module.prefetch(path, ranked=not texts) if prefetched else None)
    except InputError as exc:
        errors = exc.errors if isinstance(exc, InputErrors) else [exc]
        return "error", [(e.message, e.file, e.line, e.key, e.hint) for e in errors]
    return "ok", (got.outputs, got.unmatched, got.noise)


def both(tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch, texts: bool = True) -> tuple[Any, bool]:
    """(the outcome, whether the one-call path took the file), after checking it equals the line-by-line outcome."""
    path = tmp_path / "results.jsonl"
    path.write_bytes(data)
    shape = results_module._Line if texts else results_module._LineOfIds
    took = results_module._whole_file(data, shape) is not None
    fast = outcome(path, texts)
    assert outcome(path, texts, prefetched=True) == fast
    with monkeypatch.context() as m:
        m.setattr(results_module, "_whole_file", lambda raw, shape, scanned=None: None)
        slow = outcome(path, texts)
    assert fast == slow
    return fast, took


def lines(*rows: str, end: str = "\n") -> bytes:
    return "".join(r + end for r in rows).encode("utf-8")


@pytest.mark.parametrize("texts", [True, False])
def test_a_usual_file_is_decoded_in_one_call_with_the_same_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   texts: bool) -> None:
    (kind, (outputs, unmatched, noise)), took = both(tmp_path, lines(*GOOD, row("nobody", "d1")), monkeypatch, texts)
    assert took and kind == "ok"
    assert [p.id for p in outputs["c2"].retrieved] == ["x", "d2"] and unmatched == [4] and noise == {}
    assert [p.text for p in outputs["c1"].retrieved] == (["passage d1", "passage x"] if texts else [None, None])


CLEAN = {  # files the one-call path takes
    "no trailing newline": lines(*GOOD)[:-1],
    "CRLF throughout": lines(*GOOD, end="\r\n"),
    "CRLF, no trailing newline": lines(*GOOD, end="\r\n")[:-2],
    "unicode ids and texts": lines(row("c1", "dé", "日本"), json.dumps({"id": "c2", "retrieved": [{"id": "x", "text": "naïve 🙂"}]})),
    "an empty file": b"",
    "a huge integer score": lines(json.dumps({"id": "c1", "retrieved": [{"id": "d1", "score": 10 ** 200}]})),
    "an integer latency and noise": lines(row("c1", "d1", latency_ms=12, noise={"noisy_answer": "n", "distractors": ["p"]})),
    "matched by question": lines(json.dumps({"question": "question 2?", "retrieved": [{"id": "d2"}]})),
    "an unknown question": lines(json.dumps({"question": "who?", "retrieved": [{"id": "d2"}]}), *GOOD),
    "duplicate ids": lines(*GOOD, row("c2", "d9")),
    "a line without an id": lines(json.dumps({"retrieved": [{"id": "d2"}]}), *GOOD),
    "an error line": lines(json.dumps({"id": "c1", "retrieved": [], "error": "timed out"})),
    "a latency out of range": lines(row("c1", "d1", latency_ms=1e12), row("c2", "d2", latency_ms=-1)),
    "a bad noise": lines(row("c1", "d1", noise={"noisy_answer": 3})),
    "leading spaces on the first line": b"   " + lines(*GOOD),
    "unicode escapes, a surrogate pair": lines(json.dumps({"id": "c1", "retrieved": [{"id": "\U0001f600", "text": "\u00e9"}]})),
}


@pytest.mark.parametrize("name", sorted(CLEAN))
@pytest.mark.parametrize("texts", [True, False])
def test_tricky_files_the_one_call_path_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, texts: bool) -> None:
    _, took = both(tmp_path, CLEAN[name], monkeypatch, texts)
    assert took


def lc(case_id: str) -> str:  # a LangChain-serialised line: the dict way
    return json.dumps({"id": case_id, "context": [{"page_content": "text", "metadata": {"id": "d1"}}], "answer": "a"})


DEEP = {"noisy_answer": "n", "x": json.loads("[" * 250 + "]" * 250)}

OTHER = {  # files read line by line (the one-call path refuses them), with what each gives
    "a blank line": lines(GOOD[0], "", GOOD[1], "   ", GOOD[2]),
    "a BOM": b"\xef\xbb\xbf" + lines(*GOOD),
    "a lone CR": lines(GOOD[0]) + GOOD[1].encode() + b"\r" + lines(GOOD[2]),
    "CRLF and LF mixed": lines(GOOD[0], end="\r\n") + lines(*GOOD[1:]),
    "a bad line in the middle": lines(GOOD[0], '{"id": "c2", "retrieved": [', GOOD[2]),
    "a list line": lines(GOOD[0], "[1, 2]", GOOD[2]),
    "two values on a line and one over two lines": lines(GOOD[0] + " " + GOOD[1], '{"id": "c3",', '"retrieved": []}'),
    "framework lines": lines(GOOD[0], lc("c2"), GOOD[2]),
    "an empty passage id": lines(GOOD[0], row("c2", ""), GOOD[2]),
    "a score beyond 1e300": lines(GOOD[0], json.dumps({"id": "c2", "retrieved": [{"id": "d2", "score": 10 ** 301}]})),
    "an integer score of 400 digits": lines(json.dumps({"id": "c2", "retrieved": [{"id": "d2", "score": 10 ** 400}]})),
    "a lone surrogate escape": lines(GOOD[0], '{"id": "c2", "retrieved": [{"id": "d2", "text": "x\\ud800"}]}'),
    "invalid UTF-8 in a skipped field": lines(GOOD[0]) + b'{"id": "c2", "retrieved": [{"id": "d2", "meta": "\xff"}]}\n',
    "invalid UTF-8 in a text": lines(GOOD[0]) + b'{"id": "c2", "retrieved": [{"id": "d2", "text": "\xed\xa0\x80"}]}\n',
    "a U+001C line (whitespace to Python)": lines(GOOD[0], "\x1c", GOOD[1]),
    "NaN": lines(GOOD[0], '{"id": "c2", "retrieved": [{"id": "d2", "score": NaN}]}'),
    "a passage of another type": lines(GOOD[0], '{"id": "c2", "retrieved": [{"id": 7}]}'),
    "noise nested deep": lines(GOOD[0], row("c2", "d2", noise=DEEP)),
    "trailing spaces": lines(GOOD[0] + "  ", GOOD[1]),
    "whitespace only": b"  \n\t\n",
    "a pretty-printed line": json.dumps(json.loads(GOOD[0]), indent=1).encode() + b"\n",
}


@pytest.mark.parametrize("name", sorted(OTHER))
@pytest.mark.parametrize("texts", [True, False])
def test_tricky_files_read_line_by_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, texts: bool) -> None:
    _, took = both(tmp_path, OTHER[name], monkeypatch, texts)
    assert not took


def test_a_bad_line_in_the_middle_is_named_with_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kind, errors), _ = both(tmp_path, lines(GOOD[0], "", '{"id": "c2", "retrieved": [', GOOD[2]), monkeypatch)
    assert kind == "error" and [e[2] for e in errors] == [3] and "invalid JSON" in errors[0][0]


def test_duplicates_and_missing_ids_are_named_with_their_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = lines(*GOOD, row("c2", "d9"), json.dumps({"retrieved": []}))
    (kind, errors), took = both(tmp_path, data, monkeypatch)
    assert took and kind == "error"
    assert [e[2] for e in errors] == [4, 5]
    assert errors[0][0].endswith(":4: second line for case 'c2' (first at line 2)")
    assert errors[1][0].endswith(":5: each line needs an 'id' (string) or the 'question' of a golden case")


def test_lines_after_a_blank_one_keep_their_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kind, (_, unmatched, _)), took = both(tmp_path, lines(GOOD[0], "", row("nobody", "d1")), monkeypatch)
    assert not took and kind == "ok" and unmatched == [3]


def test_framework_lines_are_read_the_dict_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kind, (outputs, _, _)), took = both(tmp_path, lines(GOOD[0], lc("c2")), monkeypatch)
    assert not took and kind == "ok" and [p.id for p in outputs["c2"].retrieved] == ["d1"]


def test_not_utf8_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kind, errors), _ = both(tmp_path, lines(GOOD[0]) + b'{"id": "c2", "retrieved": [{"id": "d2", "meta": "\xff"}]}\n',
                             monkeypatch, texts=False)
    assert kind == "error" and errors[0][0].endswith(": not UTF-8 text")


def test_many_random_files_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files cut together from usual, odd and broken lines, with LF or CRLF: the two paths agree on every one."""
    import random

    rng = random.Random(5)
    pieces = [*GOOD, row("c4", "d4", "d4", latency_ms=3.5), row("c5"), lc("c5"), row("c1", ""), "", "  ", "{", "[]",
              json.dumps({"id": "c2", "retrieved": [{"id": "d2", "score": 10 ** 301}]}), row("c3", "ü", noise={"noisy_answer": "x"})]
    took = 0
    for _ in range(150):
        chosen = rng.sample(pieces, rng.randint(0, 6))
        data = lines(*chosen, end=rng.choice(["\n", "\r\n"]))
        if rng.random() < 0.3:
            data = data.rstrip(b"\r\n")
        took += both(tmp_path, data, monkeypatch, texts=rng.random() < 0.5)[1]
    assert took > 10  # some of them went the one-call way


@pytest.mark.parametrize("texts", [True, False], ids=["texts", "ids"])
@pytest.mark.parametrize("extra", [{}, {"latency_ms": 12.5}, {"answer": None}, {"contexts": ["c1", "c2"]}, {"usage": {"total_tokens": 3}},
                                   {"cached": True}, {"system": {"model": "m"}}, {"error": ""}, {"noise": {"noisy_answer": "n"}}],
                         ids=["plain", "latency", "no-answer", "contexts", "usage", "cached", "system", "empty-error", "noise"])
def test_a_line_reads_as_output_from_reads_it(tmp_path: Path, extra: dict[str, Any], texts: bool) -> None:
    # the usual line (a ranked list and an answer alone) skips output_from: it must give what output_from gives
    from gate.targets import Beside, output_from
    path = tmp_path / "results.jsonl"
    path.write_text(row("c1", "d1", "y", "x") + "\n" + json.dumps(
        {"id": "c2", "retrieved": [{"id": "d2", "text": "", "score": 0.5}, {"id": "d9"}], **extra}) + "\n", encoding="utf-8")
    got = read_results(path, CASES, texts).outputs
    shape = results_module._Line if texts else results_module._LineOfIds
    for line in path.read_text(encoding="utf-8").splitlines():
        decoded = results_module.fast_as(line, shape, open_fields=results_module._OPEN)
        assert decoded is not None
        want = output_from(decoded.id, decoded.retrieved, Beside(decoded.answer, decoded.contexts, decoded.usage, decoded.cached,
                                                                 decoded.system), latency_ms=decoded.latency_ms)
        assert got[decoded.id] == want
    assert got["c1"].contexts == (["passage d1", "passage y", "passage x"] if texts else [])


def test_a_file_read_ahead_says_what_a_file_read_then_says(tmp_path: Path) -> None:
    # an empty file (which cannot be mapped) and one that is not there: as read_results says them itself
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert outcome(empty, True, prefetched=True) == outcome(empty, True) == ("ok", ({}, [], {}))
    missing = tmp_path / "missing.jsonl"
    assert outcome(missing, True, prefetched=True) == outcome(missing, True)
    assert outcome(missing, True)[1][0][0].endswith("missing.jsonl: file not found")
