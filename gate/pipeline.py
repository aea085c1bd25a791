"""One run, as data flows: spec -> golden set -> target outputs -> stages -> gates -> report.

    run              load everything, ask the target, measure the judge stages, evaluate (I/O at the edges)
    collect_outputs  ask the target once per case
    measure_judged   the generation and robustness stages (they call the judge and, for noise, the target)
    evaluate         pure: measurements and references in, the report out (the clock and commit are arguments)
"""

from __future__ import annotations

import gc
import hashlib
import json
import operator
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from gate import __version__
from gate.config.loader import load_spec
from gate.config.spec import Spec
from gate.core.cases import fingerprint as golden_fingerprint
from gate.core.cases import groups
from gate.core.errors import RunError
from gate.core.model import GoldenCase, TargetOutput
from gate.core.pairs import PairedRun, paired_run
from gate.core.records import history_summary, mismatched, text_table, window
from gate.core.redact import Redactor
from gate.core.report import (
    EXIT_CODES,
    SCHEMA_VERSION,
    BaselineInfo,
    HistoryEntry,
    JudgeInfo,
    Report,
    RunInfo,
    StageMeasurement,
    StageResult,
    StoredRun,
)
from gate.core.verdict import DEFAULT_WINDOW, CompareWith, decide_verdict, gate_stage, run_errors, trap_warning
from gate.deadline import NO_DEADLINE, REACHED, Deadline
from gate.io.golden import load_golden_set
from gate.io.history import HistoryStore, LocalHistoryStore
from gate.io.reports import read_baseline
from gate.stages.retrieval import retrieval_stage, stale_labels
from gate.targets import Target
from gate.targets.factory import make_target

BaselineChooser = Callable[[list[HistoryEntry]], tuple[HistoryEntry | None, str] | None]
COMMITTED = "the committed baseline file"


@dataclass(frozen=True)
class RunFacts:
    """What a run is compared with and the facts about it that come from outside: its time, commit and pull request."""

    created_at: str
    commit: str | None = None
    duration_s: float | None = None
    baseline: StoredRun | None = None
    baseline_source: str | None = None
    history: Sequence[HistoryEntry] = ()  # usable entries (same golden set and spec), oldest first
    warnings: Sequence[str] = ()  # from reading the history
    target_kind: str = "results"
    target_notes: Sequence[str] = ()
    pull_request: tuple[int | None, str | None] | None = None  # (number, head commit): set by the action
    deadline_note: str | None = None  # how far the run got when max_duration_s ran out (a run error)
    golden_fingerprint: str | None = None  # the golden set's, when the caller has it already
    run_url: str | None = None  # the CI run's page (the action), recorded in report.run.url


def collect_outputs(
    target: Target, cases: Sequence[GoldenCase], k: int, on_done: Callable[[TargetOutput], None] | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> dict[str, TargetOutput]:
    """Ask the target once per case (``target.concurrency`` at a time). Never raises per case, but for a target that
    cannot be reached at all (``fail_fast``): its first case is asked alone, and if no attempt even connected the run
    stops there (RunError naming the URL) instead of waiting out every case's retries. Cases not started by the
    deadline end as errors saying so."""

    def ask(case: GoldenCase) -> TargetOutput:
        if deadline.reached():
            out = TargetOutput.failed(case.id, REACHED)
        else:
            try:
                out = target.ask(case, k)
            except Exception as exc:  # a bug in a target must not lose the other cases
                out = TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}")
        if on_done:
            on_done(out)
        return out

    outputs: dict[str, TargetOutput] = {}
    rest = list(cases)
    if getattr(target, "fail_fast", False) and rest:
        first = ask(rest.pop(0))
        outputs[first.case_id] = first
        down = getattr(target, "unreachable", None)
        if down:
            raise RunError(f"the target cannot be reached: {down}",
                           hint="start the service (or fix target.http.url) and run again; no other case was asked")
    if target.concurrency <= 1 or len(rest) <= 1:
        outputs.update((c.id, ask(c)) for c in rest)
        return outputs
    with ThreadPoolExecutor(max_workers=min(target.concurrency, len(rest)), thread_name_prefix="rag-gate-target") as pool:
        outputs.update((out.case_id, out) for out in pool.map(ask, rest))
    return outputs


