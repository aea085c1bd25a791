"""A run split over a CI matrix: each job runs one shard and writes its part; one merge step gates the whole.

    shard_of     which shard (1..N) a case is in: a stable hash of its id (the same case, the same shard, for a given N)
    run_shard    one shard's part: its cases asked and judged (every sample drawn from the whole golden set first)
    merge        the parts checked (complete, alike), their per-case data merged, every metric recomputed, the gates run

The merge recomputes each metric from the per-case values (micro averages, never an average of shard averages), so
the merged report equals the one a single job would have written; the few things that can differ are said where
they arise (``CORPUS_NOTE``) and in the README.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from gate import __version__
from gate.core.catalog import NOISE_METRICS, engine_metrics
from gate.core.errors import InputError
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.redact import Redactor
from gate.core.report import (
    SCHEMA_VERSION,
    CaseResult,
    MetricPairs,
    NoiseInfo,
    Pairing,
    Part,
    PartOutput,
    Report,
    StageMeasurement,
    Usage,
)
from gate.core.sampling import sample_from
from gate.io.reports import check_document, load_json
from gate.pipeline import (
    Loaded,
    RunFacts,
    RunOptions,
    Viewed,
    deadline_note,
    evaluate,
    gc_paused,
    load,
    measure,
    passage_text_warning,
    pending_note,
    target_notes,
    viewed,
)

SALT = b"rag-gate shard\x00"
PART_HINT = "write each part with `rag-gate run --shard I/N --report PART.json` from the same commit"
CORPUS_NOTE = ("sharded run: each shard drew the noise test's corpus distractors from the passages retrieved for its own "
               "questions (about 1/{n} of the pool one job draws from), so its noise figures can differ from an unsharded "
               "run's; `noise.source: file` or `generated` gives the same distractors however the run is split")


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


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def identity(loaded: Loaded) -> dict[str, str]:
    """What every part of one run must share with the merge: the spec as written (its ${NAME} values may differ
    between jobs and are no part of it), the golden set (every field: tags decide pinned samples) and the baseline
    the relative gates compare with."""
    return {"spec": _digest(loaded.spec.raw), "golden_set": _digest([dataclasses.asdict(c) for c in loaded.cases]),
            "baseline": _digest(loaded.baseline) if loaded.baseline is not None else "none"}


# ---------------------------------------------------------------------------------------------- a shard


def run_shard(config: str, shard: tuple[int, int], options: RunOptions | None = None) -> Part:
    """Ask and judge one shard's cases; the part (no gate, no verdict). Raises InputError for bad input."""
    started = time.perf_counter()
    options = options or RunOptions()
    index, of = shard
    with gc_paused():
        loaded = load(config, options)
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
            "unmatched": measured.unmatched,
            "outputs": [_part_output(measured.outputs[c.id]) for c in mine],
            "stages": measured.judged,
            "errors": [note] if note else [],
        }
        return cast(Part, Redactor([*loaded.spec.secrets, *options.secrets]).document(part))


def _part_output(out: TargetOutput) -> PartOutput:
    return {"id": out.case_id, "retrieved": [{"id": d.id, "text": d.text, "score": d.score} for d in out.retrieved],
            "answer": out.answer, "contexts": list(out.contexts), "latency_ms": out.latency_ms, "error": out.error}


def _target_output(o: PartOutput) -> TargetOutput:
    return TargetOutput(o["id"], [RetrievedDoc(d["id"], d["text"], d["score"]) for d in o["retrieved"]], o["answer"],
                        list(o["contexts"]), o["latency_ms"], o["error"])


# ---------------------------------------------------------------------------------------------- reading parts


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


# ---------------------------------------------------------------------------------------------- merging


def sum_usage(usages: Sequence[Mapping[str, Any]]) -> Usage:
    """Several jobs' judge usage as one: counters summed, the cost summed (None when no job had one), the largest
    number in flight, the budget reached if any job reached it; other keys (how the noise test ran) from the first."""
    out: dict[str, Any] = dict(usages[0])
    for key, value in usages[0].items():
        values = [u.get(key) for u in usages]
        if key == "budget_exceeded":
            out[key] = any(values)
        elif key == "max_in_flight":
            out[key] = max(v or 0 for v in values)
        elif key in {"cost", "calls", "chat_calls", "embedding_calls", "retried", "prompt_tokens", "completion_tokens",
                     "embedding_tokens", "cache_hits", "cache_misses"} and not isinstance(value, bool):
            numbers = [v for v in values if isinstance(v, (int, float))]
            out[key] = sum(numbers) if numbers else value
    return cast(Usage, out)


def _counts(stages: Sequence[StageMeasurement]) -> dict[str, Any]:
    attempted = sum(s["scores"]["attempted"] for s in stages if "scores" in s)
    errored = sum(s["scores"]["errored"] for s in stages if "scores" in s)
    return {"attempted": attempted, "errored": errored, "error_rate": errored / attempted if attempted else 0.0}


