"""What every judged stage of one run shares: the golden set and the target's answers, the judge (or why there is
none), the cache, the deadline, the shard's cases, where to say how far it is, and the run's secrets. Built once per
run by gate.run.context.stage_context; a stage takes its own settings (gate.core.settings) and this."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.model import GoldenCase, TargetOutput
from gate.core.redact import Redactor
from gate.core.settings import NO_JUDGE
from gate.deadline import NO_DEADLINE, Deadline
from gate.stages.progress import JudgeProgress

if TYPE_CHECKING:
    from gate.judges import Engine, JudgeSettings
    from gate.judges.cache import ScoreCache
    from gate.judges.client import JudgeClient

NOISE_ANSWERS = "the noise test"  # the robustness stage asking the target again (progress unit "answer")


# (engine names, judge settings, GEval criteria, cache) -> the engines and their shared client
EngineFactory = Callable[[set[str], "JudgeSettings | None", dict[str, str], "ScoreCache | None"],
                         "tuple[dict[str, Engine], JudgeClient | None]"]


@dataclass(frozen=True)
class Traffic:
    """A traces run's facts about its traces beside their answers: which ratings are negative, and the phrases that
    mark an answer as a refusal."""

    negative: Mapping[str, bool | None]  # case (trace) id -> its rating is negative; None: not rated
    refusal_phrases: Sequence[str]


@dataclass(frozen=True)
class StageContext:
    """One run's shared state for its judged stages. ``cases`` is the whole golden set (every sample is drawn from
    it); ``only`` a shard's case ids (the samples are then restricted to them, and ``outputs`` holds theirs)."""

    cases: Sequence[GoldenCase]
    outputs: Mapping[str, TargetOutput]
    cache: ScoreCache
    judge: JudgeSettings | None = None
    no_judge: str = NO_JUDGE  # why ``judge`` is None
    deadline: Deadline = NO_DEADLINE
    only: Collection[str] | None = None
    progress: JudgeProgress | None = None
    redactor: Redactor = field(default_factory=lambda: Redactor([]))
    engines: EngineFactory | None = None  # None: gate.stages.judging.build_engines (a test or benchmark may give its own)
    golden_dir: Path | None = None  # the golden set's folder: a case's own files (checks.json_schema) are relative to it
    traffic: Traffic | None = None  # a traces run: its cases are production traces
    cutoff: int = 10  # the rank a relevant id must stay within: the spec's (the smallest k of the retrieval metrics, else target.k)

    def mine(self, cases: Sequence[GoldenCase]) -> list[GoldenCase]:
        """``cases`` restricted to this shard's (all of them outside a shard)."""
        return list(cases) if self.only is None else [c for c in cases if c.id in self.only]
