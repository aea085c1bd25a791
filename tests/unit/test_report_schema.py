"""report.schema.json: the one shape of report.json, the baseline and history entries, and the doors that check it.

* the schema is valid JSON Schema 2020-12, every property is described, and it mirrors the TypedDicts of
  gate.core.report key for key (required keys included), so mypy and the schema check the same fields;
* real documents validate: the quickstart's report, its committed baseline, a history entry;
* at every door a document is read back through (``baseline update``, ``history record``, ``run`` reading the
  baseline file, the action's report mode, the history reader) a wrong type, a missing field or an unknown stage
  is refused with exit 2 naming the file and the key path (the history reader skips the entry with a warning);
* the self-check the test suite turns on refuses to write a document the schema refuses.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.core import report as model
from gate.core.errors import InputError
from gate.io.reports import SELF_CHECK, check_document, parse_history, report_json, report_schema

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"

# TypedDict -> its $def in report.schema.json
MIRRORS = {
    "Distractor": "distractor", "CaseResult": "case", "CheckRecord": "check", "GateRecord": "gate", "LostRank": "lost_rank",
    "WorseCase": "worse_case", "GroupMetrics": "group_metrics", "SampleInfo": "sample_info", "JudgeInfo": "judge_info",
    "Usage": "usage", "NoiseInfo": "noise_info", "ScoreCounts": "score_counts", "MetricDiff": "metric_diff",
    "SelfCheck": "self_check", "RejectionCase": "rejection_case", "RejectionInfo": "rejection_info", "StageResult": "stage",
    "ToolInfo": "tool_info", "RunInfo": "run_info", "GoldenSetInfo": "golden_set_info", "TargetInfo": "target_info",
    "BaselineInfo": "baseline_info", "CaseOutput": "case_output", "HistoryRun": "history_run", "HistorySummary": "history_summary",
    "Report": "report", "StoredStage": "stored_stage", "Baseline": "baseline", "HistoryEntry": "history_entry",
    "OutputRef": "output_ref", "PairedCase": "paired_case", "MetricPairs": "metric_pairs", "Pairing": "pairing",
    "StageMeasurement": "stage_measurement", "ShardInfo": "shard_info", "PartPassage": "part_passage", "PartOutput": "part_output",
    "PartRun": "part_run", "Part": "part", "GroupGate": "group_gate", "FailedCheck": "failed_check",
    "AnswerCheckCase": "answer_check_case", "AnswersInfo": "answers_info", "CaseDiagnosis": "case_diagnosis",
    "LayerSummary": "layer_summary", "DiagnosisInfo": "diagnosis_info", "SystemInfo": "system_info", "Change": "change",
    "ChangesFrom": "changes_from", "HumanScale": "human_scale", "CalibrationInfo": "calibration_info",
    "TraceProblem": "trace_problem", "TraceCase": "trace_case", "TracesInfo": "traces_info", "WindowMetric": "window_metric",
    "WindowComparison": "window_comparison", "ParaphraseRewrite": "paraphrase_rewrite", "ParaphraseCase": "paraphrase_case",
    "ParaphraseMetric": "paraphrase_metric", "ParaphraseInfo": "paraphrase_info", "StabilityCase": "stability_case",
    "StabilityInfo": "stability_info",
}


def _properties(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (path, property schema) of the schema."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                yield f"{path}/{name}", sub
            for key, value in node.items():
                stack.append((f"{path}/{key}", value))
        elif isinstance(node, list):
            stack += [(f"{path}[{i}]", v) for i, v in enumerate(node)]


def test_schema_is_valid_and_every_property_is_described():
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    undescribed = [path for path, sub in _properties(schema) if "description" not in sub]
    assert undescribed == []
    assert schema["$defs"]["schema_version"]["const"] == model.SCHEMA_VERSION


@pytest.mark.parametrize(("typed", "definition"), sorted(MIRRORS.items()))
def test_schema_mirrors_the_typed_dicts(typed: str, definition: str):
    cls = getattr(model, typed)
    schema = report_schema()["$defs"][definition]
    assert set(schema["properties"]) == set(typing.get_type_hints(cls)), typed
    assert set(schema.get("required", [])) == set(cls.__required_keys__), typed
    assert schema.get("additionalProperties") is False, typed


def test_every_typed_dict_of_the_report_module_is_mirrored():
    typed = {name for name, obj in vars(model).items() if isinstance(obj, type) and typing.is_typeddict(obj) and name[0] != "_"}
    assert typed == set(MIRRORS)  # a measurement is written in a shard's part


# --------------------------------------------------------------------------- real documents


@pytest.fixture(scope="module")
def quickstart_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ws = tmp_path_factory.mktemp("qs") / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return json.loads((ws / "report.json").read_text(encoding="utf-8"))


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


def test_the_quickstart_report_and_its_committed_baseline_validate(quickstart_report):
    assert check_document(quickstart_report, "report", file="report.json") is quickstart_report
    baseline = json.loads((QUICKSTART / "eval" / "baseline.json").read_text(encoding="utf-8"))
    check_document(baseline, "baseline", file="baseline.json")
    assert all(isinstance(s["samples"], list) for s in baseline["stages"].values())  # one per-case shape


def test_cases_have_one_shape_in_the_report_the_baseline_and_the_history(quickstart_report, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    (ws / "report.json").write_text(json.dumps(quickstart_report), encoding="utf-8")
    assert rag_gate(ws, "baseline", "update", "--config", "rag-eval.yml", "--report", "report.json",
                    "--output", "new-baseline.json").returncode == 0
    assert rag_gate(ws, "history", "record", "--config", "rag-eval.yml", "--report", "report.json").returncode == 0
    baseline = json.loads((ws / "new-baseline.json").read_text(encoding="utf-8"))
    (entry,) = [json.loads(line) for line in (ws / "eval" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    report_case = quickstart_report["stages"]["generation"]["samples"][0]
    for stored in (baseline["stages"]["generation"]["samples"][0], entry["stages"]["generation"]["samples"][0]):
        assert stored["id"] == report_case["id"] and stored["metrics"] == report_case["metrics"]
        assert set(stored) <= set(report_case)


# --------------------------------------------------------------------------- the doors


def _forged(report: dict[str, Any], how: str) -> tuple[dict[str, Any], str]:
    """(a broken copy of the report, the key path the refusal must name)."""
    bad = copy.deepcopy(report)
    if how == "wrong type":
        bad["stages"]["retrieval"]["metrics"]["mrr"] = "0.9"
        return bad, "stages.retrieval.metrics.mrr"
    if how == "missing field":
        del bad["stages"]["retrieval"]["gates"][0]["status"]
        return bad, "stages.retrieval.gates[0]"
    bad["stages"]["evil"] = bad["stages"]["retrieval"]
    return bad, "stages.evil"


FORGERIES = ["wrong type", "missing field", "unknown stage"]


@pytest.mark.parametrize("how", FORGERIES)
@pytest.mark.parametrize("command", [["baseline", "update"], ["history", "record"]])
def test_cli_doors_refuse_a_broken_report_with_exit_2_and_the_key_path(quickstart_report, tmp_path, how, command):
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    bad, key = _forged(quickstart_report, how)
    (ws / "broken.json").write_text(json.dumps(bad), encoding="utf-8")
    before = (ws / "eval" / "baseline.json").read_bytes()
    proc = rag_gate(ws, *command, "--config", "rag-eval.yml", "--report", "broken.json")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"broken.json: {key}" in proc.stderr and "not a rag-gate report" in proc.stderr, proc.stderr
    assert (ws / "eval" / "baseline.json").read_bytes() == before and not (ws / "eval" / "history.jsonl").exists()


@pytest.mark.parametrize("how", FORGERIES)
def test_run_refuses_a_broken_baseline_file_with_exit_2_and_the_key_path(tmp_path, how):
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    baseline = json.loads((ws / "eval" / "baseline.json").read_text(encoding="utf-8"))
    if how == "wrong type":
        baseline["stages"]["retrieval"]["metrics"]["mrr"], key = [0.9], "stages.retrieval.metrics.mrr"
    elif how == "missing field":
        del baseline["fingerprints"]
        key = "(top level)"
    else:
        baseline["stages"]["evil"], key = baseline["stages"]["retrieval"], "stages.evil"
    (ws / "eval" / "baseline.json").write_text(json.dumps(baseline), encoding="utf-8")
    proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json")
    assert proc.returncode == 2, proc.stderr
    assert f"baseline.json: {key}: not a rag-gate baseline" in proc.stderr, proc.stderr
    assert not (ws / "report.json").exists()


@pytest.mark.parametrize("how", FORGERIES)
def test_the_actions_report_mode_refuses_a_broken_artifact(quickstart_report, tmp_path, how, capsys):
    from gate.github.action import main

    bad, key = _forged(quickstart_report, how)
    bad["run"].update(pr=7, head_sha="ab" * 20)
    (tmp_path / "rag-gate-report.json").write_text(json.dumps(bad), encoding="utf-8")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": "ab" * 20}}), encoding="utf-8")
    summary = tmp_path / "summary.md"
    env = {"GITHUB_WORKSPACE": str(tmp_path), "INPUT_MODE": "report", "GITHUB_EVENT_PATH": str(event),
           "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_STEP_SUMMARY": str(summary)}
    assert main(env=env) == 2
    out = capsys.readouterr().out
    (error,) = [line for line in out.splitlines() if line.startswith("::error")]
    assert f"rag-gate-report.json: {key}: not a rag-gate report" in error
    assert "not a rag-gate report" in summary.read_text(encoding="utf-8")  # the job summary says it too


def test_the_history_reader_skips_a_broken_entry_with_a_warning_naming_line_and_key():
    good = {"schema_version": 1, "created_at": "2026-11-01T00:00:00+00:00", "commit": "c1", "branch": "main", "verdict": "pass",
            "fingerprints": {"golden_set": "sha256:a"}, "stages": {"retrieval": {"metrics": {"mrr": 0.5}}}}
    broken = [
        {**good, "fingerprints": None},
        {**good, "stages": "retrieval"},
        {**good, "stages": {"generation": {"metrics": {"faithfulness": 0.5}, "samples": [1, 2]}}},
        {**good, "stages": {"retrieval": {"metrics": {"mrr": "high"}}}},
    ]
    warnings: list[str] = []
    entries = parse_history("\n".join(json.dumps(e) for e in [good, *broken, good]), "h.jsonl", warnings)
    assert [e["commit"] for e in entries] == ["c1", "c1"]
    assert [w.split(":")[1] for w in warnings] == ["2", "3", "4", "5"]
    assert "fingerprints" in warnings[0] and "stages" in warnings[1] and "samples[" in warnings[2] and "mrr" in warnings[3]
    assert all(w.endswith("skipped") for w in warnings)


# --------------------------------------------------------------------------- the self-check


def test_self_check_refuses_to_write_a_document_the_schema_refuses(quickstart_report, monkeypatch):
    monkeypatch.setenv(SELF_CHECK, "1")
    bad = copy.deepcopy(quickstart_report)
    bad["verdict"] = "passed"
    with pytest.raises(RuntimeError, match="report.schema.json refuses: .*verdict"):
        report_json(bad)  # type: ignore[arg-type]
    monkeypatch.delenv(SELF_CHECK)
    assert json.loads(report_json(bad))["verdict"] == "passed"  # without it, nothing is checked (and nothing slows down)


def test_check_document_names_file_line_and_key():
    with pytest.raises(InputError) as err:
        check_document({"schema_version": 1}, "baseline", file="b.json", line=4)
    assert err.value.message.startswith("b.json:4: (top level): not a rag-gate baseline: ")
    assert err.value.exit_code == 2


def test_the_schema_and_the_catalog_agree_on_what_a_metric_name_is():
    """report.schema.json's metric_name pattern is the catalog's: a metric the catalog can name is one a report may hold."""
    from gate.core.catalog import METRIC_NAME_PATTERN
    from gate.io.reports import report_schema

    assert report_schema()["$defs"]["metric_name"]["pattern"] == METRIC_NAME_PATTERN


def test_a_refused_key_name_is_named_in_the_message_and_the_key_path(quickstart_report):
    report = copy.deepcopy(quickstart_report)
    report["stages"]["bogus_stage"] = report["stages"]["retrieval"]
    with pytest.raises(InputError) as caught:
        check_document(report, "report", file="report.json")
    assert caught.value.key == "stages.bogus_stage"
    assert "key 'bogus_stage' is not allowed here" in caught.value.message and "'retrieval'" in caught.value.message
