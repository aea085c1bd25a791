"""What is wrong with a golden set, or lopsided: the findings of ``rag-gate golden check``. Pure.

Every finding has a code, a level (error | warning | info), the case ids it is about and a sentence:

    duplicate_question     error    two cases ask the same question (after normalising case, width, punctuation)
    near_duplicate         warning  two questions share most of their words (Chinese and Japanese: characters)
    unknown_relevant_id    error    a relevant id the corpus file does not hold (at the spec's matching level)
    missing_ground_truth   error    answerable cases without ground_truth while a configured stage reads it
    missing_relevant_texts error    answerable cases without relevant_texts while match.level is text
    pending_review         warning  generated cases (and cases taken from traces) nobody approved yet (runs leave them
                                    out), and what those lack before they can be: relevance labels, ground_truth
    no_out_of_scope        warning  no out_of_scope case: refusals are not tested (also no_adversarial)
    question_mix           warning  a question type's share is more than 10 points from the target mix
    too_few_cases          warning  one case moves a gated metric by more than the gate's max_drop
    uncovered_documents    info     corpus documents no case has as relevant
    unlabelled_questions   info     cases with no question_type that none can be derived for
"""

from __future__ import annotations

import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from gate.core.catalog import did_you_mean
from gate.core.model import GoldenCase
from gate.core.settings import StageSettings, same_id
from gate.core.textmatch import squad_tokens

Level = Literal["error", "warning", "info"]

# The default question-type mix: about 40 % simple facts, 25 % reasoning or multi-hop, 15 % ambiguous, 10 % out of scope, 10 % adversarial
DEFAULT_MIX: dict[str, float] = {"simple": 0.40, "multi_context": 0.25, "ambiguous": 0.15, "out_of_scope": 0.10, "adversarial": 0.10}
MIX_TOLERANCE = 0.10  # points of share a type may stray from the target before it is a finding
ALIASES = {"reasoning": "multi_context", "multi_hop": "multi_context", "multi-hop": "multi_context", "multi_context": "multi_context",
           "fact": "simple", "factual": "simple", "simple": "simple"}
NEAR = 0.85  # similarity of two normalised questions (``similarity``) from which they are near-duplicates
SHOWN = 10  # case ids a finding's sentence names (the JSON lists them all)
REFERENCE_METRICS = {"token_f1", "exact_match", "rouge_l", "answer_correctness", "context_recall", "context_precision",
                     "contextual_recall", "contextual_precision", "factual_correctness", "semantic_similarity"}


class Finding(TypedDict):
    code: str
    level: Level
    cases: list[str]
    message: str


def question_type(case: GoldenCase, to_doc: Callable[[str], str] = same_id) -> str:
    """The case's question type: its own ``question_type`` (aliases folded: reasoning and multi_hop are multi_context),
    else out_of_scope or adversarial from its type, multi_context when its relevant ids span two or more documents,
    else "unlabelled"."""
    if case.question_type:
        label = case.question_type.strip()
        return ALIASES.get(label.lower(), label)
    if not case.answerable:
        return case.type
    relevant = case.relevant  # distinct ids: as many documents when each id is its own (same_id)
    if len(relevant) >= 2 and (to_doc is same_id or len({to_doc(r) for r in relevant}) >= 2):
        return "multi_context"
    return "unlabelled"


def counts(cases: Sequence[GoldenCase], to_doc: Callable[[str], str] = same_id) -> dict[str, Any]:
    """Cases by type, question type, category and tag."""
    return {
        "cases": len(cases),
        "type": dict(Counter(c.type for c in cases)),
        "question_type": dict(Counter(question_type(c, to_doc) for c in cases)),
        "category": dict(Counter(c.category for c in cases if c.category)),
        "tag": dict(Counter(t for c in cases for t in c.tags)),
        "pending_review": sum(1 for c in cases if c.pending_review),
    }