def _in_order(rows: Iterable[CaseResult], ids: Sequence[str], what: str) -> list[CaseResult]:
    """The rows in ``ids`` order; InputError unless they are exactly those cases, each once."""
    by_id: dict[str, CaseResult] = {}
    for row in rows:
        if row["id"] in by_id:
            raise InputError(f"the parts' {what} holds case {row['id']!r} twice", hint=PART_HINT)
        by_id[row["id"]] = row
    if set(by_id) != set(ids):
        lost = sorted(set(ids) - set(by_id))[:5]
        extra = sorted(set(by_id) - set(ids))[:5]
        raise InputError(f"the parts' {what} does not match the sample this spec draws (missing: {lost or 'none'}; "
                         f"not in the sample: {extra or 'none'})", hint=PART_HINT)
    return [by_id[i] for i in ids]


def merge_pairing(records: Sequence[dict[str, Pairing]], order: Mapping[str, int]) -> dict[str, Pairing]:
    """Each reference's pairs from every shard: counts summed, pairs in sample order (as one run lists them)."""
    out: dict[str, Pairing] = {}
    for key, first in records[0].items():
        pieces = [r[key] for r in records if key in r]
        merged: Pairing = {**first, "added": sorted({i for p in pieces for i in p["added"]}),
                           "judgings": sum(p["judgings"] for p in pieces), "metrics": {}}
        for metric in first["metrics"]:
            parts = [p["metrics"][metric] for p in pieces if metric in p["metrics"]]
            cases = sorted((c for p in parts for c in p["cases"]), key=lambda c: order.get(c["id"], len(order)))
            mp: MetricPairs = {"pairs": sum(p["pairs"] for p in parts), "changed": sum(p["changed"] for p in parts),
                               "errored": sum(p["errored"] for p in parts), "cases": cases}
            merged["metrics"][metric] = mp
        out[key] = merged
    return out


def merge_generation(cfg: Mapping[str, Any], cases: Sequence[GoldenCase], stages: Sequence[StageMeasurement]) -> StageMeasurement:
    """The generation stage of the whole run from its shards' (every metric recomputed from the per-case scores)."""
    from gate.stages.generation import aggregate, self_check

    first = stages[0]
    measured = [s for s in stages if not s.get("skipped")]
    if not measured:
        return first
    if len(measured) < len(stages):
        raise InputError(f"the generation stage was measured by some shards and skipped by others ({first.get('skipped') or ''}"
                         f"{next((s.get('skipped') for s in stages if s.get('skipped')), '')}): run the skipped shards again "
                         "with the judge's key set", hint=PART_HINT)
    first = measured[0]
    judges = {json.dumps(s.get("judge"), sort_keys=True) for s in measured}
    if len(judges) > 1:
        raise InputError("the shards were judged by different judges (engine versions or prompts differ): run them on one "
                         "image", hint=PART_HINT)
    engines = first.get("judge", {}).get("engines", {})
    runnable = [p for p in engine_metrics(cfg) if p.engine in engines]
    runnable_names = {p.name for p in runnable}
    sample_ids = first["sample"]["ids"]
    by_id = {c.id: c for c in cases}
    rows = _in_order((r for s in measured for r in s["samples"]), sample_ids, "generation sample")
    not_evaluated = {m: why for m, why in first["not_evaluated"].items() if m not in runnable_names}
    samples, metrics = aggregate([by_id[i] for i in sample_ids], runnable, {r["id"]: r["metrics"] for r in rows},
                                 {r["id"]: r.get("errors", {}) for r in rows}, not_evaluated)
    union = {k: v for s in measured for k, v in s.get("texts", {}).items()}
    texts: dict[str, str] = {}
    for merged, row in zip(samples, rows, strict=True):
        if "output" in row:
            merged["output"] = row["output"]
            for tid in [*row["output"]["contexts"], row["output"]["answer"]]:
                if tid is not None:
                    texts[tid] = union[tid]
    stage: StageMeasurement = {
        "sample": first["sample"], "metrics": metrics, "samples": samples, "not_evaluated": not_evaluated,
        "warnings": list(first["warnings"]), "judge": first["judge"], "usage": sum_usage([s["usage"] for s in measured]),
        "scores": cast(Any, _counts(measured)), "budget_exceeded": any(s.get("budget_exceeded") for s in measured),
    }
    order = {cid: i for i, cid in enumerate(sample_ids)}
    if "pairing" in first:
        stage["pairing"] = merge_pairing([s["pairing"] for s in measured], order)
    stage["texts"] = texts
    if "self_check" in first:
        checks = [s["self_check"] for s in measured]
        diffs = {m: [d for c in checks for d in c.get("diffs", {}).get(m, [])] for m in (p.name for p in runnable)}
        stage["self_check"] = self_check(diffs, sum(c["errored"] for c in checks), sum(c["cases"] for c in checks),
                                         [p.name for p in runnable], first["self_check"]["limit"], first["self_check"]["on_unstable"])
    return stage


