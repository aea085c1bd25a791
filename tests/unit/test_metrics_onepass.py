"""The one-pass scorer (gate.core.retrieval_onepass) gives CaseScorer's values bit for bit, and the stage's means
and breakdowns are those of CaseScorer and ``aggregate`` (tests/unit/test_metrics.py holds CaseScorer to trec_eval)."""

from __future__ import annotations

import math
import random
import struct

import pytest

from gate.core.cases import groups
from gate.core.catalog import parse_metric
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.ranking import CaseScorer, aggregate, dedupe, first_ranks
from gate.core.retrieval_onepass import case_scorer, mean_of
from gate.stages.retrieval import retrieval_stage
from tests.support.settings import retrieval

KS = (1, 2, 3, 5, 7, 10, 20, 50, 1500)  # 50 and 1500 beyond every list: 1500 beyond the table of log2 too
BASES = ("hit_rate", "mrr", "recall", "precision", "ndcg", "map", "context_recall")
NAMES = [f"{b}@{k}" for b in BASES for k in KS] + ["mrr", "map", "ndcg"]
METRICS = [parse_metric(n) for n in NAMES]


POOLS = {n: [f"d{j}" for j in range(n)] for n in (5, 30, 200, 2000)}


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def random_case(rng: random.Random, graded: bool) -> tuple[list[str], dict[str, int]]:
    """A raw ranked list (repeats, empty, only misses, long lists with hits deep down) and its relevant ids."""
    pool = POOLS[rng.choice((5, 30, 200, 2000))]
    relevant = {d: (rng.randint(1, 3) if graded else 1) for d in rng.sample(pool, rng.randint(1, min(9, len(pool) - 1)))}
    shape = rng.random()
    if shape < 0.08:
        ids: list[str] = []
    elif shape < 0.15:
        ids = [rng.choice([d for d in pool if d not in relevant]) for _ in range(rng.randint(1, 25))]
    elif shape < 0.2 and len(pool) > 1000 or shape < 0.17:  # long lists, relevant ids beyond rank 1000 (beyond the table of log2)
        ids = rng.sample(pool, len(pool))
    else:
        ids = [rng.choice(pool) for _ in range(rng.randint(1, 40))]  # with replacement: repeats
    if ids and rng.random() < 0.3:
        ids.insert(rng.randint(0, len(ids)), rng.choice(ids))
    return ids, relevant


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_every_value_is_case_scorers_bit_for_bit(graded):
    rng = random.Random(7 + graded)
    score = case_scorer(METRICS)
    compared = deep = repeats = 0
    for _ in range(3000):
        ids, relevant = random_case(rng, graded)
        ranks, rank_list, row = score(ids, relevant)
        old = CaseScorer(dedupe(ids), relevant)
        assert ranks == first_ranks(ids, relevant)
        assert list(ranks) == list(relevant)  # the order of the relevant ids, as the report lists them
        assert rank_list == old.rank_list
        for metric, value in zip(METRICS, row, strict=True):
            assert bits(value) == bits(old.score(metric)), (metric.name, ids, relevant)
            compared += 1
        deep += any(r > 1000 for r in rank_list)
        repeats += len(set(ids)) != len(ids) and bool(rank_list)
    assert compared == 3000 * len(METRICS)
    assert deep and repeats > 100  # the data reached what it is meant to


def test_a_scorer_of_a_subset_and_order_of_metrics_gives_the_same_values():
    rng = random.Random(3)
    full, part = case_scorer(METRICS), case_scorer(METRICS[::-7])
    for _ in range(500):
        ids, relevant = random_case(rng, True)
        assert full(ids, relevant)[2][::-7] == part(ids, relevant)[2]


def test_a_name_that_is_no_retrieval_metric_is_refused_when_the_scorer_is_made():
    with pytest.raises(ValueError, match="not a retrieval metric: error_rate"):
        case_scorer([parse_metric("error_rate")])


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_means_are_aggregates_bit_for_bit(graded):
    rng = random.Random(11 + graded)
    data = [random_case(rng, graded) for _ in range(1000)]
    score = case_scorer(METRICS)
    got = [score(ids, rel) for ids, rel in data]
    olds = [CaseScorer(dedupe(ids), rel) for ids, rel in data]
    for j, metric in enumerate(METRICS):
        mine = mean_of(metric, [row[j] for _, _, row in got], [r for _, r, _ in got], [len(rel) for _, rel in data])
        theirs = aggregate(metric, olds, [s.score(metric) for s in olds])
        assert mine is not None and theirs is not None and bits(mine) == bits(theirs), metric.name
    assert mean_of(METRICS[0], [], [], []) is None
    assert mean_of(parse_metric("context_recall@5"), [0.0], [[]], [0]) is None


def test_the_stage_gives_the_old_means_breakdowns_and_ranks():
    rng = random.Random(5)
    data = [random_case(rng, True) for _ in range(800)]
    cases = [GoldenCase(id=f"q{i}", question=f"q {i}", line=i + 1, relevant=rel, category=rng.choice("abc"),
                        tags=tuple(rng.sample(["x", "y", "z"], rng.randint(0, 2)))) for i, (_, rel) in enumerate(data)]
    outputs = {c.id: TargetOutput(case_id=c.id, retrieved=[RetrievedDoc(d) for d in ids]) for c, (ids, _) in zip(cases, data, strict=True)}
    names = ["hit_rate@5", "mrr", "recall@10", "precision@3", "ndcg@10", "map", "context_recall@5", "ndcg", "map@3"]
    metrics = [parse_metric(n) for n in names]
    stage = retrieval_stage(retrieval(names), cases, outputs, groups(cases))
    olds = {c.id: CaseScorer(dedupe(ids), rel) for c, (ids, rel) in zip(cases, data, strict=True)}

    def means(members: list[str]) -> dict[str, float]:
        scorers = [olds[i] for i in members]
        return {m.name: aggregate(m, scorers, [s.score(m) for s in scorers]) for m in metrics}  # type: ignore[misc]

    assert stage["n"] == len(cases)
    assert {k: bits(v) for k, v in stage["metrics"].items() if k in names} == {k: bits(v) for k, v in means(list(olds)).items()}
    for sample, (ids, rel) in zip(stage["samples"], data, strict=True):
        assert sample["relevant_ranks"] == first_ranks(ids, rel)
        assert sample["metrics"] == {m.name: olds[sample["id"]].score(m) for m in metrics}
    by_category = groups(cases)["category"]
    assert set(stage["breakdown"]["category"]) == set(by_category)
    for group, ids in by_category.items():
        got = stage["breakdown"]["category"][group]
        assert got["n"] == len(ids)
        assert {k: bits(v) for k, v in got["metrics"].items()} == {k: bits(v) for k, v in means(ids).items()}
    assert all(not math.isnan(v) for v in stage["metrics"].values())
