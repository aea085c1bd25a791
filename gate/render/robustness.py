"""The robustness stage in the PR comment: the noise test's setup and the answers distractors turned wrong, the
rejection misses, and the paraphrase and stability tests. Pure; every value from the report is escaped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.core.report import StageResult
from gate.render import rejection_misses
from gate.render.escape import cell, code
from gate.render.variants import variant_lines


def _showing(shown: list[Any], everything: list[Any]) -> str:
    return f" (showing {len(shown)} of {len(everything)})" if len(shown) < len(everything) else ""


def robustness_details(stage: StageResult, max_cases: int) -> list[str]:
    """What misled the model (clean right, noisy wrong), which cases the rejection check caught, and the tests that asked
    the target again (gate.render.variants)."""
    lines: list[str] = []
    noise = _noise_test(stage.get("noise") or {})
    if noise:
        lines += [noise, ""]
    all_flipped = [s for s in stage.get("samples", []) if s.get("flipped")]
    flipped = all_flipped[:max_cases]
    if flipped:
        lines += [f"<details><summary>{len(all_flipped)} answer(s) turned wrong when distractors were added{_showing(flipped, all_flipped)}"
                  "</summary>", "",
                  "| Case | Clean answer | Noisy answer | Distractor it followed |", "|---|---|---|---|"]
        for s in flipped:
            noisy = (s.get("noisy_answer") or "").casefold()
            words = set(noisy.split())
            followed = max(s.get("distractors", []), key=lambda d: len(words & set((d.get("text") or "").casefold().split())),
                           default=None)
            text = followed["text"] if followed else None
            label = (code(followed["id"], 40) + " " if followed and followed["id"] else "") + cell(text or "—", 100)
            lines.append(f"| {code(s['id'], 40)} | {cell(s.get('clean_answer') or '—', 90)} | {cell(s.get('noisy_answer') or '—', 90)} "
                         f"| {label} |")
        lines += ["", "</details>", ""]
    misses = rejection_misses(stage)
    wrong = misses[:max_cases]
    if wrong:
        lines += [f"<details><summary>{len(misses)} rejection miss(es){_showing(wrong, misses)}</summary>", "",
                  "| Case | Type | What happened | Decided by |", "|---|---|---|---|"]
        for r in wrong:
            if r["type"] == "answerable":
                what = "refused an answerable question"
            elif r.get("leaked"):
                what = "leaked " + ", ".join(code(x, 30) for x in r["leaked"])
            else:
                what = "answered instead of refusing: " + cell(r.get("answer") or "", 90)
            lines.append(f"| {code(r['id'], 40)} | {cell(r['type'])} | {what} | {cell(r.get('method', ''))} |")
        lines += ["", "</details>", ""]
    return lines + variant_lines(stage, max_cases)


def _noise_test(noise: Mapping[str, Any]) -> str:
    """The noise test's setup in words ("2 distractor(s) from corpus at the front; correct = offline ≥ 0.3"), from the
    keys it has: each one is optional in the report's schema. Empty when none is there."""
    n, method, threshold = noise.get("distractors"), noise.get("method"), noise.get("threshold")
    what = f"{int(n)} distractor(s)" if n is not None else "distractors"
    what += f" from {cell(noise['source'])}" if "source" in noise else ""
    what += f" at the {cell(noise['position'])}" if "position" in noise else ""
    if method is not None or threshold is not None:
        what += "; correct" + (f" = {cell(method)}" if method is not None else "") + (f" ≥ {float(threshold):g}" if threshold is not None else "")
    known = ("distractors", "source", "position", "method", "threshold")
    return f"Noise test: {what}." if any(k in noise for k in known) else ""
