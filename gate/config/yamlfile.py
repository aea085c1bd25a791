"""Safe YAML loading that remembers the line of every key (for error messages)."""

from __future__ import annotations

from typing import Any

import yaml

from gate.core.errors import InputError, KeyPath, key_path


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


def load_yaml(text: str, file: str) -> tuple[Any, dict[KeyPath, int]]:
    """Parse YAML with the safe loader. Returns (data, {key path: line}).

    Tags such as ``!!python/object`` are refused (nothing is executed); duplicate keys are errors.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        if node is None:
            return None, lines
        _walk(node, (), lines, file)
        return loader.construct_document(node), lines
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


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """Line of a key path, or of its nearest parent that has one."""
    p = tuple(path)
    while p:
        if p in lines:
            return lines[p]
        p = p[:-1]
    return lines.get(())
