"""People's labels against the judge, end to end: the quickstart judged by the OpenAI-compatible judge stand-in on
127.0.0.1 (real ragas), `rag-gate label` and `rag-gate calibrate` on its report, then runs whose judge gates carry
the calibration status: labels that agree give "calibrated", random ones "weak" (a skipped gate with on_fail: skip),
and a new judge model "stale"."""

from __future__ import annotations

import csv
import importlib.util
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.judge_server import JudgeServer

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
KEY = "sk-test-0123456789abcdef"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ragas") is None, reason="needs the judge engines")


def rag_gate(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "JUDGE_BASE_URL")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=300)


def judged_project(tmp: Path) -> Path:
    project = tmp / "qs"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".rag-gate", "eval", "__pycache__"))
    spec = (project / "rag-eval.judge.yml").read_text(encoding="utf-8")
    spec = spec.replace("metrics: [faithfulness, answer_relevancy, context_recall, deepeval/faithfulness, token_f1]", "metrics: [faithfulness]")
    spec = spec.replace("    self_check: {cases: 5, max_diff: 0.02}\n", "").replace("sample: {size: 20,", "sample: {size: 32,")
    spec = re.sub(r"    gates:\n      faithfulness:.*\n      answer_relevancy:.*\n      token_f1:.*\n", "    gates:\n      faithfulness: {min: 0.5}\n", spec)
    (project / "spec.yml").write_text(spec, encoding="utf-8")
    return project


def with_calibration(project: Path, on_fail: str, model: str | None = None) -> None:
    spec = (project / "spec.yml").read_text(encoding="utf-8")
    spec = re.sub(r"  calibration: \{.*\}\n", "", spec)
    spec = spec.replace("  temperature: 0\n", f"  temperature: 0\n  calibration: {{file: calibration.json, min_kappa: 0.6, on_fail: {on_fail}}}\n")
    if model:
        spec = re.sub(r"  model: \S+\n", f"  model: {model}\n", spec, count=1)
    (project / "spec.yml").write_text(spec, encoding="utf-8")


def labels_for(report: dict[str, Any], how: str, seed: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for s in report["stages"]["generation"]["samples"]:
        if "faithfulness" not in s["metrics"]:
            continue
        judge = s["metrics"]["faithfulness"]
        score = (1.0 if judge >= 0.5 else 0.0) if how == "agree" else float(rng.random() < 0.5)
        out.append({"case_id": s["id"], "metric": "faithfulness", "score": score, "labeler": "ana", "labelled_at": "2026-11-30T10:00:00+00:00",
                    "answer_id": s["output"]["answer"]})
    return out


def test_labels_that_agree_calibrate_the_judge_random_ones_make_it_weak_and_a_new_model_stale(tmp_path: Path) -> None:
    project = judged_project(tmp_path)
    with JudgeServer() as judge:
        env = {"OPENAI_API_KEY": KEY, "JUDGE_BASE_URL": judge.url}
        first = rag_gate(project, "run", "--config", "spec.yml", "--report", "report.json", "--no-progress", "-q", env=env)
        assert first.returncode in (0, 1), first.stdout + first.stderr
        report = json.loads((project / "report.json").read_text(encoding="utf-8"))
        scores = [s["metrics"]["faithfulness"] for s in report["stages"]["generation"]["samples"] if "faithfulness" in s["metrics"]]
        assert len(scores) >= 20 and len({s >= 0.5 for s in scores}) == 2, scores  # both sides of the threshold, or kappa says nothing

        agree = labels_for(report, "agree")
        (project / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in agree), encoding="utf-8")
        cal = rag_gate(project, "calibrate", "--labels", "labels.jsonl", "--report", "report.json", "--out", "calibration.json",
                       "--json", "-")
        assert cal.returncode == 0, cal.stdout + cal.stderr
        doc = json.loads(cal.stdout)
        m = doc["metrics"]["faithfulness"]
        assert m["n"] == len(agree) and m["kappa"] == pytest.approx(1.0) and m["threshold"] == 0.5
        assert doc["judge"]["model"] == "gpt-4o-mini-2024-07-18" and "faithfulness" in doc["judge"]["prompts"]
        assert "kappa" in cal.stderr  # the table on stderr when the JSON goes to stdout

        with_calibration(project, "skip")
        run = rag_gate(project, "run", "--config", "spec.yml", "--report", "r2.json", "--markdown", "c2.md", "--no-progress", env=env)
        r2 = json.loads((project / "r2.json").read_text(encoding="utf-8"))
        info = r2["stages"]["generation"]["calibration"]["faithfulness"]
        assert info["status"] == "calibrated" and info["n"] == len(agree), info
        hs = info["human_scale"]
        assert hs["low"] <= hs["estimate"] <= hs["high"] and hs["labels"] == len(agree)
        assert "faithfulness: calibrated (κ 1.00" in run.stdout
        assert "**Judge calibration**" in (project / "c2.md").read_text(encoding="utf-8")

        noise = labels_for(report, "random")
        (project / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in noise), encoding="utf-8")
        assert rag_gate(project, "calibrate", "--labels", "labels.jsonl", "--report", "report.json", "--out", "calibration.json").returncode == 0
        weak_doc = json.loads((project / "calibration.json").read_text(encoding="utf-8"))
        assert weak_doc["metrics"]["faithfulness"]["kappa"] is None or weak_doc["metrics"]["faithfulness"]["kappa"] < 0.6
        run = rag_gate(project, "run", "--config", "spec.yml", "--report", "r3.json", "--no-progress", env=env)
        r3 = json.loads((project / "r3.json").read_text(encoding="utf-8"))
        gen = r3["stages"]["generation"]
        assert gen["calibration"]["faithfulness"]["status"] == "weak"
        (gate,) = [g for g in gen["gates"] if g["metric"] == "faithfulness"]
        assert gate["status"] == "skipped" and "judge not calibrated for faithfulness: weak" in gate["reason"] and "(on_fail: skip)" in gate["reason"]

        with_calibration(project, "warn", model="gpt-4o-2024-11-20")
        run = rag_gate(project, "run", "--config", "spec.yml", "--report", "r4.json", "--no-progress", env=env)
        r4 = json.loads((project / "r4.json").read_text(encoding="utf-8"))
        info = r4["stages"]["generation"]["calibration"]["faithfulness"]
        assert info["status"] == "stale" and "gpt-4o-mini-2024-07-18" in info["reason"] and "gpt-4o-2024-11-20" in info["reason"]
        assert any("not calibrated" in w for w in r4["warnings"])


