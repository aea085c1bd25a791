"""Retrieval metric math against trec_eval (through pytrec_eval) as the independent oracle.

The README says our retrieval metrics *equal* trec_eval's:

    hit_rate@k = success_k    mrr = recip_rank     recall@k = recall_k
    precision@k = P_k         ndcg = ndcg          ndcg@k = ndcg_cut_k
    map = map                 map@k = map_cut_k

trec_eval details this file relies on:
* it sorts a run by score descending (ties by docid descending), so every run we hand it
  gets scores that strictly decrease with rank: its order is then exactly our order;
* it evaluates only the queries present in the run, so a case whose list is empty is left
  out of the trec run; our value for it must be 0 and it counts as 0 in our mean;
* pytrec_eval accepts any cut-off list as ``"measure.k1,k2"`` (its defaults are
  success 1/5/10 and P/recall/ndcg_cut/map_cut 5/10/15/20/30/100/200/500/1000), so we
  ask for the cut-offs we test, including ones far beyond the list lengths.
"""

from __future__ import annotations

import functools
import math
import random
import statistics

import pytest

pytrec_eval = pytest.importorskip("pytrec_eval")

from gate.core.catalog import HEALTH_METRICS, MetricName, higher_is_better, parse_metric  # noqa: E402
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput  # noqa: E402
from gate.core.ranking import CaseScorer, aggregate, dedupe, health_metrics, percentile  # noqa: E402
from gate.stages.retrieval import retrieval_stage  # noqa: E402
from tests.support.settings import retrieval  # noqa: E402

SEED = 20241130
N_QUERIES = 300
KS = (1, 2, 3, 5, 10, 20, 50)  # 50 is beyond every generated list (at most 30 items)
APPROX = {"rel": 1e-9, "abs": 1e-12}

# our metric base -> trec_eval measure family (cut-off appended as _k)
CUT_MEASURES = {"hit_rate": "success", "recall": "recall", "precision": "P", "ndcg": "ndcg_cut", "map": "map_cut"}
NO_CUT_MEASURES = {"mrr": "recip_rank", "map": "map", "ndcg": "ndcg"}


# --------------------------------------------------------------------------- data


def make_cases(graded: bool) -> list[tuple[str, dict[str, int], list[str]]]:
    """(query id, relevant {id: grade}, raw run with duplicates) for N_QUERIES queries."""
    rng = random.Random(SEED * 2 + graded)
    cases = []
    for qi in range(N_QUERIES):
        pool = [f"doc{j:03d}" for j in range(rng.randint(8, 60))]
        n_rel = rng.randint(1, min(8, len(pool) - 1))
        rel_ids = rng.sample(pool, n_rel)
        relevant = {d: (rng.randint(1, 3) if graded else 1) for d in rel_ids}
        shape = rng.random()
        if shape < 0.08:
            run: list[str] = []  # empty list
        elif shape < 0.14:  # only non-relevant docs
            nonrel = [d for d in pool if d not in relevant]
            run = [rng.choice(nonrel) for _ in range(rng.randint(1, 12))]
        elif shape < 0.22:  # every relevant doc near the top, then noise
            run = rel_ids[:] + [rng.choice(pool) for _ in range(rng.randint(0, 10))]
            rng.shuffle(run[: len(rel_ids) + 2])
        else:  # random length, drawn with replacement: duplicates happen naturally
            run = [rng.choice(pool) for _ in range(rng.randint(1, 30))]
        if run and rng.random() < 0.3:  # force an explicit duplicate of an early item later on
            run.insert(rng.randint(1, len(run)), run[0])
        cases.append((f"q{qi:03d}", relevant, run))
    return cases


def trec_run(ranked: list[str]) -> dict[str, float]:
    """A trec run whose scores strictly decrease with rank (so trec_eval keeps our order)."""
    return {d: float(len(ranked) - i) for i, d in enumerate(ranked)}


@functools.cache
def dataset(graded: bool) -> dict[str, object]:
    cases = make_cases(graded)
    qrels = {qid: dict(rel) for qid, rel, _ in cases}
    ranked = {qid: dedupe(run) for qid, _, run in cases}
    run = {qid: trec_run(r) for qid, r in ranked.items() if r}  # empty lists are absent, as in a trec file
    ks = ",".join(map(str, KS))
    measures = {f"{m}.{ks}" for m in CUT_MEASURES.values()} | set(NO_CUT_MEASURES.values())
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    # mrr@k: recip_rank of the run cut to its top k
    rr_at = {}
    for k in KS:
        cut = {qid: trec_run(r[:k]) for qid, r in ranked.items() if r}
        rr_at[k] = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    return {"cases": cases, "ranked": ranked, "trec": trec, "rr_at": rr_at}


