"""Loading the spec (rag-eval.yml): parse, validate against config.schema.json, expand ${VARS}.

Steps, in order:
  1. read the file and parse it with the safe YAML loader (line of every key kept);
  2. validate the raw data against config.schema.json (before any ${VAR} is expanded,
     so an error message can never show a secret);
  3. fill the defaults the schema declares;
  4. check what the schema cannot (metric names, gates on metrics that exist);
  5. expand ${NAME} references from the environment, remembering the values as secrets;
  6. resolve relative paths against the spec file's folder.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.config.checks import check_semantics
from gate.config.spec import Spec
from gate.config.yamlfile import line_of, load_yaml
from gate.core.errors import InputError, InputErrors, KeyPath, key_path
from gate.io.schema import SchemaValidator, best_branch_error, describe

if TYPE_CHECKING:
    import jsonschema

_ENV_REF = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@cache
def config_validator() -> SchemaValidator:
    return SchemaValidator(config_schema())


@cache
def config_schema() -> dict[str, Any]:
    """The JSON Schema of rag-eval.yml, shipped inside the package."""
    return json.loads(resources.files("gate").joinpath("config.schema.json").read_text(encoding="utf-8"))


def _fill_defaults(instance: Any, schema: dict[str, Any], root: dict[str, Any]) -> None:
    """Set every missing property that has a ``default`` in the schema (after validation)."""
    if "$ref" in schema:
        ref = schema["$ref"].removeprefix("#/$defs/")
        _fill_defaults(instance, root["$defs"][ref], root)
    if isinstance(instance, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in instance and "default" in sub:
                instance[name] = copy.deepcopy(sub["default"])
            if name in instance:
                _fill_defaults(instance[name], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, value in instance.items():
                if name not in schema.get("properties", {}):
                    _fill_defaults(value, extra, root)
    for branch in schema.get("oneOf", []):
        if isinstance(instance, dict) and branch.get("type") == "object":
            _fill_defaults(instance, branch, root)


def _schema_message(error: jsonschema.ValidationError) -> tuple[KeyPath, str]:
    """A readable message and the key path it is about, for one schema error."""
    path: KeyPath = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list(schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        key = extra[0] if extra else "?"
        hint = f" (allowed here: {', '.join(allowed)})" if allowed else ""
        return path + (key,), f"unknown key {key!r}{hint}"
    if error.validator == "required":
        return path, error.message.replace("is a required property", "is required")
    if error.validator == "oneOf":
        branches = error.validator_value
        if all(set(b) == {"required"} for b in branches):
            names = [b["required"][0] for b in branches]
            present = [n for n in names if isinstance(error.instance, dict) and n in error.instance]
            if present:
                return path, f"give exactly one of {', '.join(names)} (found {', '.join(present)})"
            return path, f"needs one of {', '.join(names)}"
        if error.context:
            return _schema_message(best_branch_error(error))
    if error.validator == "pattern" and path and path[-2:-1] == ("metrics",):
        return path, f"unknown metric {error.instance!r}; use hit_rate@k, mrr, recall@k, precision@k, ndcg@k, map, context_recall@k"
    if error.validator == "const":
        return path, f"must be {error.validator_value!r}, got {error.instance!r}"
    if error.validator == "enum":
        return path, f"must be one of {', '.join(map(repr, error.validator_value))}, got {error.instance!r}"
    return path, error.message


def _has_env_ref(value: Any) -> bool:
    """True for a string holding a ${NAME} to expand (not an escaped $${NAME})."""
    return isinstance(value, str) and any(not m.group(1) for m in _ENV_REF.finditer(value))


def _rule(error: jsonschema.ValidationError) -> str:
    """The schema rule an error breaks, in words that never quote the value."""
    if error.validator == "oneOf" and error.context:
        error = best_branch_error(error)
    note = " (an environment variable gives a string)" if error.validator == "type" else ""
    return f"it {describe(error)}{note}"


def _value_at(data: Any, path: KeyPath) -> Any:
    """data[p0][p1]...; None where a step is missing."""
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def _expanded_errors(spec: Spec, validator: SchemaValidator) -> list[InputError]:
    """Schema errors of values that came from ${VARS}, checked after expansion, never showing the value."""
    errors = []
    for err in validator.errors(spec.data):
        at: KeyPath = tuple(err.absolute_path)
        raw = _value_at(spec.raw, at)
        names = sorted({m.group(2) for m in _ENV_REF.finditer(raw) if not m.group(1)}) if isinstance(raw, str) else []
        refs = ", ".join("${" + n + "}" for n in names) or "the environment"
        errors.append(spec.error(f"the value from {refs} is invalid here: {_rule(err)} (the value is not shown)", *at))
    return errors


def _expand(value: Any, path: KeyPath, file: str, lines: dict[KeyPath, int], secrets: list[str], env: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, path + (k,), file, lines, secrets, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, path + (i,), file, lines, secrets, env) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(1):  # $${NAME} -> literal ${NAME}
            return m.group(0)[1:]
        name, default = m.group(2), m.group(3)
        if name not in env and default is not None:  # ${NAME:-default}: the default is no secret
            return default
        if name not in env:
            raise InputError(
                f"environment variable {name} is not set",
                file=file,
                line=line_of(lines, path),
                key=key_path(path),
                hint=f"export {name}=... before running rag-gate (in a workflow: env: {{{name}: ${{{{ secrets.{name} }}}}}})",
            )
        if env[name]:
            secrets.append(env[name])
        return env[name]

    return _ENV_REF.sub(sub, value)


def load_spec(path: str | os.PathLike[str], env: dict[str, str] | None = None) -> Spec:
    """Load and validate a spec file. Raises InputError (exit 2) naming file and line/key."""
    p = Path(path)
    file = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("spec file not found", file=file, hint="pass --config PATH to your rag-eval.yml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the spec file: {exc}", file=file) from None
    raw, lines = load_yaml(text, file)
    if not isinstance(raw, dict):
        raise InputError("the spec must be a YAML mapping (key: value lines)", file=file, line=1)

    validator = config_validator()
    errors: list[InputError] = []
    for err in sorted(validator.errors(raw), key=lambda e: line_of(lines, tuple(e.absolute_path)) or 0):
        if _has_env_ref(err.instance):
            continue  # a string holding ${NAME} is checked once expanded (the schema allows ${NAME} in any string)
        at, message = _schema_message(err)
        errors.append(InputError(message, file=file, line=line_of(lines, at), key=key_path(at)))
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)

    data = copy.deepcopy(raw)
    _fill_defaults(data, config_schema(), config_schema())
    spec = Spec(path=p, raw=raw, data=data, lines=lines)
    errors = check_semantics(spec)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    environment = dict(os.environ if env is None else env)
    spec.data = _expand(data, (), file, lines, spec.secrets, environment)
    key_env = (spec.data.get("judge") or {}).get("api_key_env")
    if key_env and environment.get(key_env):
        spec.secrets.append(environment[key_env])  # the judge's key: a secret of the run like any ${NAME}
    errors = _expanded_errors(spec, validator)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    return spec
