"""report.json written as msgspec's bytes (``report_bytes`` handed to ``write_text``) is byte for byte what writing
``report_json``'s text wrote."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from gate.io.files import write_text
from gate.io.reports import COMPACT_ABOVE, SELF_CHECK, report_bytes, report_json

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
