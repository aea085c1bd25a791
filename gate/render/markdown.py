"""The PR comment body (Markdown). Pure. Every string that comes from the report goes through gate.render.escape
(``cell`` or ``code``), whatever its origin: in the workflow_run job the whole report is a fork's artifact."""

from __future__ import annotations

import re
from typing import Any

from gate.core.catalog import CHECK_METRICS, PER_CASE_STAGES
from gate.core.pairs import summary
from gate.core.report import JudgeInfo, LostRank, Report, StageResult
from gate.render import (
    STATUS_ICON,
    fmt_delta,
    fmt_value,
    headline,
    headline_verdict,
    metric_rows,
    ordered_stages,
    run_page,
)
from gate.render.calibration import calibration_lines
from gate.render.changes import changes_lines
from gate.render.diagnosis import answer_check_cases, checks_note, diagnosed, where_it_broke
from gate.render.escape import cell, code, escape_html
from gate.render.robustness import robustness_details
from gate.render.traces import traces_line, window_lines
from gate.render.trend import render_trend

MARKER_PREFIX = "<!-- rag-gate:comment"


def marker(comment_id: str = "default") -> str:
    """Hidden marker a later run uses to find and edit its own comment."""
    return f"{MARKER_PREFIX} id={comment_id} -->"


def _header(report: Report) -> list[str]:
    lines = [f"## {STATUS_ICON.get(headline_verdict(report), '')} {headline(report)}", ""]
    g = report.get("golden_set", {})
    by_type = ", ".join(f"{int(n)} {cell(t)}" for t, n in sorted(g.get("by_type", {}).items()))
    t = report.get("target", {})
    b = report.get("baseline", {})
    if b.get("found"):
        when = cell((b.get("created_at") or "")[:10])
        commit = cell((b.get("commit") or "")[:7])
        source = b.get("source") or ""
        where = cell(source, 120) if source and "committed baseline file" not in source else f"baseline {code(b.get('path', ''), 120)}"
        base = where + (f" from {when}" if when else "") + (f" ({commit})" if commit and commit not in where else "")
        age = _age_days(b.get("created_at"), report.get("run", {}).get("created_at"))
        if age is not None:
            base += f", {age} day{'s' if age != 1 else ''} old"
    else:
        base = "no baseline yet (max_drop gates skipped)"
    lines.append(traces_line(report) or f"Golden set: {int(g.get('n', 0))} cases ({by_type}) · target: {cell(t.get('kind', '?'))} · "
                 f"{int(t.get('errors', 0))} of {int(t.get('calls', 0))} calls failed · {base}")
    mix = g.get("by_question_type") or {}
    if mix:
        lines.append("Question types: " + " · ".join(f"{cell(k)} {int(n)}" for k, n in mix.items()))
    shards = report.get("run", {}).get("shards")
    if shards:
        lines.append(f"Sharded: {int(shards)} jobs each ran part of the golden set; `rag-gate merge` gated them as one run.")
    lines.append("")
    for err in report.get("errors", []):
        lines.append(f"> [!CAUTION]\n> {cell(err, 300)}\n")
    staged = {w for st in report.get("stages", {}).values() for w in st.get("warnings", [])}
    for w in report.get("warnings", []):
        if w not in staged:
            lines.append(f"> [!WARNING]\n> {cell(w, 500)}\n")
    if b.get("mismatch"):
        what = cell(", ".join(b["mismatch"]))
        policy = b["on_mismatch"]
        action = {"warn": "Compared anyway", "skip": "max_drop gates skipped", "fail": "max_drop gates failed"}.get(policy, "")
        lines.append(f"> [!WARNING]\n> The baseline was made from a different {what} than this run. {action} "
                     f"(baseline.on_mismatch: {cell(policy)}). Run `rag-gate baseline update` to refresh it.\n")
    return lines


def _stage_table(name: str, stage: StageResult) -> list[str]:
    icon = STATUS_ICON.get(stage["status"], "")
    lines = [f"### {icon} {cell(name.capitalize())}: {cell(stage['status'])}", ""]
    if stage["status"] == "skipped":
        return lines + [f"_{cell(stage.get('reason', 'skipped'), 300)}_", ""]
    n = stage.get("n")
    if n is not None and not (n == 0 and name == "retrieval" and not stage.get("samples")):  # a traces run: health alone
        extra = f", {int(stage['errored'])} errored" if stage.get("errored") else ""
        excluded = ", ".join(f"{int(v)} {cell(k)}" for k, v in sorted(stage.get("excluded", {}).items()))
        lines.append(f"{int(n)} cases scored{extra}" + (f" ({excluded} left out)" if excluded else "") + ".")
        lines.append("")
    lines += _judge_notes(stage)
    lines += ["| Metric | Baseline | This run | Δ | Gate | Status |", "|---|---:|---:|---:|---|:---:|"]
    for row in metric_rows(stage):
        status = STATUS_ICON.get(row["status"], "") if row["status"] else ""
        lines.append(
            f"| {code(row['metric'])} | {fmt_value(row['metric'], row['baseline'])} | {fmt_value(row['metric'], row['value'])} "
            f"| {fmt_delta(row['metric'], row['delta'])} | {cell(row['rule']) or '—'} | {status} |"
        )
    lines.append("")
    failed = [g for g in stage.get("gates", []) if g["status"] in ("fail", "error")]
    for g in failed:
        lines.append(f"- {STATUS_ICON[g['status']]} {code(g['metric'])}: {cell(g['reason'], 300)}")
    if failed:
        lines.append("")
    return lines


