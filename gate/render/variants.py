"""The robustness stage's tests that ask the target again, in the PR comment and the console: the paraphrase test's
lost cases with the rewrite that lost them, the stability test's unstable cases with their answers. Pure. The
questions, rewrites and answers come from the golden set, the judge and the target: untrusted text, escaped by
gate.render.escape before it is shown."""

from __future__ import annotations

from typing import Any

from gate.core.report import StageResult
from gate.render.escape import cell, code


def _num(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "–"


def _showing(shown: int, everything: int) -> str:
    return f" (showing {shown} of {everything})" if shown < everything else ""


def paraphrase_lines(stage: StageResult, max_cases: int) -> list[str]:
    """The paraphrase test: where the rewrites came from, each metric on the originals and the rewrites, and the cases
    found on the original but lost on a rewrite."""
    p = stage.get("paraphrase")
    if not p:
        return []
    cases = p.get("cases", [])
    lines = [f"Paraphrase test: {len(cases)} sampled case(s), {int(p['given'])} rewrite(s) from the golden set, {int(p['generated'])} "
             f"written by the judge ({int(p['cached'])} from the cache), {cell(p['style'])}; found = a relevant id within the top "
             f"{int(p['k'])}; {int(p['target_calls'])} target call(s).", "",
             "| Metric | Originals | Rewrites | Gap |", "|---|---:|---:|---:|"]
    for metric, m in p.get("metrics", {}).items():
        lines.append(f"| {code(metric, 40)} | {_num(m['original'])} | {_num(m['rewrites'])} | {_num(m['gap'])} |")
    lines.append("")
    lost = [c for c in cases if c.get("lost")]
    shown = lost[:max_cases]
    if shown:
        lines += [f"<details><summary>{len(lost)} case(s) found on the original question, lost on a rewrite{_showing(len(shown), len(lost))}"
                  "</summary>", "", "| Case | Question | Rewrite that lost it | From |", "|---|---|---|---|"]
        for c in shown:
            for r in [r for r in c.get("rewrites", []) if r.get("found") is False][:3]:
                lines.append(f"| {code(c['id'], 40)} | {cell(c['question'], 90)} | {cell(r['text'], 90)} | {cell(r['source'])} |")
        lines += ["", "</details>", ""]
    return lines


def stability_lines(stage: StageResult, max_cases: int) -> list[str]:
    """The stability test: how often it asked, the flip rate's interval, and the unstable cases with their answers."""
    s = stage.get("stability")
    if not s:
        return []
    interval: list[float | None] = [*s.get("flip_interval", []), None, None]
    low, high = interval[0], interval[1]
    lines = [f"Stability test: {len(s.get('cases', []))} sampled question(s), each asked {int(s['repeats'])} more time(s) "
             f"({int(s['target_calls'])} target call(s)); answers compared by {cell(s['method'])}; correctness_flip_rate 95 % interval "
             f"{_num(low)} – {_num(high)}.", ""]
    unstable = set(s.get("unstable", []))
    rows = [c for c in s.get("cases", []) if c["id"] in unstable]
    shown = rows[:max_cases]
    if shown:
        lines += [f"<details><summary>{len(rows)} unstable case(s){_showing(len(shown), len(rows))}</summary>", "",
                  "| Case | Answers, one per ask | Correct | Answers agree | Top-k overlap |", "|---|---|---|---:|---:|"]
        for c in shown:
            answers = " · ".join(cell(a if a is not None else "(failed)", 60) for a in c.get("answers", [])[:4])
            correct = " ".join("✓" if x else "✗" if x is False else "?" for x in c.get("correct", []))
            lines.append(f"| {code(c['id'], 40)} | {answers} | {correct or '–'} | {_num(c.get('agreement'))} | {_num(c.get('jaccard'))} |")
        lines += ["", "</details>", ""]
    return lines


def variant_lines(stage: StageResult, max_cases: int) -> list[str]:
    return paraphrase_lines(stage, max_cases) + stability_lines(stage, max_cases)


def variant_console(stage: StageResult) -> list[str]:
    """The console's lines: the lost and unstable cases, a few of each."""
    out = []
    p = stage.get("paraphrase")
    for c in [c for c in (p["cases"] if p else []) if c.get("lost")][:5]:
        lost = next((r["text"] for r in c.get("rewrites", []) if r.get("found") is False), "")
        out.append(f"  lost on a rewrite {c['id']}: {lost[:100]!r}")
    s = stage.get("stability")
    for cid in (s["unstable"] if s else [])[:5]:
        out.append(f"  unstable {cid}")
    return out
