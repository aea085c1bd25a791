"""The real CLI on bad input: exit 2, the file and line/key on stderr, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.core.errors import EXIT_INPUT, EXIT_PASS

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "rag-eval.yml"
SECRET = "s3cr3t-t0ken-value"

SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
stages:
  retrieval:
    metrics:
      - hit_rate@5
      - mrr
    gates:
      hit_rate@5:
        min: 0.5
        max_drop: 0.02
"""
GOLDEN = [
    {"id": "q1", "question": "How long can I borrow a book?", "relevant_doc_ids": ["lending#1"]},
    {"id": "q2", "question": "What does an e-book loan last?", "relevant_doc_ids": {"ebooks#1": 3, "ebooks#2": 1}},
    {"id": "q3", "question": "What is the weather on Mars?", "type": "out_of_scope"},
]
RESULTS = [
    {"id": "q1", "retrieved": [{"id": "lending#1", "text": "21 days", "score": 0.9}, {"id": "x", "score": 0.1}], "answer": "21 days."},
    {"id": "q2", "retrieved": [{"id": "ebooks#1"}, {"id": "ebooks#2"}], "answer": "14 days.", "latency_ms": 12.5},
    {"id": "q3", "retrieved": [], "answer": "I don't know."},
]


def jsonl(rows: list[object]) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def project(tmp_path: Path, spec: str = SPEC, golden: list[object] = GOLDEN, results: list[object] = RESULTS) -> Path:
    (tmp_path / "rag-eval.yml").write_text(spec, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(jsonl(golden), encoding="utf-8")
    (tmp_path / "results.jsonl").write_text(jsonl(results), encoding="utf-8")
    return tmp_path


def rag_gate(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("RAG_GATE_DEBUG", "RAG_TOKEN") and not k.startswith("GITHUB_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "gate", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120
    )


def command(name: str, config: str = "rag-eval.yml") -> list[str]:
    return ["validate", "--config", config] if name == "validate" else ["run", "--config", config, "--no-progress"]


COMMANDS = ["validate", "run"]


def assert_input_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_INPUT, (proc.returncode, proc.stdout, proc.stderr)
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)


# --------------------------------------------------------------------------- the fixture project itself is valid


def test_validate_quickstart(tmp_path):
    proc = rag_gate(tmp_path, "validate", "--config", str(QUICKSTART))
    assert proc.returncode == EXIT_PASS, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "valid" in proc.stdout
    assert "40 cases" in proc.stdout


@pytest.mark.parametrize("cmd", COMMANDS)
def test_fixture_project_is_valid(tmp_path, cmd):
    """Every malformed case below differs from this one by one change: exit 2 is down to that change."""
    proc = rag_gate(project(tmp_path), *command(cmd))
    assert proc.returncode == EXIT_PASS, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- malformed spec


def _mut(old: str, new: str):
    def apply(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return apply


SPEC_BAD = [
    # (id, mutation of SPEC, what stderr must name besides the file: the line and/or the key)
    ("unknown top-level key", lambda t: t + "colour: red\n", ["rag-eval.yml:14", "colour"]),
    ("unknown nested key", _mut("    metrics:", "    metrcs:"), ["rag-eval.yml:7", "stages.retrieval.metrcs"]),
    ("wrong type", _mut("golden_set: golden.jsonl", "golden_set: 5"), ["rag-eval.yml:2", "golden_set"]),
    ("bad metric name", _mut("      - mrr", "      - hits@5"), ["rag-eval.yml:9", "hits@5"]),
    ("gate on a metric not computed", lambda t: t + "      ndcg@10:\n        min: 0.5\n", ["rag-eval.yml:14", "ndcg@10"]),
    ("two target kinds", _mut("  results: results.jsonl", "  results: results.jsonl\n  python: m:f"), ["rag-eval.yml:3", "target"]),
    ("no target kind", _mut("  results: results.jsonl", "  k: 10"), ["rag-eval.yml:3", "target"]),
    ("bad max_drop", _mut("max_drop: 0.02", "max_drop: 3 percent"), ["rag-eval.yml:13", "max_drop"]),
    ("duplicate key", lambda t: t + "version: 1\n", ["rag-eval.yml:14", "duplicate", "line 1"]),
    ("YAML syntax error", _mut("golden_set: golden.jsonl", "golden_set: golden.jsonl: x"), ["rag-eval.yml:2", "YAML"]),
    ("version 2", _mut("version: 1", "version: 2"), ["rag-eval.yml:1", "version"]),
    ("missing env var", _mut("  results: results.jsonl", "  http:\n    url: https://rag.example\n    headers:\n      Authorization: Bearer ${RAG_TOKEN}"),
     ["rag-eval.yml:7", "RAG_TOKEN", "target.http.headers.Authorization"]),
    ("not a mapping", lambda t: "- just\n- a list\n", ["rag-eval.yml:1", "mapping"]),
]


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("mutate, needles", [b[1:] for b in SPEC_BAD], ids=[b[0] for b in SPEC_BAD])
def test_malformed_spec(tmp_path, cmd, mutate, needles):
    proc = rag_gate(project(tmp_path, spec=mutate(SPEC)), *command(cmd))
    assert_input_error(proc, *needles)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_python_tag_in_spec_runs_nothing(tmp_path, cmd):
    marker = tmp_path / "pwned"
    spec = SPEC + f'evil: !!python/object/apply:os.system ["touch {marker}"]\n'
    proc = rag_gate(project(tmp_path, spec=spec), *command(cmd))
    assert_input_error(proc, "rag-eval.yml:14")
    assert not marker.exists()


@pytest.mark.parametrize("cmd", COMMANDS)
def test_secret_not_printed_with_another_error(tmp_path, cmd):
    spec = SPEC.replace(
        "  results: results.jsonl", "  http:\n    url: https://rag.example\n    headers:\n      Authorization: Bearer ${RAG_TOKEN}"
    ) + "colour: red\n"
    proc = rag_gate(project(tmp_path, spec=spec), *command(cmd), env={"RAG_TOKEN": SECRET})
    assert_input_error(proc, "rag-eval.yml:17", "colour")
    assert SECRET not in proc.stderr + proc.stdout


# --------------------------------------------------------------------------- malformed golden set

OK = {"id": "ok", "question": "Fine?", "relevant_doc_ids": ["d"]}
GOLDEN_BAD = [
    # (id, bad line 2 of the golden set (after one good line), words stderr must contain)
    ("invalid JSON", '{"id": "x", "question": ', ["invalid JSON"]),
    ("not an object", '["a", "b"]', ["JSON object"]),
    ("missing question", {"id": "x", "relevant_doc_ids": ["d"]}, ["question"]),
    ("empty question", {"id": "x", "question": "", "relevant_doc_ids": ["d"]}, ["question"]),
    ("tags not a list", {"id": "x", "question": "Q?", "relevant_doc_ids": ["d"], "tags": "faq"}, ["tags"]),
    ("ground_truth a number", {"id": "x", "question": "Q?", "relevant_doc_ids": ["d"], "ground_truth": 1}, ["ground_truth"]),
    ("relevant_doc_ids a string", {"id": "x", "question": "Q?", "relevant_doc_ids": "d"}, ["relevant_doc_ids"]),
    ("grade 0", {"id": "x", "question": "Q?", "relevant_doc_ids": {"d": 0}}, ["grade"]),
    ("grade float", {"id": "x", "question": "Q?", "relevant_doc_ids": {"d": 1.5}}, ["grade"]),
    ("grade bool", {"id": "x", "question": "Q?", "relevant_doc_ids": {"d": True}}, ["grade"]),
    ("duplicate id", {"id": "ok", "question": "Again?", "relevant_doc_ids": ["d"]}, ["duplicate", "line 1"]),
    ("unknown type", {"id": "x", "question": "Q?", "relevant_doc_ids": ["d"], "type": "trick"}, ["type"]),
    ("unknown field", {"id": "x", "question": "Q?", "relevant_doc_ids": ["d"], "answer": "A"}, ["unknown field", "answer"]),
    ("answerable without relevant ids", {"id": "x", "question": "Q?"}, ["relevant_doc_ids"]),
]


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("bad, words", [b[1:] for b in GOLDEN_BAD], ids=[b[0] for b in GOLDEN_BAD])
def test_malformed_golden_set(tmp_path, cmd, bad, words):
    proc = rag_gate(project(tmp_path, golden=[OK, bad, GOLDEN[0]]), *command(cmd))
    assert_input_error(proc, "golden.jsonl:2", *words)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_several_golden_errors_all_reported(tmp_path, cmd):
    golden = [OK, {"id": "a"}, GOLDEN[0], {"id": "b", "question": "Q?", "tags": 3, "relevant_doc_ids": ["d"]}]
    proc = rag_gate(project(tmp_path, golden=golden), *command(cmd))
    assert_input_error(proc, "golden.jsonl:2", "golden.jsonl:4")


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("content", ["", "\n\n"], ids=["empty", "blank lines"])
def test_empty_golden_set(tmp_path, cmd, content):
    root = project(tmp_path)
    (root / "golden.jsonl").write_text(content, encoding="utf-8")
    proc = rag_gate(root, *command(cmd))
    assert_input_error(proc, "golden.jsonl", "empty")


@pytest.mark.parametrize("cmd", COMMANDS)
def test_missing_golden_set(tmp_path, cmd):
    root = project(tmp_path)
    (root / "golden.jsonl").unlink()
    proc = rag_gate(root, *command(cmd))
    assert_input_error(proc, "golden.jsonl", "not found")


# --------------------------------------------------------------------------- malformed results file

RESULTS_BAD = [
    ("retrieved not a list", {"id": "q2", "retrieved": "ebooks#1", "answer": "x"}, ["retrieved", "list"]),
    ("bad JSON", '{"id": "q2", "retrieved": [', ["invalid JSON"]),
    ("retrieved item without id", {"id": "q2", "retrieved": [{"text": "t"}], "answer": "x"}, ["retrieved[0]"]),
    ("answer not a string", {"id": "q2", "retrieved": [], "answer": 3}, ["answer"]),
    ("negative latency", {"id": "q2", "retrieved": [], "answer": "x", "latency_ms": -1}, ["latency_ms"]),
    ("no id or question", {"retrieved": [], "answer": "x"}, ["id"]),
    ("second line for a case", {"id": "q1", "retrieved": [], "answer": "x"}, ["q1", "first at line 1"]),
]


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("bad, words", [b[1:] for b in RESULTS_BAD], ids=[b[0] for b in RESULTS_BAD])
def test_malformed_results_file(tmp_path, cmd, bad, words):
    proc = rag_gate(project(tmp_path, results=[RESULTS[0], bad, RESULTS[2]]), *command(cmd))
    assert_input_error(proc, "results.jsonl:2", *words)


# --------------------------------------------------------------------------- missing config, no half-written reports


@pytest.mark.parametrize("cmd", COMMANDS)
def test_missing_config_file(tmp_path, cmd):
    proc = rag_gate(tmp_path, *command(cmd, "nope.yml"))
    assert_input_error(proc, "nope.yml", "not found")


@pytest.mark.parametrize("cmd", COMMANDS)
def test_default_config_missing(tmp_path, cmd):
    proc = rag_gate(tmp_path, cmd)
    assert_input_error(proc, "rag-eval.yml")


def test_run_with_invalid_spec_writes_no_report(tmp_path):
    root = project(tmp_path, spec=SPEC + "colour: red\n")
    proc = rag_gate(root, "run", "--config", "rag-eval.yml", "--no-progress",
                    "--report", "out.json", "--markdown", "comment.md", "--junit", "junit.xml")
    assert_input_error(proc, "rag-eval.yml:14")
    for name in ("out.json", "comment.md", "junit.xml"):
        assert not (root / name).exists(), name
    assert not list(root.glob(".out.json.*")), "temporary report left behind"


def test_run_with_invalid_golden_set_writes_no_report(tmp_path):
    root = project(tmp_path, golden=[OK, {"id": "x"}])
    proc = rag_gate(root, "run", "--config", "rag-eval.yml", "--no-progress", "--report", "out.json")
    assert_input_error(proc, "golden.jsonl:2")
    assert not (root / "out.json").exists()


def test_run_with_valid_spec_writes_the_report(tmp_path):
    """Counter-check of the two tests above: the same command on the valid project writes out.json."""
    root = project(tmp_path)
    proc = rag_gate(root, "run", "--config", "rag-eval.yml", "--no-progress", "--report", "out.json")
    assert proc.returncode == EXIT_PASS, proc.stderr
    report = json.loads((root / "out.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "pass"
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@5"] == 1.0


# --------------------------------------------------------------------------- unknown metric: the stage's names, "did you mean"

UNKNOWN_METRICS = [
    # (id, spec, line, words stderr must hold, whether a "did you mean" is expected)
    ("generation typo", SPEC + "  generation:\n    metrics: [token-f1]\n", 15,
     ["stages.generation.metrics[0]", "unknown generation metric 'token-f1' (did you mean 'token_f1'?); generation metrics are "], True),
    ("generation typo past the pattern", SPEC + "  generation:\n    metrics: [faithfulnes]\n", 15,
     ["stages.generation.metrics", "(did you mean 'faithfulness'?)"], True),
    ("retrieval typo", _mut("      - mrr", "      - ndgc")(SPEC), 9,
     ["stages.retrieval.metrics[1]", "unknown retrieval metric 'ndgc' (did you mean 'ndcg'?); retrieval metrics are hit_rate@k"], True),
    ("generation, nothing close", SPEC + "  generation:\n    metrics: [bleu-4]\n", 15,
     ["unknown generation metric 'bleu-4'; generation metrics are "], False),
    ("retrieval, nothing close", _mut("      - mrr", "      - zzz")(SPEC), 9, ["unknown retrieval metric 'zzz'; retrieval metrics are "], False),
]


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("spec, line, words, suggests", [u[1:] for u in UNKNOWN_METRICS], ids=[u[0] for u in UNKNOWN_METRICS])
def test_unknown_metric_names_its_stage(tmp_path, cmd, spec, line, words, suggests):
    proc = rag_gate(project(tmp_path, spec=spec), *command(cmd))
    assert_input_error(proc, f"rag-eval.yml:{line}:", *words)
    assert ("did you mean" in proc.stderr) is suggests, proc.stderr
    other = "hit_rate@k" if "generation" in words[0] else "token_f1"
    assert other not in proc.stderr, proc.stderr