def trec_value(data: dict, qid: str, metric: MetricName) -> float | None:
    """trec_eval's value for one query, None when the query is absent from the run."""
    if metric.base == "mrr" and metric.k is not None:
        per_q = data["rr_at"][metric.k].get(qid)
        return None if per_q is None else per_q["recip_rank"]
    per_q = data["trec"].get(qid)
    if per_q is None:
        return None
    if metric.k is None:
        return per_q[NO_CUT_MEASURES[metric.base]]
    if metric.base == "context_recall":
        return per_q[f"recall_{metric.k}"]  # per case, context_recall@k is recall@k
    return per_q[f"{CUT_MEASURES[metric.base]}_{metric.k}"]


METRIC_NAMES = (
    [f"{b}@{k}" for b in ("hit_rate", "recall", "precision", "ndcg", "map", "mrr") for k in KS]
    + ["mrr", "map", "ndcg"]
)


# --------------------------------------------------------------------------- the data set is what we claim


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_generated_data_covers_the_edge_cases(graded):
    data = dataset(graded)
    cases = data["cases"]
    assert len(cases) == N_QUERIES
    raw_lens = [len(run) for _, _, run in cases]
    deduped = data["ranked"]
    assert any(n == 0 for n in raw_lens), "no empty run"
    assert any(len(run) != len(deduped[q]) for q, _, run in cases), "no duplicates"
    assert any(0 < len(deduped[q]) < 5 for q, _, _ in cases), "no list shorter than a cut-off"
    assert max(len(r) for r in deduped.values()) < max(KS), "the largest cut-off must exceed every list"
    assert any(r and not set(r) & rel.keys() for (q, rel, _), r in zip(cases, deduped.values())), "no all-non-relevant run"
    grades = {g for _, rel, _ in cases for g in rel.values()}
    assert grades == ({1, 2, 3} if graded else {1})


# --------------------------------------------------------------------------- per query and mean vs trec_eval


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
@pytest.mark.parametrize("name", METRIC_NAMES)
def test_per_query_and_mean_equal_trec_eval(name, graded):
    data = dataset(graded)
    metric = parse_metric(name)
    ours_per_case, scorers, trec_sum = [], [], 0.0
    for qid, relevant, _ in data["cases"]:
        scorer = CaseScorer(data["ranked"][qid], relevant)
        ours = scorer.score(metric)
        expected = trec_value(data, qid, metric)
        if expected is None:  # empty list: trec_eval does not see the query; we score 0
            assert not data["ranked"][qid]
            assert ours == 0.0, (qid, name)
        else:
            assert ours == pytest.approx(expected, **APPROX), (qid, name, data["ranked"][qid], relevant)
            trec_sum += expected
        ours_per_case.append(ours)
        scorers.append(scorer)
    mean = aggregate(metric, scorers, ours_per_case)
    assert mean == pytest.approx(trec_sum / N_QUERIES, **APPROX)


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_retrieval_stage_means_equal_trec_eval(graded):
    """The stage itself (raw lists with duplicates, empty lists scored 0) gives trec_eval's mean."""
    data = dataset(graded)
    cases = [GoldenCase(id=q, question=f"question {q}", line=i + 1, relevant=rel) for i, (q, rel, _) in enumerate(data["cases"])]
    outputs = {q: TargetOutput(case_id=q, retrieved=[RetrievedDoc(d) for d in run]) for q, _, run in data["cases"]}
    metrics = [parse_metric(n) for n in METRIC_NAMES]
    stage = retrieval_stage(retrieval(list(METRIC_NAMES)), cases, outputs)
    assert stage["n"] == N_QUERIES
    for metric in metrics:
        trec_sum = sum(v for q, _, _ in data["cases"] if (v := trec_value(data, q, metric)) is not None)
        assert stage["metrics"][metric.name] == pytest.approx(trec_sum / N_QUERIES, **APPROX), metric.name


