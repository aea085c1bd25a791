"""The documents rag-gate writes and reads back: report.json, the baseline file, a history entry and a shard's part.

They mirror ``report.schema.json`` (top level of the repository): mypy checks every producer and
reader against these types, and the schema checks every file read back from disk at the door.
One per-case shape, ``CaseResult``, is shared by all three: a report's stage lists every case it
looked at; a baseline and a history entry keep the cases that have scores.
"""

from typing import Any, Literal, NotRequired, Required, TypedDict

# The format of report.json, the baseline file and history entries (one version for all three).
#   1  the first format. Baselines and history entries written before the typed report kept per-case
#      scores as objects keyed by case id; readers still accept that form and turn it into the list form.
SCHEMA_VERSION = 1

Verdict = Literal["pass", "fail", "error"]
Status = Literal["pass", "fail", "error", "skipped"]


# ---------------------------------------------------------------------------------------------- per case


class Distractor(TypedDict):
    id: str | None
    text: str | None


class OutputRef(TypedDict):
    """What the target answered for a judged case, by content address (``gate.core.pairs.text_id``): the texts are
    in the document's ``texts`` table, once each however many cases or runs share them."""

    answer: str | None
    contexts: list[str]
    question: NotRequired[str]  # a traces run: the question asked (a later run re-judges its anchor traces from it)


class CaseResult(TypedDict, total=False):
    """One case of one stage: the shape shared by report.json, the baseline and history entries."""

    id: Required[str]
    metrics: Required[dict[str, float]]
    output: OutputRef  # judge stages: the answer and passages judged, so a later run can judge them again
    error: str | None  # why the case (or one of its metrics) could not be scored; None: it was
    errors: dict[str, str]  # judge stages: metric -> why that metric could not be computed
    relevant_ranks: dict[str, int | None]  # retrieval: relevant id -> its rank (None: not retrieved)
    # robustness, noise test
    clean_answer: str | None
    noisy_answer: str | None
    position: str
    distractors: list[Distractor]
    clean_correct: bool
    noisy_correct: bool
    flipped: bool


# ---------------------------------------------------------------------------------------------- gates


class CheckRecord(TypedDict):
    kind: str  # min | max | max_drop | trend | case_drop | share_below | share_above | consecutive_decline | value
    limit: float | str
    status: Status
    detail: str


class GroupGate(TypedDict):
    """One group of a per-group gate (``by``): the gate's checks on that group's cases alone."""

    by: str  # category | tag | type | question_type
    group: str
    n: int  # scored cases in the group
    value: float | None
    baseline: float | None
    delta: float | None
    status: Status  # skipped: under min_group_size, not gated
    detail: str


class GateRecord(TypedDict):
    stage: str
    metric: str
    status: Status
    value: float | None
    baseline: float | None
    delta: float | None
    higher_is_better: bool
    checks: list[CheckRecord]
    rule: str
    reason: str
    method: str
    groups: NotRequired[list[GroupGate]]  # a per-group gate (by): each group's decision


LostRank = TypedDict("LostRank", {"id": str, "from": int, "to": int | None, "left_top_k": bool})


class WorseCase(TypedDict, total=False):
    """A case whose per-case figures fell against the reference run."""

    id: Required[str]
    question: Required[str]
    drops: Required[dict[str, list[float]]]  # metric -> [reference, this run]
    lost: list[LostRank]  # retrieval: relevant ids that lost rank
    cause: str  # judge stages: retrieval miss | unfaithful generation | both | answer quality
    retrieval: list[LostRank]  # judge stages: the retrieval stage's lost ranks of the same case
    diagnosis: str  # where it broke: the case's code in report.diagnosis


# ---------------------------------------------------------------------------------------------- stage parts


class GroupMetrics(TypedDict):
    n: int
    metrics: dict[str, float]
    baseline: NotRequired[dict[str, float]]  # the baseline's value over the same cases (means of per-case values)


class SampleInfo(TypedDict):
    size: int
    of: int
    ids: list[str]


class JudgeInfo(TypedDict):
    model: str | None
    temperature: float | None
    engines: dict[str, str]  # engine -> library version
    prompts: NotRequired[dict[str, str]]  # metric -> fingerprint of the prompt its engine sends


class PairedCase(TypedDict):
    """A case whose judge input changed since the reference run: both sides' scores, judged in this run."""

    id: str
    reference: float | None
    current: float | None
    error: NotRequired[str]  # why a side has no score
    confirmed: NotRequired[list[float]]  # [reference, current], each the mean of two judgings (case_drop)