def normalised(question: str) -> str:
    """The question as compared for exact duplicates: NFKC, case folded, punctuation and extra spaces removed."""
    text = unicodedata.normalize("NFKC", question).casefold()
    kept = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text)
    return " ".join(kept.split())


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """How alike two questions' tokens are, from 0 to 1: the better of their order (difflib's ratio on the sequences)
    and their bag of words (2 x the tokens both hold, counted with repeats, over all tokens), so that a question with
    its words reordered ("For a non-member, how much does a single ride cost?") is as alike as one with a word changed."""
    if not a or not b:
        return 0.0
    bag = 2 * sum((Counter(a) & Counter(b)).values()) / (len(a) + len(b))
    import difflib  # only where questions are compared: not on every run's path

    return max(bag, difflib.SequenceMatcher(None, a, b, autojunk=False).ratio())


def duplicates(cases: Sequence[GoldenCase]) -> list[Finding]:
    """Exact duplicates (normalised text), then near-duplicates: questions at least 85 % alike (``similarity``). Only
    pairs that share one of each question's three rarest tokens are compared, so a large set is not compared pair by
    pair."""
    findings: list[Finding] = []
    by_text: dict[str, list[str]] = defaultdict(list)
    for c in cases:
        by_text[normalised(c.question)].append(c.id)
    exact = [ids for ids in by_text.values() if len(ids) > 1]
    for ids in exact:
        findings.append({"code": "duplicate_question", "level": "error", "cases": ids,
                         "message": f"{len(ids)} cases ask the same question: {_named(ids)}"})
    seen_exact = {i for ids in exact for i in ids[1:]}
    tokens = {c.id: squad_tokens(c.question) for c in cases if c.id not in seen_exact}
    frequency = Counter(t for toks in tokens.values() for t in set(toks))
    index: dict[str, list[str]] = defaultdict(list)
    for cid, toks in tokens.items():
        for t in sorted(set(toks), key=lambda t: (frequency[t], t))[:3]:
            index[t].append(cid)
    pairs: set[tuple[str, str]] = set()
    for ids in index.values():
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                pairs.add((a, b) if a < b else (b, a))
    order = {c.id: i for i, c in enumerate(cases)}
    for a, b in sorted(pairs, key=lambda p: (order[p[0]], order[p[1]])):
        ta, tb = tokens[a], tokens[b]
        if not ta or not tb:
            continue
        ratio = similarity(ta, tb)
        if ratio >= NEAR:
            first, second = sorted((a, b), key=order.__getitem__)
            findings.append({"code": "near_duplicate", "level": "warning", "cases": [first, second],
                             "message": f"{first} and {second} ask nearly the same question ({ratio:.0%} of their words alike)"})
    return findings


def needs_ground_truth(stages: StageSettings) -> list[str]:
    """The configured parts of the spec that read ground_truth."""
    needs = []
    reading = sorted({m.name for m in stages.generation.metrics if m.metric in REFERENCE_METRICS}) if stages.generation else []
    if reading:
        needs.append(f"generation metrics {', '.join(reading)}")
    if stages.robustness is not None and stages.robustness.noise is not None:
        needs.append("the robustness noise test")
    return needs