def reference_k(spec: Spec) -> int:
    """The cut-off a relevant id must stay within: the smallest k of the retrieval metrics (else the target's k)."""
    ks = [m.k for m in spec.retrieval_metrics() if m.k]
    return min(ks) if ks else spec.target_k


def paired_runs(spec: Spec, baseline: StoredRun | None, source: str | None, history: Sequence[HistoryEntry],
                     texts: Mapping[str, str], stage: str = "generation") -> list[PairedRun]:
    """The runs the stage's relative gates compare with: the baseline (max_drop, case_drop) and, per trend window,
    the oldest run of the window. Their judged answers are judged again in this run, beside this run's."""
    gates = (spec.data["stages"].get(stage) or {}).get("gates", {})
    runs: list[PairedRun] = []
    if baseline is not None and any("max_drop" in g or "case_drop" in g for g in gates.values()):
        when = (baseline["created_at"] or "")[:10]
        run = paired_run("baseline", f"the baseline ({source or COMMITTED}{', ' + when if when else ''})", baseline, stage, texts)
        if run is not None:
            runs.append(run)
    usable = [e for e in history if stage in e["stages"]]
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


def measure_judged(spec: Spec, cases: Sequence[GoldenCase], outputs: dict[str, TargetOutput], target: Any,
                   use_cache: bool, deadline: Deadline = NO_DEADLINE, references: Sequence[PairedRun] = (),
                   only: Collection[str] | None = None, progress: Any = None) -> dict[str, StageMeasurement]:
    """Run the generation and robustness stages the spec configures (they share one judge cache). ``references``: the
    runs the generation stage's relative gates compare with (paired_runs). ``only``: a shard's case ids (every
    sample is drawn from ``cases``, the whole golden set, then restricted to them); ``outputs`` holds theirs."""
    stages_cfg = spec.data["stages"]
    judged: dict[str, StageMeasurement] = {}
    if not stages_cfg.get("generation") and not stages_cfg.get("robustness"):
        return judged
    from gate.stages.judging import open_cache

    cache = open_cache(spec, use_cache)
    try:
        if stages_cfg.get("generation"):
            from gate.stages.generation import generation_stage

            judged["generation"] = generation_stage(stages_cfg["generation"], spec.data.get("judge"), cases, outputs, cache,
                                                    secrets=spec.secrets, deadline=deadline, references=references, only=only,
                                                    progress=progress)
        if stages_cfg.get("robustness"):
            from gate.io.golden import load_distractor_file
            from gate.stages.robustness import robustness_stage

            cfg = stages_cfg["robustness"]
            noise = cfg.get("noise") or {}
            files = load_distractor_file(spec.resolve(noise["file"])) if noise.get("source") == "file" and noise.get("file") else {}
            judged["robustness"] = robustness_stage(
                cfg, spec.data.get("judge"), cases, outputs, target, cache, match=(spec.retrieval or {}).get("match", {}),
                precomputed=getattr(target, "noise", None), file_distractors=files, secrets=spec.secrets, deadline=deadline,
                only=only, progress=progress,
            )
    finally:
        cache.close()  # folds the WAL back into the one file that CI caches carry
    return judged


