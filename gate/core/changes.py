"""What differs between a reference run (the baseline, a history entry) and this run: the golden set, the spec, the
judge, rag-gate's version, the commit, and what the RAG system says about itself (``system``). Pure.

A target's answer may carry ``system``, an object of strings and numbers it knows about itself (its model, prompt
version, index version, number of documents...). A run keeps the value its answers gave for each key (``values``)
and, for a key whose answers disagree or that some answers leave out, how many gave each (``counts``); a comparison
lists each key whose value moved, so that a drop that came without a pull request (a model upgraded behind an API,
an index not rebuilt after the corpus grew) is named beside the figures it moved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from gate.core.report import Change, StoredRun, SystemInfo

MAX_KEYS = 50  # keys of one answer's system object
MAX_KEY_CHARS = 100
MAX_VALUE_CHARS = 200
_NONE = "(not given)"


def read_system(value: Any, name: str = "system") -> dict[str, str | float | int] | None:
    """An answer's ``system`` object as given (None: absent); ValueError naming the key when it is not an object of
    strings and numbers within the limits."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{name!r} must be an object of strings and numbers (model, prompt version, documents...), got "
                         f"{type(value).__name__}")
    if len(value) > MAX_KEYS:
        raise ValueError(f"{name!r} has {len(value)} keys, more than {MAX_KEYS}")
    for key, v in value.items():
        if not key or len(key) > MAX_KEY_CHARS:
            raise ValueError(f"{name!r} keys must be 1 to {MAX_KEY_CHARS} characters, got one of {len(key)}")
        if isinstance(v, bool) or not isinstance(v, str | int | float) or (isinstance(v, float) and v != v):
            raise ValueError(f"{name}.{key} must be a string or a number, got {type(v).__name__}")
        if isinstance(v, int | float) and not -1e300 < v < 1e300:
            raise ValueError(f"{name}.{key} is a number out of range")
        if isinstance(v, str) and len(v) > MAX_VALUE_CHARS:
            raise ValueError(f"{name}.{key} is {len(v)} characters long, more than {MAX_VALUE_CHARS}")
    return value


def summarise_system(systems: Iterable[Mapping[str, Any] | None]) -> SystemInfo | None:
    """What the answers said about the system: each key's most common value (ties: the first seen), and for a key the
    answers disagree on or some leave out, the count of each value ("(not given)" for those that leave it out).
    None when no answer carried a system object."""
    given = list(systems)
    seen = [s for s in given if s is not None]
    if not seen:
        return None
    keys = list(dict.fromkeys(k for s in seen for k in s))
    info: SystemInfo = {"values": {}}
    counts: dict[str, dict[str, int]] = {}
    for key in keys:
        tally = Counter(_shown(s.get(key)) if s is not None else _NONE for s in given)  # in the order first seen
        values = {_shown(v): v for s in seen if (v := s.get(key)) is not None}
        info["values"][key] = values[max(values, key=lambda v: tally[v])]  # the most common (a tie: the first seen)
        if len(tally) > 1:
            counts[key] = dict(tally.most_common())
    if counts:
        info["counts"] = counts
    return info


def _shown(value: Any) -> str:
    return _NONE if value is None else value if isinstance(value, str) else format(value, "g") if isinstance(value, float) else str(value)


def _fingerprint(value: str | None) -> str | None:
    return None if value is None else value[:19] if value.startswith("sha256:") else value


def _judges(stages: Mapping[str, Any]) -> dict[str, Any]:
    """judge.model, judge.temperature, judge.<engine> (its version), judge.prompt.<metric>, from each judged stage."""
    out: dict[str, Any] = {}
    for stage in stages.values():
        judge = stage.get("judge") if isinstance(stage, Mapping) else None
        if not isinstance(judge, Mapping) or judge.get("model") is None:
            continue
        out.setdefault("judge.model", judge.get("model"))
        out.setdefault("judge.temperature", judge.get("temperature"))
        for engine, version in sorted((judge.get("engines") or {}).items()):
            out.setdefault(f"judge.{engine}", version)
        for metric, fp in sorted((judge.get("prompts") or {}).items()):
            out.setdefault(f"judge.prompt.{metric}", _fingerprint(fp))
    return out


def facts(fingerprints: Mapping[str, str], stages: Mapping[str, Any], *, commit: str | None, tool_version: str | None,
          system: SystemInfo | None) -> dict[str, Any]:
    """The comparable facts of a run, key -> value, in the order a change list names them."""
    out: dict[str, Any] = {"golden_set": _fingerprint(fingerprints.get("golden_set"))}
    for name in sorted(fingerprints):
        if name != "golden_set":
            out[f"spec.{name}" if name != "spec" else "spec"] = _fingerprint(fingerprints[name])
    out.update(_judges(stages))
    out["rag_gate"] = tool_version
    out["commit"] = commit
    for key, value in (system["values"] if system else {}).items():
        out[f"system.{key}"] = value
    return out


def stored_facts(reference: StoredRun) -> dict[str, Any]:
    return facts(reference.get("fingerprints") or {}, reference.get("stages") or {}, commit=reference.get("commit"),
                 tool_version=reference.get("tool_version"), system=reference.get("system"))


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Every key whose value differs, in ``after``'s order then the keys only ``before`` has. Not a change: a key
    neither run knows; ``commit`` or ``rag_gate`` unknown on either side (a run outside CI, a reference written before
    rag-gate kept its version); ``system.*`` when either run kept no system at all (a reference made before it was
    kept, a target that says nothing of itself); a judge or stage fingerprint only one side has (the stage's own lines
    say it was added or removed)."""
    knows_system = any(k.startswith("system.") for k in before) and any(k.startswith("system.") for k in after)
    out: list[Change] = []
    for key in [*after, *(k for k in before if k not in after)]:
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key in ("commit", "rag_gate") and (old is None or new is None):
            continue
        if key.startswith("system.") and not knows_system:
            continue
        if key.startswith(("spec.", "judge.")) and (old is None or new is None):
            continue
        out.append({"key": key, "before": old, "after": new})
    return out


def change_text(change: Change) -> str:
    """One change in words: ``system.model: gpt-4-0613 → gpt-4-0125``; numbers with thousands separators."""
    return f"{change['key']}: {_value(change['before'])} → {_value(change['after'])}"


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) < 1e15 else format(value, "g")
    return str(value)
