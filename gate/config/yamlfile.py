"""Safe YAML loading that remembers the line of every key (for error messages)."""

from __future__ import annotations

from typing import Any

import yaml

from gate.core.errors import InputError, KeyPath, key_path
from gate.core.surrogates import NOT_UNICODE, lone_surrogate

# YAML reads "\ud83d\ude00" as two lone halves (it does not join a surrogate pair as JSON does)
YAML_SURROGATE_HINT = 'write the character itself, or its escape of eight hex digits ("\\U0001F600")'


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], file: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                raise InputError(
                    f"duplicate key {key!r} (first at line {seen[key]})", file=file, line=line, key=key_path(path + (key,))
                )
            seen[key] = line
            lines[path + (key,)] = line
            _walk(value_node, path + (key,), lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _walk(item, path + (i,), lines, file)


class _NoAliasLoader(yaml.SafeLoader):
    """The safe loader, refusing aliases (``*name``) as the parser meets them: an alias repeats a node without copying
    it, so ten nested aliases expand to billions of nodes ("billion laughs") and an alias inside its own anchor loops
    for ever. A spec has no need of them; refusing them keeps loading linear in the file's size."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise InputError(f"YAML aliases (*{event.anchor}) are not allowed in a rag-gate spec: write the value out",
                             line=event.start_mark.line + 1)
        return super().compose_node(parent, index)


def load_yaml(text: str, file: str) -> tuple[Any, dict[KeyPath, int]]:
    """Parse YAML with the safe loader. Returns (data, {key path: line}).

    Tags such as ``!!python/object`` are refused (nothing is executed); duplicate keys are errors; aliases are refused.
    """
    loader = _NoAliasLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        if node is None:
            return None, lines
        _walk(node, (), lines, file)
        data = loader.construct_document(node)
        at = lone_surrogate(data)
        if at is not None:  # a double-quoted "\ud800": nothing could write it (a report, a comment, the key of a cache)
            raise InputError(NOT_UNICODE, file=file, line=_line_of_shown(lines, at), key=key_path(at), hint=YAML_SURROGATE_HINT)
        return data, lines
    except InputError as exc:  # an alias: the loader knows the line, not the file
        raise InputError(exc.message, file=file, line=exc.line) if exc.file is None else exc from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        msg = f"{context}: {problem}" if context and "constructor" not in str(context) else problem
        if "python/" in str(exc):
            msg = f"{problem} (Python tags are not allowed in rag-gate files)"
        raise InputError(f"invalid YAML: {msg}", file=file, line=mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()


def _line_of_shown(lines: dict[KeyPath, int], at: KeyPath) -> int | None:
    """``line_of`` a key path whose last key is shown escaped (``lone_surrogate``: a key holding a lone surrogate)."""
    if at in lines or not at or not isinstance(at[-1], str):
        return line_of(lines, at)
    shown = at[-1]
    return next((n for p, n in lines.items() if p[:-1] == at[:-1] and len(p) == len(at) and isinstance(p[-1], str)
                 and p[-1].encode("utf-8", "backslashreplace").decode("ascii") == shown), None) or line_of(lines, at[:-1])


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """Line of a key path, or of its nearest parent that has one."""
    p = tuple(path)
    while p:
        if p in lines:
            return lines[p]
        p = p[:-1]
    return lines.get(())
