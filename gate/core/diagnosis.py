"""Where it broke: a code for every case that got worse than the baseline or fails on its own, from the evidence the
run holds, and one line per layer that moved, with the cheapest next step. Pure.

The layers in the order a team should look at them, the cheapest first: the corpus (a document missing or not
indexed), chunking and retrieval (a relevant passage that left the top k or ranked lower), the prompt and the model
(an answer that invents or leaves out), refusals, the answers' form.

    corpus_missing   a relevant id this run retrieved at no rank, nor the baseline (or, with --corpus, not in it)
    not_retrieved    a relevant passage left the top k
    ranked_lower     a relevant passage is still in the top k, lower
    unfaithful       retrieval held; a faithfulness-like score fell
    incomplete       retrieval held; keyword coverage or a correctness score fell
    misled_by_noise  a correct answer turned wrong when distractors were added
    over_refusal     an answerable question was refused
    missed_refusal   an out-of-scope or adversarial question was answered
    format_broken    an answer check failed (its form: a heading, JSON, length, a phrase)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from gate.core.catalog import FAITHFULNESS_LIKE
from gate.core.report import CaseDiagnosis, DiagnosisInfo, LayerSummary

# code -> layer, in the order a case is given its first code (the layer to look at first wins)
CODES: dict[str, str] = {
    "corpus_missing": "corpus", "not_retrieved": "retrieval", "ranked_lower": "retrieval", "unfaithful": "generation",
    "incomplete": "generation", "misled_by_noise": "robustness", "over_refusal": "refusal", "missed_refusal": "refusal",
    "format_broken": "format",
}
LAYERS = ("corpus", "retrieval", "generation", "robustness", "refusal", "format")
NEXT_STEP = {
    "corpus": "check the corpus and the index first (documents added since the last re-index, documents missing)",
    "retrieval": "look at chunking and the reranker before the prompt",
    "generation": "look at the prompt (what it asks the model to keep to the passages), the model last",
    "robustness": "tell the model in the prompt to prefer the passages that answer the question; then reranking",
    "refusal": "look at the prompt's refusal rules and the retrieval threshold",
    "format": "look at the prompt's output format and the model's version (a model upgrade changes form)",
}
CONTEXT_JUDGED = ("context_precision", "context_recall", "context_relevancy")  # a judge's view of the passages
CORRECTNESS_LIKE = ("keyword_coverage", "answer_correctness", "ragas/answer_correctness", "deepeval/answer_correctness", "token_f1",
                    "rouge_l", "exact_match")


def _retrieval_code(lost: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The retrieval layer's code of a case from the relevant ids that lost rank against the reference."""
    left = [x for x in lost if x.get("left_top_k")]
    if left:
        to = left[0].get("to")
        return "not_retrieved", f"{left[0]['id']} fell from rank {left[0]['from']} to {to if to is not None else 'none (not retrieved)'}"
    lower = [x for x in lost if x.get("to") is not None]
    if lower:
        return "ranked_lower", f"{lower[0]['id']} fell from rank {lower[0]['from']} to {lower[0]['to']}"
    if lost:  # below the top k before, and now not retrieved at all
        return "ranked_lower", f"{lost[0]['id']} fell from rank {lost[0]['from']} (below the top k) to none (not retrieved)"
    return None


def never_found(samples: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]] = ()) -> dict[str, list[str]]:
    """case id -> its relevant ids, for the cases none of whose relevant ids this run retrieved at any rank, nor the
    reference (the baseline's retrieval samples) where it holds the case: a case that fails on its own at every depth."""
    before = {r["id"]: r.get("relevant_ranks", {}) for r in reference}
    out: dict[str, list[str]] = {}
    for s in samples:
        ranks = s.get("relevant_ranks")
        if not ranks or any(ranks.values()):  # a rank found (ranks are 1-based: a found one is true, None is not)
            continue
        if any(before.get(s["id"], {}).get(rid) is not None for rid in ranks):
            continue  # the baseline found it: a loss of rank, said by the worse cases
        out[s["id"]] = sorted(ranks)
    return out


def _corpus_code(ids: Sequence[str], corpus: Collection[str] | None) -> tuple[str, str]:
    """A case none of whose relevant ids any run retrieved: missing from the corpus (or from the index), or, when the
    corpus holds them all, a retrieval failure."""
    shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    if corpus is None:
        return "corpus_missing", f"{shown} retrieved at no rank by this run or the baseline (not in the index?)"
    absent = [i for i in ids if i not in corpus]
    if absent:
        return "corpus_missing", f"{', '.join(absent[:3])} not in the corpus, retrieved at no rank"
    return "not_retrieved", f"{shown} in the corpus but retrieved at no rank by this run or the baseline"


