"""The readable console report: verdict line and one aligned table per stage. Pure.

The console is a CI job's log, where a line that starts with ``::`` (after blanks) is a workflow command and
``##[`` anywhere in a line is one too (GitHub's runner reads both, on stdout and stderr, and ends a line at CR
as well as LF). Untrusted text (answers, ids, error bodies, reasons) may carry either: ``log_safe`` makes every
line inert, and the whole report goes through it."""

from __future__ import annotations

import re
import shlex

from gate.core.report import Report, StageResult
from gate.render import VERDICT_TITLE, fmt_delta, fmt_value, gate_counts, metric_rows, ordered_stages, rejection_miss, rejection_misses
from gate.render.calibration import calibration_console
from gate.render.changes import changes_console
from gate.render.traces import traces_line
from gate.render.variants import variant_console

_MARK = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "skipped": "SKIP", "": ""}


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


_LINE_ENDS = re.compile(r"\r\n|\r|\n")


def log_safe(text: str) -> str:
    """Text that starts no workflow command in a CI log: CRs end lines here too, a line that would start with ``::``
    is shown behind ``| ``, and ``##[`` becomes ``## [``. Lines that need none of it are left as they are."""
    lines = _LINE_ENDS.split(text)
    return "\n".join(("| " + ln if ln.lstrip().startswith("::") else ln).replace("##[", "## [") for ln in lines)


def _robustness_failures(stage: StageResult, written: str | None, limit: int = 10) -> list[str]:
    """The cases behind failed robustness gates: answers the distractors turned wrong, and the rejection misses."""
    out: list[str] = []
    flipped = [s for s in stage.get("samples", []) if s.get("flipped")]
    if flipped:
        out.append(f"  {len(flipped)} answer(s) turned wrong when distractors were added: "
                   + ", ".join(s["id"] for s in flipped[:limit]) + (" ..." if len(flipped) > limit else ""))
    misses = rejection_misses(stage)
    for r in misses[:limit]:
        out.append(f"  rejection miss {r['id']} ({r['type']}): {rejection_miss(r)} (decided by {r.get('method', '?')})")
    if len(misses) > limit:
        out.append(f"  ... {len(misses) - limit} more rejection misses in the report")
    if (flipped or misses) and written and written != "-":
        out.append(f"  (rag-gate show CASE_ID --report {shlex.quote(written)}: one case in full)")
    elif flipped or misses:
        out.append("  (run with --report PATH, then rag-gate show CASE_ID --report PATH: one case in full)")
    return out


def _check_failures(stage: StageResult, limit: int = 5) -> list[str]:
    """The answers that failed an answer check, the first few with the evidence."""
    failed = [r for r in stage.get("checks", {}).get("cases", []) if r.get("failed")]
    if not failed:
        return []
    out = [f"  {len(failed)} answer(s) failed an answer check: " + ", ".join(r["id"] for r in failed[:20]) + (" ..." if len(failed) > 20 else "")]
    for r in failed[:limit]:
        first = r["failed"][0]
        out.append(f"    {r['id']}: {first['check']}: {first['evidence']}")
    return out


def render_console(report: Report, written: str | None = None) -> str:
    out: list[str] = []
    for name, stage in ordered_stages(report):
        out.append(f"{name} [{_MARK[stage['status']]}]")
        if stage["status"] == "skipped":
            out += [f"  skipped: {stage.get('reason', '')}", ""]
            continue
        rows = [
            [r["metric"], fmt_value(r["metric"], r["baseline"]), fmt_value(r["metric"], r["value"]),
             fmt_delta(r["metric"], r["delta"]), r["rule"] or "-", _MARK[r["status"]]]
            for r in metric_rows(stage)
        ]
        out += ["  " + x for x in _table(["metric", "baseline", "this run", "delta", "gate", "status"], rows, {1, 2, 3})]
        for name, reason in stage.get("not_evaluated", {}).items():
            out.append(f"  {name}: {reason}")
        for w in stage.get("warnings", []):
            out.append(f"  WARNING {w}")
        for g in stage.get("gates", []):
            said = g["status"] == "skipped" and g["metric"] in stage.get("not_evaluated", {})  # its reason is above
            if g["status"] in ("fail", "error", "skipped") and not said:
                out.append(f"  {_MARK[g['status']]} {g['metric']}: {g['reason'] or g['status']}")
        worse = stage.get("worse_cases", [])
        if worse:
            out.append(f"  {len(worse)} case(s) got worse than the baseline: {', '.join(w['id'] for w in worse[:10])}"
                       + (" ..." if len(worse) > 10 else ""))
        out += _check_failures(stage)
        if name == "robustness" and any(g["status"] == "fail" for g in stage.get("gates", [])):
            out += _robustness_failures(stage, written)
        if name == "robustness":
            out += variant_console(stage)
        errored = [s for s in stage.get("samples", []) if s.get("error")]
        for s in errored[:5]:
            out.append(f"  errored {s['id']}: {s['error']}")
        if len(errored) > 5:
            out.append(f"  ... {len(errored) - 5} more errored cases in the report")
        out.append("")
    b = report.get("baseline", {})
    if b.get("mismatch"):
        out.append(f"warning: the baseline was made from a different {', '.join(b['mismatch'])} (on_mismatch: {b.get('on_mismatch')})")
    elif report.get("traces"):
        out.append(traces_line(report, plain=True) or "")
    elif not b.get("found"):
        out.append(f"note: no baseline at {b.get('path')}; max_drop gates skipped (create one with `rag-gate baseline update`)")
    staged = {w for st in report.get("stages", {}).values() for w in st.get("warnings", [])}
    out += [f"warning: {w}" for w in report.get("warnings", []) if w not in staged]
    for note in report.get("target", {}).get("notes", []):
        out.append(f"note: {note}")
    if report.get("run", {}).get("shards"):
        out.append(f"note: merged from {report['run']['shards']} shards")
    for err in report.get("errors", []):
        out.append(f"error: {err}")
    out += changes_console(report) + [x for st in report.get("stages", {}).values() for x in calibration_console(st)]
    out += [f"where it broke: {entry['line']}" for entry in report.get("diagnosis", {}).get("layers", [])]
    out.append(_verdict_line(report))
    return log_safe("\n".join(out) + "\n")


def _verdict_line(report: Report) -> str:
    """The last line: the gates counted (a gate errors when its figure could not be computed), and the cases the
    target failed on, when there were any (the error-rate gate may let them through)."""
    c = gate_counts(report)
    gates = sum(c.values())
    line = (f"rag-gate {VERDICT_TITLE[report['verdict']]}: {gates} gate{'' if gates == 1 else 's'}: {c['pass']} passed, "
            f"{c['fail']} failed, {c['error']} errored, {c['skipped']} skipped")
    target = report.get("target", {})
    errors, calls = target.get("errors") or 0, target.get("calls") or 0
    if errors:
        line += f"; {errors} of {calls} case{'' if calls == 1 else 's'} errored at the target"
    return line + f" (exit {report['exit_code']})"
