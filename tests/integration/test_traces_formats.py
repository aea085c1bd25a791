"""The four trace formats through a whole run: each fixture of tests/fixtures/traces (written from the tools' published
field names, see its README) judged by the same spec with no judge (answer checks, refusal and feedback shares,
health) gives the same cases and the same figures; a malformed file's traces are counted and named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
FORMATS = ("rag-gate", "langfuse", "openinference", "otel-genai")
SPEC = """version: 1
target:
  traces: {{path: {path}, format: {fmt}, sample: {{rate: 1.0, max: 300, seed: 7}}, min_sample: 2}}
stages:
  retrieval:
    metrics: []
    gates:
      error_rate: {{max: 0.5}}
  generation:
    metrics: []
    checks: {{max_words: 40}}
    gates:
      check_pass_rate: {{min: 0.5}}
      refusal_rate: {{max: 0.5}}
      negative_feedback_rate: {{max: 0.9}}
history:
  path: history-{fmt}.jsonl
"""


def run(tmp: Path, fmt: str, path: Path, codes: tuple[int, ...] = (0, 1)) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    spec = tmp / f"{fmt}.yml"
    spec.write_text(SPEC.format(path=json.dumps(str(path)), fmt=fmt), encoding="utf-8")
    out = tmp / f"{fmt}.json"
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", str(spec), "--report", str(out), "--no-progress"],
                          cwd=tmp, capture_output=True, text=True, timeout=120)
    assert proc.returncode in codes and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    return proc, json.loads(out.read_text(encoding="utf-8"))


def test_every_format_reads_into_the_same_cases_and_figures(tmp_path: Path) -> None:
    reports = {fmt: run(tmp_path, fmt, FIXTURES / f"{fmt}.jsonl")[1] for fmt in FORMATS}
    base = reports["rag-gate"]
    assert base["traces"]["read"] >= 5 and base["traces"]["unreadable"] == 0
    for fmt, report in reports.items():
        assert report["traces"]["unreadable"] == 0, (fmt, report["traces"]["problems"])
        assert [(c["id"], c["question"], c["feedback"]) for c in report["traces"]["cases"]] == \
            [(c["id"], c["question"], c["feedback"]) for c in base["traces"]["cases"]], fmt
        assert [(c["id"], c["retrieved"], c["answer"], c["error"]) for c in report["cases"]] == \
            [(c["id"], c["retrieved"], c["answer"], c["error"]) for c in base["cases"]], fmt
        gen, ret = report["stages"]["generation"]["metrics"], report["stages"]["retrieval"]["metrics"]
        assert gen == base["stages"]["generation"]["metrics"], fmt
        assert gen["negative_feedback_rate"] > 0 and "refusal_rate" in gen and "check_pass_rate" in gen
        for m in ("error_rate", "mean_latency_ms", "mean_total_tokens"):
            assert ret[m] == pytest.approx(base["stages"]["retrieval"]["metrics"][m], rel=1e-6), (fmt, m)
        assert report["traces"]["by_day"] == base["traces"]["by_day"] and len(report["traces"]["by_day"]) >= 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_malformed_trace_is_counted_and_named_with_its_line(tmp_path: Path, fmt: str) -> None:
    # exit 3 allowed: a gated metric may have nothing left to count (no rated trace survives), which is an error of the run
    proc, report = run(tmp_path, fmt, FIXTURES / f"{fmt}.malformed.jsonl", (0, 1, 3))
    t = report["traces"]
    assert t["unreadable"] >= 1 and t["unreadable"] == len(t["problems"])
    assert all(p["line"] >= 1 and p["reason"] for p in t["problems"])
    assert f"{t['unreadable']} unreadable" in proc.stdout and f"line {t['problems'][0]['line']}" in proc.stdout