class MetricPairs(TypedDict):
    pairs: int  # cases both runs judged, with what the metric reads
    changed: int  # of them, the cases whose judge input differs (the rest have a delta of exactly 0)
    errored: int  # changed pairs with a side that could not be scored (left out of the test, listed)
    cases: list[PairedCase]  # the changed pairs


class Pairing(TypedDict):
    """This run paired with one reference run, for one kind of relative gate."""

    against: str  # "baseline" | "trend"
    label: str  # the reference in words: which run, and why it is the one
    commit: str | None
    created_at: str | None
    method: str  # "same run": the reference's changed answers judged again in this run | "stored scores"
    note: NotRequired[str]  # why the stored scores were used, or what changed in the judge since the reference
    added: list[str]  # judged here, not by the reference (new or newly sampled cases)
    removed: list[str]  # judged by the reference, no longer in the golden set
    metrics: dict[str, MetricPairs]
    judgings: int  # judgings made in this run for the pairs (both sides of each changed pair not cached)
    cached: NotRequired[int]  # changed pairs whose two sides came from the pair cache (judged together by an earlier run)


class Usage(TypedDict, total=False):
    """Judge calls and tokens (what the judge client counted), and the cache's hits and misses."""

    calls: int
    chat_calls: int
    embedding_calls: int
    retried: int
    prompt_tokens: int
    completion_tokens: int
    embedding_tokens: int
    cost: float | None
    max_in_flight: int
    budget_exceeded: bool
    cache_hits: int
    cache_misses: int


class NoiseInfo(Usage, total=False):
    """How the noise test ran, with its judge usage."""

    method: str
    threshold: float
    source: str
    distractors: int
    position: str


class ScoreCounts(TypedDict):
    attempted: int
    errored: int
    error_rate: float


class MetricDiff(TypedDict):
    cases: int
    max_diff: float
    mean_diff: float


class SelfCheck(TypedDict):
    limit: float
    on_unstable: str
    metrics: dict[str, MetricDiff]
    unstable: list[str]
    errored: int
    cases: int
    diffs: NotRequired[dict[str, list[float]]]  # a shard's part only: metric -> each |first - second|, for the merge


class RejectionCase(TypedDict, total=False):
    id: Required[str]
    type: Required[str]
    error: Required[str | None]
    refused: bool
    method: str
    phrase: str | None
    answer: str | None
    leaked: list[str]
    passed: bool


class RejectionInfo(TypedDict):
    cases: list[RejectionCase]
    phrases_default: bool
    judge: bool


# ---------------------------------------------------------------------------------------------- stages


class FailedCheck(TypedDict):
    """An answer check an answer failed, and the evidence."""

    check: str  # must_contain | must_not_contain | regex | max_words | max_chars | json_schema | answer
    evidence: str


class AnswerCheckCase(TypedDict):
    """What the answer checks found in one case's answer (cases with nothing to say are left out)."""

    id: str
    missing: NotRequired[list[str]]  # expected keywords the answer lacks
    failed: NotRequired[list[FailedCheck]]


class AnswersInfo(TypedDict):
    """The generation stage's answer checks: what they found over every answerable case."""

    cases: list[AnswerCheckCase]
    keywords: int  # answered cases with expected_keywords
    checked: int  # answers at least one check applied to


class WindowMetric(TypedDict):
    """One judged metric of a traces window against the reference window(s): both sides' means, the judge's drift
    measured on the anchor traces, the reference as judged today (``corrected``), and the unpaired test."""

    n: int  # scored traces in this window
    mean: float | None
    sd: float | None
    reference_n: int  # scored traces in the reference window(s)
    reference_mean: float | None  # as judged then
    anchor_n: int  # anchor traces judged again in this run, with a score on both sides
    drift: float | None  # mean of (today's score - then) over the anchor traces: the judge's drift since
    corrected: float | None  # the reference as today's judge would score it: reference_mean + drift
    delta: float | None  # mean - corrected (this window against the reference, judge drift cancelled)
    se: float | None  # standard error of delta (both windows and the drift)
    p_value: float | None  # one-sided: how likely a delta this bad is with no real change
    insufficient: NotRequired[str]  # why no decision can be made (a side under min_sample), when so


class WindowComparison(TypedDict):
    """A traces window against its reference: the previous window, or the mean of the last N windows (trend)."""

    against: str  # previous | trend
    label: str  # the reference in words
    windows: list[str]  # created_at of each reference window, oldest first
    anchor: list[str]  # the anchor trace ids judged again, of every reference window
    judgings: int  # judgings made in this run for the anchor (never from the cache)
    min_sample: int
    metrics: dict[str, WindowMetric]


