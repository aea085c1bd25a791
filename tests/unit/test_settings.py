"""The typed stage settings (gate/core/settings.py) carry the schema's defaults and none of their own: every field
has no default in code, every field read from the spec is a key the schema requires or gives a default, and a block
with only its required keys, filled by the loader, reads without a KeyError."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gate.config.loader import config_schema, filled, load_spec
from gate.core import settings as typed

# class -> (where its block is in config.schema.json, {field: the key it reads}, a block with only its required keys)
READS: dict[type, tuple[str, dict[str, str], dict[str, Any]]] = {
    typed.SampleSettings: ("$defs/sample", {"size": "size", "seed": "seed", "always_tags": "always"}, {}),
    typed.MatchSettings: ("$defs/retrieval_stage/properties/match", {"level": "level", "separator": "separator",
                                                                     "min_overlap": "min_overlap"}, {}),
    typed.RetrievalSettings: ("$defs/retrieval_stage", {"metrics": "metrics", "match": "match", "gates": "gates",
                                                        "on_stale_labels": "on_stale_labels"}, {"metrics": ["mrr"]}),
    typed.SelfCheckSettings: ("$defs/generation_stage/properties/self_check", {"cases": "cases", "max_diff": "max_diff",
                                                                              "on_unstable": "on_unstable"}, {}),
    typed.GenerationSettings: ("$defs/generation_stage", {"metrics": "metrics", "criteria": "criteria", "sample": "sample",
                                                          "self_check": "self_check", "checks": "checks", "gates": "gates"},
                               {"metrics": ["token_f1"]}),
    typed.CorrectnessSettings: ("$defs/robustness_stage/properties/noise/properties/correctness",
                                {"method": "method", "engine": "engine", "threshold": "threshold"}, {}),
    typed.NoiseSettings: ("$defs/robustness_stage/properties/noise", {"distractors": "distractors", "source": "source",
                          "position": "position", "seed": "seed", "sample": "sample", "correctness": "correctness", "file": "file"}, {}),
    typed.RejectionSettings: ("$defs/robustness_stage/properties/rejection", {"phrases": "phrases", "judge": "judge",
                                                                             "canaries": "canaries"}, {}),
    typed.ParaphraseSettings: ("$defs/robustness_stage/properties/paraphrase", {"generate": "generate", "style": "style",
                               "sample": "sample", "metrics": "metrics"}, {}),
    typed.StabilitySettings: ("$defs/robustness_stage/properties/stability", {"repeats": "repeats", "sample": "sample",
                              "method": "method", "correctness": "correctness"}, {}),
    typed.RobustnessSettings: ("$defs/robustness_stage", {"noise": "noise", "rejection": "rejection", "gates": "gates",
                                                          "paraphrase": "paraphrase", "stability": "stability"}, {}),
}
OPTIONAL = {  # keys the spec may leave out, whose absence means something of its own (None / empty): no default needed
    (typed.GenerationSettings, "criteria"): "no GEval criterion",
    (typed.GenerationSettings, "self_check"): "no self-check",
    (typed.GenerationSettings, "checks"): "no answer check for every answer (a case may have its own)",
    (typed.NoiseSettings, "file"): "source is not file",
    (typed.RejectionSettings, "phrases"): "rag-gate's own refusal phrases",
    (typed.RobustnessSettings, "noise"): "no noise test",
    (typed.RobustnessSettings, "paraphrase"): "no paraphrase test",
    (typed.RobustnessSettings, "stability"): "no stability test",
}


def _node(where: str) -> dict[str, Any]:
    node: Any = config_schema()
    for part in where.split("/"):
        node = node[part]
    return node


def _has_default(prop: dict[str, Any]) -> bool:
    if "default" in prop:
        return True
    ref = prop.get("$ref", "")
    return ref.startswith("#/$defs/") and "default" in config_schema()["$defs"][ref.removeprefix("#/$defs/")]


def test_every_settings_class_of_the_module_is_checked() -> None:
    classes = {c for c in vars(typed).values() if dataclasses.is_dataclass(c) and isinstance(c, type) and c.__module__ == typed.__name__}
    assert classes - {typed.StageSettings} == set(READS)


@pytest.mark.parametrize("cls", list(READS), ids=lambda c: c.__name__)
def test_no_field_has_a_default_of_its_own(cls: type) -> None:
    for f in dataclasses.fields(cls):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f"{cls.__name__}.{f.name}"


@pytest.mark.parametrize("cls", list(READS), ids=lambda c: c.__name__)
def test_every_field_reads_a_key_the_schema_requires_or_gives_a_default(cls: type) -> None:
    where, keys, _ = READS[cls]
    block = _node(where)
    names = {f.name for f in dataclasses.fields(cls)} - {"match"} if cls is typed.RobustnessSettings else {f.name for f in dataclasses.fields(cls)}
    assert set(keys) == names, cls.__name__
    for field_name, key in keys.items():
        prop = block["properties"][key]
        required = key in block.get("required", [])
        assert required or _has_default(prop) or (cls, field_name) in OPTIONAL, f"{cls.__name__}.{field_name} <- {where}/{key}"


@pytest.mark.parametrize("cls", list(READS), ids=lambda c: c.__name__)
def test_a_block_with_only_its_required_keys_reads(cls: type) -> None:
    where, _, minimal = READS[cls]
    data = filled(where, minimal)
    if cls is typed.RobustnessSettings:
        got = cls.read(data, typed.MatchSettings.read(filled("$defs/retrieval_stage/properties/match", {})))
    else:
        got = cls.read(data)
    assert isinstance(got, cls)


def test_a_loaded_spec_carries_the_schemas_defaults(tmp_path) -> None:
    (tmp_path / "golden.jsonl").write_text('{"id": "q1", "question": "Q?", "relevant_doc_ids": ["d"]}\n', encoding="utf-8")
    (tmp_path / "rag-eval.yml").write_text(
        "version: 1\ngolden_set: golden.jsonl\ntarget: {results: r.jsonl}\n"
        "stages:\n  retrieval: {metrics: [mrr]}\n  generation: {metrics: [token_f1]}\n  robustness: {noise: {}}\n", encoding="utf-8")
    stages = load_spec(tmp_path / "rag-eval.yml", env={}).stages
    assert stages.generation is not None and stages.robustness is not None and stages.robustness.noise is not None
    judge_sample = config_schema()["$defs"]["judge_sample"]["properties"]
    noise = config_schema()["$defs"]["robustness_stage"]["properties"]["noise"]["properties"]
    assert stages.generation.sample.size == judge_sample["size"]["default"]  # 150: every case of a set up to it
    assert stages.robustness.noise.sample.size == "all"
    assert stages.robustness.noise.distractors == noise["distractors"]["default"]
    assert stages.robustness.noise.correctness.threshold == noise["correctness"]["properties"]["threshold"]["default"]
    assert stages.match.level == "exact" and stages.retrieval is not None and stages.retrieval.gates == {}