def test_the_two_documented_differences_in_the_averages():
    """README: a query with no relevant document (here an out-of-scope case) and a case the target did not answer
    are left out of rag-gate's averages; trec_eval counts the first as 0, and `trec_eval -c` the second."""
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"z": 0}, "q4": {"c": 1}}  # q3: judged, nothing relevant
    run = {"q1": trec_run(["a", "x"]), "q2": trec_run(["x", "b"]), "q3": trec_run(["z"])}  # q4: not answered
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    assert trec["q3"]["recip_rank"] == 0 and "q4" not in trec
    trec_mean = sum(v["recip_rank"] for v in trec.values()) / len(trec)  # over q1..q3
    trec_c_mean = sum(v["recip_rank"] for v in trec.values()) / len(qrels)  # -c: q4 counts as 0
    cases = [GoldenCase(id="q1", question="1", line=1, relevant={"a": 1}), GoldenCase(id="q2", question="2", line=2, relevant={"b": 1}),
             GoldenCase(id="q3", question="3", line=3, type="out_of_scope"), GoldenCase(id="q4", question="4", line=4, relevant={"c": 1})]
    outputs = {"q1": TargetOutput(case_id="q1", retrieved=[RetrievedDoc("a"), RetrievedDoc("x")]),
               "q2": TargetOutput(case_id="q2", retrieved=[RetrievedDoc("x"), RetrievedDoc("b")]),
               "q3": TargetOutput(case_id="q3", retrieved=[RetrievedDoc("z")]),
               "q4": TargetOutput(case_id="q4", error="timeout")}
    stage = retrieval_stage(retrieval(["mrr"]), cases, outputs)
    assert stage["n"] == 2 and stage["errored"] == 1 and stage["excluded"] == {"out_of_scope": 1}
    assert stage["metrics"]["mrr"] == pytest.approx(0.75)  # (1 + 1/2) / 2
    assert trec_mean == pytest.approx(0.5) and trec_c_mean == pytest.approx(0.375)


def test_trec_eval_scores_an_all_non_relevant_run_as_zero_and_so_do_we():
    qrels = {"q": {"a": 2, "b": 1}}
    ranked = ["x", "y", "z"]
    measures = {"success.1,5", "recall.5", "P.5", "ndcg_cut.5", "map_cut.5", "recip_rank", "map", "ndcg"}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate({"q": trec_run(ranked)})["q"]
    assert trec and all(v == 0.0 for v in trec.values()), trec
    scorer = CaseScorer(ranked, qrels["q"])
    for name in ("hit_rate@1", "hit_rate@5", "recall@5", "precision@5", "ndcg@5", "map@5", "mrr", "map", "ndcg", "context_recall@5"):
        assert scorer.score(parse_metric(name)) == 0.0, name


def test_trec_eval_keeps_our_order_only_because_scores_strictly_decrease():
    """Guard for the oracle: with equal scores trec_eval reorders (docid descending)."""
    qrels = {"q": {"a": 1}}
    ranked = ["a", "z"]  # relevant first in our order
    ours = CaseScorer(ranked, qrels["q"]).score(parse_metric("mrr"))
    ordered = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate({"q": trec_run(ranked)})["q"]["recip_rank"]
    tied = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate({"q": {"a": 1.0, "z": 1.0}})["q"]["recip_rank"]
    assert ours == pytest.approx(ordered)
    assert tied != pytest.approx(ordered)  # "z" sorts first on a tie


def test_duplicates_keep_the_first_occurrence_rank():
    relevant = {"a": 1}
    with_dup = CaseScorer(dedupe(["x", "a", "x", "a"]), relevant)
    expected = pytrec_eval.RelevanceEvaluator({"q": relevant}, {"recip_rank", "P.2", "map"}).evaluate(
        {"q": trec_run(["x", "a"])}
    )["q"]
    assert with_dup.score(parse_metric("mrr")) == pytest.approx(expected["recip_rank"])
    assert with_dup.score(parse_metric("precision@2")) == pytest.approx(expected["P_2"])
    assert with_dup.score(parse_metric("map")) == pytest.approx(expected["map"])


# --------------------------------------------------------------------------- context_recall@k (micro)


