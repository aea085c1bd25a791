"""Measuring: ask the target once per case, then run the judged stages on its answers (they share one judge cache,
and the generation stage judges the paired runs' changed answers beside this run's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gate.core.model import GoldenCase, TargetOutput
from gate.core.pairs import PairedRun, paired_run
from gate.core.records import text_table
from gate.core.report import StageMeasurement
from gate.core.verdict import DEFAULT_WINDOW
from gate.run.ask import collect_outputs
from gate.run.context import Measured, stage_context
from gate.run.load import Loaded
from gate.run.options import RunOptions
from gate.targets import Target
from gate.targets.factory import make_target

if TYPE_CHECKING:  # a traces run's windows: imported by the run that has them
    from gate.stages.windows import WindowRefs


def paired_runs(loaded: Loaded, stage: str = "generation") -> list[PairedRun]:
    """The runs the stage's relative gates compare with: the baseline (max_drop, case_drop) and, per trend window,
    the oldest run of the window. Their judged answers are judged again in this run, beside this run's."""
    gates = loaded.spec.stages.gates(stage)
    texts = text_table(loaded.baseline, *loaded.entries)
    runs: list[PairedRun] = []
    baseline = loaded.baseline
    if baseline is not None and any("max_drop" in g or "case_drop" in g for g in gates.values()):
        when = (baseline["created_at"] or "")[:10]
        run = paired_run("baseline", f"the baseline ({loaded.source}{', ' + when if when else ''})", baseline, stage, texts)
        if run is not None:
            runs.append(run)
    usable = [e for e in loaded.history if stage in e["stages"]]
    for size in sorted({int(g["trend"].get("window", DEFAULT_WINDOW)) for g in gates.values() if "trend" in g}):
        entries = usable[-size:]
        if not entries:
            continue
        oldest = entries[0]
        label = (f"the oldest of the last {len(entries)} default-branch run{'s' if len(entries) != 1 else ''} "
                 f"({oldest['commit'][:7] if oldest['commit'] else 'no commit'}, {oldest['created_at'][:10]})")
        run = paired_run(f"trend:{size}", label, oldest, stage, texts)
        if run is not None:
            runs.append(run)
    return runs


def window_refs(loaded: Loaded) -> list[WindowRefs]:
    """A traces run's references: the previous window of the history, and the last N windows of each trend gate; each
    window with its anchor traces (gate.stages.windows)."""
    spec = loaded.spec
    settings = spec.traces
    if settings is None or loaded.traces is None:
        return []
    from gate.run.traces import traces_fingerprint
    from gate.stages.windows import WindowRefs, stored_window

    mine = traces_fingerprint(spec)
    usable = [e for e in loaded.history if "generation" in e["stages"] and e["fingerprints"].get("golden_set") == mine]
    if not usable:
        return []
    texts = text_table(*loaded.entries)
    anchor, seed, least = int(settings["anchor"]), int(settings["sample"]["seed"]), int(settings["min_sample"])
    stored = {e["created_at"]: w for e in usable if (w := stored_window(e, texts, anchor, seed)) is not None}
    previous = stored.get(usable[-1]["created_at"])
    refs = [WindowRefs("previous", "the previous " + previous.label[4:], [previous], anchor, least)] if previous else []
    gates = spec.stages.gates("generation")
    for size in sorted({int(g["trend"].get("window", DEFAULT_WINDOW)) for g in gates.values() if "trend" in g}):
        windows = [stored[e["created_at"]] for e in usable[-size:] if e["created_at"] in stored]
        if windows:
            label = f"the mean of the last {len(windows)} window{'s' if len(windows) != 1 else ''}"
            refs.append(WindowRefs(f"trend:{size}", label, windows, anchor, least))
    return refs


def measure_judged(loaded: Loaded, outputs: dict[str, TargetOutput], target: Target, options: RunOptions,
                   only: Sequence[GoldenCase] | None = None) -> dict[str, StageMeasurement]:
    """Run the judged stages the spec configures (generation, robustness: the robustness stage asks the target
    again). ``only``: a shard's cases (every sample is drawn from the whole golden set, then restricted to them)."""
    spec = loaded.spec
    judged: dict[str, StageMeasurement] = {}
    if not spec.stages.judged:
        return judged
    from gate.stages.judging import open_cache

    cache = open_cache(spec, options.use_cache)
    try:
        ctx = stage_context(loaded, outputs, options, cache, None if only is None else {c.id for c in only})
        if spec.stages.generation is not None:
            from gate.stages.generation import generation_stage

            if loaded.traces is not None:  # the traces were sampled already (target.traces.sample): every one is judged
                settings = replace(spec.stages.generation, sample=replace(spec.stages.generation.sample, size="all"))
                judged["generation"] = generation_stage(settings, ctx, (), window_refs(loaded))
            else:
                judged["generation"] = generation_stage(spec.stages.generation, ctx, paired_runs(loaded))
        if spec.stages.robustness is not None:
            from gate.io.golden import load_distractor_file
            from gate.stages.robustness import robustness_stage

            noise = spec.stages.robustness.noise
            files = load_distractor_file(spec.resolve(noise.file)) if noise and noise.source == "file" and noise.file else {}
            judged["robustness"] = robustness_stage(spec.stages.robustness, ctx, target, files)
    finally:
        cache.close()  # folds the WAL back into the one file that CI caches carry
    return judged


def measure(loaded: Loaded, options: RunOptions, only: Sequence[GoldenCase] | None = None) -> Measured:
    """Ask the target for every case (or the ``only`` ones: a shard's) and run the judged stages."""
    spec, cases = loaded.spec, loaded.cases
    asked = cases if only is None else only
    progress = options.progress
    with make_target(spec, cases, loaded.deadline, loaded.traces.outputs if loaded.traces else None, loaded.results_read) as target:
        if progress is not None:
            progress.on_start(len(asked), target.kind)
        outputs = collect_outputs(target, asked, spec.target_k, progress.on_done if progress else None, loaded.deadline,
                                  getattr(progress, "on_all", None))  # a reporter may say each answer only
        judged = measure_judged(loaded, outputs, target, options, only)
    return Measured(outputs, judged, target.kind, list(target.unmatched))
