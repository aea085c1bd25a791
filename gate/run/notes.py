"""What the report says about a run beside its figures: lines of a results file that match no case, scores out of
order, answers without passage text, generated cases left out, and how far a run got when its time ran out."""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gate.config.spec import Spec
from gate.core.model import GoldenCase, TargetOutput
from gate.core.report import StageMeasurement
from gate.deadline import REACHED, Deadline

if TYPE_CHECKING:
    from gate.run.load import Loaded

try:  # the two loops below in C, where gate.core._native is built (tests/unit/test_native.py holds them to these)
    from gate.core._native import near_ids as _near_ids_c
    from gate.core._native import unsorted_scores as _unsorted_c
except ImportError:
    _near_ids_c = _unsorted_c = None



def unsorted_scores_note(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> list[str]:
    """A note when retrieved lists carry scores that are not in descending order: rag-gate ranks by list order (the
    order the RAG system uses), trec_eval by score, so the two would disagree on those cases."""
    count, first = (_unsorted_c or unsorted_scores)(cases, outputs)
    if not count:
        return []
    return [f"{count} case(s) list passages whose scores are not in descending order (first: {first}); "
            "rag-gate ranks by the order of the list, trec_eval by score: sort the list if the scores are the ranking"]


def target_notes(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput], unmatched: Sequence[int]) -> list[str]:
    """What the report says about the target's outputs: results-file lines that match no case, unsorted scores."""
    notes = [f"{len(unmatched)} lines of the results file match no golden case (first at line {unmatched[0]})"] if unmatched else []
    return notes + unsorted_scores_note(cases, outputs) + near_ids_note(cases, outputs)