def _lost_ranks(lost: list[LostRank], k: int | None) -> str:
    return "; ".join(
        f"{code(x['id'])} {int(x['from'])}→{int(x['to']) if x['to'] is not None else 'not retrieved'}"
        + (f" (left top {k})" if x.get("left_top_k") else "")
        for x in lost
    )


def _worse_cases(name: str, stage: StageResult, max_cases: int, retrieval_k: int | None) -> list[str]:
    rows = stage.get("worse_cases", [])
    if not rows or max_cases == 0:
        return []
    judged = name in PER_CASE_STAGES  # judge stages label each case with where to look
    k = stage.get("reference_k", retrieval_k)
    shown = rows[:max_cases]
    against = "the baseline" if stage.get("baseline_metrics") or not judged else "recent runs"
    lines = [f"<details><summary>{len(rows)} case{'s' if len(rows) != 1 else ''} got worse than {against}"
             + (f" (showing {len(shown)})" if len(shown) < len(rows) else "") + "</summary>", ""]
    if judged:
        lines += ["| Case | Question | Scores | Where to look |", "|---|---|---|---|"]
    else:
        lines += ["| Case | Question | Metrics | Relevant ids that lost rank |", "|---|---|---|---|"]
    for r in shown:
        drops = ", ".join(f"{cell(m)} {b:.2f}→{v:.2f}" for m, (b, v) in r["drops"].items())
        if judged:
            lost = _lost_ranks(r.get("retrieval", []), k)
            where = f"**{cell(r.get('cause', ''))}**{diagnosed(r)}" + (f": {lost}" if lost else "")
            lines.append(f"| {code(r['id'], 40)} | {cell(r['question'])} | {drops or '—'} | {where} |")
        else:
            lost = _lost_ranks(r.get("lost", []), k) or "—"
            lines.append(f"| {code(r['id'], 40)} | {cell(r['question'])} | {drops or '—'} | {lost}{diagnosed(r)} |")
    return lines + ["", "</details>", ""]


def _judge_notes(stage: StageResult) -> list[str]:
    """Sample, judge, usage, self-check, metrics not evaluated and warnings of a judge stage."""
    lines: list[str] = []
    sample = stage.get("sample")
    judge: JudgeInfo | dict[str, Any] = stage.get("judge") or {}
    lines += checks_note(stage)
    offline = any(m not in CHECK_METRICS for m in stage.get("metrics", {}))
    if sample and not judge.get("model") and offline:  # only the metrics that need no model ran (no judge, or no key for it)
        lines += [f"Scored {int(sample['size'])} of {int(sample['of'])} answerable cases with the metrics that need no model; "
                  "no LLM judge ran.", ""]
    elif sample:
        parts = [f"Judged {int(sample['size'])} of {int(sample['of'])} answerable cases", f"judge {code(judge['model'])} at "
                 f"temperature {float(judge.get('temperature') or 0):g}"]
        usage = stage.get("usage") or {}
        if usage:
            calls = f"{int(usage.get('calls', 0))} judge calls"
            tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            if tokens:
                calls += f", {tokens:,} tokens"
            if usage.get("cost") is not None:
                calls += f", cost {float(usage['cost'] or 0):.4f}"
            parts.append(calls)
            parts.append(f"cache {int(usage.get('cache_hits', 0))} hits / {int(usage.get('cache_misses', 0))} misses")
        lines += [" · ".join(parts) + ".", ""]
    check = stage.get("self_check")
    if check and (check["metrics"] or judge.get("model")):
        per = ", ".join(f"{code(m)} max {d['max_diff']:.3f} / mean {d['mean_diff']:.3f}" for m, d in check["metrics"].items())
        lines += [f"Judge self-check ({int(check['cases'])} cases re-judged, limit {float(check['limit']):g}): "
                  f"{per or 'nothing re-judged'}.", ""]
    for name, reason in stage.get("not_evaluated", {}).items():
        lines.append(f"- {code(name)}: {cell(reason, 300)}")
    if stage.get("not_evaluated"):
        lines.append("")
    lines += _evidence(stage)
    for w in stage.get("warnings", []):
        lines += [f"> [!WARNING]\n> {cell(w, 500)}", ""]
    return lines