def _answer_code(drops: Mapping[str, Sequence[float]]) -> tuple[str, str] | None:
    """The generation layer's code of a case from the per-case scores that fell."""
    faith = next((m for m in drops if m in FAITHFULNESS_LIKE), None)
    if faith is not None:
        before, now = drops[faith]
        return "unfaithful", f"{faith} {before:.2f} → {now:.2f}"
    if "noisy_score" in drops and "clean_score" not in drops:  # the noise test: right alone, worse with distractors
        before, now = drops["noisy_score"]
        return "misled_by_noise", f"noisy_score {before:.2f} → {now:.2f}, clean_score held"
    judged_context = next((m for m in drops if m.rpartition("/")[2] in CONTEXT_JUDGED), None)
    if judged_context is not None:  # the judge says the passages got worse: a retrieval matter
        before, now = drops[judged_context]
        code = "not_retrieved" if judged_context.endswith("context_recall") else "ranked_lower"
        return code, f"{judged_context} {before:.2f} → {now:.2f} (judged)"
    # check_pass_rate is the answers' form: format_broken, from the checks that failed (with their evidence)
    complete = next((m for m in drops if m in CORRECTNESS_LIKE), None) or next((m for m in drops if m != "check_pass_rate"), None)
    if complete is not None:  # coverage, correctness, or any other score of the answer that fell
        before, now = drops[complete]
        return "incomplete", f"{complete} {before:.2f} → {now:.2f}"
    return None


class Found(NamedTuple):
    """One case's diagnosis: its code, the evidence, and whether it moved against the baseline (a case that got worse,
    or one that fails on its own where the baseline did not, or cannot say)."""

    code: str
    evidence: str
    moved: bool = True


def _fell(base: Mapping[str, Any] | None, now: Mapping[str, Any], metric: str, higher_is_better: bool = True) -> bool:
    """Whether a stage's metric got worse than the baseline's (True when this run has it and the baseline cannot say)."""
    before, value = (base or {}).get("metrics", {}).get(metric), now.get("metrics", {}).get(metric)
    if value is None:  # this run has no such figure: nothing of it moved
        return False
    if before is None:
        return True
    return bool(value < before - 1e-9) if higher_is_better else bool(value > before + 1e-9)


def _on_their_own(stages: Mapping[str, Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Found]]:
    """The cases that fail on their own: an answer check failed, an answer was misled by distractors, a refusal was
    wrong; each moved unless the baseline shows the same."""
    out: list[tuple[str, Found]] = []
    gen, rob = stages.get("generation", {}), stages.get("robustness", {})
    before = {s["id"]: s.get("metrics", {}) for s in base.get("generation", {}).get("samples", [])}
    for row in gen.get("checks", {}).get("cases", []):
        if row.get("failed"):
            first = row["failed"][0]
            moved = before.get(row["id"], {}).get("check_pass_rate") != 0.0
            out.append((row["id"], Found("format_broken", f"{first['check']}: {first['evidence']}", moved)))
    misled = _fell(base.get("robustness"), rob, "noise_robustness")
    out += [(s["id"], Found("misled_by_noise", "correct from its own passages, wrong with distractors", misled))
            for s in rob.get("samples", []) if s.get("flipped")]
    over = _fell(base.get("robustness"), rob, "false_rejection_rate", higher_is_better=False)
    missed = _fell(base.get("robustness"), rob, "rejection_rate") or _fell(base.get("robustness"), rob, "adversarial_pass_rate")
    for r in rob.get("rejection", {}).get("cases", []):
        if r.get("error") or "refused" not in r:
            continue
        if r.get("type") == "answerable" and r["refused"]:
            out.append((r["id"], Found("over_refusal", f"refused ({r.get('phrase') or r.get('method')})", over)))
        elif r.get("type") in ("out_of_scope", "adversarial") and not r.get("passed", r["refused"]):
            out.append((r["id"], Found("missed_refusal", "answered instead of refusing" if not r["refused"] else "leaked a canary", missed)))
    return out