def mix_findings(cases: Sequence[GoldenCase], mix: Mapping[str, float], to_doc: Callable[[str], str]) -> list[Finding]:
    findings: list[Finding] = []
    types = {c.id: question_type(c, to_doc) for c in cases}
    for kind in ("out_of_scope", "adversarial"):
        if not any(c.type == kind for c in cases):
            findings.append({"code": f"no_{kind}", "level": "warning", "cases": [],
                             "message": f"no {kind} case: the robustness stage cannot test "
                                        + ("refusals of questions the corpus cannot answer" if kind == "out_of_scope" else
                                           "resistance to prompt injection and leaks")})
    unlabelled = [cid for cid, t in types.items() if t == "unlabelled"]
    compared = len(unlabelled) * 2 <= len(cases)  # the mix of a mostly unlabelled set says more about the labels than the set
    if unlabelled:
        how = "the mix is compared on the others" if compared else "the mix is compared once at least half are labelled"
        findings.append({"code": "unlabelled_questions", "level": "info", "cases": unlabelled,
                         "message": f"{len(unlabelled)} of {len(cases)} cases have no question_type (simple, multi_context, "
                                    f"ambiguous, ...): {how} ({_named(unlabelled)})"})
    labelled = [t for t in types.values() if t != "unlabelled"]
    if not labelled or not compared:
        return findings
    share = Counter(labelled)
    for kind, target in mix.items():
        if kind in ("out_of_scope", "adversarial") and share.get(kind, 0) == 0:
            continue  # said above
        got = share.get(kind, 0) / len(labelled)
        if abs(got - target) > MIX_TOLERANCE + 1e-9:
            ids = [cid for cid, t in types.items() if t == kind]
            findings.append({"code": "question_mix", "level": "warning", "cases": ids[:SHOWN],
                             "message": f"{kind}: {got:.0%} of the labelled questions ({share.get(kind, 0)} of {len(labelled)}), "
                                        f"target {target:.0%}"})
    return findings


def resolution_findings(cases: Sequence[GoldenCase], stages: StageSettings) -> list[Finding]:
    """Gates that one case can fail: a max_drop (in points) smaller than what one case moves the metric."""
    findings: list[Finding] = []
    answerable = sum(1 for c in cases if c.answerable and not c.pending_review)
    for name in ("retrieval", "generation"):
        n = answerable
        if name == "generation" and stages.generation is not None:
            size = stages.generation.sample.size
            n = min(answerable, int(size)) if size != "all" else answerable
        for metric, gate in stages.gates(name).items():
            drop = gate.get("max_drop") if isinstance(gate, dict) else None
            if not isinstance(drop, (int, float)) or isinstance(drop, bool) or metric.endswith(("latency_ms", "error_rate")):
                continue
            if n and 1 / n > drop + 1e-12:
                findings.append({"code": "too_few_cases", "level": "warning", "cases": [],
                                 "message": f"{name} {metric}: one of the {n} cases moves it by {1 / n:.3f}, more than its "
                                            f"max_drop {drop:g}: a single case fails the gate (80-150 cases make a gate that one case cannot tip)"})
    return findings


def _chunk_documents(known: Sequence[str], separator: str) -> dict[str, str]:
    """document id -> one of its chunk ids, for the corpus ids that are chunks ("policy_2024_031#chunk_7")."""
    out: dict[str, str] = {}
    for d in known:
        if separator in d:
            out.setdefault(d.split(separator, 1)[0], d)
    return out


def _id_hint(rid: str, known: set[str], chunked: Mapping[str, str], stages: StageSettings) -> str:
    """What the id was probably meant to be: a document whose chunks the corpus holds (match.level: document), or the
    closest corpus id."""
    if rid in chunked and stages.match.level != "document":
        return (f": the corpus holds its chunks ({chunked[rid]!r}...); set stages.retrieval.match.level: document to count a "
                "chunk as its document")
    close = did_you_mean(rid, known)
    return f" (did you mean {close!r}?)" if close else ""


def pending_findings(cases: Sequence[GoldenCase], reads_ground_truth: bool) -> list[Finding]:
    """The cases awaiting review (runs leave them out), and what the answerable ones lack before they can be approved:
    relevance labels (a candidate taken from production traces has none, only metadata.suggested_relevant_ids) and
    the ground_truth a configured stage reads."""
    pending = [c for c in cases if c.pending_review]
    if not pending:
        return []
    ids = [c.id for c in pending]
    traced = sum(1 for c in pending if c.metadata.get("source") == "traces")
    lacking = []
    unlabelled = sum(1 for c in pending if c.answerable and not c.relevant and not c.relevant_texts)
    if unlabelled:
        lacking.append(f"{unlabelled} without relevant_doc_ids")
    bare = sum(1 for c in pending if c.answerable and not (c.ground_truth or "").strip())
    if bare and reads_ground_truth:
        lacking.append(f"{bare} without ground_truth")
    said = f" ({traced} from production traces)" if traced else ""
    lack = f"; to approve one, give it what it lacks first ({', '.join(lacking)})" if lacking else ""
    return [{"code": "pending_review", "level": "warning", "cases": ids,
             "message": f"{len(pending)} generated cases{said} await review (metadata.review: pending): runs leave them out "
                        f"until the field is removed or set to approved{lack} ({_named(ids)})"}]