def _evidence(stage: StageResult) -> list[str]:
    """What the judge gates compared: each reference run, its pairs and how they were judged, what changed in the
    judge since; then each relative check's figures (pairs, changed pairs, p, the smallest detectable drop)."""
    lines: list[str] = []
    if not stage.get("pairing"):  # not a judge stage, or no reference run to compare with
        return lines
    for pairing in stage.get("pairing", {}).values():
        lines.append(cell(summary(pairing), 600))
        if pairing.get("note") and pairing["method"] == "same run":
            lines[-1] += f" Note: {cell(pairing['note'], 400)}."
        lines.append("")
    checks = [(g["metric"], c) for g in stage.get("gates", []) for c in g.get("checks", [])
              if c["kind"] in ("max_drop", "trend", "case_drop") and c["status"] != "fail"]
    if checks:
        lines += [f"<details><summary>Evidence of the judge gates ({len(checks)} check{'s' if len(checks) != 1 else ''})</summary>", ""]
        lines += [f"- {code(metric)} {cell(c['kind'])}: {cell(c['detail'], 400)}" for metric, c in checks]
        lines += ["", "</details>", ""]
    return lines


def _errored_cases(stage: StageResult, max_cases: int) -> list[str]:
    errored = [s for s in stage.get("samples", []) if s.get("error")]
    if not errored or max_cases == 0:
        return []
    lines = [f"<details><summary>{len(errored)} case{'s' if len(errored) != 1 else ''} errored (left out of the averages)</summary>", "",
             "| Case | Error |", "|---|---|"]
    lines += [f"| {code(s['id'], 40)} | {cell(s['error'], 200)} |" for s in errored[:max_cases]]
    if len(errored) > max_cases:
        lines.append(f"| … | {len(errored) - max_cases} more in report.json |")
    return lines + ["", "</details>", ""]


def _showing(shown: list[Any], everything: list[Any]) -> str:
    return f" (showing {len(shown)} of {len(everything)})" if len(shown) < len(everything) else ""


def _group_gates(stage: StageResult, max_cases: int) -> list[str]:
    """Per-group gates (``by``): each group's baseline, value, delta and status; open when a group failed. At most
    ``max_cases`` groups a gate, failed ones first."""
    lines: list[str] = []
    for g in stage.get("gates", []):
        groups = g.get("groups") or []
        if not groups:
            continue
        order = {"error": 0, "fail": 1, "pass": 2, "skipped": 3}
        ranked = sorted(groups, key=lambda r: order.get(r["status"], 4))
        shown = ranked[:max_cases]
        failed = sum(1 for r in groups if r["status"] in ("fail", "error"))
        ungated = sum(1 for r in groups if r["status"] == "skipped")
        metric = g["metric"]
        # a <summary> is raw HTML: no Markdown inside it (the metric and `by` are names the spec's schema allows)
        summary = (f"<code>{escape_html(metric)}</code> by {escape_html(groups[0]['by'])}: {failed} of {len(groups) - ungated} groups failed"
                   + (f", {ungated} too small to gate" if ungated else "") + _showing(shown, groups))
        lines += [f"<details{' open' if failed else ''}><summary>{summary}</summary>", "",
                  "| Group | Cases | Baseline | This run | Delta | Status |", "|---|---:|---:|---:|---:|:---:|"]
        for r in shown:
            status = STATUS_ICON.get(r["status"], "") if r["status"] != "skipped" else "not gated"
            lines.append(f"| {code(r['group'], 40)} | {int(r['n'])} | {fmt_value(metric, r['baseline'])} | "
                         f"{fmt_value(metric, r['value'])} | {fmt_delta(metric, r['delta'])} | {status} |")
        lines += ["", "</details>", ""]
    return lines


def _breakdown(stage: StageResult, max_cases: int) -> list[str]:
    """Collapsible table of the stage's metrics per category and per tag (after the baseline's value when it moved): at
    most ``max_cases`` groups, as for cases."""
    groups = stage.get("breakdown", {})
    every = [(dimension, group, row) for dimension, rows in groups.items() for group, row in rows.items()]
    shown = every[:max_cases]
    if not shown:
        return []
    names = [m for m in stage.get("metrics", {}) if not m.endswith("_ms") and m != "error_rate"][:6]
    lines = [f"<details><summary>By category and tag{_showing(shown, every)}</summary>", "",
             "| Group | Cases | " + " | ".join(code(m) for m in names) + " |", "|---|---:|" + "---:|" * len(names)]
    for dimension, group, row in shown:
        base = row.get("baseline") or {}
        values = " | ".join(_then_now(m, base.get(m), row["metrics"].get(m)) for m in names)
        lines.append(f"| {cell(dimension)}: {code(group, 40)} | {int(row['n'])} | {values} |")
    return lines + ["", "</details>", ""]


