"""Reading the parts of a sharded run back: the files named (a folder stands for its .json files), each checked at
the door, and together checked to be one run's complete set of shards."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import cast

from gate import __version__
from gate.core.errors import InputError
from gate.core.report import Part
from gate.io.reports import check_document, load_json
from gate.run.load import Loaded
from gate.run.shards import identity, shard_of

PART_HINT = "write each part with `rag-gate run --shard I/N --report PART.json` from the same commit"


def part_files(paths: Iterable[str]) -> list[Path]:
    """The part files named: a folder stands for every .json file under it (downloaded CI artifacts)."""
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not found:
                raise InputError("no part (.json file) in this folder", file=str(path), hint=PART_HINT)
            files += found
        else:
            files.append(path)
    if not files:
        raise InputError("no part given", key="PART", hint=PART_HINT)
    return files


def read_part(path: Path) -> Part:
    """A part, checked at the door against report.schema.json ($defs/part)."""
    return cast(Part, check_document(load_json(path, "part", hint=PART_HINT), "part", file=str(path)))


def check_parts(loaded: Loaded, parts: Sequence[tuple[Path, Part]]) -> None:
    """Refuse (InputError, exit 2), naming every problem at once, unless the parts are one run's shards, each once,
    all there, made by this version from this spec, golden set and baseline."""
    problems: list[str] = []
    mine = identity(loaded)
    what = {"spec": "spec", "golden_set": "golden set", "baseline": "baseline"}
    for path, part in parts:
        if part["tool"]["version"] != __version__:
            problems.append(f"{path}: made by rag-gate {part['tool']['version']}, this is {__version__}")
        for key, name in what.items():
            if part["identity"].get(key) != mine[key]:
                problems.append(f"{path}: made from another {name} ({part['identity'].get(key)}; this {name} is {mine[key]})")
    sizes = sorted({p["shard"]["of"] for _, p in parts})
    if len(sizes) > 1:
        problems.append("the parts split the golden set differently: " + "; ".join(
            f"{', '.join(str(path) for path, p in parts if p['shard']['of'] == n)} into {n}" for n in sizes))
    n = max(sizes)
    counts: dict[int, int] = {}
    for case in loaded.cases:
        counts[shard_of(case.id, n)] = counts.get(shard_of(case.id, n), 0) + 1
    given: dict[int, list[Path]] = {}
    for path, part in parts:
        if part["shard"]["of"] == n:
            given.setdefault(part["shard"]["index"], []).append(path)
    for index, paths in sorted(given.items()):
        if len(paths) > 1:
            problems.append(f"shard {index} of {n} is given {len(paths)} times ({', '.join(map(str, paths))}; it holds "
                            f"{counts.get(index, 0)} cases)")
    missing = [i for i in range(1, n + 1) if i not in given]
    if missing:
        held = sum(counts.get(i, 0) for i in missing)
        problems.append(f"shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of {n} "
                        f"{'are' if len(missing) > 1 else 'is'} missing ({held} of the {len(loaded.cases)} cases)")
    if not problems:
        for path, part in parts:
            index = part["shard"]["index"]
            expected = [c.id for c in loaded.cases if shard_of(c.id, n) == index]
            if [o["id"] for o in part["outputs"]] != expected:
                problems.append(f"{path}: does not hold shard {index} of {n}'s cases ({len(part['outputs'])} outputs, "
                                f"{len(expected)} expected)")
    if problems:
        raise InputError("these parts do not make one run: " + "; ".join(problems), file=str(parts[0][0]) if len(parts) == 1 else None,
                         hint=PART_HINT)
