"""Per-group gates: `hit_rate@5: {min: 0.8, max_drop: 0.2, by: category}` gates each category besides the whole set.

The real CLI on a results file: the baseline retrieves every relevant passage; the pull request loses every "travel"
case (6 of 40). The whole set drops to 0.85, within the gate; travel drops to 0, and the gate fails naming it.
A category of 3 cases is reported, not gated. The comment is rendered by cmark-gfm, GitHub's renderer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
baseline: {path: baseline.json}
stages:
  retrieval:
    metrics: [hit_rate@5, mrr]
    gates:
      hit_rate@5: {min: 0.8, max_drop: 0.2, by: category}
      mrr: {min: 0.5, by: question_type, min_group_size: 4}
"""
CATEGORIES = ["travel"] * 6 + ["billing"] * 20 + ["accounts"] * 10 + ["misc"] * 3 + [None]


def golden() -> str:
    rows = []
    for i, category in enumerate(CATEGORIES):
        row: dict[str, Any] = {"id": f"c{i:02d}", "question": f"Question {i}?", "relevant_doc_ids": [f"d{i}"],
                               "question_type": "simple" if i % 2 else "multi_context"}
        if category:
            row["category"] = category
        rows.append(json.dumps(row))
    return "\n".join(rows) + "\n"


def results(lose_travel: bool) -> str:
    lines = []
    for i, category in enumerate(CATEGORIES):
        hit = not (lose_travel and category == "travel")
        lines.append(json.dumps({"id": f"c{i:02d}", "retrieved": [{"id": f"d{i}" if hit else "x"}, {"id": "y"}]}))
    return "\n".join(lines) + "\n"


def rag_gate(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    (tmp_path / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(golden(), encoding="utf-8")
    (tmp_path / "results.jsonl").write_text(results(False), encoding="utf-8")
    assert rag_gate(tmp_path, "run", "--config", "rag-eval.yml", "--report", "base.json", "--no-progress").returncode == 0
    assert rag_gate(tmp_path, "baseline", "update", "--config", "rag-eval.yml", "--report", "base.json").returncode == 0
    return tmp_path


def test_a_group_fails_and_is_named_while_the_whole_set_passes(ws: Path) -> None:
    (ws / "results.jsonl").write_text(results(True), encoding="utf-8")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--markdown", "comment.md", "--no-progress")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    hit, mrr = report["stages"]["retrieval"]["gates"]
    assert hit["value"] == pytest.approx(34 / 40) and hit["status"] == "fail"
    overall = [c for c in hit["checks"] if not c["detail"].startswith("category ")]
    assert {c["status"] for c in overall} == {"pass"}  # the whole set is within min 0.8 and max_drop 0.2
    assert "category travel (6 cases): 0 < min 0.8" in hit["reason"]
    assert "category travel (6 cases): drop 1 vs baseline 1 (above 0.2)" in hit["reason"]
    groups = {g["group"]: g for g in hit["groups"]}
    assert groups["travel"] == {"by": "category", "group": "travel", "n": 6, "value": 0.0, "baseline": 1.0, "delta": -1.0,
                                "status": "fail", "detail": groups["travel"]["detail"]}
    assert groups["billing"]["status"] == groups["accounts"]["status"] == "pass"
    assert groups["misc"]["status"] == "skipped" and "under min_group_size 5: not gated" in groups["misc"]["detail"]
    assert hit["rule"] == "min 0.8, max_drop 0.2, by category"
    # question types: 20 of each, travel's losses split between them; both above min 0.5 with min_group_size 4
    assert mrr["status"] == "pass" and {g["group"] for g in mrr["groups"]} == {"simple", "multi_context"}

    html = cmarkgfm.github_flavored_markdown_to_html((ws / "comment.md").read_text(encoding="utf-8"), options=Options.CMARK_OPT_UNSAFE)
    assert "<details open><summary><code>hit_rate@5</code> by category: 1 of 3 groups failed, 1 too small to gate</summary>" in html
    row = html[html.index("<td><code>travel</code></td>"):]
    row = row[:row.index("</tr>")]
    assert [cell.split(">", 1)[1].split("<")[0] for cell in row.split("<td")[2:]] == ["6", "1.0000", "0.0000", "−1.0000", "❌"]
    assert "<td><code>misc</code></td>" in html and "not gated" in html
    assert "category travel (6 cases)" in proc.stdout
    # the breakdown of every category shows the baseline beside this run's value where it moved
    comment = (ws / "comment.md").read_text(encoding="utf-8")
    assert "| category: `travel` | 6 | 1.0000 → 0.0000 | 1.0000 → 0.0000 |" in comment
    assert "| category: `billing` | 20 | 1.0000 | 1.0000 |" in comment
    travel = report["stages"]["retrieval"]["breakdown"]["category"]["travel"]
    assert travel["baseline"] == {"hit_rate@5": 1.0, "mrr": 1.0} and travel["metrics"]["hit_rate@5"] == 0.0


def test_a_passing_run_shows_the_groups_closed(ws: Path) -> None:
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--markdown", "comment.md", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    comment = (ws / "comment.md").read_text(encoding="utf-8")
    assert "<details><summary><code>hit_rate@5</code> by category: 0 of 3 groups failed, 1 too small to gate</summary>" in comment


@pytest.mark.parametrize(("gates", "said"), [
    ("      error_rate: {max: 0.1, by: category}\n", "stages.retrieval.gates.error_rate.by: by: error_rate is not a mean over cases"),
    ("      hit_rate@5: {min: 0.8, by: country}\n", "stages.retrieval.gates.hit_rate@5.by"),
])
def test_a_group_gate_on_what_has_no_groups_is_refused(tmp_path: Path, gates: str, said: str) -> None:
    (tmp_path / "rag-eval.yml").write_text(SPEC.split("    gates:\n")[0] + "    gates:\n" + gates, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(golden(), encoding="utf-8")
    proc = rag_gate(tmp_path, "validate", "--config", "rag-eval.yml")
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