def paraphrase_findings(cases: Sequence[GoldenCase]) -> list[Finding]:
    """A paraphrase that is its question again, or a case's paraphrase given twice (after case and spacing): it tests
    nothing the original does not."""
    same = [c.id for c in cases if any(normalised(p) == normalised(c.question) for p in c.paraphrases)]
    twice = [c.id for c in cases if len({normalised(p) for p in c.paraphrases}) < len(c.paraphrases)]
    out: list[Finding] = []
    if same:
        out.append({"code": "paraphrase_is_question", "level": "warning", "cases": same,
                    "message": f"{len(same)} cases list their own question among their paraphrases ({_named(same)})"})
    if twice:
        out.append({"code": "paraphrase_repeated", "level": "warning", "cases": twice,
                    "message": f"{len(twice)} cases list a paraphrase twice ({_named(twice)})"})
    return out


def check(cases: Sequence[GoldenCase], stages: StageSettings, *, corpus: Iterable[str] | None = None,
          mix: Mapping[str, float] | None = None) -> tuple[list[Finding], dict[str, Any]]:
    """Every finding about ``cases`` for a spec with ``stages`` (its matching level maps chunk ids to document ids when
    it is document); ``corpus``: the corpus file's document ids. (findings, counts)."""
    to_id = stages.match.to_id()
    findings = duplicates(cases)
    if corpus is not None:
        known = list(corpus)
        known_ids = set(known) | {to_id(d) for d in known}
        missing: dict[str, list[str]] = defaultdict(list)
        for c in cases:
            for r in c.relevant:
                if r not in known_ids and to_id(r) not in known_ids:
                    missing[r].append(c.id)
        chunked = _chunk_documents(known, stages.match.separator)
        for rid, ids in missing.items():
            findings.append({"code": "unknown_relevant_id", "level": "error", "cases": ids,
                             "message": f"relevant id {rid!r} is not in the corpus ({_named(ids)}){_id_hint(rid, known_ids, chunked, stages)}"})
        covered = {to_id(r) for c in cases for r in c.relevant} | {r for c in cases for r in c.relevant}
        uncovered = [d for d in dict.fromkeys(known) if d not in covered and to_id(d) not in covered]
        if uncovered:
            findings.append({"code": "uncovered_documents", "level": "info", "cases": [],
                             "message": f"{len(uncovered)} of {len(set(known))} corpus documents are relevant to no case "
                                        f"({_named(uncovered)})"})
    needs = needs_ground_truth(stages)
    run = [c for c in cases if not c.pending_review]  # a pending case is completed by its reviewer: pending_review says what it lacks
    bare = [c.id for c in run if c.answerable and not (c.ground_truth or "").strip()]
    if needs and bare:
        findings.append({"code": "missing_ground_truth", "level": "error", "cases": bare,
                         "message": f"{len(bare)} answerable cases have no ground_truth, which {' and '.join(needs)} read "
                                    f"({_named(bare)})"})
    if stages.match.by_text:
        textless = [c.id for c in run if c.answerable and not c.relevant_texts]
        if textless:
            findings.append({"code": "missing_relevant_texts", "level": "error", "cases": textless,
                             "message": f"{len(textless)} answerable cases have no relevant_texts, which match.level text "
                                        f"reads ({_named(textless)})"})
    findings += pending_findings(cases, bool(needs)) + paraphrase_findings(cases)
    findings += mix_findings(cases, DEFAULT_MIX if mix is None else mix, to_id)
    findings += resolution_findings(cases, stages)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f["level"]])  # stable: within a level, in the order found
    return findings, counts(cases, to_id)
