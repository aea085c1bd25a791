"""config.schema.json is the single source of truth: valid 2020-12, every key documented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from gate.config.loader import config_schema

ROOT = Path(__file__).resolve().parents[2]


def _undocumented(schema: dict[str, Any], where: str, defs: dict[str, Any]) -> list[str]:
    missing = []
    for name, sub in schema.get("properties", {}).items():
        resolved = defs[sub["$ref"].removeprefix("#/$defs/")] if "$ref" in sub else sub
        if not resolved.get("description"):
            missing.append(f"{where}.{name}")
        missing += _undocumented(resolved, f"{where}.{name}", defs)
    for i, branch in enumerate(schema.get("oneOf", [])):
        missing += _undocumented(branch, f"{where}[oneOf {i}]", defs)
    return missing


def test_schema_is_valid_2020_12() -> None:
    schema = json.loads((ROOT / "config.schema.json").read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_package_ships_the_same_schema() -> None:
    assert config_schema() == json.loads((ROOT / "config.schema.json").read_text())


def test_every_key_has_a_description() -> None:
    schema = config_schema()
    assert _undocumented(schema, "", schema["$defs"]) == []


def test_every_object_rejects_unknown_keys() -> None:
    def walk(node: Any, where: str) -> list[str]:
        bad = []
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and node.get("additionalProperties") is not False:
                bad.append(where)
            for k, v in node.items():
                bad += walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                bad += walk(v, f"{where}/{i}")
        return bad

    assert walk(config_schema(), "#") == []