def with_judge(fingerprint: str, judge: JudgeInfo) -> str:
    """A judge stage's fingerprint with the judge that measured it: engine versions and prompt fingerprints."""
    blob = json.dumps([fingerprint, judge.get("engines", {}), judge.get("prompts", {})], sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def _skipped(reason: str) -> StageMeasurement:
    return {"skipped": reason, "metrics": {}, "samples": [], "not_evaluated": {}, "warnings": []}


def gate_stages(spec: Spec, measured: Mapping[str, StageMeasurement], context: RunFacts, fingerprints: dict[str, str],
                questions: Mapping[str, str], case_groups: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
                ) -> dict[str, StageResult]:
    """Every stage gated the same way, against the baseline's stage and the history entries measured the same way."""
    baseline = context.baseline
    stages: dict[str, StageResult] = {}
    for name, stage in measured.items():
        differs = baseline is not None and bool(mismatched(baseline, fingerprints, name))
        # the stored-scores comparison needs runs measured the same way; same-run pairs do not (gate.core.pairs)
        refs = CompareWith(
            baseline=baseline["stages"].get(name) if baseline else None,
            history=[e for e in context.history if not mismatched(e, fingerprints, name)],
            mismatch_policy=spec.data["baseline"]["on_mismatch"] if differs else None,
            retrieval=stages.get("retrieval"),
            groups=case_groups,
        )
        gates = (spec.data["stages"].get(name) or {}).get("gates", {})
        stages[name] = gate_stage(name, stage, gates, refs, questions)
    return stages


def evaluate(
    spec: Spec,
    cases: Sequence[GoldenCase],
    outputs: Mapping[str, TargetOutput],
    context: RunFacts,
    judged: Mapping[str, StageMeasurement] | None = None,
) -> Report:
    """The report for one run. Pure: the retrieval stage is measured here (it needs no I/O), ``judged`` holds the
    judge stages already measured (generation, robustness); every stage is gated the same way."""
    fingerprints = spec.fingerprints(context.golden_fingerprint or golden_fingerprint(cases))
    case_groups = groups(cases)
    measured: dict[str, StageMeasurement] = {"retrieval": _skipped("not configured in the spec")}
    if spec.retrieval:
        measured["retrieval"] = retrieval_stage(cases, outputs, spec.retrieval_metrics(), spec.retrieval.get("match", {}),
                                                case_groups, reference_k(spec))
    measured.update(judged or {})
    texts: dict[str, str] = {}
    for name, stage in measured.items():
        texts.update(stage.get("texts", {}))
        if name in fingerprints and "judge" in stage:  # the judge's engines and prompts are part of how a stage measures
            fingerprints[name] = with_judge(fingerprints[name], stage["judge"])
    by_groups = {**case_groups, "question_type": question_groups(cases, spec)}
    stages = gate_stages(spec, measured, context, fingerprints, {c.id: c.question for c in cases}, by_groups)

    warnings: list[str] = []
    trap = trap_warning(stages, context.baseline, context.history)
    if trap:
        warnings.append(trap)
        stages["generation"]["warnings"].append(trap)
    failed = [o.error for o in outputs.values() if o.error is not None]
    errors = run_errors(stages, len(cases), failed, float(spec.data["max_error_rate"]))
    retrieval_cfg = spec.retrieval or {}
    stale = stale_labels(cases, outputs, retrieval_cfg.get("match", {})) if retrieval_cfg else None
    if stale and retrieval_cfg.get("on_stale_labels", "error") == "error":
        errors.insert(0, stale)  # said first: every retrieval gate below reads the same labels
    elif stale:
        warnings.insert(0, stale)
    if context.deadline_note:
        errors.append(context.deadline_note)
    verdict = decide_verdict((s["status"] for s in stages.values()), errors)
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": verdict,
        "exit_code": EXIT_CODES[verdict],
        "errors": errors,
        "warnings": warnings + list(context.warnings),
        "tool": {"name": "rag-gate", "version": __version__},
        "run": _run_info(spec, context),
        "fingerprints": fingerprints,
        "golden_set": {
            "path": str(spec.golden_set_path),
            "n": len(cases),
            "by_type": {t: len(ids) for t, ids in case_groups["type"].items()},
            "by_category": {t: len(ids) for t, ids in case_groups["category"].items()},
            "by_tag": {t: len(ids) for t, ids in case_groups["tag"].items()},
            **({"by_question_type": question_mix(cases, spec)} if any(c.question_type for c in cases) else {}),  # type: ignore[typeddict-item]
        },
        "target": {"kind": context.target_kind, "k": spec.target_k, "calls": len(cases), "errors": len(failed),
                   "error_rate": len(failed) / len(cases) if cases else 0.0, "max_error_rate": float(spec.data["max_error_rate"]),
                   "notes": list(context.target_notes)},
        "baseline": _baseline_info(spec, context, fingerprints),
        "stages": stages,
        "cases": [
            {"id": c.id, "type": c.type, "retrieved": [d.id for d in outputs[c.id].retrieved],
             "answer": outputs[c.id].answer, "latency_ms": outputs[c.id].latency_ms, "error": outputs[c.id].error}
            for c in cases
        ],
        "history": history_summary(context.history),
        **({"texts": texts} if texts else {}),  # type: ignore[typeddict-item]
    }


