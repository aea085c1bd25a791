"""Same-run paired judging: the reference runs a judge gate compares with, which cases pair up, and what the pairs
prove. Pure.

A judge wobbles from call to call, drifts from week to week, is harsher on some days than others and changes when
its engine or prompt does. Comparing this run's scores with scores a reference run got from last month's judge
mixes all of that into the delta. So a judge gate compares this run with one reference run (the baseline for
``max_drop``; the oldest run of the window for ``trend``) case by case, on the cases both runs judged:

* a case whose judge input is the same on both sides (same answer and, when the metric reads them, same passages)
  would get the same score: its delta is exactly 0 and costs no call;
* a changed case is judged on both sides in this run, the reference's answer again beside the new one. A shift
  shared by every call of the run, a drifted or upgraded judge, a bias tied to the case: each cancels in the delta.

References keep, per judged case, the answer and passages by content address (``text_id``), the texts once each in
a table (``texts``) however many cases and runs share them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gate.core.report import CaseResult, JudgeInfo, MetricPairs, OutputRef, Pairing, StoredRun
from gate.core.stats import PairedResult, drop_test

MIN_PAIRS = 10  # changed pairs below which a mean-drop test is "insufficient evidence"
POWER = 0.8  # the power at which the smallest detectable drop is stated


def text_id(text: str) -> str:
    """A text's content address: 24 hex digits (96 bits) of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def output_ref(answer: str | None, contexts: Sequence[str], texts: dict[str, str], question: str | None = None) -> OutputRef:
    """The output's text ids (and the question's, for a traces run); each text goes into ``texts``."""
    ids = []
    for passage in contexts:
        ids.append(text_id(passage))
        texts[ids[-1]] = passage
    answer_id = None
    if answer is not None:
        answer_id = text_id(answer)
        texts[answer_id] = answer
    ref: OutputRef = {"answer": answer_id, "contexts": ids}
    if question is not None:
        ref["question"] = text_id(question)
        texts[ref["question"]] = question
    return ref


def referenced(samples: Iterable[CaseResult]) -> set[str]:
    """The text ids the cases' outputs refer to."""
    ids: set[str] = set()
    for s in samples:
        out = s.get("output")
        if out:
            ids.update(out["contexts"])
            if out["answer"]:
                ids.add(out["answer"])
            if "question" in out:
                ids.add(out["question"])
    return ids


@dataclass(frozen=True)
class StoredOutput:
    """A judged case's output as a paired run kept it: its answer and contexts, resolved from the texts table."""

    answer: str
    contexts: tuple[str, ...]


@dataclass(frozen=True)
class PairedRun:
    """One run a judge gate compares with: its stored figures, and its judged outputs when it kept them."""

    key: str  # "baseline" | "trend:N"
    label: str  # the run in words
    commit: str | None
    created_at: str | None
    metrics: Mapping[str, float]  # the stage's stored values
    scores: Mapping[str, Mapping[str, float]]  # case id -> metric -> stored score
    outputs: Mapping[str, StoredOutput] = field(default_factory=dict)  # case id -> its output; empty: kept none
    judge: JudgeInfo | None = None

    @property
    def against(self) -> str:
        return self.key.split(":")[0]


def paired_run(key: str, label: str, doc: StoredRun, stage: str, texts: Mapping[str, str]) -> PairedRun | None:
    """The stage of a baseline or history entry as a PairedRun (its outputs resolved through ``texts``, the
    tables of every document read); None when the run did not measure the stage."""
    stored = doc["stages"].get(stage)
    if stored is None:
        return None
    outputs: dict[str, StoredOutput] = {}
    scores: dict[str, dict[str, float]] = {}
    for case in stored.get("samples", []):
        scores[case["id"]] = dict(case["metrics"])
        out = case.get("output")
        if not out or not out["answer"] or out["answer"] not in texts or any(c not in texts for c in out["contexts"]):
            continue  # kept no output (an older rag-gate), or its texts were lost: this case cannot be re-judged
        outputs[case["id"]] = StoredOutput(texts[out["answer"]], tuple(texts[c] for c in out["contexts"]))
    return PairedRun(key, label, doc["commit"], doc["created_at"], dict(stored["metrics"]), scores, outputs, stored.get("judge"))