def unsorted_scores(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> tuple[int, str | None]:
    """How many cases list scores out of descending order (those given), and the first one's id."""
    unsorted = [c.id for c in cases
                if (scores := [d.score for d in outputs[c.id].retrieved if d.score is not None])
                and any(map(operator.lt, scores, scores[1:]))]
    return len(unsorted), unsorted[0] if unsorted else None


def near_ids_note(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> list[str]:
    """A note when retrieved ids differ from a relevant id of their case only in case or surrounding spaces ('Doc1'
    for 'doc1', 'doc1 '): ids are compared exactly, so those documents count as not retrieved."""
    found = (_near_ids_c or near_ids)(cases, outputs)
    if not found:
        return []
    case_id, got, want = found[0]
    cases_hit = len({f[0] for f in found})
    return [f"{len(found)} retrieved id(s) in {cases_hit} case(s) differ from a relevant id only in case or spaces (first: case "
            f"{case_id} retrieved {got!r}, its relevant_doc_ids name {want!r}): ids are compared exactly, so those count as "
            "not retrieved; make the target's ids and the golden set's the same"]


def near_ids(cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> list[tuple[str, str, str]]:
    """(case, the id retrieved, the relevant id) of every retrieved id that differs from a relevant id of its case
    (one it missed) only in case or surrounding spaces."""
    found: list[tuple[str, str, str]] = []
    for c in cases:
        out = outputs.get(c.id)
        if out is None or not c.relevant or out.error is not None:
            continue
        ids = {d.id for d in out.retrieved}
        missed = {r.strip().casefold(): r for r in c.relevant if r not in ids}
        found += [(c.id, d.id, missed[d.id.strip().casefold()]) for d in out.retrieved
                  if d.id not in c.relevant and d.id.strip().casefold() in missed]
    return found


def passage_text_warning(spec: Spec, outputs: Mapping[str, TargetOutput]) -> str | None:
    """A warning when the target's answers carry no passage text while a configured stage needs it (the noise test's
    contexts and corpus distractors, the judge metrics that read contexts): said once, with the count and the key to
    set, instead of a stage that quietly finds "no distractor" or "no contexts" for every case."""
    needs: list[str] = []
    robustness, generation = spec.stages.robustness, spec.stages.generation
    if robustness is not None and robustness.noise is not None:
        needs.append("the robustness noise test")
    if generation is not None and any(m.engine != "offline" for m in generation.metrics):
        needs.append("the judge metrics that read contexts")
    if not needs:
        return None
    answered = [o for o in outputs.values() if o.error is None and o.retrieved]
    bare = [o for o in answered if not o.contexts and not any(d.text for d in o.retrieved)]
    if not bare:
        return None
    target = spec.target
    if "http" in target:
        key = f"target.http.response.text (now {target['http']['response']['text']!r})"
    elif "results" in target:
        key = "a 'text' in each item of 'retrieved' in the results file (or 'contexts' on each line)"
    else:
        key = "a 'text' in each retrieved item the python target returns (or 'contexts')"
    return (f"{len(bare)} of {len(answered)} answers carry no passage text, which {' and '.join(needs)} need: "
            f"set {key} to the field that holds each passage's text")


# an id a framework makes up for a document: a UUID (LlamaIndex's node ids) or a long hex digest (Haystack's ids)
MADE_UP_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32,}", re.I)


def _retrieved_key(spec: Spec) -> str:
    target = spec.target
    if "http" in target:
        preset = " (a LangServe chain whose output is a string returns none)" if target["http"].get("preset") else ""
        return f"target.http.response.retrieved (now {target['http']['response']['retrieved']!r}){preset}"
    if "results" in target:
        return "'retrieved' on each line of the results file"
    return "the documents the python target returns (or its retriever)"


def retrieval_warning(spec: Spec, cases: Sequence[GoldenCase], outputs: Mapping[str, TargetOutput]) -> str | None:
    """A warning when the retrieval metrics are 0 for a reason in the target's answers, not in the retriever: no
    answer holds a passage at all, or no relevant id was retrieved for any case while the ids retrieved look made up
    by a framework (LlamaIndex's and Haystack's own ids, where the user's ids sit in the metadata)."""
    retrieval = spec.stages.retrieval
    if retrieval is None or retrieval.match.level == "text" or spec.traces is not None:
        return None
    answered = [(c, o) for c in cases if c.answerable and (o := outputs.get(c.id)) is not None and o.error is None]
    if not answered:
        return None
    if not any(o.retrieved for _, o in answered):
        return (f"none of the {len(answered)} answers holds a retrieved passage, so every retrieval metric is 0: set "
                f"{_retrieved_key(spec)} to where the passages are")
    if retrieval.match.level != "exact" or any(not c.relevant.keys().isdisjoint([d.id for d in o.retrieved]) for c, o in answered):
        return None  # (at match.level document a chunk's id is not its document's: the stage matches them)
    ids = [d.id for _, o in answered for d in o.retrieved]
    made_up = [i for i in ids if MADE_UP_ID.fullmatch(i)]
    if len(made_up) * 2 < len(ids):
        return None
    return (f"no relevant id was retrieved for any of the {len(answered)} cases, and {len(made_up)} of the {len(ids)} ids "
            f"retrieved look made up (such as {made_up[0]!r}): LlamaIndex and Haystack give documents ids of their own; "
            "if yours are in the metadata, set id_key (target.python.id_key, or target.results: {path, id_key}) to its key")


def deadline_note(deadline: Deadline, outputs: Mapping[str, TargetOutput], judged: Mapping[str, StageMeasurement]) -> str | None:
    """A sentence saying how far the run got, if max_duration_s ran out before it finished; None if it did not."""
    late_cases = sum(1 for o in outputs.values() if o.error is not None and REACHED in o.error)
    late_scores = sum(1 for stage in judged.values() for s in stage["samples"] for e in [s.get("error") or ""] if REACHED in e)
    if not late_cases and not late_scores:
        return None
    return (f"the run reached max_duration_s ({deadline.seconds:g} s) after {deadline.elapsed():.0f} s: "
            f"{len(outputs) - late_cases} of {len(outputs)} cases answered, {late_scores} judged case(s) left unscored; "
            "what was done is kept (judge scores in the cache), the rest is errored with 'deadline reached'")


def pending_note(loaded: Loaded) -> list[str]:
    """A warning when generated cases awaiting review were left out of the run."""
    if not loaded.pending:
        return []
    return [f"{loaded.pending} generated case(s) of {loaded.spec.golden_set_path} await review (metadata.review: pending) and "
            "were left out: approve them (remove the field or set it to approved) to gate on them"]
