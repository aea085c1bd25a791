"""Progress on stderr: lines in CI logs (not a terminal), bars on a terminal, and the closing lines that split the time
between the target and the judges. Through the real CLI against the test judge, and the reporter alone."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gate.core.model import TargetOutput
from gate.progress import Progress

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_ci_lines_every_few_seconds_and_the_closing_lines() -> None:
    out = io.StringIO()
    shown = Progress(True, out, every=0.0)  # every tick is "a few seconds later"
    shown.on_start(3, "http")
    for i in range(3):
        shown.on_done(TargetOutput(f"c{i}", error="HTTP 503" if i == 2 else None))
    spent = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "embedding_tokens": 0, "cost": 0.0}

    def usage() -> dict[str, float]:  # what the judge client has counted so far
        return dict(spent)

    shown.start("generation", 4, usage=usage)
    for _ in range(4):
        spent.update(calls=spent["calls"] + 3, prompt_tokens=spent["prompt_tokens"] + 900, completion_tokens=spent["completion_tokens"] + 60,
                     cost=spent["cost"] + 0.0015)
        shown.done("generation")
    shown.start("robustness", 0)  # nothing to judge: nothing said
    shown.close()
    text = out.getvalue()
    assert text.startswith("rag-gate: asking the http target for 3 cases\n")
    assert re.search(r"^rag-gate: the target: 1 of 3 cases answered \(\d+(\.\d)?/s, about \d+ s left\)$", text, re.MULTILINE), text
    assert "rag-gate: judging generation: 4 scores to compute\n" in text
    assert re.search(r"^rag-gate: judging generation: 2 of 4 scores \(.*\); 6 judge calls, 1,920 tokens, \$0\.0030$", text, re.MULTILINE), text
    assert re.search(r"^rag-gate: the target took \d+\.\d s for 3 cases: 2 answered, 1 errored$", text, re.MULTILINE)
    assert re.search(r"^rag-gate: the judges took \d+\.\d s for 4 scores \(generation 4\): 12 judge calls, 3,840 tokens, \$0\.0060$",
                     text, re.MULTILINE), text
    assert "robustness" not in text


def test_the_noise_tests_answers_are_the_targets_time_not_the_judges(tmp_path: Path) -> None:
    """The offline quickstart: no judge, but the robustness stage asks the target again for 20 cases x (clean, noisy)."""
    ws = tmp_path / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json"], cwd=ws,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = json.loads((ws / "report.json").read_text(encoding="utf-8"))["stages"]["robustness"]["target_calls"]
    assert calls == 40
    assert f"rag-gate: the noise test: asking the target for {calls} answers from given passages\n" in proc.stderr
    assert re.search(rf"^rag-gate: the target took \d+\.\d s for 40 cases: 40 answered, 0 errored; and {calls} answers from "
                     r"given passages for the noise test \(\d+\.\d s of it\)$", proc.stderr, re.MULTILINE), proc.stderr
    # the offline metrics are scores too, computed in-process: no judge client, so no calls, tokens or cost, and never
    # announced as judging
    assert re.search(r"^rag-gate: scoring generation: \d+ scores to compute with the metrics that need no model$", proc.stderr, re.MULTILINE)
    assert re.search(r"^rag-gate: the metrics that need no model took \d+\.\d s for \d+ scores \(generation \d+\)$", proc.stderr,
                     re.MULTILINE), proc.stderr
    assert "judging" not in proc.stderr and "judges" not in proc.stderr


def test_a_terminal_gets_bars_and_a_disabled_reporter_says_nothing() -> None:
    term = Terminal()
    shown = Progress(True, term)
    shown.start("generation", 2, usage=lambda: {"calls": 7, "prompt_tokens": 1500, "completion_tokens": 20, "cost": None})
    shown.done("generation")
    shown.done("generation")
    assert shown.bars["generation"].n == 2
    assert shown.bars["generation"].postfix == "7 judge calls, 1,520 tokens"  # drawn after the rate; no judge.prices: no cost
    shown.close()
    assert "\rjudging generation:   0%|" in term.getvalue() and "/2 [" in term.getvalue()  # tqdm's bar, redrawn in place
    quiet = io.StringIO()
    off = Progress(False, quiet)
    off.on_start(1, "python")
    off.start("generation", 1)
    off.done("generation")
    off.close()
    assert quiet.getvalue() == ""


def test_a_judged_run_reports_its_judging_on_stderr(tmp_path: Path) -> None:
    pytest.importorskip("ragas")
    from tests.support.judge_server import JudgeServer

    ws = tmp_path / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    with JudgeServer() as judge:
        env.update(PYTHONPATH=str(ROOT), JUDGE_BASE_URL=judge.url, OPENAI_API_KEY="sk-test-0123456789abcdef")
        proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.judge.yml", "--report", "report.json"],
                              cwd=ws, env=env,
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 22 sampled cases x 5 judge metrics + the self-check's 5 cases x 5 (token_f1 needs no judge: counted too)
    said = re.search(r"^rag-gate: judging generation: (\d+) scores to compute$", proc.stderr, re.MULTILINE)
    assert said and int(said.group(1)) > 100, proc.stderr
    closing = re.search(r"^rag-gate: the judges took \d+\.\d s for (\d+) scores \(generation (\d+)\): (\d+) judge calls, ([\d,]+) tokens(.*)$",
                        proc.stderr, re.MULTILINE)
    assert closing and closing.group(1) == closing.group(2) == said.group(1), proc.stderr
    # the calls and tokens as they accrued: at the end, what the report says the judge client counted
    usage = json.loads((ws / "report.json").read_text(encoding="utf-8"))["stages"]["generation"]["usage"]
    assert int(closing.group(3)) == usage["calls"] > 0
    assert int(closing.group(4).replace(",", "")) == usage["prompt_tokens"] + usage["completion_tokens"] + usage.get("embedding_tokens", 0) > 0
    cost = f", ${usage['cost']:.4f}" if usage.get("cost") is not None else " (no judge.prices: no cost)"
    assert closing.group(5) == cost
    assert proc.stderr.index("the target took") < proc.stderr.index("the judges took")


def test_a_results_file_is_said_at_once_as_one_by_one() -> None:
    # a results file's answers are all in memory: counted in one call (on_all), to the same lines and bar
    outputs = [TargetOutput(f"c{i}", error="results file: timeout" if i % 4 == 0 else None) for i in range(10)]
    texts = []
    for at_once in (True, False):
        out = io.StringIO()
        shown = Progress(True, out, every=3600.0)
        shown.on_start(10, "results")
        if at_once:
            shown.on_all(outputs)
        else:
            for o in outputs:
                shown.on_done(o)
        shown.close()
        texts.append(re.sub(r"took \d+\.\d s", "took T s", out.getvalue()))
    assert texts[0] == texts[1] == ("rag-gate: asking the results target for 10 cases\n"
                                    "rag-gate: the target took T s for 10 cases: 7 answered, 3 errored\n")
    term = Terminal()
    bar = Progress(True, term)
    bar.on_start(10, "results")
    bar.on_all(outputs)
    assert bar.bars["target"].n == 10
    bar.close()


def test_a_results_file_run_says_its_counts(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    golden = [json.loads(line) for line in (ws / "golden_set.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = [{"id": c["id"], "retrieved": [{"id": d} for d in c.get("relevant_doc_ids", [])]} for c in golden]
    lines[0] = {"id": golden[0]["id"], "error": "timeout"}
    (ws / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (ws / "spec.yml").write_text("version: 1\ngolden_set: golden_set.jsonl\ntarget:\n  results: results.jsonl\nmax_error_rate: 0.5\n"
                                 "stages:\n  retrieval:\n    metrics: [mrr]\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "spec.yml", "--report", "r.json"], cwd=ws,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "GITHUB_ACTIONS": ""})
    assert proc.returncode == 0, proc.stderr
    n = len(golden)
    assert f"rag-gate: asking the results target for {n} cases\n" in proc.stderr
    assert re.search(rf"^rag-gate: the target took \d+\.\d s for {n} cases: {n - 1} answered, 1 errored$", proc.stderr, re.MULTILINE), proc.stderr