def brute_force_context_recall(cases, k):
    """Sum over queries of |relevant ∩ top-k| / sum of |relevant| (written independently)."""
    found = total = 0
    for _, relevant, run in cases:
        top = []
        for d in run:  # first occurrences only, then the first k of them
            if d not in top:
                top.append(d)
        found += len(set(top[:k]) & set(relevant))
        total += len(relevant)
    return found / total


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
@pytest.mark.parametrize("k", KS)
def test_context_recall_is_the_micro_average(k, graded):
    data = dataset(graded)
    metric = parse_metric(f"context_recall@{k}")
    scorers = [CaseScorer(data["ranked"][q], rel) for q, rel, _ in data["cases"]]
    per_case = [s.score(metric) for s in scorers]
    assert aggregate(metric, scorers, per_case) == pytest.approx(brute_force_context_recall(data["cases"], k), **APPROX)


def test_context_recall_differs_from_macro_recall():
    # one easy case with one relevant id found, one hard case with four relevant ids, none found
    cases = [("easy", {"a": 1}, ["a", "x"]), ("hard", {"b": 1, "c": 1, "d": 1, "e": 1}, ["x", "y"])]
    scorers = [CaseScorer(dedupe(run), rel) for _, rel, run in cases]
    micro_m, macro_m = parse_metric("context_recall@5"), parse_metric("recall@5")
    micro = aggregate(micro_m, scorers, [s.score(micro_m) for s in scorers])
    macro = aggregate(macro_m, scorers, [s.score(macro_m) for s in scorers])
    trec = pytrec_eval.RelevanceEvaluator({q: rel for q, rel, _ in cases}, {"recall.5"}).evaluate(
        {q: trec_run(dedupe(run)) for q, _, run in cases}
    )
    assert macro == pytest.approx(statistics.fmean(v["recall_5"] for v in trec.values()))
    assert micro == pytest.approx(brute_force_context_recall(cases, 5))
    assert micro != pytest.approx(macro)
    assert micro < macro  # the hard case weighs four times as much in the micro average


def test_aggregate_without_cases_is_none():
    assert aggregate(parse_metric("mrr"), [], []) is None
    assert aggregate(parse_metric("context_recall@5"), [], []) is None


# --------------------------------------------------------------------------- parse_metric


@pytest.mark.parametrize(
    "name, base, k",
    [
        ("hit_rate@1", "hit_rate", 1),
        ("hit_rate@5", "hit_rate", 5),
        ("mrr", "mrr", None),
        ("mrr@10", "mrr", 10),
        ("recall@20", "recall", 20),
        ("precision@3", "precision", 3),
        ("ndcg", "ndcg", None),
        ("ndcg@10", "ndcg", 10),
        ("map", "map", None),
        ("map@100", "map", 100),
        ("context_recall@5", "context_recall", 5),
    ],
)
def test_parse_metric_valid(name, base, k):
    m = parse_metric(name)
    assert (m.name, m.base, m.k, m.higher_is_better) == (name, base, k, True)


@pytest.mark.parametrize("name", ["hit_rate", "recall", "precision", "context_recall"])
def test_parse_metric_needs_a_cut_off(name):
    with pytest.raises(ValueError, match="cut-off"):
        parse_metric(name)


@pytest.mark.parametrize(
    "name",
    [
        "", "hits@5", "faithfulness", "HIT_RATE@5", "hit_rate@0", "hit_rate@05", "hit_rate@-1", "hit_rate@",
        "hit_rate@5.0", "mrr@", "ndcg @10", " mrr", "mrr ", "mrr\n", "hit_rate@5\n", "map@k", "latency",
    ],
)
def test_parse_metric_unknown_raises(name):
    with pytest.raises(ValueError):
        parse_metric(name)


@pytest.mark.parametrize("name", sorted(set(HEALTH_METRICS) - {"cache_hit_rate"}))
def test_health_metrics_are_lower_is_better(name):
    m = parse_metric(name)
    assert m.higher_is_better is False
    assert m.k is None
    assert higher_is_better(name) is False


def test_the_cache_hit_rate_is_the_one_health_metric_higher_is_better():
    m = parse_metric("cache_hit_rate")
    assert m.higher_is_better is True and m.k is None and higher_is_better("cache_hit_rate") is True


@pytest.mark.parametrize(
    "name, expected",
    [
        ("hit_rate@5", True), ("mrr", True), ("ndcg@10", True), ("context_recall@5", True),
        ("faithfulness", True), ("noise_robustness", True), ("rejection_rate", True),
        ("false_rejection_rate", False), ("error_rate", False), ("p95_latency_ms", False),
        ("mean_latency_ms", False),
    ],
)
def test_higher_is_better(name, expected):
    assert higher_is_better(name) is expected