class ParaphraseRewrite(TypedDict):
    """One rewrite of a case's question, asked of the target and scored against the case's relevant ids."""

    text: str
    source: str  # golden (the case's paraphrases) | generated (the judge's, cached)
    found: bool | None  # a relevant id within k; None: the call failed
    metrics: dict[str, float]
    error: NotRequired[str]


class ParaphraseCase(TypedDict):
    id: str
    question: str
    found: bool | None  # on the original question
    lost: bool  # found on the original, not on some rewrite
    rewrites: list[ParaphraseRewrite]


class ParaphraseMetric(TypedDict):
    original: float | None  # the metric's mean on the originals of the sampled cases
    rewrites: float | None  # its mean over every rewrite
    gap: float | None  # original - rewrites


class ParaphraseInfo(TypedDict):
    """The paraphrase test: each sampled case's rewrites, what each retrieved, and the metrics on both."""

    k: int
    style: str
    sample: SampleInfo
    given: int  # rewrites from the golden set's paraphrases
    generated: int  # rewrites the judge wrote (this run or an earlier one: cached)
    cached: int  # of them, read from the cache
    target_calls: int
    metrics: dict[str, ParaphraseMetric]
    cases: list[ParaphraseCase]
    usage: NotRequired[Usage]


class StabilityCase(TypedDict):
    id: str
    question: str
    answers: list[str | None]  # the run's answer first, then each repeat's (None: the call failed)
    retrieved: list[list[str]]  # the top k ids of each ask
    jaccard: float | None  # mean pairwise Jaccard of the top k ids
    agreement: float | None  # mean pairwise agreement of the answers (token F1, or the judge's)
    correct: list[bool | None]  # each ask's correctness (None: not decided)
    flipped: bool | None  # the asks disagree on correctness


class StabilityInfo(TypedDict):
    """The stability test: each sampled question asked again, how far its retrieval and answers moved."""

    repeats: int
    k: int
    method: str
    sample: SampleInfo
    target_calls: int
    flip_interval: list[float]  # 95 % interval of correctness_flip_rate (Wilson)
    unstable: list[str]  # the cases whose asks disagree (correctness, or answers below agreement 1)
    cases: list[StabilityCase]
    usage: NotRequired[Usage]


class _StageData(TypedDict, total=False):
    """What every stage carries, measured or gated."""

    metrics: Required[dict[str, float]]
    samples: Required[list[CaseResult]]
    not_evaluated: Required[dict[str, str]]  # metric -> why it was not evaluated
    warnings: Required[list[str]]
    # retrieval
    n: int
    errored: int
    excluded: dict[str, int]
    breakdown: dict[str, dict[str, GroupMetrics]]
    reference_k: int
    # judge stages
    sample: SampleInfo
    judge: JudgeInfo
    usage: Usage
    scores: ScoreCounts
    budget_exceeded: bool
    self_check: SelfCheck
    pairing: dict[str, Pairing]  # "baseline" | "trend:N" -> the pairs with that reference run
    checks: AnswersInfo  # generation: the answer checks (no model)
    windows: dict[str, WindowComparison]  # a traces run: "previous" | "trend:N" -> this window against it
    # robustness
    noise: NoiseInfo
    rejection: RejectionInfo
    target_calls: int
    scored: int
    paraphrase: ParaphraseInfo
    stability: StabilityInfo


class HumanScale(TypedDict):
    """A judged metric's mean on the people's scale (prediction-powered), beside the judge's own mean, 95 % intervals."""

    estimate: float
    low: float
    high: float
    judge_mean: float
    judge_low: float
    judge_high: float
    labels: float  # the labelled cases the correction rests on


class CalibrationInfo(TypedDict):
    status: str  # calibrated | weak | stale | none
    reason: str  # why it is not calibrated ("" when it is)
    kappa: NotRequired[float | None]
    n: NotRequired[int]
    created_at: NotRequired[str]
    human_scale: NotRequired[HumanScale]


class StageMeasurement(_StageData, total=False):
    """What a stage measured, before its gates are applied: every stage returns this shape.
    ``skipped`` set means the stage could not measure anything (no judge, nothing configured); it becomes the
    stage's ``reason``."""

    skipped: str | None
    texts: dict[str, str]  # text id -> text of the judged outputs; evaluate moves them to the report's table


