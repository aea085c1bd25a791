"""A validated spec (rag-eval.yml): its settings with defaults filled and ${NAME}s expanded, the paths it
names, and the fingerprints of what it measures. Loaded by gate.config.loader."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.config.yamlfile import line_of
from gate.core.catalog import parse_metric
from gate.core.digest import digest_json
from gate.core.errors import InputError, KeyPath, key_path
from gate.core.redact import Redactor
from gate.core.settings import StageSettings


@dataclass
class Spec:
    """A validated spec. ``data`` has defaults filled and ${VARS} expanded; ``raw`` has neither."""

    path: Path
    raw: dict[str, Any]
    data: dict[str, Any]
    lines: dict[KeyPath, int]
    secrets: list[str] = field(default_factory=list)
    stages: StageSettings = field(init=False)  # typed stage settings, set by the loader once the spec is expanded

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
        """The golden set's path; InputError for a traces spec that names none (its questions are the traces')."""
        if "golden_set" not in self.data:
            raise self.error("this spec names no golden_set (a traces target reads its questions from the traces); add "
                             "golden_set: PATH", "target", "traces")
        return self.resolve(self.data["golden_set"])

    @property
    def traces(self) -> dict[str, Any] | None:
        """target.traces (defaults filled), or None for a golden-set run."""
        traces = self.target.get("traces") if isinstance(self.target, dict) else None
        return traces if isinstance(traces, dict) else None

    @property
    def target(self) -> dict[str, Any]:
        return self.data["target"]

    @property
    def results_file(self) -> tuple[Path, str | None] | None:
        """target.results as (its path, its id_key or None), or None when the target is not a results file."""
        results = self.target.get("results") if isinstance(self.target, dict) else None
        if isinstance(results, dict):
            return self.resolve(results["path"]), results.get("id_key")
        return None if results is None else (self.resolve(results), None)

    def redactor(self, extra: Iterable[str] = ()) -> Redactor:
        """What the run's outputs go through: every secret the spec read (and ``extra``: the action's token), with the
        encodings rag-gate itself makes of them (the Basic credential of the target URL's user:password)."""
        http = self.target.get("http") if isinstance(self.target, dict) else None
        return Redactor.with_urls([*self.secrets, *extra], [http.get("url") if isinstance(http, dict) else None])

    @property
    def judge(self) -> dict[str, Any] | None:
        """The ``judge:`` block (gate.judges.resolve_judge turns it into the run's judge settings)."""
        return self.data.get("judge")

    @property
    def target_k(self) -> int:
        """How many passages the target is asked for: target.k, else the largest k of the retrieval metrics (10 at
        least)."""
        if "k" in self.target:
            return int(self.target["k"])
        retrieval = self.data["stages"].get("retrieval") or {}
        ks = [m.k for m in map(parse_metric, retrieval.get("metrics", [])) if m.k]
        return max([10, *ks])

    @property
    def data_cutoff(self) -> int:
        """``cutoff`` read from the spec's data alone (before the typed stage settings exist)."""
        retrieval = self.data["stages"].get("retrieval") or {}
        ks = []
        for name in retrieval.get("metrics", []):
            try:
                k = parse_metric(name).k
            except ValueError:
                continue  # said by the retrieval stage's check
            if k:
                ks.append(k)
        return min(ks) if ks else self.target_k

    @property
    def cutoff(self) -> int:
        """The cut-off a relevant id must stay within: the smallest k of the retrieval metrics, else the target's k."""
        retrieval = self.stages.retrieval
        return (retrieval.cutoff if retrieval else None) or self.target_k

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
        return digest_json(basis)

    def fingerprints(self, golden_set: str) -> dict[str, str]:
        """The run's fingerprints: golden set, retrieval spec ("spec"), k, and one per judge stage."""
        out = {"golden_set": golden_set, "spec": self.fingerprint("retrieval"), "k": f"k={self.target_k}"}
        for stage in ("generation", "robustness"):
            if getattr(self.stages, stage) is not None:
                out[stage] = self.fingerprint(stage)
        return out
