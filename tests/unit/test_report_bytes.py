"""report.json written as msgspec's bytes (``report_bytes`` handed to ``write_text``, or ``report_pieces`` to a
``PiecesWriter``) is byte for byte what writing ``report_json``'s text wrote."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from gate.io.files import RESTART, PiecesWriter, write_text
from gate.io.reports import COMPACT_ABOVE, PIECE_CASES, SELF_CHECK, report_bytes, report_json, report_pieces

ODD = "é ü 日本 🙂 \u2028\u2029 \x00\x1f\x7f \\ \" / \b\f\n\r\t </script> \ufeff"


def report(n: int, **extra: Any) -> dict[str, Any]:
    cases = [{"id": f"q{i} {ODD}", "answer": ODD[i % len(ODD):], "latency_ms": i / 7, "scores": [1e16, 1e-7, -0.0, 5e-324, 2 ** 70]}
             for i in range(n)]
    return {"verdict": "pass", "note": ODD, **extra, "cases": cases}


@pytest.mark.parametrize("n", [3, COMPACT_ABOVE, COMPACT_ABOVE + 1, 3000])
@pytest.mark.parametrize("extra", [{}, {"limit": math.nan}, {"limit": math.inf}])
def test_the_bytes_written_are_the_texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, extra: dict[str, Any]) -> None:
    monkeypatch.delenv(SELF_CHECK, raising=False)  # a made-up report, not one the schema would take
    doc = report(n, **extra)
    write_text(tmp_path / "old.json", report_json(doc))  # type: ignore[arg-type]
    write_text(tmp_path / "new.json", report_bytes(doc))  # type: ignore[arg-type]
    old, new = (tmp_path / "old.json").read_bytes(), (tmp_path / "new.json").read_bytes()
    assert new == old and new.endswith(b"}\n")
    assert (new.count(b"\n") == 1) == (n > COMPACT_ABOVE)  # compact above a thousand cases, indented below


def test_bytes_on_stdout_are_the_text(capfdbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SELF_CHECK, raising=False)
    doc = report(COMPACT_ABOVE + 1)
    print("before", flush=True)
    write_text("-", report_bytes(doc))  # type: ignore[arg-type]
    assert capfdbinary.readouterr().out == b"before\n" + report_json(doc).encode("utf-8")  # type: ignore[arg-type]


def test_a_file_written_from_bytes_gets_the_usual_mode(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt", "x\n")
    write_text(tmp_path / "b.bin", b"x\n")
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.bin").stat().st_mode
    assert (tmp_path / "b.bin").read_bytes() == b"x\n" and not list(tmp_path.glob(".*.tmp"))


def test_a_real_report_of_a_run_reads_back_and_is_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of 1,001 cases (the compact form) writes report.json; its value, written again as bytes with the schema
    self-check on, is the same bytes."""
    import json

    from gate.cli.main import main

    n = COMPACT_ABOVE + 1
    golden = [{"id": f"c{i}", "question": f"Wie lange — {i}? \"\\", "relevant_doc_ids": [f"d{i}", "dé"]} for i in range(n)]
    lines = [{"id": f"c{i}", "retrieved": [{"id": f"d{i + i % 3}", "score": 0.5}, {"id": "dé"}], "answer": f"🙂 {i}", "latency_ms": i / 3}
             for i in range(n)]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in golden), encoding="utf-8")
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text("version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\n"
                                           "stages:\n  retrieval:\n    metrics: [mrr, ndcg@10]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress"]) == 0
    written = (tmp_path / "report.json").read_bytes()
    monkeypatch.setenv(SELF_CHECK, "1")
    assert report_bytes(json.loads(written)) == written and written.count(b"\n") == 1


def joined(pieces: Any) -> bytes:
    """The file PiecesWriter would write of these pieces (RESTART drops what came before it)."""
    out = b""
    for p in pieces:
        out = b"" if p is RESTART else out + bytes(p)
    return out


