"""Loading the spec (rag-eval.yml): parse, validate against config.schema.json, expand ${VARS}.

Steps, in order:
  1. read the file and parse it with the safe YAML loader (line of every key kept);
  2. validate the raw data against config.schema.json (before any ${VAR} is expanded,
     so an error message can never show a secret): a string holding a ${NAME} is left
     out here and checked once expanded (step 5), so the schema's alternatives that accept
     any reference (its "env_ref" branches, for editors and check-jsonschema) are dropped;
  3. fill the defaults the schema declares;
  4. check what the schema cannot (metric names, gates on metrics that exist);
  5. expand ${NAME} references from the environment, remembering the values as secrets;
  6. resolve relative paths against the spec file's folder.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from collections.abc import Mapping, Set
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.config.checks import check_semantics
from gate.config.spec import Spec
from gate.config.yamlfile import line_of, load_yaml
from gate.core.catalog import (
    HEALTH_METRICS,
    RETRIEVAL_BASES,
    generation_metric_hint,
    generation_metric_names,
    retrieval_metric_names,
    suggest_retrieval_metric,
)
from gate.core.errors import InputError, InputErrors, KeyPath, key_path, value_at
from gate.core.settings import GenerationSettings, MatchSettings, RetrievalSettings, RobustnessSettings, StageSettings
from gate.core.surrogates import lone_surrogate
from gate.io.schema import PACKAGE_DIR, SchemaValidator, best_branch_error, describe

if TYPE_CHECKING:
    import jsonschema

_ENV_REF = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


_ENV_REF_BRANCH = {"$ref": "#/$defs/env_ref"}


@cache
def config_validator() -> SchemaValidator:
    """The validator of the spec, before and after expansion: config.schema.json without its env_ref alternatives."""
    return SchemaValidator(strict_config_schema())


@cache
def config_schema() -> dict[str, Any]:
    """The JSON Schema of rag-eval.yml, shipped inside the package."""
    return json.loads((PACKAGE_DIR / "config.schema.json").read_text(encoding="utf-8"))


@cache
def strict_config_schema() -> dict[str, Any]:
    """config.schema.json with every ``anyOf: [constraint, {$ref: env_ref}]`` replaced by the constraint itself.

    The schema lets a constrained string hold a ${NAME} (an editor cannot know its value). The loader is
    stricter: it skips such a string before expansion and checks the expanded value against the constraint
    itself, so that an expanded value that happens to hold "${" (an escaped $${NAME}) is no reference.
    """
    return _without_env_refs(config_schema())


def _without_env_refs(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_env_refs(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_env_refs(v) for k, v in node.items() if k != "anyOf"}
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b != _ENV_REF_BRANCH]
        if len(branches) == 1 and len(node["anyOf"]) == 2 and not set(branches[0]) & set(out):
            out.update(_without_env_refs(branches[0]))
        else:
            out["anyOf"] = [_without_env_refs(b) for b in branches]
    if isinstance(out.get("$defs"), dict):
        out["$defs"].pop("env_ref", None)
    return out


def _fill_defaults(instance: Any, schema: dict[str, Any], root: dict[str, Any]) -> None:
    """Set every missing property that has a ``default`` in the schema (after validation)."""
    if "$ref" in schema:
        ref = schema["$ref"].removeprefix("#/$defs/")
        _fill_defaults(instance, root["$defs"][ref], root)
    if isinstance(instance, dict):
        for name, sub in schema.get("properties", {}).items():
            default = sub.get("default", _referenced(sub, root).get("default"))  # a $ref's target may carry it
            if name not in instance and default is not None:
                instance[name] = copy.deepcopy(default)
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


def _referenced(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """The definition a ``{"$ref": "#/$defs/NAME"}`` names ({} for any other schema)."""
    ref = schema.get("$ref")
    return root["$defs"][ref.removeprefix("#/$defs/")] if isinstance(ref, str) and ref.startswith("#/$defs/") else {}


def _schema_message(error: jsonschema.ValidationError, raw: Any = None) -> tuple[KeyPath, str]:
    """A readable message and the key path it is about, for one schema error (``raw``: the whole spec)."""
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
            return _schema_message(best_branch_error(error), raw)
    if error.validator == "pattern" and len(path) >= 3 and path[-2] == "metrics" and isinstance(error.instance, str):
        return path, _unknown_metric(str(path[-3]), error.instance, raw)
    if error.validator == "dependentRequired" and isinstance(error.instance, dict):
        key = next((k for k, needs in error.validator_value.items() if k in error.instance and set(needs) - set(error.instance)), "?")
        return path + (key,), f"{key!r} goes with {', '.join(map(repr, error.validator_value.get(key, [])))}, which is not set"
    if error.validator == "const":
        return path, f"must be {error.validator_value!r}, got {error.instance!r}"
    if error.validator == "enum":
        return path, f"must be one of {', '.join(map(repr, error.validator_value))}, got {error.instance!r}"
    return path, error.message


def _unknown_metric(stage: str, name: str, raw: Any) -> str:
    """Why a name in stages.<stage>.metrics is refused, with the closest name of that stage and the list of them."""
    if stage == "generation":
        criteria = value_at(raw, ("stages", "generation", "criteria"))
        names = sorted(criteria) if isinstance(criteria, dict) else []
        known = ", ".join(sorted(generation_metric_names()))
        custom = f"or a name from criteria ({', '.join(names)})" if names else "or a name from criteria"
        return (f"unknown generation metric {name!r}{generation_metric_hint(name, names)}; generation metrics are {known} "
                f"(ragas/ or deepeval/ in front picks the engine of an LLM metric), {custom}")
    if name in HEALTH_METRICS:
        return f"{name!r} is a health metric: always computed, gate it under stages.retrieval.gates without listing it in metrics"
    base, at, _ = name.partition("@")
    if base in RETRIEVAL_BASES:
        return (f"metric {name!r}: the cut-off must be a whole number from 1, e.g. {base}@10" if at
                else f"metric {name!r} needs a cut-off, e.g. {base}@5")
    suggestion = suggest_retrieval_metric(name)
    if name.rpartition("/")[2] in generation_metric_names():
        hint = " (a generation metric: list it under stages.generation.metrics)"
    elif suggestion in HEALTH_METRICS:
        hint = f" (did you mean {suggestion!r}? a health metric: always computed, gate it without listing it)"
    elif suggestion:
        hint = f" (did you mean {suggestion!r}?)"
    else:
        hint = ""
    return (f"unknown retrieval metric {name!r}{hint}; retrieval metrics are {', '.join(retrieval_metric_names())}; "
            f"health metrics ({', '.join(HEALTH_METRICS)}) are always computed: gate them without listing them")


def _has_env_ref(value: Any) -> bool:
    """True for a string holding a ${NAME} to expand (not an escaped $${NAME})."""
    return isinstance(value, str) and any(not m.group(1) for m in _ENV_REF.finditer(value))


def _about_env_refs_only(error: jsonschema.ValidationError) -> bool:
    """True when an error is only about strings holding ${NAME}, which are checked once expanded: the string itself,
    or every error of the branch of a oneOf/anyOf that fits best (python: {function: "${FN}"})."""
    if _has_env_ref(error.instance):
        return True
    if error.validator in ("oneOf", "anyOf") and error.context:
        best = best_branch_error(error)
        while best.parent is not None and best.parent is not error:  # best_match may pick an error deeper down
            best = best.parent
        if best is error or not best.relative_schema_path:
            return False
        branch = best.relative_schema_path[0]
        return all(_about_env_refs_only(e) for e in error.context if e.relative_schema_path and e.relative_schema_path[0] == branch)
    return False


def _leaf(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The error of the best-fitting branch, down through nested oneOf/anyOf: the key it names is the one to show."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        error = best_branch_error(error)
    return error


def _rule(error: jsonschema.ValidationError) -> str:
    """The schema rule an error breaks, in words that never quote the value."""
    if error.validator == "oneOf" and error.context:
        error = best_branch_error(error)
    note = " (an environment variable gives a string)" if error.validator == "type" else ""
    return f"it {describe(error)}{note}"


def _expanded_errors(spec: Spec, validator: SchemaValidator, kept: Set[str] = frozenset()) -> list[InputError]:
    """Schema errors of values that came from ${VARS}, checked after expansion, never showing the value (a value
    that still holds a ``kept`` variable is not checked: it was not expanded)."""
    errors = []
    for err in validator.errors(spec.data):
        at: KeyPath = tuple(_leaf(err).absolute_path)
        while at and value_at(spec.raw, at) is None:  # a key the loader added (python: "${FN}" -> {function: ...})
            at = at[:-1]
        raw = value_at(spec.raw, at)
        names = sorted({m.group(2) for m in _ENV_REF.finditer(raw) if not m.group(1)}) if isinstance(raw, str) else []
        if kept & set(names):
            continue
        refs = ", ".join("${" + n + "}" for n in names) or "the environment"
        errors.append(spec.error(f"the value from {refs} is invalid here: {_rule(err)} (the value is not shown)", *at))
    return errors


@dataclass
class _Expander:
    """Expands every ${NAME} of a spec from ``env``: each value it reads goes into ``secrets``; a variable that is not
    set is an error naming its key and line, or (``kept`` given) stays as it is and its name goes into ``kept``."""

    file: str
    lines: dict[KeyPath, int]
    secrets: list[str]
    env: dict[str, str]
    kept: set[str] | None = None

    def expand(self, value: Any, path: KeyPath = ()) -> Any:
        if isinstance(value, dict):
            return {k: self.expand(v, path + (k,)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v, path + (i,)) for i, v in enumerate(value)]
        if not isinstance(value, str) or "${" not in value:
            return value
        return _ENV_REF.sub(lambda m: self._value(m, path), value)

    def _value(self, m: re.Match[str], path: KeyPath) -> str:
        if m.group(1):  # $${NAME} -> literal ${NAME}
            return m.group(0)[1:]
        name, default, env = m.group(2), m.group(3), self.env
        if name not in env and default is not None:  # ${NAME:-default}: the default is no secret
            return default
        if name not in env and self.kept is not None:
            self.kept.add(name)
            return m.group(0)
        if name not in env:
            raise InputError(
                f"environment variable {name} is not set",
                file=self.file,
                line=line_of(self.lines, path),
                key=key_path(path),
                hint=f"export {name}=... before running rag-gate (in a workflow: env: {{{name}: ${{{{ secrets.{name} }}}}}})",
            )
        if env[name]:
            self.secrets.append(env[name])
        if lone_surrogate(env[name]) is not None:  # bytes that are not UTF-8, as Python reads the environment
            raise InputError(f"environment variable {name} is not UTF-8 text", file=self.file, line=line_of(self.lines, path),
                             key=key_path(path), hint="set it to UTF-8 text")
        return env[name]


def load_spec(path: str | os.PathLike[str], env: dict[str, str] | None = None, *, unset_ok: bool = False) -> Spec:
    """Load and validate a spec file. Raises InputError (exit 2) naming file and line/key. ``unset_ok``: a ${NAME}
    that is not set stays as written instead of being an error (``rag-gate merge`` reads the spec's stages and
    gates, never the target or the judge those variables usually configure)."""
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
        if _about_env_refs_only(err):
            continue  # a string holding ${NAME} is checked once expanded (config.schema.json's env_ref branches accept it)
        at, message = _schema_message(err, raw)
        errors.append(InputError(message, file=file, line=line_of(lines, at), key=key_path(at)))
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)

    data = copy.deepcopy(raw)
    python = data.get("target", {}).get("python")
    if isinstance(python, str):  # the short form of a python target: its object form, so that its defaults are filled too
        data["target"]["python"] = {"function": python}
    _fill_defaults(data, config_schema(), config_schema())
    spec = Spec(path=p, raw=raw, data=data, lines=lines)
    errors = check_semantics(spec)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    environment = dict(os.environ if env is None else env)
    kept: set[str] | None = set() if unset_ok else None
    spec.data = _Expander(file, lines, spec.secrets, environment, kept).expand(data)
    key_env = (spec.data.get("judge") or {}).get("api_key_env")
    if key_env and environment.get(key_env):
        spec.secrets.append(environment[key_env])  # the judge's key: a secret of the run like any ${NAME}
    errors = _expanded_errors(spec, validator, kept or set())
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)
    spec.stages = _with_paths(read_settings(spec.data), spec)
    return spec


def _with_paths(stages: StageSettings, spec: Spec) -> StageSettings:
    """The settings with the files they name resolved against the spec's folder (the answers' JSON Schema)."""
    gen = stages.generation
    if gen is None or gen.checks is None or not gen.checks.json_schema:
        return stages
    checks = dataclasses.replace(gen.checks, json_schema=str(spec.resolve(gen.checks.json_schema)))
    return dataclasses.replace(stages, generation=dataclasses.replace(gen, checks=checks))


def filled(where: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` with the defaults config.schema.json gives the block at ``where`` (a path into the schema, such as
    "$defs/http_target" or "$defs/retrieval_stage/properties/match") filled in: what the loader makes of that block
    when a spec writes it (for a block built in code: a benchmark's, a test's)."""
    node: Any = config_schema()
    for part in where.strip("#/").split("/"):
        node = node[part]
    out = copy.deepcopy(dict(value))
    _fill_defaults(out, node, config_schema())
    return out


def read_settings(data: Mapping[str, Any]) -> StageSettings:
    """The typed stage settings of a validated, expanded spec whose defaults are filled (gate.core.settings)."""
    stages = data["stages"]
    retrieval = RetrievalSettings.read(stages["retrieval"]) if stages.get("retrieval") else None
    match = retrieval.match if retrieval else MatchSettings.read(filled("$defs/retrieval_stage/properties/match", {}))
    return StageSettings(
        retrieval=retrieval,
        generation=GenerationSettings.read(stages["generation"]) if stages.get("generation") else None,
        robustness=RobustnessSettings.read(stages["robustness"], match) if stages.get("robustness") else None,
        match=match,
    )