class StageResult(_StageData, total=False):
    """A stage in report.json: what it measured, its gates, its status, and what got worse against the reference."""

    status: Required[Status]
    reason: str  # why the stage was skipped
    gates: Required[list[GateRecord]]
    baseline_metrics: dict[str, float]
    worse_cases: list[WorseCase]
    calibration: dict[str, CalibrationInfo]  # judged metric -> how far its judge is shown to agree with people


# ---------------------------------------------------------------------------------------------- report.json


class ToolInfo(TypedDict):
    name: str
    version: str


class SystemInfo(TypedDict):
    values: dict[str, str | float | int]  # key -> the value most answers gave
    counts: NotRequired[dict[str, dict[str, int]]]  # key -> value -> answers, for keys the answers disagree on


class RunInfo(TypedDict):
    created_at: str
    config: str
    commit: str | None
    duration_s: float | None
    comment_id: str
    max_cases: int
    pr: NotRequired[int | None]  # the action, on a pull request
    head_sha: NotRequired[str | None]
    shards: NotRequired[int]  # merged from this many shards (rag-gate merge)
    url: NotRequired[str]  # the CI run's page, where its artifacts are (the action: GITHUB_SERVER_URL/REPO/actions/runs/ID)
    system: NotRequired[SystemInfo]  # what the target's answers said about the system (gate.core.changes)
    kind: NotRequired[str]  # how the run came: pr, push, schedule, dispatch, deployment, merge (the action, or --kind)


class Change(TypedDict):
    key: str  # golden_set, spec, spec.<stage>, k, judge.model, judge.<engine>, judge.prompt.<metric>, rag_gate, commit, system.<key>
    before: str | float | int | None
    after: str | float | int | None


class ChangesFrom(TypedDict):
    source: str  # which run the changes are counted from, in words
    created_at: str | None
    commit: str | None


class GoldenSetInfo(TypedDict):
    path: str
    n: int
    by_type: dict[str, int]
    by_category: dict[str, int]
    by_tag: dict[str, int]
    by_question_type: NotRequired[dict[str, int]]  # when some case has a question_type (gate.core.goldencheck)


class TargetInfo(TypedDict):
    kind: str
    k: int
    calls: int
    errors: int
    error_rate: float
    max_error_rate: float
    notes: list[str]


class BaselineInfo(TypedDict):
    path: str
    found: bool
    created_at: str | None
    commit: str | None
    fingerprints: dict[str, str] | None
    mismatch: list[str]
    on_mismatch: str
    source: str | None  # which baseline: the committed file, or a history entry (base commit, ancestor)


class CaseOutput(TypedDict):
    """What the target answered for one golden case."""

    id: str
    type: str
    retrieved: list[str]
    answer: str | None
    latency_ms: float | None
    error: str | None


class HistoryRun(TypedDict):
    commit: str | None
    created_at: str | None
    metrics: dict[str, dict[str, float]]  # stage -> metric -> value


class HistorySummary(TypedDict):
    entries: int
    runs: list[HistoryRun]


class CaseDiagnosis(TypedDict):
    """Where one case broke (gate.core.diagnosis)."""

    id: str
    code: str  # corpus_missing | not_retrieved | ranked_lower | unfaithful | incomplete | misled_by_noise | over_refusal | ...
    layer: str  # corpus | retrieval | generation | robustness | refusal | format
    evidence: str
    moved: bool  # got worse than the baseline, or fails where the baseline did not (or has no baseline)


class LayerSummary(TypedDict):
    """One layer that moved: its cases, its codes, the next step, and the comment's sentence."""

    layer: str
    cases: list[str]
    codes: dict[str, int]
    next_step: str
    line: str


class DiagnosisInfo(TypedDict):
    """Where it broke: every diagnosed case, and the layers that moved, the cheapest to look at first."""

    cases: list[CaseDiagnosis]
    layers: list[LayerSummary]


class TraceProblem(TypedDict):
    line: int
    id: str | None
    reason: str


class TraceCase(TypedDict):
    """One sampled trace: what the golden-case candidates are made from (``rag-gate golden add``)."""

    id: str
    question: str
    line: int
    timestamp: str | None
    feedback: float | None
    negative: bool | None  # the feedback is negative (below target.traces.negative_below); None: no feedback