def merge_robustness(cfg: Mapping[str, Any], cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput],
                     stages: Sequence[StageMeasurement], shards: int) -> StageMeasurement:
    """The robustness stage of the whole run from its shards': the noise rows in sample order with the metrics
    recomputed, the rejection rows recomputed from every answer (with the judge's refusal verdicts the shards got)."""
    from gate.stages.robustness import finish, noise_metrics

    first = stages[0]
    metrics: dict[str, float] = {}
    not_evaluated: dict[str, str] = {}
    stage: StageMeasurement = {"metrics": metrics, "not_evaluated": not_evaluated, "samples": [], "warnings": []}
    samples: list[CaseResult] = []
    noise_cfg = cfg.get("noise")
    if noise_cfg and "noise" in first:
        ids = [c.id for c in sample_from(noise_cfg.get("sample", {}), [c for c in cases if c.answerable])]
        samples = _in_order((r for s in stages for r in s["samples"]), ids, "noise test")
        noise_metrics(samples, metrics, not_evaluated)
        stage["noise"] = cast(NoiseInfo, sum_usage([s["noise"] for s in stages]))
        if first["noise"].get("source") == "corpus" and shards > 1:
            stage["warnings"].append(CORPUS_NOTE.format(n=shards))
    elif noise_cfg:
        not_evaluated.update({m: first["not_evaluated"][m] for m in NOISE_METRICS if m in first["not_evaluated"]})
    usages = [s["usage"] for s in stages if "usage" in s]
    if usages:
        stage["usage"] = sum_usage(usages)
    judged = {r["id"]: bool(r.get("refused")) for s in stages for r in s["rejection"]["cases"] if r.get("method") == "judge"}
    finish(stage, cfg.get("rejection", {}), cases, outputs, judged, samples,
           target_calls=sum(s.get("target_calls", 0) for s in stages), scored=sum(s.get("scored", 0) for s in stages))
    return stage


def merge(config: str, paths: Sequence[str], options: RunOptions | None = None) -> Report:
    """The report of the run the parts make up (see ``merge_viewed``)."""
    return merge_viewed(config, paths, options).report


def merge_viewed(config: str, paths: Sequence[str], options: RunOptions | None = None) -> Viewed:
    """The report of the run the parts make up, as one job would have written it (``run.shards`` says it was split).
    InputError (exit 2) when the parts are not one run's complete set of shards."""
    started = time.perf_counter()
    options = options or RunOptions()
    with gc_paused():
        loaded = load(config, options, unset_ok=True)  # the merge asks no target and no judge: their variables may be unset
        parts = [(path, read_part(path)) for path in part_files(paths)]
        check_parts(loaded, parts)
        parts.sort(key=lambda pp: pp[1]["shard"]["index"])
        n = parts[0][1]["shard"]["of"]
        spec, cases = loaded.spec, loaded.cases
        by_id = {o["id"]: _target_output(o) for _, p in parts for o in p["outputs"]}
        outputs = {c.id: by_id[c.id] for c in cases}
        judged: dict[str, StageMeasurement] = {}
        names = [name for name in ("generation", "robustness") if any(name in p["stages"] for _, p in parts)]
        for name in names:
            stages = [p["stages"][name] for _, p in parts if name in p["stages"]]
            if len(stages) != len(parts):
                raise InputError(f"the {name} stage is missing from some parts", hint=PART_HINT)
            cfg = spec.data["stages"][name]
            if name == "generation":
                judged[name] = merge_generation(cfg, cases, stages)
            else:
                judged[name] = merge_robustness(cfg, cases, outputs, stages, n)
        notes = [f"shard {p['shard']['index']} of {n}: {e}" for _, p in parts for e in p["errors"]]
        no_text = passage_text_warning(spec, outputs)
        longest = max(p["run"]["duration_s"] for _, p in parts)
        context = RunFacts(created_at=options.now(), commit=options.commit or parts[0][1]["run"]["commit"],
                             duration_s=longest + time.perf_counter() - started, deadline_note=" ".join(notes) or None,
                             golden_fingerprint=None, baseline=loaded.baseline, baseline_source=loaded.source,
                             history=loaded.history,
                             warnings=[*loaded.store.warnings, *([no_text] if no_text else []), *pending_note(loaded)],
                             target_kind=parts[0][1]["target_kind"],
                             target_notes=target_notes(cases, outputs, parts[0][1]["unmatched"]), pull_request=options.pull_request,
                             run_url=options.run_url)
        report = evaluate(spec, cases, outputs, context, judged)
        report["run"]["shards"] = n
        return viewed(report, loaded, outputs, options)
