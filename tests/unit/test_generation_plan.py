"""Planning the generation stage: metric names and engines, judge settings, floating model names, spec checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.config.loader import filled
from gate.core.catalog import DEEPEVAL_METRICS, RAGAS_METRICS, EngineMetric, engine_metrics
from gate.core.errors import EXIT_INPUT, EXIT_PASS
from gate.judges import JudgeSettings, resolve_judge
from gate.judges.models import is_floating_model

ROOT = Path(__file__).resolve().parents[2]
CITES = "The answer names the document it relies on."


def plans(cfg: dict) -> list[tuple[str, str, str]]:
    return [(p.name, p.engine, p.metric) for p in engine_metrics(cfg)]


# --------------------------------------------------------------------------- engine_metrics


# (id, stage config, [(report name, engine, engine metric)])
PLAN_TABLE = [
    ("default engine is ragas", {"metrics": ["faithfulness", "answer_relevancy"]},
     [("faithfulness", "ragas", "faithfulness"), ("answer_relevancy", "ragas", "answer_relevancy")]),
    ("engine deepeval", {"engine": "deepeval", "metrics": ["faithfulness", "hallucination"]},
     [("faithfulness", "deepeval", "faithfulness"), ("hallucination", "deepeval", "hallucination")]),
    ("a prefix picks the engine, the name stays plain", {"metrics": ["deepeval/hallucination", "ragas/answer_correctness"]},
     [("hallucination", "deepeval", "hallucination"), ("answer_correctness", "ragas", "answer_correctness")]),
    ("prefix of the default engine", {"engine": "deepeval", "metrics": ["ragas/context_recall"]},
     [("context_recall", "ragas", "context_recall")]),
    ("both engines: the non-default one is prefixed", {"metrics": ["faithfulness", "deepeval/faithfulness"]},
     [("faithfulness", "ragas", "faithfulness"), ("deepeval/faithfulness", "deepeval", "faithfulness")]),
    ("both engines, listed the other way round", {"metrics": ["deepeval/faithfulness", "faithfulness"]},
     [("deepeval/faithfulness", "deepeval", "faithfulness"), ("faithfulness", "ragas", "faithfulness")]),
    ("both engines, default deepeval", {"engine": "deepeval", "metrics": ["ragas/faithfulness", "faithfulness"]},
     [("ragas/faithfulness", "ragas", "faithfulness"), ("faithfulness", "deepeval", "faithfulness")]),
    ("offline metrics need no engine", {"engine": "deepeval", "metrics": ["token_f1", "exact_match", "rouge_l"]},
     [("token_f1", "offline", "token_f1"), ("exact_match", "offline", "exact_match"), ("rouge_l", "offline", "rouge_l")]),
    ("criteria become deepeval metrics", {"metrics": ["faithfulness"], "criteria": {"cites_source": CITES}},
     [("faithfulness", "ragas", "faithfulness"), ("cites_source", "deepeval", "cites_source")]),
    ("criteria listed in metrics are not added twice", {"metrics": ["cites_source", "token_f1"], "criteria": {"cites_source": CITES}},
     [("cites_source", "deepeval", "cites_source"), ("token_f1", "offline", "token_f1")]),
    ("criteria with the deepeval prefix", {"metrics": ["deepeval/cites_source"], "criteria": {"cites_source": CITES}},
     [("cites_source", "deepeval", "cites_source")]),
]


@pytest.mark.parametrize(("cfg", "expected"), [r[1:] for r in PLAN_TABLE], ids=[r[0] for r in PLAN_TABLE])
def test_plan_metrics(cfg, expected):
    assert plans(cfg) == expected


def test_plan_returns_metric_plans():
    (p,) = engine_metrics({"metrics": ["deepeval/hallucination"]})
    assert p == EngineMetric(name="hallucination", engine="deepeval", metric="hallucination")


# (id, stage config, words the message must contain)
PLAN_ERRORS = [
    ("offline metric with a prefix", {"metrics": ["ragas/token_f1"]}, ["'ragas/token_f1'", "without a prefix"]),
    ("offline metric with deepeval prefix", {"metrics": ["deepeval/rouge_l"]}, ["'deepeval/rouge_l'", "without a prefix"]),
    ("unknown metric", {"metrics": ["faithfullness"]}, ["'faithfullness'", "faithfulness", "answer_relevancy", "token_f1", "criteria"]),
    ("metric of the other engine only", {"metrics": ["ragas/hallucination"]}, ["'ragas/hallucination'", "not a ragas metric", "hallucination"]),
    ("deepeval has no answer_correctness", {"engine": "deepeval", "metrics": ["answer_correctness"]},
     ["'answer_correctness'", "not a deepeval metric"]),
    ("criteria through ragas", {"metrics": ["ragas/cites_source"], "criteria": {"cites_source": CITES}}, ["'ragas/cites_source'", "deepeval"]),
    ("listed twice, once prefixed", {"metrics": ["faithfulness", "ragas/faithfulness"]}, ["listed twice", "faithfulness"]),
    ("listed twice, default deepeval", {"engine": "deepeval", "metrics": ["hallucination", "deepeval/hallucination"]},
     ["listed twice", "hallucination"]),
]


@pytest.mark.parametrize(("cfg", "needles"), [r[1:] for r in PLAN_ERRORS], ids=[r[0] for r in PLAN_ERRORS])
def test_plan_metrics_rejects(cfg, needles):
    with pytest.raises(ValueError) as info:
        engine_metrics(cfg)
    for n in needles:
        assert n in str(info.value), (n, str(info.value))


def test_unknown_metric_message_lists_every_known_metric():
    with pytest.raises(ValueError) as info:
        engine_metrics({"metrics": ["bleu"]})
    for known in RAGAS_METRICS | DEEPEVAL_METRICS | {"exact_match", "token_f1", "rouge_l"}:
        assert known in str(info.value)


# --------------------------------------------------------------------------- resolve_judge


JUDGE = {"base_url": "http://127.0.0.1:9/v1", "model": "gpt-4o-2024-11-20", "api_key_env": "JUDGE_KEY"}


def judge_settings(block, env):
    """The judge block as the loader fills it (the schema's defaults), resolved."""
    return resolve_judge(filled("properties/judge", block), env)


@pytest.mark.parametrize("env", [{}, {"JUDGE_KEY": ""}, {"OTHER": "x"}], ids=["unset", "empty", "other variable"])
def test_judge_settings_without_the_key_says_which_variable(env):
    settings, reason = judge_settings(JUDGE, env)
    assert settings is None
    assert "JUDGE_KEY" in reason


def test_judge_settings_with_the_key():
    settings, reason = judge_settings({**JUDGE, "temperature": 0, "concurrency": 4, "max_judge_calls": 100}, {"JUDGE_KEY": "sk-test"})
    assert reason == ""
    assert isinstance(settings, JudgeSettings)
    assert settings.api_key == "sk-test"
    assert (settings.base_url, settings.model) == (JUDGE["base_url"], JUDGE["model"])
    assert settings.temperature == 0.0 and settings.concurrency == 4 and settings.max_judge_calls == 100


def test_judge_settings_without_api_key_env_needs_no_key():
    settings, reason = judge_settings({"base_url": "http://127.0.0.1:9/v1", "model": "m-2024-01-01"}, {})
    assert reason == "" and settings is not None
    assert settings.api_key is None
    # defaults as the issue fixes them: temperature 0 (and actually sent), shared limit 16
    assert settings.temperature == 0.0 and settings.concurrency == 16 and settings.max_retries == 3


# --------------------------------------------------------------------------- is_floating_model


FLOATING = ["gpt-4o", "gpt-4.1", "gpt-4o-mini", "claude-3-5-sonnet-latest", "llama3", "GPT-4O", "o1-mini", "llama3:latest",
            "qwen2.5:7b", "chatgpt-4o-latest"]
PINNED = ["gpt-4o-2024-11-20", "claude-3-5-sonnet-20241022", "gpt-4-0613", "gemini-1.5-pro-002", "mistral-large-2411",
          "llama3@sha256:" + "0123456789abcdef" * 4, "gpt-4o-mini-2024-07-18", "GPT-4O-2024-11-20"]


@pytest.mark.parametrize("name", FLOATING)
def test_floating_model_names(name):
    assert is_floating_model(name) is True


@pytest.mark.parametrize("name", PINNED)
def test_pinned_model_names(name):
    assert is_floating_model(name) is False


# --------------------------------------------------------------------------- the spec, through the real CLI


SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
judge:
  base_url: http://127.0.0.1:9/v1
  model: gpt-4o
stages:
  generation:
    metrics:
      - faithfulness
      - token_f1
    gates:
      faithfulness:
        trend:
          window: 7
          max_drop: 0.03
"""
MODEL_LINE = 7


def project(tmp_path: Path, spec: str) -> Path:
    (tmp_path / "rag-eval.yml").write_text(spec, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(
        json.dumps({"id": "q1", "question": "How long is a loan?", "ground_truth": "21 days", "relevant_doc_ids": ["d1"]}) + "\n",
        encoding="utf-8",
    )
    return tmp_path


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def assert_input_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_INPUT, (proc.returncode, proc.stdout, proc.stderr)
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)


@pytest.mark.parametrize("command", [["validate"], ["run", "--no-progress"]])
def test_floating_judge_model_is_refused_with_how_to_pin(tmp_path, command):
    root = project(tmp_path, SPEC)
    proc = rag_gate(root, *command, "--config", "rag-eval.yml")
    assert_input_error(proc, f"rag-eval.yml:{MODEL_LINE}", "judge.model", "gpt-4o", "floating", "allow_floating_model")
    assert "pin" in proc.stderr and "gpt-4o-2024-11-20" in proc.stderr  # says how, with an example


def test_floating_judge_model_allowed_explicitly(tmp_path):
    spec = SPEC.replace("  model: gpt-4o\n", "  model: gpt-4o\n  allow_floating_model: true\n")
    proc = rag_gate(project(tmp_path, spec), "validate", "--config", "rag-eval.yml")
    assert proc.returncode == EXIT_PASS, proc.stderr
    assert "valid" in proc.stdout


def test_pinned_judge_model_validates(tmp_path):
    spec = SPEC.replace("model: gpt-4o\n", "model: gpt-4o-2024-11-20\n")
    proc = rag_gate(project(tmp_path, spec), "validate", "--config", "rag-eval.yml")
    assert proc.returncode == EXIT_PASS, proc.stderr


def test_gate_on_a_metric_the_plan_does_not_compute(tmp_path):
    spec = SPEC.replace("model: gpt-4o\n", "model: gpt-4o-2024-11-20\n") + """\
      answer_relevancy:
        min: 0.8
"""
    proc = rag_gate(project(tmp_path, spec), "validate", "--config", "rag-eval.yml")
    assert_input_error(proc, "rag-eval.yml:18", "stages.generation.gates.answer_relevancy", "not computed", "faithfulness, token_f1")


def test_gate_on_a_prefixed_name_is_accepted_when_both_engines_compute_it(tmp_path):
    spec = SPEC.replace("model: gpt-4o\n", "model: gpt-4o-2024-11-20\n").replace(
        "      - token_f1\n", "      - deepeval/faithfulness\n").replace("      faithfulness:\n", "      deepeval/faithfulness:\n")
    proc = rag_gate(project(tmp_path, spec), "validate", "--config", "rag-eval.yml")
    assert proc.returncode == EXIT_PASS, proc.stderr


def test_unknown_generation_metric_names_the_metrics_key(tmp_path):
    spec = SPEC.replace("model: gpt-4o\n", "model: gpt-4o-2024-11-20\n").replace("      - token_f1\n", "      - bleu\n")
    proc = rag_gate(project(tmp_path, spec), "validate", "--config", "rag-eval.yml")
    assert_input_error(proc, "rag-eval.yml", "stages.generation.metrics", "'bleu'")