class TracesInfo(TypedDict):
    """What a traces run read and sampled: the file, the traces it could not read, the window and the sample."""

    path: str
    format: str
    lines: int  # non-blank lines of the file
    read: int  # traces read
    unreadable: int
    problems: list[TraceProblem]  # the first unreadable traces, each with its line and why
    since: str | None
    until: str | None
    in_window: int  # traces read that fall in [since, until)
    undated: int  # traces with no timestamp (outside any window when since or until is set)
    first: str | None  # the earliest and latest timestamp in the window
    last: str | None
    sampled: int
    by_day: dict[str, int]  # UTC day -> sampled traces
    rate: float
    max: int
    seed: int
    negative_below: float
    cases: list[TraceCase]


class Report(TypedDict):
    schema_version: int
    verdict: Verdict
    exit_code: int
    errors: list[str]
    warnings: list[str]
    tool: ToolInfo
    run: RunInfo
    fingerprints: dict[str, str]
    golden_set: GoldenSetInfo
    target: TargetInfo
    baseline: BaselineInfo
    stages: dict[str, StageResult]
    diagnosis: NotRequired[DiagnosisInfo]  # where it broke: absent when no case got worse or failed
    changes: NotRequired[list[Change]]  # what differs from the reference run (changes_from): absent without one
    changes_from: NotRequired[ChangesFrom]
    cases: list[CaseOutput]
    history: HistorySummary
    texts: NotRequired[dict[str, str]]  # text id -> text, for the judged cases' outputs (CaseResult.output)
    traces: NotRequired[TracesInfo]  # a traces run: what it read and sampled


# ---------------------------------------------------------------------------------------------- kept runs


class StoredStage(TypedDict, total=False):
    metrics: Required[dict[str, float]]
    samples: list[CaseResult]
    judge: JudgeInfo  # judge stages: the judge that scored them
    window_deltas: dict[str, float]  # a traces run: metric -> its change against the previous window, judge drift cancelled
    window_se: dict[str, float]  # the standard error of each of those changes


class Baseline(TypedDict):
    """The baseline file: the figures a pull request is compared with."""

    schema_version: int
    created_at: str
    tool_version: str
    commit: str | None
    fingerprints: dict[str, str]
    stages: dict[str, StoredStage]
    texts: NotRequired[dict[str, str]]  # text id -> text, for the judged cases' outputs
    system: NotRequired[SystemInfo]


class HistoryEntry(TypedDict):
    """One default-branch run in the history (for trend gates and the PR's base-commit baseline)."""

    schema_version: int
    created_at: str
    commit: str | None
    branch: str | None
    verdict: str | None
    fingerprints: dict[str, str]
    stages: dict[str, StoredStage]
    texts: NotRequired[dict[str, str]]  # text id -> text; each text is kept by the oldest entry that uses it
    tool_version: NotRequired[str]
    kind: NotRequired[str]  # pr, push, schedule, dispatch, deployment, merge
    url: NotRequired[str]  # the CI run's page
    system: NotRequired[SystemInfo]
    changes: NotRequired[list[Change]]  # what differed from the run it was compared with


StoredRun = Baseline | HistoryEntry  # a run kept for comparison: the baseline or a history entry


# ---------------------------------------------------------------------------------------------- a shard's part


class ShardInfo(TypedDict):
    index: int  # 1..of
    of: int
    cases: int  # golden cases in this shard


class PartPassage(TypedDict):
    id: str
    text: str | None
    score: float | None


class PartOutput(TypedDict):
    """What the target returned for one case of the shard, whole: the merge measures retrieval from it."""

    id: str
    retrieved: list[PartPassage]
    answer: str | None
    contexts: list[str]
    latency_ms: float | None
    error: str | None
    usage: NotRequired[dict[str, Any]]  # the RAG system's own token counts
    cached: NotRequired[bool]  # it answered from its own cache
    system: NotRequired[dict[str, str | float | int]]  # what it said about itself


class PartRun(TypedDict):
    created_at: str
    config: str
    commit: str | None
    duration_s: float


class Part(TypedDict):
    """One shard's work (``rag-gate run --shard I/N``): what its target answered and its judge stages measured, before
    any gate. ``rag-gate merge`` checks that the parts are complete and alike, then gates the whole."""

    schema_version: int
    part: Literal["rag-gate shard"]
    tool: ToolInfo
    shard: ShardInfo
    run: PartRun
    identity: dict[str, str]  # spec, golden_set, baseline: what every part of one run must share
    target_kind: str
    unmatched: list[int]  # results-file lines that match no golden case
    outputs: list[PartOutput]
    stages: dict[str, StageMeasurement]
    errors: list[str]  # how far the shard got, if its deadline ran out
