"""A validated spec (rag-eval.yml): its settings with defaults filled and ${NAME}s expanded, the paths it
names, and the fingerprints of what it measures. Loaded by gate.config.loader."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.config.yamlfile import line_of
from gate.core.catalog import MetricName, parse_metric
from gate.core.errors import InputError, KeyPath, key_path


@dataclass
class Spec:
    """A validated spec. ``data`` has defaults filled and ${VARS} expanded; ``raw`` has neither."""

    path: Path
    raw: dict[str, Any]
    data: dict[str, Any]
    lines: dict[KeyPath, int]
    secrets: list[str] = field(default_factory=list)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve(self, relative: str) -> Path:
        p = Path(relative)
        return p if p.is_absolute() else self.base_dir / p

    def line(self, *path: str | int) -> int | None:
        return line_of(self.lines, path)

    def error(self, message: str, *path: str | int, hint: str | None = None) -> InputError:
        return InputError(message, file=str(self.path), line=self.line(*path), key=key_path(path), hint=hint)

    @property
    def golden_set_path(self) -> Path:
        return self.resolve(self.data["golden_set"])

    @property
    def target(self) -> dict[str, Any]:
        return self.data["target"]

    @property
    def retrieval(self) -> dict[str, Any] | None:
        return self.data["stages"].get("retrieval")

    def retrieval_metrics(self) -> list[MetricName]:
        stage = self.retrieval
        return [parse_metric(m) for m in stage["metrics"]] if stage else []

    @property
    def target_k(self) -> int:
        if "k" in self.target:
            return int(self.target["k"])
        ks = [m.k for m in self.retrieval_metrics() if m.k]
        return max([10, *ks])

    @property
    def history_path(self) -> Path:
        return self.resolve(self.data["history"]["path"])

    @property
    def baseline_path(self) -> Path:
        return self.resolve(self.data["baseline"]["path"])

    def fingerprint(self, stage: str = "retrieval") -> str:
        """Hash of what defines a stage's measurement: its settings without gates; for retrieval
        also k, for judge stages the judge's model, temperature and embeddings model. Gates,
        target and timeouts can change without invalidating a baseline."""
        cfg = self.raw.get("stages", {}).get(stage) or {}
        basis: dict[str, Any] = {k: v for k, v in cfg.items() if k != "gates"}
        if stage == "retrieval":
            basis["_k"] = self.target_k
        else:
            judge = self.raw.get("judge") or {}
            basis["_judge"] = {k: judge.get(k) for k in ("model", "temperature", "embeddings_model")}
        blob = json.dumps(basis, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def fingerprints(self, golden_set: str) -> dict[str, str]:
        """The run's fingerprints: golden set, retrieval spec ("spec"), k, and one per judge stage."""
        out = {"golden_set": golden_set, "spec": self.fingerprint("retrieval"), "k": f"k={self.target_k}"}
        for stage in ("generation", "robustness"):
            if self.data["stages"].get(stage):
                out[stage] = self.fingerprint(stage)
        return out
