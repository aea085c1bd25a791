"""One case in full, for the console (``rag-gate show CASE_ID``): what was asked, what the target retrieved and
answered, every stage's figures for it, and the baseline's beside them. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.core.model import GoldenCase
from gate.core.report import Report, StoredRun
from gate.render import fmt_value, ordered_stages, reference_answers, rejection_miss, rejection_misses


def _case_row(samples: Sequence[Mapping[str, Any]], case_id: str) -> Mapping[str, Any] | None:
    return next((s for s in samples if s.get("id") == case_id), None)


def _rank(rank: int | None) -> str:
    return f"rank {rank}" if rank is not None else "not retrieved"


def render_case(report: Report, case_id: str, golden: GoldenCase | None = None, baseline: StoredRun | None = None) -> str:
    """The case's drill-down; a line saying it is not in the report when it is not."""
    out = next((c for c in report["cases"] if c["id"] == case_id), None)
    if out is None:
        return f"{case_id}: not in this report ({report['golden_set']['n']} cases)\n"
    lines = _head(out, golden)
    if out["error"]:
        lines.append(f"target error: {out['error']}")
    else:
        latency = f" in {out['latency_ms']:.0f} ms" if out["latency_ms"] is not None else ""
        lines.append(f"answer{latency}: {out['answer'] if out['answer'] is not None else '(none)'}")
        answer = reference_answers(baseline).get(case_id)
        if answer is not None and answer != out["answer"]:
            lines.append(f"baseline's answer: {answer}")
    base_stages: Mapping[str, Any] = baseline["stages"] if baseline else {}
    for name, stage in ordered_stages(report):
        row = _case_row(stage.get("samples", []), case_id)
        base_row = _case_row(base_stages.get(name, {}).get("samples", []), case_id)
        rej = next((r for r in stage.get("rejection", {}).get("cases", []) if r["id"] == case_id), None)
        if name == "retrieval" and row is not None:
            lines += _retrieval_lines(out["retrieved"], row, base_row)
        if row is None:
            lines += [_rejection_line(rej, stage)] if rej is not None else []
            continue
        lines += _score_lines(name, row, base_row)
        if name == "robustness":
            lines += _noise_lines(row) + ([_rejection_line(rej, stage)] if rej is not None else [])
        if row.get("error") and not row.get("errors"):
            lines.append(f"  {name} error: {row['error']}")
    return "\n".join(lines) + "\n"


def _head(out: Mapping[str, Any], golden: GoldenCase | None) -> list[str]:
    lines = [f"case {out['id']} ({out['type']})"]
    if golden is not None:
        extra = [f"category {golden.category}"] if golden.category else []
        extra += [f"tags {', '.join(golden.tags)}"] if golden.tags else []
        extra += [f"question type {golden.question_type}"] if golden.question_type else []
        if extra:
            lines[0] += " · " + " · ".join(extra)
        lines.append(f"question:     {golden.question}")
        if golden.ground_truth:
            lines.append(f"ground truth: {golden.ground_truth}")
    return lines


def _retrieval_lines(retrieved: Sequence[str], row: Mapping[str, Any], base_row: Mapping[str, Any] | None) -> list[str]:
    lines = ["retrieval:"]
    ranks = row.get("relevant_ranks") or {}
    base_ranks = (base_row or {}).get("relevant_ranks") or {}
    for i, doc in enumerate(retrieved, 1):
        mark = "  relevant" if doc in ranks else ""
        lines.append(f"  {i:>3}. {doc}{mark}")
    for rid, rank in ranks.items():
        moved = f" (baseline: {_rank(base_ranks[rid])})" if rid in base_ranks and base_ranks[rid] != rank else ""
        lines.append(f"  relevant {rid}: {_rank(rank)}{moved}")
    return lines


def _score_lines(name: str, row: Mapping[str, Any], base_row: Mapping[str, Any] | None) -> list[str]:
    metrics = row.get("metrics", {})
    if not metrics and not row.get("errors"):
        return []
    base_metrics = (base_row or {}).get("metrics", {})
    shown = [f"{m} {fmt_value(m, v)}" + (f" (baseline {fmt_value(m, base_metrics[m])})" if m in base_metrics else "")
             for m, v in metrics.items()]
    return [f"{name}: " + (", ".join(shown) or "no score")] + [f"  {metric} not scored: {why}" for metric, why in (row.get("errors") or {}).items()]


def _noise_lines(row: Mapping[str, Any]) -> list[str]:
    lines = [f"  distractor {d.get('id') or ''}: {d.get('text') or ''}".rstrip() for d in row.get("distractors") or []]
    if "noisy_answer" in row:
        lines.append(f"  clean answer: {row.get('clean_answer')}")
        lines.append(f"  noisy answer: {row.get('noisy_answer')}")
        lines.append(f"  {'turned wrong by the distractors' if row.get('flipped') else 'not turned wrong by the distractors'}")
    return lines


def _rejection_line(row: Mapping[str, Any], stage: Mapping[str, Any]) -> str:
    if row.get("error"):
        return f"rejection: not checked ({row['error']})"
    decided = row.get("method", "?") + (f" {row['phrase']!r}" if row.get("phrase") else "")
    verdict = "refused" if row.get("refused") else "answered"
    missed = any(r["id"] == row["id"] for r in rejection_misses(stage))
    return f"rejection: {verdict}, decided by {decided}" + (f": a miss ({rejection_miss(row)})" if missed else ": as it should")