def test_labels_of_another_answer_never_count_and_bad_label_files_are_refused(tmp_path: Path) -> None:
    project = judged_project(tmp_path)
    with JudgeServer() as judge:
        env = {"OPENAI_API_KEY": KEY, "JUDGE_BASE_URL": judge.url}
        rag_gate(project, "run", "--config", "spec.yml", "--report", "report.json", "--no-progress", "-q", env=env)
    report = json.loads((project / "report.json").read_text(encoding="utf-8"))
    moved = [{**x, "answer_id": "0" * 24} for x in labels_for(report, "agree")]
    (project / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in moved), encoding="utf-8")
    cal = rag_gate(project, "calibrate", "--labels", "labels.jsonl", "--report", "report.json", "--out", "calibration.json")
    assert cal.returncode == 2 and "the label was given to another answer than the one judged" in cal.stderr
    assert not (project / "calibration.json").exists()
    for text, said in (('{"case_id": "q01"}\n', "lacks metric, score"), ("not json\n", "labels.jsonl:1"),
                       ('{"case_id": "q01", "metric": "faithfulness", "score": 7, "labeler": "a", "labelled_at": "2026-11-30", "answer_id": "x"}\n',
                        "'score' must be a number from 0 to 1")):
        (project / "labels.jsonl").write_text(text, encoding="utf-8")
        cal = rag_gate(project, "calibrate", "--labels", "labels.jsonl", "--report", "report.json", "--out", "calibration.json")
        assert cal.returncode == 2 and said in cal.stderr and "Traceback" not in cal.stderr, cal.stderr

    # the CSV sheet, filled in a spreadsheet and read back; a formula-like answer stays text
    sheet = rag_gate(project, "label", "--report", "report.json", "--config", "spec.yml", "--metrics", "faithfulness", "--n", "10",
                     "--out", "sheet.csv", "--format", "csv")
    assert sheet.returncode == 0, sheet.stderr
    rows = list(csv.DictReader((project / "sheet.csv").open(encoding="utf-8")))
    assert len(rows) == 10 and all(not r["answer"].startswith(("=", "+", "@")) for r in rows)
    for r in rows:
        r["score"], r["labeler"] = "1", "ben"
    with (project / "filled.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cal = rag_gate(project, "calibrate", "--labels", "filled.csv", "--report", "report.json", "--out", "calibration.json")
    assert cal.returncode == 0, cal.stderr
    assert json.loads((project / "calibration.json").read_text(encoding="utf-8"))["metrics"]["faithfulness"]["n"] == 10
