"""The offline engine: exact_match, token_f1 and rouge_l against the ground truth, no model and no network
(the measures themselves are in gate.core.textmatch)."""

from __future__ import annotations

import unicodedata

from gate import __version__
from gate.core.textmatch import METRICS, NORMALISATION_VERSION, SCORERS
from gate.judges import JudgeError, JudgeInput


class OfflineEngine:
    """Reference-based measures with no model: exact_match, token_f1, rouge_l.

    Every metric needs the case's ``ground_truth``; a case without one (absent, or only
    whitespace) is a JudgeError for that case. Asking for a metric this engine does not
    have is a programming error (ValueError): the spec is validated before engines run.
    """

    name = "offline"
    version = f"{__version__}+norm{NORMALISATION_VERSION}.unicode{unicodedata.unidata_version}"

    def metrics(self) -> set[str]:
        return set(SCORERS)

    def needs(self, metric: str) -> set[str]:
        self._check(metric)
        return {"reference"}

    def prompt_fingerprint(self, metric: str) -> str:
        self._check(metric)
        return f"{metric} norm{NORMALISATION_VERSION}: {METRICS[metric]}"

    async def score(self, metric: str, item: JudgeInput) -> float:
        self._check(metric)
        if item.reference is None or not item.reference.strip():
            raise JudgeError("no ground_truth for this case")
        return SCORERS[metric](item.answer, item.reference)

    async def aclose(self) -> None:
        return None

    @staticmethod
    def _check(metric: str) -> None:
        if metric not in SCORERS:
            known = ", ".join(sorted(SCORERS))
            raise ValueError(f"the offline engine has no metric {metric!r}; it computes {known}")
