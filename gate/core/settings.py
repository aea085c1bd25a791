"""The spec's stage settings as typed values, read once by the loader (gate.config.loader.read_settings). Pure.

config.schema.json is the one source of every default: the loader fills the schema's defaults into the validated
spec before these are built, so no field below has a default of its own and none can disagree with the schema
(tests/unit/test_settings.py holds every field to a schema property). The gates stay the mappings the spec writes
(gate.core.gates reads them); a gate key the schema gives no default has its default named once, in gate.core.gates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.core.answers import AnswerChecks
from gate.core.catalog import EngineMetric, MetricName, engine_metrics, parse_metric
from gate.core.model import GoldenCase
from gate.core.sampling import select_sample

NO_JUDGE = "no judge configured (add judge: to the spec)"  # why a run has no judge (gate.judges.resolve_judge)

GateTable = Mapping[str, Mapping[str, Any]]  # metric -> its gate, as the spec writes it (defaults filled)


@dataclass(frozen=True)
class SampleSettings:
    """``sample: {size, seed, always: {tags}}``: which answerable cases a stage judges."""

    size: int | str  # a number of cases, or "all"
    seed: int
    always_tags: tuple[str, ...]

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> SampleSettings:
        return cls(d["size"], int(d["seed"]), tuple(d["always"]["tags"]))

    def draw(self, cases: Sequence[GoldenCase]) -> list[GoldenCase]:
        """The sample of the answerable ``cases`` (gate.core.sampling: the same seed and set, the same sample)."""
        return select_sample([c for c in cases if c.answerable], self.size, self.seed, self.always_tags)


@dataclass(frozen=True)
class MatchSettings:
    """``match: {level, separator, min_overlap}``: how a retrieved passage is matched with a relevant one."""

    level: str  # exact | document | text
    separator: str
    min_overlap: float

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> MatchSettings:
        return cls(d["level"], d["separator"], float(d["min_overlap"]))

    @property
    def by_text(self) -> bool:
        return self.level == "text"

    def to_id(self) -> Callable[[str], str]:
        """exact and text: ids as they are; document: 'doc#chunk_7' -> 'doc' (the part before the separator)."""
        if self.level != "document":
            return same_id
        sep = self.separator
        return lambda x: x.split(sep, 1)[0]


def same_id(x: str) -> str:
    """An id as it is (match levels exact and text)."""
    return x


@dataclass(frozen=True)
class RetrievalSettings:
    metrics: tuple[MetricName, ...]
    match: MatchSettings
    gates: GateTable
    on_stale_labels: str  # error | warn

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> RetrievalSettings:
        return cls(tuple(parse_metric(m) for m in d["metrics"]), MatchSettings.read(d["match"]), d["gates"], d["on_stale_labels"])

    @property
    def cutoff(self) -> int | None:
        """The cut-off a relevant id must stay within: the smallest k of the metrics (None: no metric has one)."""
        ks = [m.k for m in self.metrics if m.k]
        return min(ks) if ks else None


@dataclass(frozen=True)
class SelfCheckSettings:
    cases: int
    max_diff: float
    on_unstable: str  # warn | fail

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> SelfCheckSettings:
        return cls(int(d["cases"]), float(d["max_diff"]), d["on_unstable"])


@dataclass(frozen=True)
class GenerationSettings:
    metrics: tuple[EngineMetric, ...]  # each report metric with the engine that computes it
    criteria: Mapping[str, str]  # GEval criteria by name
    sample: SampleSettings
    self_check: SelfCheckSettings | None
    checks: AnswerChecks | None  # for every answer (json_schema: resolved against the spec's folder by the loader)
    gates: GateTable

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> GenerationSettings:
        """ValueError with a sentence when a metric is unknown (gate.core.catalog.engine_metrics)."""
        check = d.get("self_check")
        return cls(tuple(engine_metrics(d)), dict(d.get("criteria", {})), SampleSettings.read(d["sample"]),
                   SelfCheckSettings.read(check) if check else None, AnswerChecks.read(d["checks"]) if d.get("checks") else None,
                   d["gates"])

    @property
    def case_drop(self) -> dict[str, float]:
        """The case_drop limit of each gate that has one."""
        return {m: float(g["case_drop"]) for m, g in self.gates.items() if "case_drop" in g}


@dataclass(frozen=True)
class CorrectnessSettings:
    """How the noise test decides an answer is correct: ``method`` offline or judge (with ``engine``)."""

    method: str
    engine: str
    threshold: float

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> CorrectnessSettings:
        return cls(d["method"], d["engine"], float(d["threshold"]))

    @property
    def judged(self) -> bool:
        return self.method == "judge"

    def metric(self) -> EngineMetric:
        """ragas answer_correctness, a deepeval GEval correctness criterion, or offline answer-bearing token F1 (F1 on
        the ground truth's words the question does not give, its numbers required: gate.core.textmatch)."""
        if not self.judged:
            return EngineMetric("correctness", "offline", "answer_bearing_f1")
        if self.engine == "deepeval":
            return EngineMetric("correctness", "deepeval", "correctness")
        return EngineMetric("correctness", "ragas", "answer_correctness")


@dataclass(frozen=True)
class NoiseSettings:
    distractors: int
    source: str  # corpus | file | generated
    position: str  # front | back | random
    seed: int
    sample: SampleSettings
    correctness: CorrectnessSettings
    file: str | None  # source: file, relative to the spec

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> NoiseSettings:
        return cls(int(d["distractors"]), d["source"], d["position"], int(d["seed"]), SampleSettings.read(d["sample"]),
                   CorrectnessSettings.read(d["correctness"]), d.get("file"))


@dataclass(frozen=True)
class RejectionSettings:
    phrases: tuple[str, ...]  # empty: rag-gate's own list (gate.core.rejection)
    judge: bool  # the judge classifies the answers no phrase settled
    canaries: tuple[str, ...]

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> RejectionSettings:
        return cls(tuple(d.get("phrases") or ()), bool(d["judge"]), tuple(d["canaries"]))


@dataclass(frozen=True)
class ParaphraseSettings:
    """``paraphrase: {generate, style, sample, metrics}``: each sampled case asked again in a user's words."""

    generate: int  # rewrites the judge writes for a case with no golden paraphrases
    style: str  # colloquial
    sample: SampleSettings
    metrics: tuple[MetricName, ...]

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> ParaphraseSettings:
        return cls(int(d["generate"]), d["style"], SampleSettings.read(d["sample"]), tuple(parse_metric(m) for m in d["metrics"]))

    @property
    def k(self) -> int | None:
        """The paraphrase's cut-off: the smallest k of its metrics (None: none has one)."""
        ks = [m.k for m in self.metrics if m.k]
        return min(ks) if ks else None


@dataclass(frozen=True)
class StabilitySettings:
    """``stability: {repeats, sample, method, correctness}``: each sampled question asked again ``repeats`` times."""

    repeats: int
    sample: SampleSettings
    method: str  # token_f1 | judge
    correctness: CorrectnessSettings

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> StabilitySettings:
        return cls(int(d["repeats"]), SampleSettings.read(d["sample"]), d["method"], CorrectnessSettings.read(d["correctness"]))


@dataclass(frozen=True)
class RobustnessSettings:
    noise: NoiseSettings | None
    rejection: RejectionSettings
    gates: GateTable
    match: MatchSettings  # the retrieval stage's: a passage relevant to the case is never its distractor
    paraphrase: ParaphraseSettings | None
    stability: StabilitySettings | None

    @classmethod
    def read(cls, d: Mapping[str, Any], match: MatchSettings) -> RobustnessSettings:
        return cls(NoiseSettings.read(d["noise"]) if d.get("noise") else None, RejectionSettings.read(d["rejection"]), d["gates"],
                   match, ParaphraseSettings.read(d["paraphrase"]) if d.get("paraphrase") else None,
                   StabilitySettings.read(d["stability"]) if d.get("stability") else None)


@dataclass(frozen=True)
class StageSettings:
    """The stages the spec configures (None: not configured), and the matching every stage uses."""

    retrieval: RetrievalSettings | None
    generation: GenerationSettings | None
    robustness: RobustnessSettings | None
    match: MatchSettings  # the retrieval stage's, else the schema's default matching

    def gates(self, stage: str) -> GateTable:
        settings = getattr(self, stage)
        return settings.gates if settings is not None else {}

    @property
    def judged(self) -> bool:
        """Whether a stage that may call a judge is configured."""
        return self.generation is not None or self.robustness is not None

    @property
    def reads_texts(self) -> bool:
        """Whether a stage reads the passages' texts: a generation stage with metrics (its judge reads the contexts), the
        robustness stage (distractors from the corpus), or matching by text. The answer checks read the answer alone."""
        return bool(self.generation is not None and self.generation.metrics) or self.robustness is not None or self.match.by_text
