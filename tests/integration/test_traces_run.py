"""Traces runs end to end: production traces in rag-gate's JSONL judged by the real DeepEval GEval code against the
OpenAI-compatible judge stand-in on 127.0.0.1, window after window through the CLI, the history recorded between them.
A judge that grows harsher is cancelled by the anchor traces (and is not without them); a real drop is caught; a window
under min_sample is "insufficient evidence"; consecutive_decline fires on the third fall, not the second; an unreadable
trace is counted and named."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.judge_server import JudgeServer

KEY = "sk-test-0123456789abcdef"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepeval") is None, reason="needs the judge engines")

SPEC = """version: 1
target:
  traces: {{path: traces.jsonl, format: rag-gate, sample: {{rate: 1.0, max: 300, seed: 7}}, anchor: {anchor}, min_sample: 30}}
judge:
  base_url: "${{JUDGE_BASE_URL}}"
  model: gpt-4o-mini-2024-07-18
  api_key_env: OPENAI_API_KEY
  temperature: 0
stages:
  retrieval:
    metrics: []
    gates:
      p95_latency_ms: {{max: 5000}}
  generation:
    engine: deepeval
    metrics: [supported]
    criteria:
      supported: "The answer says only what the retrieval context supports, nothing else."
    gates:
{gates}
history:
  path: history.jsonl
cache:
  path: cache.sqlite