def _then_now(metric: str, baseline: float | None, value: float | None) -> str:
    """A breakdown cell: the value, after the baseline's when it moved ("1.0000 → 0.0000")."""
    if baseline is None or value is None or fmt_delta(metric, value - baseline) == "±0":
        return fmt_value(metric, value)
    return f"{fmt_value(metric, baseline)} → {fmt_value(metric, value)}"


def _age_days(then: str | None, now: str | None) -> int | None:
    from datetime import datetime

    try:
        return max(0, (datetime.fromisoformat(str(now)) - datetime.fromisoformat(str(then))).days)
    except (TypeError, ValueError):
        return None


COMMENT_LIMIT = 65_536  # GitHub refuses a longer issue comment body


def render_comment(report: Report, limit: int = COMMENT_LIMIT, max_cases: int | None = None) -> str:
    """The PR comment, under ``limit`` characters (GitHub's 65,536 for a comment): per-case details shrink first, and
    the comment says so. ``max_cases``: per-case rows a section (default the spec's report.max_cases)."""
    configured = int(report["run"]["max_cases"]) if max_cases is None else max_cases
    for n in dict.fromkeys([configured, 100, 50, 20, 10, 5, 2, 0]):
        if n > configured:
            continue
        body = _render(report, n)
        if n < configured:
            body = body.replace("\n<sub>rag-gate", f"\n_Per-case details cut to {n} a section to fit GitHub's size "
                                "limit: the full list is in report.json._\n\n<sub>rag-gate", 1)
        if len(body) <= limit:
            return body
    footer = body.rstrip("\n").rsplit("\n", 1)[1]
    note = "\n\n_The comment was cut to fit GitHub's size limit; the full report is in report.json._\n\n" + footer + "\n"
    return _cut_between_blocks(body, limit - len(note)) + note


_DETAILS_OPEN = re.compile(r"<details[\s>]")  # <details> and <details open>: the template's (untrusted text has no "<")


def _cut_between_blocks(body: str, room: int) -> str:
    """The longest start of ``body`` within ``room`` characters that ends between blocks: never inside an open
    ``<details>`` (``<details open>`` too) or a fenced block, nor after an alert's first line (``> [!WARNING]``, whose
    text is on the next), so what follows the cut (the note, the footer) still renders and no alert is left empty."""
    kept, used, depth, fenced = 0, 0, 0, False
    lines = body.split("\n")
    for i, line in enumerate(lines):
        used += len(line) + 1
        if used > room:
            break
        if line.startswith("```"):
            fenced = not fenced
        depth += len(_DETAILS_OPEN.findall(line)) - line.count("</details>")
        if depth <= 0 and not fenced and not line.startswith("> [!"):
            kept = i + 1
    return "\n".join(lines[:kept]).rstrip("\n")


SUMMARY_CASES = 200  # per-case rows a section in the job summary, which may be 16 times the size of a comment
SUMMARY_CHARS = 256 * 1024  # GitHub's job summary limit is 1 MiB: 4 bytes a character at most in UTF-8


def render_summary(report: Report) -> str:
    """The job summary: the comment's report with more per-case rows (at least the comment's), under 1 MiB."""
    return render_comment(report, SUMMARY_CHARS, max(SUMMARY_CASES, int(report["run"]["max_cases"])))


def _render(report: Report, max_cases: int) -> str:
    lines = [marker(report["run"]["comment_id"]), *_header(report), *where_it_broke(report), *changes_lines(report)]
    for name, stage in ordered_stages(report):
        lines += _stage_table(name, stage)
        retrieval = report["stages"].get("retrieval")
        lines += _worse_cases(name, stage, max_cases, retrieval.get("reference_k") if retrieval else None)
        lines += answer_check_cases(stage, max_cases) + calibration_lines(stage) + window_lines(stage)
        lines += _group_gates(stage, max_cases)
        lines += _breakdown(stage, max_cases)
        if name == "robustness" and stage["status"] != "skipped":
            lines += robustness_details(stage, max_cases)
        lines += _errored_cases(stage, max_cases)
    lines += render_trend(report)
    page = run_page(report)
    if page:  # checked against the run page's grammar: in the workflow_run job it comes from the event, not the artifact
        lines += [f"Every case, with its passages, answer diff and scores: the HTML report in [this run's artifacts]({page}).", ""]
    tool = report.get("tool", {})
    lines.append(f"<sub>rag-gate {cell(tool.get('version', ''))} · report schema {cell(report.get('schema_version'))}</sub>")
    return "\n".join(lines) + "\n"