def question_groups(cases: Sequence[GoldenCase], spec: Spec) -> dict[str, list[str]]:
    """Case ids by question type (its own, else derived: gate.core.goldencheck.question_type)."""
    from gate.core.goldencheck import question_type
    from gate.core.ranking import id_mapper

    to_doc = id_mapper((spec.retrieval or {}).get("match", {}))
    out: dict[str, list[str]] = {}
    for c in cases:
        out.setdefault(question_type(c, to_doc), []).append(c.id)
    return out


def question_mix(cases: Sequence[GoldenCase], spec: Spec) -> dict[str, int]:
    """Cases by question type, most frequent first."""
    counts = {kind: len(ids) for kind, ids in question_groups(cases, spec).items()}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _run_info(spec: Spec, context: RunFacts) -> RunInfo:
    run: RunInfo = {
        "created_at": context.created_at,
        "config": str(spec.path),
        "commit": context.commit,
        "duration_s": None if context.duration_s is None else round(context.duration_s, 3),
        "comment_id": spec.data["report"]["comment_id"],
        "max_cases": spec.data["report"]["max_cases"],
    }
    if context.pull_request is not None:
        run["pr"], run["head_sha"] = context.pull_request
    if context.run_url:
        run["url"] = context.run_url
    return run


def _baseline_info(spec: Spec, context: RunFacts, fingerprints: dict[str, str]) -> BaselineInfo:
    baseline = context.baseline
    return {
        "path": str(spec.baseline_path),
        "found": baseline is not None,
        "created_at": baseline["created_at"] if baseline else None,
        "commit": baseline["commit"] if baseline else None,
        "fingerprints": baseline["fingerprints"] if baseline else None,
        "mismatch": mismatched(baseline, fingerprints) if baseline else [],
        "on_mismatch": spec.data["baseline"]["on_mismatch"],
        "source": context.baseline_source if baseline else None,
    }


