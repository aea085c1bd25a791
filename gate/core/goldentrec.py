"""Golden rows from TREC topics and their qrels: pure (gate.io.goldenformats reads the files; gate.core.goldenformats
the other formats)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gate.core.goldenformats import Record, Row


@dataclass(frozen=True, slots=True)
class Qrel:
    """One judgement of a qrels file: topic ``qid`` has document ``doc`` at ``grade`` (0 or less: not relevant)."""

    where: str
    qid: str
    doc: str
    grade: int


def from_trec(topics: Sequence[Record], qrels: Sequence[Qrel]) -> tuple[list[tuple[str, Row | str]], list[str]]:
    """Golden rows from TREC topics (each Record's value: {"id", "question", "metadata"}, or the sentence saying why
    it is none) and their qrels: a topic's documents of grade >= 1 are its relevant ids (graded when some grade in
    the qrels is above 1, else a list); a topic with none is dropped, and so are the qrels of a topic the topics do
    not hold (said once a topic). Also the notes: judgements repeated (the highest grade kept)."""
    known = {t.value["id"] for t in topics if isinstance(t.value, dict)}
    dropped = {v.split(" ")[1] for t in topics if isinstance(v := t.value, str) and v.startswith("topic ")}
    judged: dict[str, dict[str, int]] = {}
    strays: dict[str, list[str]] = {}
    repeated = 0
    for q in qrels:
        if q.qid not in known:
            strays.setdefault(q.qid, []).append(q.where)
            continue
        docs = judged.setdefault(q.qid, {})
        if q.doc in docs:
            repeated += 1
        docs[q.doc] = max(q.grade, docs.get(q.doc, q.grade))
    graded = any(g > 1 for docs in judged.values() for g in docs.values())
    out: list[tuple[str, Row | str]] = []
    first: dict[str, str] = {}  # topic id -> where it is
    for t in topics:
        if not isinstance(t.value, dict):
            out.append((t.where, str(t.value)))
            continue
        if first.setdefault(t.value["id"], t.where) != t.where:
            out.append((t.where, f"topic {t.value['id']} again (the first is {first[t.value['id']]}): its judgements are "
                        "the first's, a topic number is one topic"))
            continue
        relevant = {d: g for d, g in judged.get(t.value["id"], {}).items() if g >= 1}
        if not relevant:
            zero = len(judged.get(t.value["id"], {}))
            why = f"only grade-0 judgements ({zero})" if zero else "no judgement"
            out.append((t.where, f"topic {t.value['id']} has {why} in the qrels: an answerable case needs a relevant document"))
            continue
        out.append((t.where, {**t.value, "relevant_doc_ids": relevant if graded else list(relevant)}))
    for qid, wheres in strays.items():
        more = f" (and {len(wheres) - 1} more line(s))" if len(wheres) > 1 else ""
        if qid in dropped:
            continue  # its topic is dropped, and said so
        near = next((k for k in known if k.lstrip("0") == qid.lstrip("0")), None)
        hint = f" (the topics have {near!r}: the numbers must be written alike)" if near else ""
        out.append((wheres[0] + more, f"a judgement for topic {qid}, which the topics do not hold{hint}"))
    notes = [f"{repeated} judgement(s) repeated in the qrels: the highest grade kept"] if repeated else []
    return out, notes
