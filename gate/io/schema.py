"""JSON Schema validation, fast and readable: a compiled validator (jsonschema-rs) says whether a document is
valid; only when it is not does the pure-Python validator (jsonschema) run, to say which rule broke where in words
the messages use. A valid spec or report therefore never imports the slower library at all."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema

# the gate package's folder, which holds its schemas (package data beside its modules: read as files, without
# importlib.resources, whose import brings tempfile and shutil along)
PACKAGE_DIR = Path(__file__).resolve().parent.parent


class SchemaValidator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    @functools.cached_property
    def _fast(self) -> Any:
        import jsonschema_rs

        return jsonschema_rs.validator_for(self.schema, validate_formats=False)

    @functools.cached_property
    def readable(self) -> jsonschema.Draft202012Validator:
        import jsonschema

        return jsonschema.Draft202012Validator(self.schema)

    def is_valid(self, data: Any) -> bool:
        return bool(self._fast.is_valid(data))

    def errors(self, data: Any) -> Iterator[jsonschema.ValidationError]:
        """Every error, with its rule and place (none when the data is valid)."""
        if self.is_valid(data):
            return iter(())
        return self.readable.iter_errors(data)

    def best_error(self, data: Any) -> jsonschema.ValidationError | None:
        """The most useful error (jsonschema's best_match), None when the data is valid."""
        import jsonschema

        return jsonschema.exceptions.best_match(self.errors(data))


def best_branch_error(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The most useful error among a oneOf's branches.

    A branch whose type the value does not even have explains nothing ("'3 percent' is not of
    type 'number'" for a key that also takes "3%"), and jsonschema's best_match may pick it:
    prefer the errors of the branches whose type matches.
    """
    import jsonschema

    fitting = [e for e in error.context or [] if e.validator != "type" or e.relative_path]
    return jsonschema.exceptions.best_match(fitting or error.context or []) or error


def describe(error: jsonschema.ValidationError) -> str:
    """What is wrong, in words that never quote the value (it may be huge, hostile, or a secret from ${NAME})."""
    v, vv = error.validator, error.validator_value
    if v == "oneOf" and error.context:
        return describe(best_branch_error(error))
    if v == "required":
        missing = [k for k in vv if isinstance(error.instance, dict) and k not in error.instance]
        return f"{missing[0]!r} is required" if missing else "a required key is missing"
    if v == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = [k for k in error.instance if k not in allowed]
        return f"unknown key {str(extra[0])[:60]!r}" if extra else "unknown key"
    if v == "type":
        return f"must be of type {vv!r}"
    if v == "enum":
        return f"must be one of {', '.join(map(repr, vv))}"
    if v == "const":
        return f"must be {vv!r}"
    if v == "pattern":
        return f"must match {vv!r}"
    if v == "minLength" and vv == 1:
        return "must not be empty"
    if v == "propertyNames":
        return "has a key that is not allowed here"
    if v in ("maxLength", "maxItems", "maxProperties"):
        return f"is longer than {vv} (the limit for this field)"
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "minLength"):
        return f"breaks the schema's {v} {vv}"
    return f"breaks the schema's {v!r} rule"
