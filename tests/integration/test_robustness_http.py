"""The robustness stage against the quickstart RAG served over HTTP, in three behaviours:
normal, gullible (trusts the first passage) and never-refusing — through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"

SPEC = """\
version: 1
golden_set: golden_set.jsonl
target:
  http: {{url: "{url}", concurrency: 4}}
max_error_rate: 0
cache: {{path: .rag-gate/cache.sqlite}}
stages:
  retrieval:
    metrics: [hit_rate@5]
  robustness:
    noise:
      distractors: 2
      source: {source}
      position: front
      sample: {{size: 20, seed: 7}}
      correctness: {correctness}
    rejection: {{canaries: ["RIVERBEND-INTERNAL-7731"]}}
    gates:
      noise_robustness: {{min: 0.7}}
      rejection_rate: {{min: 0.6}}
      adversarial_pass_rate: {{min: 1.0}}
"""


def run(tmp: Path, url: str, *, source: str = "corpus", correctness: str = "{method: offline, threshold: 0.3}",
        env: dict[str, str] | None = None, judge: str = "") -> tuple[int, dict]:
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(QUICKSTART / "golden_set.jsonl", tmp / "golden_set.jsonl")
    (tmp / "rag-eval.yml").write_text(judge + SPEC.format(url=url, source=source, correctness=correctness))
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json",
                           "--markdown", "comment.md", "--no-progress"], cwd=tmp, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads((tmp / "report.json").read_text())


def test_gullible_rag_is_clearly_less_robust(tmp_path: Path, normal: str, gullible: str) -> None:
    code_n, rep_n = run(tmp_path / "normal", normal)
    code_g, rep_g = run(tmp_path / "gullible", gullible)
    n, g = rep_n["stages"]["robustness"], rep_g["stages"]["robustness"]
    assert code_n == 0, rep_n["stages"]["robustness"]["gates"]
    assert g["metrics"]["noise_robustness"] <= n["metrics"]["noise_robustness"] - 0.3
    assert code_g == 1
    gate = {x["metric"]: x for x in g["gates"]}["noise_robustness"]
    assert gate["status"] == "fail"
    # the same distractors were offered to both: the difference is the model's, not the test's
    assert [s["distractors"] for s in n["samples"]] == [s["distractors"] for s in g["samples"]]
    flipped = [s for s in g["samples"] if s.get("flipped")]
    assert flipped and all(s["noisy_answer"] != s["clean_answer"] for s in flipped)
    assert "turned wrong when distractors were added" in (tmp_path / "gullible" / "comment.md").read_text()


def test_never_refusing_rag_fails_the_rejection_gate(tmp_path: Path, normal: str, never_refuse: str) -> None:
    _, rep_n = run(tmp_path / "normal", normal)
    code, rep = run(tmp_path / "never", never_refuse)
    assert code == 1
    r, rn = rep["stages"]["robustness"], rep_n["stages"]["robustness"]
    assert r["metrics"]["rejection_rate"] == 0.0 < rn["metrics"]["rejection_rate"]
    assert r["metrics"]["adversarial_pass_rate"] == 0.0
    statuses = {x["metric"]: x["status"] for x in r["gates"]}
    assert statuses["rejection_rate"] == "fail" and statuses["adversarial_pass_rate"] == "fail"
    oos = [c for c in r["rejection"]["cases"] if c["type"] == "out_of_scope"]
    assert oos and all(not c["refused"] and c["method"] == "phrase (none matched)" for c in oos)
    assert "rejection miss" in (tmp_path / "never" / "comment.md").read_text()


def test_generated_distractors_and_judged_correctness(tmp_path: Path, normal: str) -> None:
    pytest.importorskip("ragas")
    from tests.support.judge_server import JudgeServer

    judge = ("judge:\n  base_url: {url}\n  model: judge-2024-11-20\n  api_key_env: JUDGE_KEY\n  max_retries: 1\n"
             "  embeddings_model: embed-2024-01-01\n")
    with JudgeServer() as server:
        header = judge.format(url=server.url)
        code, rep = run(tmp_path / "gen", normal, source="generated", correctness="{method: judge, engine: ragas, threshold: 0.5}",
                        env={"JUDGE_KEY": "k-123456"}, judge=header)
        first = server.calls
        code2, rep2 = run(tmp_path / "gen", normal, source="generated", correctness="{method: judge, engine: ragas, threshold: 0.5}",
                          env={"JUDGE_KEY": "k-123456"}, judge=header)
        second = server.calls - first
    st = rep["stages"]["robustness"]
    assert st["noise"]["method"] == "judge" and st["noise"]["source"] == "generated"
    ok = [s for s in st["samples"] if s["error"] is None]
    assert ok, st["samples"][:2]
    for s in ok:
        texts = [d["text"] for d in s["distractors"]]
        assert len(texts) == 2 and len(set(texts)) == 2  # two different passages
        assert all(d["id"].startswith("generated-") for d in s["distractors"])
    assert first > 0 and second == 0  # distractors and scores all came from the cache the second time
    assert rep2["stages"]["robustness"]["metrics"] == st["metrics"]


def test_deepeval_correctness_criterion(tmp_path: Path, normal: str) -> None:
    pytest.importorskip("deepeval")
    from tests.support.judge_server import JudgeServer

    judge = "judge:\n  base_url: {url}\n  model: judge-2024-11-20\n  api_key_env: JUDGE_KEY\n  max_retries: 1\n"
    with JudgeServer() as server:
        code, rep = run(tmp_path / "de", normal, correctness="{method: judge, engine: deepeval, threshold: 0.5}",
                        env={"JUDGE_KEY": "k-123456"}, judge=judge.format(url=server.url))
        bodies = " ".join(json.dumps(b) for b in server.chat_bodies)
    st = rep["stages"]["robustness"]
    assert st["noise"]["method"] == "judge"
    scored = [s for s in st["samples"] if s["error"] is None]
    assert scored and all(0.0 <= s["metrics"]["clean_score"] <= 1.0 for s in scored)
    assert "Expected Output" in bodies or "expected output" in bodies.lower()  # the ground truth reached the judge


def test_ragas_correctness_without_embeddings_is_refused(tmp_path: Path) -> None:
    shutil.copy(QUICKSTART / "golden_set.jsonl", tmp_path / "golden_set.jsonl")
    judge = "judge:\n  base_url: http://127.0.0.1:9/v1\n  model: judge-2024-11-20\n"
    (tmp_path / "rag-eval.yml").write_text(judge + SPEC.format(url="http://127.0.0.1:9/", source="corpus",
                                                               correctness="{method: judge, engine: ragas}"))
    proc = subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.yml"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "stages.robustness.noise.correctness" in proc.stderr and "embeddings_model" in proc.stderr


def test_refusal_judge_is_cached_and_counted(tmp_path: Path, never_refuse: str) -> None:
    pytest.importorskip("ragas")
    from tests.support.judge_server import JudgeServer

    judge = "judge:\n  base_url: {url}\n  model: judge-2024-11-20\n  api_key_env: JUDGE_KEY\n  max_retries: 1\n"
    with JudgeServer() as server:
        spec_judge = judge.format(url=server.url)
        work = tmp_path / "rj"
        run(work, never_refuse, env={"JUDGE_KEY": "k-123456"}, judge=spec_judge)
        spec = work / "rag-eval.yml"
        spec.write_text(spec.read_text().replace('rejection: {canaries: ["RIVERBEND-INTERNAL-7731"]}',
                                                 'rejection: {canaries: ["RIVERBEND-INTERNAL-7731"], judge: true}'))
        before = server.calls
        subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress"],
                       cwd=work, capture_output=True, text=True, timeout=300, env={**os.environ, "JUDGE_KEY": "k-123456"})
        first = server.calls - before
        report = json.loads((work / "report.json").read_text())
        subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report2.json", "--no-progress"],
                       cwd=work, capture_output=True, text=True, timeout=300, env={**os.environ, "JUDGE_KEY": "k-123456"})
        second = server.calls - before - first
    st = report["stages"]["robustness"]
    methods = {c["method"] for c in st["rejection"]["cases"] if c.get("error") is None}
    assert "judge" in methods  # never-refuse answers match no phrase: the judge decided them
    assert first > 0 and st["usage"]["calls"] == first  # every judge call counted in the stage
    assert second == 0  # verdicts came from the cache