"""
MAX_DROP = "      supported: {max_drop: 0.03}\n      refusal_rate: {max: 0.5}\n      negative_feedback_rate: {max: 0.5}"


FACTS = ("refunds take {days} days", "refunds are paid to the card used for order {o}", "returns of order {o} need the receipt",
         "exchanges of order {o} happen in the store", "gift cards of order {o} are not refunded")


def traces(prefix: str, day: int, bad: int, n: int = 200) -> list[dict[str, Any]]:
    """n traces over four days, each answer five sentences of its passage; in every ``bad``-th answer one of them is
    replaced by a sentence the passages do not support (a score of 0.8 instead of 1)."""
    out = []
    for i in range(n):
        o = f"{prefix}-{i}"
        facts = [f.format(days=10 + i % 9, o=o).capitalize() + "." for f in FACTS]
        said = facts[:4] + ["The moon is made of green cheese and sings."] if i % bad == 0 else facts
        answer = "I don't know." if i % 37 == 0 else " ".join(said)
        out.append({"id": f"{prefix}{i:03d}", "timestamp": f"2026-11-{day + i % 4:02d}T10:{i % 60:02d}:00Z",
                    "question": f"What are the refund rules for order {o}?",
                    "retrieved": [{"id": f"p{i}", "text": " ".join(facts), "score": 0.9},
                                  {"id": f"s{i}", "text": "Shipping is free above 50 euros.", "score": 0.4}],
                    "answer": answer, "latency_ms": 100 + i, "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320},
                    "feedback": (-1 if i % 7 == 0 else 1) if i % 2 == 0 else None})
    return out


class Project:
    def __init__(self, root: Path, judge: JudgeServer, *, anchor: int = 40, gates: str = MAX_DROP) -> None:
        self.root = root
        self.judge = judge
        root.mkdir(parents=True, exist_ok=True)
        (root / "spec.yml").write_text(SPEC.format(anchor=anchor, gates=gates), encoding="utf-8")

    def rag_gate(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**{k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "JUDGE_BASE_URL")},
               "OPENAI_API_KEY": KEY, "JUDGE_BASE_URL": self.judge.url}
        return subprocess.run([sys.executable, "-m", "gate", *args], cwd=self.root, env=env, capture_output=True, text=True, timeout=300)

    def window(self, rows: list[dict[str, Any]], name: str, *, record: bool = True, extra: str = "") -> dict[str, Any]:
        (self.root / "traces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + extra, encoding="utf-8")
        run = self.rag_gate("run", "--config", "spec.yml", "--report", f"{name}.json", "--markdown", f"{name}.md", "--no-progress")
        assert run.returncode in (0, 1), run.stdout + run.stderr
        assert "Traceback" not in run.stderr
        if record:
            rec = self.rag_gate("history", "record", "--config", "spec.yml", "--report", f"{name}.json")
            assert rec.returncode == 0, rec.stdout + rec.stderr
        report: dict[str, Any] = json.loads((self.root / f"{name}.json").read_text(encoding="utf-8"))
        report["_stdout"] = run.stdout
        return report


def gate_of(report: dict[str, Any], metric: str) -> dict[str, Any]:
    (gate,) = [g for g in report["stages"]["generation"]["gates"] if g["metric"] == metric]
    return gate


def check_of(report: dict[str, Any], metric: str, kind: str) -> dict[str, Any]:
    (check,) = [c for c in gate_of(report, metric)["checks"] if c["kind"] == kind]
    return check


def test_a_harsher_judge_is_cancelled_by_the_anchor_and_not_without_it(tmp_path: Path) -> None:
    with JudgeServer() as judge:
        anchored, raw = Project(tmp_path / "anchored", judge), Project(tmp_path / "raw", judge, anchor=0)
        for project in (anchored, raw):
            judge.offset = 0.0
            first = project.window(traces("a", 1, 5), "w1")
            assert check_of(first, "supported", "max_drop")["status"] == "skipped"
            assert "no earlier traces window" in check_of(first, "supported", "max_drop")["detail"]
            judge.offset = -0.06  # the same system, a judge 0.06 harsher on every score
            before = judge.calls
            second = project.window(traces("b", 8, 5), "w2")
            project.calls = judge.calls - before  # type: ignore[attr-defined]
            project.second = second  # type: ignore[attr-defined]

    a, r = anchored.second, raw.second  # type: ignore[attr-defined]
    wa = a["stages"]["generation"]["windows"]["previous"]["metrics"]["supported"]
    wr = r["stages"]["generation"]["windows"]["previous"]["metrics"]["supported"]
    # both windows are scored the same way in both projects: the raw comparison sees the judge's 0.06 as a fall
    assert wa["mean"] == pytest.approx(wr["mean"]) and wa["reference_mean"] == pytest.approx(wr["reference_mean"])
    assert wr["drift"] is None and wr["mean"] - wr["reference_mean"] < -0.04
    assert check_of(r, "supported", "max_drop")["status"] == "fail"
    # the anchor measured the drift on the previous window's own traces, and cancelled it
    assert wa["anchor_n"] == 40 and -0.07 < wa["drift"] < -0.03
    assert abs(wa["delta"]) < 0.02 and check_of(a, "supported", "max_drop")["status"] == "pass"
    assert "judge drift" in check_of(a, "supported", "max_drop")["detail"]
    # the anchors were judged afresh (never the cache): 40 more judgings than the raw project made
    assert a["stages"]["generation"]["windows"]["previous"]["judgings"] == 40
    assert anchored.calls > raw.calls  # type: ignore[attr-defined]
    # exact shares of the traffic, compared without an anchor (no judge in them)
    assert a["stages"]["generation"]["windows"]["previous"]["metrics"]["refusal_rate"]["drift"] is None
    comment = (anchored.root / "w2.md").read_text(encoding="utf-8")
    assert "This window vs the previous window" in comment and "Judge drift" in comment and "Traces: 200 sampled of 200" in comment


def test_a_real_drop_is_caught_and_a_small_window_is_insufficient_evidence(tmp_path: Path) -> None:
    with JudgeServer() as judge:
        project = Project(tmp_path / "p", judge)
        project.window(traces("a", 1, 10), "w1")
        worse = project.window(traces("b", 8, 2), "w2", record=False)  # half the answers now invent a sentence
        small = project.window(traces("c", 8, 10, n=12), "w3", record=False)
    check = check_of(worse, "supported", "max_drop")
    assert check["status"] == "fail" and "above 0.03" in check["detail"] and "significant" in check["detail"], check
    assert worse["verdict"] == "fail"
    small_check = check_of(small, "supported", "max_drop")
    assert small_check["status"] == "skipped"
    assert small_check["detail"].startswith("insufficient evidence: 12 scored traces in this window, fewer than min_sample 30")
    assert "insufficient evidence" in (project.root / "w3.md").read_text(encoding="utf-8")


def test_consecutive_decline_fires_on_the_third_judge_corrected_fall_not_the_second(tmp_path: Path) -> None:
    with JudgeServer() as judge:
        project = Project(tmp_path / "p", judge, gates="      supported: {consecutive_decline: 3}")
        reports = []
        # a rise, then three falls, under a judge growing kinder each week (which hides part of each fall in raw means)
        for i, (bad, offset) in enumerate(((4, 0.0), (50, 0.02), (4, 0.04), (2, 0.06), (1, 0.08))):
            judge.offset = offset
            reports.append(project.window(traces("abcde"[i], 1 + 7 * i, bad), f"w{i + 1}"))
    deltas = [r["stages"]["generation"]["windows"]["previous"]["metrics"]["supported"]["delta"] for r in reports[1:]]
    assert deltas[0] > 0 and all(d < 0 for d in deltas[1:]), deltas
    statuses = [check_of(r, "supported", "consecutive_decline")["status"] for r in reports]
    assert statuses == ["skipped", "skipped", "skipped", "pass", "fail"], statuses
    assert "not worse in each of the last 3 windows" in check_of(reports[3], "supported", "consecutive_decline")["detail"]
    fired = check_of(reports[4], "supported", "consecutive_decline")["detail"]
    assert fired.startswith("worse in each of the last 3 windows (judge drift cancelled)") and "significant at 0.99" in fired
    history = [json.loads(line) for line in (project.root / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [round(h["stages"]["generation"]["window_deltas"]["supported"], 9) for h in history[1:]] == [round(d, 9) for d in deltas]


def test_an_unreadable_trace_is_counted_and_named_and_the_spec_refuses_what_traces_cannot_measure(tmp_path: Path) -> None:
    with JudgeServer() as judge:
        project = Project(tmp_path / "p", judge)
        report = project.window(traces("a", 1, 5, n=40), "w1", record=False, extra='{"id": "broken", "question": 7}\nnot json\n')
        assert report["traces"]["unreadable"] == 2 and report["traces"]["read"] == 40
        lines = sorted(p["line"] for p in report["traces"]["problems"])
        assert lines == [41, 42], report["traces"]["problems"]
        assert "2 unreadable" in report["_stdout"] and "line 41" in (project.root / "w1.md").read_text(encoding="utf-8")
        spec = (project.root / "spec.yml").read_text(encoding="utf-8")
        for bad, said in ((spec.replace("metrics: []", "metrics: [hit_rate@5]"), "stages.retrieval.metrics"),
                          (spec.replace("metrics: [supported]", "metrics: [supported, answer_correctness]"), "answer_correctness"),
                          (spec.replace("anchor: 40,", "anchor: 40, since: last tuesday,"), "target.traces.since")):
            (project.root / "bad.yml").write_text(bad, encoding="utf-8")
            run = project.rag_gate("run", "--config", "bad.yml", "--no-progress")
            assert run.returncode == 2 and said in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_the_spec_printed_in_the_docs_is_valid_and_plans_its_run(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "traces.md").read_text(encoding="utf-8")
    block = doc.split("```yaml\n# rag-eval.traces.yml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "rag-eval.traces.yml").write_text(block, encoding="utf-8")
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "langfuse.jsonl"
    (tmp_path / "traces.jsonl").write_bytes(fixture.read_bytes())
    from gate.config.loader import load_spec

    spec = load_spec(tmp_path / "rag-eval.traces.yml")
    assert spec.traces is not None and spec.traces["format"] == "langfuse" and spec.traces["anchor"] == 40
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    # the docs' window is the last 7 days: the fixture's traces are older, so the window holds none of them
    plan = subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.traces.yml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0 and "traces read (langfuse), 0 unreadable; 0 in the window" in plan.stdout, plan.stdout + plan.stderr