@pytest.mark.parametrize("n", [0, 3, COMPACT_ABOVE, COMPACT_ABOVE + 1, PIECE_CASES * 2, PIECE_CASES * 2 + 1, 3500])
@pytest.mark.parametrize("extra", [{}, {"limit": math.nan}, {"limit": -math.inf}, {"z_after": {"deep": [1.5, None, ODD]}}])
def test_the_pieces_are_the_bytes(monkeypatch: pytest.MonkeyPatch, n: int, extra: dict[str, Any]) -> None:
    """report.json's pieces, joined, are report_bytes byte for byte: the cases a thousand at a time, any value before
    or after them, a NaN anywhere (json writes it, in one piece)."""
    monkeypatch.delenv(SELF_CHECK, raising=False)
    doc = report(n, **extra)
    pieces = list(report_pieces(doc))  # type: ignore[arg-type]
    assert joined(pieces) == report_bytes(doc)  # type: ignore[arg-type]
    if n > COMPACT_ABOVE and "limit" not in extra:  # msgspec's pieces: the cases among them a thousand at a time
        assert RESTART not in pieces and len(pieces) > 2 * len(doc) + n // PIECE_CASES
    else:  # report_bytes' own bytes
        assert len(pieces) == 1


def test_a_value_msgspec_refuses_half_way_restarts_the_file_with_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key msgspec refuses after the cases (True; json writes "true"): the pieces made so far are dropped and json's
    text follows, so the file is what report_bytes gives; a lone surrogate fails as report_bytes fails on it."""
    monkeypatch.delenv(SELF_CHECK, raising=False)
    doc = report(COMPACT_ABOVE + 5, z_after={True: 1})
    pieces = list(report_pieces(doc))  # type: ignore[arg-type]
    assert RESTART in pieces and pieces.index(RESTART) > 2 and pieces.index(RESTART) == len(pieces) - 2
    assert joined(pieces) == report_bytes(doc) == report_json(doc).encode("utf-8")  # type: ignore[arg-type]
    lone = report(COMPACT_ABOVE + 5, z_after="\ud800 alone")
    with pytest.raises(UnicodeEncodeError):
        report_bytes(lone)  # type: ignore[arg-type]
    with pytest.raises(UnicodeEncodeError):
        list(report_pieces(lone))  # type: ignore[arg-type]


def test_the_self_check_reads_the_joined_pieces_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """With RAG_GATE_SELF_CHECK set, a report the schema refuses fails before its last piece (so it is never put in
    place), as report_bytes fails on it."""
    monkeypatch.setenv(SELF_CHECK, "1")
    doc = report(COMPACT_ABOVE + 1)
    with pytest.raises(RuntimeError, match="refuses"):
        report_bytes(doc)  # type: ignore[arg-type]
    pieces = report_pieces(doc)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="refuses"):
        for _ in pieces:
            pass


def test_a_pieces_writer_puts_the_file_in_place_only_when_closed(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old\n")
    out = PiecesWriter(target, what="report")
    for piece in (b"ab", memoryview(b"xcdx")[1:3], RESTART, b"new ", memoryview(b"file"), b"\n"):
        out.write(piece)
    assert target.read_bytes() == b"old\n"
    out.close()
    assert target.read_bytes() == b"new file\n" and not list(tmp_path.glob(".*.tmp"))
    write_text(tmp_path / "plain.json", b"x")
    assert target.stat().st_mode == (tmp_path / "plain.json").stat().st_mode  # the mode write_text gives


def test_an_aborted_pieces_writer_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old\n")
    out = PiecesWriter(target, what="report")
    out.write(b"half of it")
    out.abort()
    assert target.read_bytes() == b"old\n" and not list(tmp_path.glob(".*.tmp"))


def test_a_pieces_writer_that_cannot_write_says_where_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails (the disk full) is raised by close as write_text raises it (exit 3, the path named), and
    neither the file nor a temporary is left; a path that is a directory is refused before anything is written."""
    import errno
    import os

    from gate.core.errors import InputError, RunError
    from gate.io import files

    target = tmp_path / "report.json"
    real_write = os.write

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    out = PiecesWriter(target, what="report")
    monkeypatch.setattr(files.os, "write", full)
    out.write(b"{}")
    out.finish()
    with pytest.raises(RunError) as raised:
        out.close()
    monkeypatch.setattr(files.os, "write", real_write)
    assert str(target) in raised.value.message and "the disk is full" in raised.value.message and raised.value.exit_code == 3
    assert not target.exists() and not list(tmp_path.glob(".*.tmp"))
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        PiecesWriter(tmp_path / "dir", what="report")