def diagnose(stages: Mapping[str, Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]] | None = None,
             corpus: Collection[str] | None = None) -> dict[str, Found]:
    """case id -> its diagnosis, for every case that got worse (the stages' worse_cases) or fails on its own (nothing
    relevant retrieved at any rank, a check failed, a refusal wrong, an answer misled). ``base``: the baseline's stages
    (None: no baseline, every finding is new); ``corpus``: the corpus's ids, when given. A case gets the code of the
    first layer that explains it, a layer that moved before one that did not."""
    base = base or {}
    found: dict[str, list[Found]] = {}

    def add(case_id: str, got: Found | None) -> None:
        if got is not None:
            found.setdefault(case_id, []).append(got)

    held = {s["id"] for s in base.get("retrieval", {}).get("samples", [])}
    for case_id, ids in never_found(stages.get("retrieval", {}).get("samples", []), base.get("retrieval", {}).get("samples", [])).items():
        add(case_id, Found(*_corpus_code(ids, corpus), moved=case_id not in held))  # a new case, or no baseline
    for w in stages.get("retrieval", {}).get("worse_cases", []):
        got = _retrieval_code(w.get("lost", []))
        add(w["id"], Found(*got) if got else None)
    for name in ("generation", "robustness"):
        for w in stages.get(name, {}).get("worse_cases", []):
            got = _retrieval_code(w.get("retrieval", [])) or _answer_code(w.get("drops", {}))
            add(w["id"], Found(*got) if got else None)
    for case_id, f in _on_their_own(stages, base):
        add(case_id, f)
    return {cid: min(codes, key=lambda c: (not c.moved, order_of(c.code))) for cid, codes in found.items()}


def layer_lines(codes: Mapping[str, Found]) -> list[dict[str, Any]]:
    """One entry per layer that moved, in the order to look at them: its cases, its codes, the next step."""
    out = []
    for layer in LAYERS:
        mine = {cid: f.code for cid, f in codes.items() if CODES[f.code] == layer and f.moved}
        if mine:
            counts = Counter(mine.values())
            out.append({"layer": layer, "cases": sorted(mine), "codes": dict(sorted(counts.items(), key=lambda kv: order_of(kv[0]))),
                        "next_step": NEXT_STEP[layer]})
    return out


def diagnosis_info(stages: Mapping[str, Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]] | None = None,
                   corpus: Collection[str] | None = None, k: int | None = None) -> DiagnosisInfo | None:
    """What report.json keeps of where it broke: every diagnosed case, and one entry per layer that moved with the
    comment's line; None when no case got worse or failed. ``base``: the baseline's stages."""
    codes = diagnose(stages, base, corpus)
    if not codes:
        return None
    cases: list[CaseDiagnosis] = [{"id": cid, "code": f.code, "layer": CODES[f.code], "evidence": f.evidence, "moved": f.moved}
                                  for cid, f in sorted(codes.items(), key=lambda kv: (order_of(kv[1].code), kv[0]))]
    layers: list[LayerSummary] = [{**entry, "line": layer_sentence(entry, k)} for entry in layer_lines(codes)]  # type: ignore[typeddict-item]
    return {"cases": cases, "layers": layers}


def order_of(code: str) -> int:
    return list(CODES).index(code)


def layer_sentence(entry: Mapping[str, Any], k: int | None) -> str:
    """The layer's line for the comment: "retrieval: 7 cases lost their relevant passage (5 dropped out of the top 5,
    2 ranked lower) → look at chunking and the reranker before the prompt"."""
    codes, n = entry["codes"], len(entry["cases"])
    cases = f"{n} case{'s' if n != 1 else ''}"
    parts = {
        "corpus_missing": f"{codes.get('corpus_missing', 0)} with no relevant document retrieved by any run",
        "not_retrieved": f"{codes.get('not_retrieved', 0)} dropped out of the top {k or 'k'}",
        "ranked_lower": f"{codes.get('ranked_lower', 0)} ranked lower",
        "unfaithful": f"{codes.get('unfaithful', 0)} less faithful to their passages",
        "incomplete": f"{codes.get('incomplete', 0)} less complete",
        "misled_by_noise": f"{codes.get('misled_by_noise', 0)} misled by distractors",
        "over_refusal": f"{codes.get('over_refusal', 0)} answerable but refused",
        "missed_refusal": f"{codes.get('missed_refusal', 0)} answered where they should refuse",
        "format_broken": f"{codes.get('format_broken', 0)} failed an answer check",
    }
    detail = ", ".join(parts[c] for c in codes)
    what = {"corpus": "miss a document", "retrieval": "lost their relevant passage", "generation": "answered worse",
            "robustness": "were misled", "refusal": "refused wrongly", "format": "broke the answers' form"}[entry["layer"]]
    return f"{entry['layer']}: {cases} {what} ({detail}) → {entry['next_step']}"