def judge_change(before: JudgeInfo | None, now: JudgeInfo | None) -> str | None:
    """What changed in the judge between a reference run and this one, in words; None if nothing (or unknown)."""
    if not before or not now:
        return None
    changes = []
    if before["model"] != now["model"]:
        changes.append(f"model {before['model']} → {now['model']}")
    for engine, version in sorted(now["engines"].items()):
        was = before["engines"].get(engine)
        if was is not None and was != version:
            changes.append(f"{engine} {was} → {version}")
    prompts_before, prompts_now = before.get("prompts", {}), now.get("prompts", {})
    reworded = sorted(m for m, fp in prompts_now.items() if prompts_before.get(m, fp) != fp)
    if reworded:
        changes.append(f"prompt of {', '.join(reworded)}")
    return "; ".join(changes) or None


# -------------------------------------------------------------------------------------------- evidence


def drops_of(pairs: MetricPairs, higher_is_better: bool) -> list[float]:
    """Every pair's drop (reference - current, in the "worse" direction): the changed pairs' judged deltas and a 0 for
    each unchanged pair; errored pairs are left out (they are counted and listed)."""
    sign = 1.0 if higher_is_better else -1.0
    judged = [sign * (c["reference"] - c["current"]) for c in pairs["cases"]
              if c["reference"] is not None and c["current"] is not None]
    return judged + [0.0] * (pairs["pairs"] - pairs["changed"])


def evidence(pairs: MetricPairs, higher_is_better: bool) -> PairedResult:
    """The paired test over every pair of one metric."""
    return drop_test(drops_of(pairs, higher_is_better))


def detectable_drop(pairs: MetricPairs, higher_is_better: bool, confidence: float, power: float = POWER) -> float | None:
    """The smallest drop on every case that a run with this many pairs would detect, at ``confidence`` with ``power``,
    given the spread the changed pairs show (the judge's noise, both sides): (z_conf + z_power) * sd / sqrt(pairs).
    None with fewer than two judged changed pairs (no spread to go by)."""
    sign = 1.0 if higher_is_better else -1.0
    judged = [sign * (c["reference"] - c["current"]) for c in pairs["cases"]
              if c["reference"] is not None and c["current"] is not None]
    if len(judged) < 2 or pairs["pairs"] == 0:
        return None
    import statistics  # only where the pairs are sized

    z = statistics.NormalDist()
    return (z.inv_cdf(confidence) + z.inv_cdf(power)) * statistics.stdev(judged) / math.sqrt(pairs["pairs"])


def case_drops(pairs: MetricPairs, higher_is_better: bool) -> list[tuple[str, float, float, float, bool]]:
    """(case id, drop, reference, current, confirmed) of every changed pair with both sides scored, worst first; a
    confirmed pair's figures are the means of its two judgings."""
    sign = 1.0 if higher_is_better else -1.0
    rows = []
    for c in pairs["cases"]:
        if c["reference"] is None or c["current"] is None:
            continue
        ref, cur = c.get("confirmed") or (c["reference"], c["current"])
        rows.append((c["id"], sign * (ref - cur), ref, cur, "confirmed" in c))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def summary(pairing: Pairing) -> str:
    """One sentence for the comment: what was paired with what, and how."""
    counts = {m: (p["pairs"], p["changed"]) for m, p in pairing["metrics"].items()}
    n, changed = max(counts.values(), default=(0, 0))
    if pairing["method"] != "same run":
        return f"Compared with {pairing['label']} on its stored scores: {pairing.get('note', '')}".rstrip(": ")
    cached = pairing.get("cached", 0)
    fresh = f"{pairing['judgings']} new judging{'s' if pairing['judgings'] != 1 else ''} of the reference's side"
    if cached:
        fresh += f"; {cached} changed pair{'s' if cached != 1 else ''} from the pair cache, judged together by an earlier run"
    text = (f"Compared with {pairing['label']}: {n} case{'s' if n != 1 else ''} paired, {changed} with a changed answer or passages, "
            f"both sides judged in {'one' if cached else 'this'} run ({fresh})")
    if pairing["added"] or pairing["removed"]:
        text += (f"; {len(pairing['added'])} case(s) new since the reference{_ids(pairing['added'])}, "
                 f"{len(pairing['removed'])} removed from the golden set{_ids(pairing['removed'])}")
    return text + "."


def _ids(ids: Sequence[str], shown: int = 10) -> str:
    """ " (a, b, c and 4 more)" for a sentence; empty for no id."""
    if not ids:
        return ""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return f" ({', '.join(ids[:shown])}{more})"
