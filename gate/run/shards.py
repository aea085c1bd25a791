"""A run split over a CI matrix: each job runs one shard and writes its part; one merge step gates the whole
(gate.run.merge, after gate.run.parts has checked the parts are one run's).

    shard_of     which shard (1..N) a case is in: a stable hash of its id (the same case, the same shard, for a given N)
    run_shard    one shard's part: its cases asked and judged (every sample drawn from the whole golden set first)
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import cast

from gate import __version__
from gate.core.digest import digest_json
from gate.core.errors import InputError
from gate.core.model import TargetOutput
from gate.core.report import SCHEMA_VERSION, Part, PartOutput
from gate.run.flow import gc_paused
from gate.run.load import Loaded, load
from gate.run.measure import measure
from gate.run.notes import deadline_note
from gate.run.options import RunOptions

SALT = b"rag-gate shard\x00"


def shard_of(case_id: str, n: int) -> int:
    """The shard (1..n) of a case: sha256 of its id, so it never moves while N stays the same, and the shards are
    balanced (each holds about 1/n of the cases)."""
    return int.from_bytes(hashlib.sha256(SALT + case_id.encode()).digest()[:8], "big") % n + 1


def parse_shard(text: str) -> tuple[int, int]:
    """"I/N" -> (I, N); InputError (exit 2) otherwise."""
    index, sep, of = text.strip().partition("/")
    if sep and index.isdigit() and of.isdigit() and 1 <= int(index) <= int(of):
        return int(index), int(of)
    raise InputError(f"must be I/N with 1 <= I <= N (for example 2/3), got {text!r}", key="shard")


def identity(loaded: Loaded) -> dict[str, str]:
    """What every part of one run must share with the merge: the spec as written (its ${NAME} values may differ
    between jobs and are no part of it), the golden set (every field: tags decide pinned samples) and the baseline
    the relative gates compare with."""
    return {"spec": digest_json(loaded.spec.raw), "golden_set": digest_json([dataclasses.asdict(c) for c in loaded.cases]),
            "baseline": digest_json(loaded.baseline) if loaded.baseline is not None else "none"}


def run_shard(config: str, shard: tuple[int, int], options: RunOptions | None = None) -> Part:
    """Ask and judge one shard's cases; the part (no gate, no verdict). Raises InputError for bad input."""
    started = time.perf_counter()
    options = options or RunOptions()
    index, of = shard
    with gc_paused():
        loaded = load(config, options)
        if loaded.traces is not None:
            raise loaded.spec.error("a traces run is not sharded: its window is compared as a whole with the windows before "
                                    "it (run it in one job; a sample of a few hundred traces judges in minutes)", "target", "traces")
        robustness = loaded.spec.stages.robustness
        if robustness is not None and robustness.stability is not None:
            raise loaded.spec.error("the stability test does not run in shards yet: run it in one job (or leave "
                                    "stages.robustness.stability out of the sharded spec)", "stages", "robustness", "stability")
        mine = [c for c in loaded.cases if shard_of(c.id, of) == index]
        measured = measure(loaded, options, only=mine)
        note = deadline_note(loaded.deadline, measured.outputs, measured.judged)
        part: Part = {
            "schema_version": SCHEMA_VERSION,
            "part": "rag-gate shard",
            "tool": {"name": "rag-gate", "version": __version__},
            "shard": {"index": index, "of": of, "cases": len(mine)},
            "run": {"created_at": options.now(), "config": str(loaded.spec.path), "commit": options.commit,
                    "duration_s": round(time.perf_counter() - started, 3)},
            "identity": identity(loaded),
            "target_kind": measured.target_kind,
            "unmatched": list(measured.unmatched),
            "outputs": [_part_output(measured.outputs[c.id]) for c in mine],
            "stages": measured.judged,
            "errors": [note] if note else [],
        }
        return cast(Part, loaded.spec.redactor(options.secrets).document(part))


def _part_output(out: TargetOutput) -> PartOutput:
    part: PartOutput = {"id": out.case_id, "retrieved": [{"id": d.id, "text": d.text, "score": d.score} for d in out.retrieved],
                        "answer": out.answer, "contexts": list(out.contexts), "latency_ms": out.latency_ms, "error": out.error}
    if out.usage is not None:  # the health metrics and what changed: the merge measures them from the parts too
        part["usage"] = {k: v for k, v in out.usage.items() if isinstance(v, int | float) and not isinstance(v, bool)}  # the counts
    if out.cached is not None:
        part["cached"] = out.cached
    if out.system is not None:
        part["system"] = out.system
    return part
