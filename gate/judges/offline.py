"""The offline engine: exact_match, token_f1 and rouge_l against the ground truth, and the noise test's
answer_bearing_f1, with no model and no network (the measures themselves are in gate.core.textmatch)."""

from __future__ import annotations

import unicodedata

from gate import __version__
from gate.core.textmatch import METRICS, NORMALISATION_VERSION, QUESTION_METRICS, QUESTION_SCORERS, SCORERS
from gate.judges import JudgeError, JudgeInput


class OfflineEngine:
    """Reference-based measures with no model: exact_match, token_f1, rouge_l.

    Every metric needs the case's ``ground_truth``; a case without one (absent, or only
    whitespace) is a JudgeError for that case. Asking for a metric this engine does not
    have is a programming error (ValueError): the spec is validated before engines run.

    ``metrics()`` lists the generation metrics a spec may name. The robustness noise test's
    offline correctness, ``answer_bearing_f1``, is scored too: it also reads the question
    (always present on a JudgeInput), so it is not offered as a generation metric.
    """

    name = "offline"
    version = f"{__version__}+norm{NORMALISATION_VERSION}.unicode{unicodedata.unidata_version}"

    def metrics(self) -> set[str]:
        return set(SCORERS)

    def needs(self, metric: str) -> set[str]:
        self._check(metric)
        return {"ground_truth"}

    def prompt_fingerprint(self, metric: str) -> str:
        self._check(metric)
        return f"{metric} norm{NORMALISATION_VERSION}: {METRICS.get(metric) or QUESTION_METRICS[metric]}"

    async def score(self, metric: str, item: JudgeInput) -> float:
        self._check(metric)
        if item.ground_truth is None or not item.ground_truth.strip():
            raise JudgeError("no ground_truth for this case")
        if metric in QUESTION_SCORERS:
            return QUESTION_SCORERS[metric](item.answer, item.ground_truth, item.question)
        return SCORERS[metric](item.answer, item.ground_truth)

    def kept_steps(self, criterion: str) -> list[str] | None:
        return None  # no criteria here: GEval is deepeval's

    async def aclose(self) -> None:
        return None

    @staticmethod
    def _check(metric: str) -> None:
        if metric not in SCORERS and metric not in QUESTION_SCORERS:
            known = ", ".join(sorted(SCORERS))
            raise ValueError(f"the offline engine has no metric {metric!r}; it computes {known}")
