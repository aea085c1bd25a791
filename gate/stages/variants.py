"""What the robustness stage's tests that ask the target again (paraphrase, stability) give the stage: their metrics,
why one could not be computed, their record in the report, the target calls they made and the judge's usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gate.core.report import Usage


@dataclass
class VariantPart:
    """One test's share of the robustness stage. ``key``: where its record goes in the stage (paraphrase | stability)."""

    key: str
    metrics: dict[str, float] = field(default_factory=dict)
    not_evaluated: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] | None = None  # ParaphraseInfo | StabilityInfo (gate.core.report); None: it could not run
    target_calls: int = 0
    usage: Usage | None = None
    warnings: list[str] = field(default_factory=list)  # what the test could not do as asked