def unsorted_scores_note(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> list[str]:
    """A note when retrieved lists carry scores that are not in descending order: rag-gate ranks by list order (the
    order the RAG system uses), trec_eval by score, so the two would disagree on those cases."""
    unsorted = [c.id for c in cases
                if (scores := [d.score for d in outputs[c.id].retrieved if d.score is not None])
                and any(map(operator.lt, scores, scores[1:]))]
    if not unsorted:
        return []
    return [f"{len(unsorted)} case(s) list passages whose scores are not in descending order (first: {unsorted[0]}); "
            "rag-gate ranks by the order of the list, trec_eval by score: sort the list if the scores are the ranking"]


def passage_text_warning(spec: Spec, outputs: Mapping[str, TargetOutput]) -> str | None:
    """A warning when the target's answers carry no passage text while a configured stage needs it (the noise test's
    contexts and corpus distractors, the judge metrics that read contexts): said once, with the count and the key to
    set, instead of a stage that quietly finds "no distractor" or "no contexts" for every case."""
    needs: list[str] = []
    rob = spec.data["stages"].get("robustness") or {}
    if rob.get("noise"):
        needs.append("the robustness noise test")
    gen = spec.data["stages"].get("generation") or {}
    if gen and set(gen.get("metrics", [])) - {"exact_match", "token_f1", "rouge_l"}:
        needs.append("the judge metrics that read contexts")
    if not needs:
        return None
    answered = [o for o in outputs.values() if o.error is None and o.retrieved]
    bare = [o for o in answered if not o.contexts and not any(d.text for d in o.retrieved)]
    if not needs or not bare:
        return None
    target = spec.target
    if "http" in target:
        key = f"target.http.response.text (now {target['http'].get('response', {}).get('text', 'text')!r})"
    elif "results" in target:
        key = "a 'text' in each item of 'retrieved' in the results file (or 'contexts' on each line)"
    else:
        key = "a 'text' in each retrieved item the python target returns (or 'contexts')"
    return (f"{len(bare)} of {len(answered)} answers carry no passage text, which {' and '.join(needs)} need: "
            f"set {key} to the field that holds each passage's text")


def deadline_note(deadline: Deadline, outputs: Mapping[str, TargetOutput], judged: Mapping[str, StageMeasurement]) -> str | None:
    """A sentence saying how far the run got, if max_duration_s ran out before it finished; None if it did not."""
    late_cases = sum(1 for o in outputs.values() if o.error is not None and REACHED in o.error)
    late_scores = sum(1 for stage in judged.values() for s in stage["samples"] for e in [s.get("error") or ""] if REACHED in e)
    if not late_cases and not late_scores:
        return None
    return (f"the run reached max_duration_s ({deadline.seconds:g} s) after {deadline.elapsed():.0f} s: "
            f"{len(outputs) - late_cases} of {len(outputs)} cases answered, {late_scores} judged case(s) left unscored; "
            "what was done is kept (judge scores in the cache), the rest is errored with 'deadline reached'")


def now_iso() -> str:
    """The clock a run is recorded under: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunOptions:
    """How to run: the clock, the commit and pull request, where the history and baseline come from, progress."""

    now: Callable[[], str] = now_iso  # the time the run is recorded under (ISO 8601)
    commit: str | None = None
    pull_request: tuple[int | None, str | None] | None = None  # (number, head commit), recorded in report.run
    run_url: str | None = None  # the CI run's page, recorded in report.run.url (the comment links to it)
    use_cache: bool = True
    max_duration_s: float | None = None  # overrides the spec's (the action's max-duration-s input)
    secrets: Sequence[str] = ()  # secrets the run knows besides the spec's (the action's GitHub token)
    history_store: HistoryStore | None = None  # default: the spec's local history file
    choose_baseline: BaselineChooser | None = None  # picks the baseline from the history; None: the committed file
    on_start: Callable[[int, str], None] | None = None
    on_done: Callable[[TargetOutput], None] | None = None
    judge_progress: Any = None  # gate.stages.judging.JudgeProgress: told of each judge stage's scores as they come


@dataclass
class Loaded:
    """What a run reads before it asks anything: the spec, the golden set, the history and the baseline."""

    spec: Spec
    cases: list[GoldenCase]
    store: HistoryStore
    entries: list[HistoryEntry]
    baseline: StoredRun | None
    source: str
    deadline: Deadline
    pending: int = 0  # generated cases left out: they await review

    @property
    def history(self) -> list[HistoryEntry]:
        return window(self.entries, int(self.spec.data["history"]["max_entries"]))


def load(config: str, options: RunOptions, *, unset_ok: bool = False) -> Loaded:
    """Read the spec, the golden set, the history and the baseline (the one ``options.choose_baseline`` picks).
    ``unset_ok``: the spec may read variables that are not set (a merge asks no target and no judge)."""
    spec = load_spec(config, unset_ok=unset_ok)
    max_entries = int(spec.data["history"]["max_entries"])
    everything = load_golden_set(spec.golden_set_path)
    cases = [c for c in everything if not c.pending_review]  # generated cases wait for a reviewer's approval
    store = options.history_store or LocalHistoryStore(spec.history_path, max_entries)
    if hasattr(store, "max_entries"):
        store.max_entries = max_entries
    entries = store.read()
    baseline: StoredRun | None = read_baseline(spec.baseline_path)
    source = COMMITTED
    chosen = options.choose_baseline(entries) if options.choose_baseline else None
    if chosen is not None and chosen[0] is not None:
        baseline, source = chosen
    elif chosen is not None:
        source = f"{chosen[1]}; {COMMITTED}" if baseline else chosen[1]
    deadline = Deadline(options.max_duration_s if options.max_duration_s is not None else spec.data.get("max_duration_s"))
    return Loaded(spec, cases, store, entries, baseline, source, deadline, len(everything) - len(cases))


@dataclass
class Measured:
    """What a run (or one shard of it) got from its target and its judges."""

    outputs: dict[str, TargetOutput]
    judged: dict[str, StageMeasurement]
    target_kind: str
    unmatched: list[int]  # lines of a results file that match no golden case


def measure(loaded: Loaded, options: RunOptions, only: Sequence[GoldenCase] | None = None) -> Measured:
    """Ask the target for every case (or the ``only`` ones: a shard's) and run the judge stages."""
    spec, cases = loaded.spec, loaded.cases
    asked = cases if only is None else only
    target = make_target(spec, cases, loaded.deadline)
    try:
        if options.on_start:
            options.on_start(len(asked), target.kind)
        outputs = collect_outputs(target, asked, spec.target_k, options.on_done, loaded.deadline)
        references = paired_runs(spec, loaded.baseline, loaded.source, loaded.history, text_table(loaded.baseline, *loaded.entries))
        # robustness asks the target again
        judged = measure_judged(spec, cases, outputs, target, options.use_cache, loaded.deadline, references,
                                None if only is None else {c.id for c in only}, options.judge_progress)
    finally:
        target.close()
    return Measured(outputs, judged, target.kind, list(getattr(target, "unmatched", [])))


def pending_note(loaded: Loaded) -> list[str]:
    """A warning when generated cases awaiting review were left out of the run."""
    if not loaded.pending:
        return []
    return [f"{loaded.pending} generated case(s) of {loaded.spec.golden_set_path} await review (metadata.review: pending) and "
            "were left out: approve them (remove the field or set it to approved) to gate on them"]


def target_notes(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], unmatched: Sequence[int]) -> list[str]:
    """What the report says about the target's outputs: results-file lines that match no case, unsorted scores."""
    notes = [f"{len(unmatched)} lines of the results file match no golden case (first at line {unmatched[0]})"] if unmatched else []
    return notes + unsorted_scores_note(cases, outputs)


def run(config: str, options: RunOptions | None = None) -> Report:
    """Load, ask, judge, evaluate: the report (see ``run_viewed``)."""
    return run_viewed(config, options).report


def run_viewed(config: str, options: RunOptions | None = None) -> Viewed:
    """Load, ask, judge, evaluate. Raises InputError (exit 2) for bad input; everything else is in the report.

    ``options.history_store`` replaces the spec's local history file (the action passes the repository-backed
    store; it keeps the spec's history.max_entries); ``options.choose_baseline(entries)`` may pick the baseline
    from the history (the entry of the PR's base commit) and say which, or return None to use the committed file.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    with gc_paused():  # millions of small, acyclic JSON objects: the cyclic GC would only rescan them
        loaded = load(config, options)
        measured = measure(loaded, options)
        spec, cases, outputs, judged = loaded.spec, loaded.cases, measured.outputs, measured.judged
        no_text = passage_text_warning(spec, outputs)
        context = RunFacts(created_at=options.now(), commit=options.commit, duration_s=time.perf_counter() - started,
                             deadline_note=deadline_note(loaded.deadline, outputs, judged),
                             golden_fingerprint=golden_fingerprint(cases), baseline=loaded.baseline, baseline_source=loaded.source,
                             history=loaded.history,  # every stage picks the runs it can compare with (gate_stages)
                             warnings=[*loaded.store.warnings, *([no_text] if no_text else []), *pending_note(loaded)],
                             target_kind=measured.target_kind,
                             target_notes=target_notes(cases, outputs, measured.unmatched), pull_request=options.pull_request,
                             run_url=options.run_url)
        return viewed(evaluate(spec, cases, outputs, context, judged), loaded, outputs, options)


@dataclass(frozen=True)
class Viewed:
    """A run's report, and what the HTML report shows beside it: the golden cases, the reference run the report was
    compared with, and (``passages()``) the retrieved passages' texts as the target returned them. ``redact`` holds the
    run's secrets: whatever is shown from these goes through it, as the report did."""

    report: Report
    cases: Sequence[GoldenCase]
    baseline: StoredRun | None
    outputs: Mapping[str, TargetOutput]
    k: int
    redact: Redactor

    def passages(self) -> dict[str, str]:
        """Passage id -> text, for the top k of every answer (read only when the HTML report is written)."""
        return {p.id: p.text for o in self.outputs.values() for p in o.retrieved[: self.k] if p.text}


def viewed(report: Report, loaded: Loaded, outputs: Mapping[str, TargetOutput], options: RunOptions) -> Viewed:
    """The report redacted (one place for it: no output can hold a secret the target or a judge echoed), with the rest."""
    redactor = Redactor([*loaded.spec.secrets, *options.secrets])
    return Viewed(cast(Report, redactor.document(report)), loaded.cases, loaded.baseline, outputs, loaded.spec.target_k, redactor)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting still frees memory)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()  # freeze + unfreeze: what the run left alive moves to the oldest generation at once, so the first
            gc.unfreeze()  # collection after it does not scan it all (0.1 s on 10,000 cases); cycles are still found
            gc.enable()