# --------------------------------------------------------------------------- percentile


def test_percentile_matches_statistics_quantiles_inclusive():
    rng = random.Random(SEED)
    for _ in range(200):
        values = [rng.uniform(0, 1000) if rng.random() < 0.8 else float(rng.randint(0, 5)) for _ in range(rng.randint(2, 60))]
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        for q in range(1, 100):
            assert percentile(values, q) == pytest.approx(cuts[q - 1], rel=1e-12, abs=1e-9), (values, q)
        quartiles = statistics.quantiles(values, n=4, method="inclusive")
        for q, cut in zip((25, 50, 75), quartiles):
            assert percentile(values, q) == pytest.approx(cut, rel=1e-12, abs=1e-9)
        assert percentile(values, 50) == pytest.approx(statistics.median(values))
        assert percentile(values, 0) == min(values)
        assert percentile(values, 100) == max(values)


@pytest.mark.parametrize(
    "values, q, expected",
    [
        ([7.0], 0, 7.0), ([7.0], 50, 7.0), ([7.0], 95, 7.0), ([7.0], 100, 7.0),
        ([10.0, 20.0], 0, 10.0), ([10.0, 20.0], 50, 15.0), ([10.0, 20.0], 95, 19.5), ([10.0, 20.0], 100, 20.0),
        ([20.0, 10.0], 25, 12.5),  # unsorted input
        ([1, 2, 3, 4, 5], 50, 3.0), ([1, 2, 3, 4, 5], 25, 2.0), ([1, 2, 3, 4], 50, 2.5),
        ([5, 5, 5], 99, 5.0),
    ],
)
def test_percentile_hand_picked(values, q, expected):
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing_is_none():
    assert percentile([], 95) is None


def test_health_metrics():
    lat = [120.0, 80.0, 100.0, 300.0]
    h = health_metrics(lat, calls=5, errors=1)
    assert h["error_rate"] == pytest.approx(1 / 5)
    assert h["mean_latency_ms"] == pytest.approx(statistics.fmean(lat))
    assert h["p50_latency_ms"] == pytest.approx(statistics.median(lat))
    cuts = statistics.quantiles(lat, n=100, method="inclusive")
    assert h["p95_latency_ms"] == pytest.approx(cuts[94])
    assert h["p99_latency_ms"] == pytest.approx(cuts[98])
    assert health_metrics([], calls=0, errors=0) == {}
    assert set(health_metrics([], calls=3, errors=3)) == {"error_rate"}


# --------------------------------------------------------------------------- dedupe


@pytest.mark.parametrize(
    "ids, expected",
    [
        ([], []),
        (["a"], ["a"]),
        (["a", "b", "c"], ["a", "b", "c"]),
        (["a", "a", "a"], ["a"]),
        (["b", "a", "b", "c", "a"], ["b", "a", "c"]),
        (["c", "b", "a", "a", "b", "c"], ["c", "b", "a"]),
    ],
)
def test_dedupe(ids, expected):
    assert dedupe(ids) == expected
    assert dedupe(iter(ids)) == expected  # any iterable, consumed once


def test_dedupe_keeps_first_rank_for_every_metric_against_trec_eval():
    rng = random.Random(SEED + 7)
    for _ in range(50):
        raw = [f"d{rng.randint(0, 9)}" for _ in range(rng.randint(1, 25))]
        relevant = {f"d{i}": rng.randint(1, 3) for i in rng.sample(range(10), 3)}
        firsts = [d for i, d in enumerate(raw) if d not in raw[:i]]
        assert dedupe(raw) == firsts
        trec = pytrec_eval.RelevanceEvaluator({"q": relevant}, {"recip_rank", "ndcg", "map"}).evaluate({"q": trec_run(firsts)})["q"]
        scorer = CaseScorer(dedupe(raw), relevant)
        assert math.isclose(scorer.score(parse_metric("mrr")), trec["recip_rank"], rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(scorer.score(parse_metric("ndcg")), trec["ndcg"], rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(scorer.score(parse_metric("map")), trec["map"], rel_tol=1e-9, abs_tol=1e-12)
