"""The stability test through the real CLI (``python -m gate run``) against a real RAG service over HTTP on 127.0.0.1.

The service answers "What is the capital of region i?" for 80 regions. For 30 % of the questions (the lowest hashes of
the question) it is wavy: each ask, at random, gives the right capital (from the region's passage) or a wrong one (from
another region's passage); every other question gets the same answer and passages every time. With four asks (the run's
and three repeats), a wavy question flips unless its four asks are alike, which happens with probability 2 x 0.5^4, so
the expected correctness_flip_rate is (the wavy share of the sample) x 0.875.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gate.core.stability import wilson_interval
from gate.core.textmatch import squad_tokens
from tests.support import judge_server
from tests.support.judge_server import JudgeServer
from tests.support.standin import StandIn, StandInHandler

REGIONS = 80
NAMES = ("Cedar", "Birch", "Maple", "Aspen", "Willow", "Hazel", "Alder", "Larch", "Linden", "Poplar", "Spruce", "Juniper",
         "Holly", "Rowan", "Fir", "Pine")
REPEATS, SAMPLE = 3, 60
ALL_ALIKE = 2 * 0.5 ** (REPEATS + 1)  # four fair coin flips all alike


def name(i: int) -> str:
    return f"{NAMES[i % len(NAMES)]}{i}"  # unique per region


def question(i: int) -> str:
    return f"What is the capital of region {i}?"


def truth(i: int) -> str:
    return f"The capital of region {i} is {name(i)}."


def wrong(i: int) -> str:
    return f"The capital of region {i} is {name(i + REGIONS)}."


def wavy_questions(share: float) -> set[str]:
    """``share`` of the questions, chosen by a hash of the question."""
    ranked = sorted((question(i) for i in range(REGIONS)), key=lambda q: hashlib.sha256(q.encode()).hexdigest())
    return set(ranked[: round(share * REGIONS)])


class WavyRag(StandIn):
    """The RAG service: ``wavy`` questions answered at random each ask (seeded by the question and the ask's number, so
    a run is reproducible), the others the same every time. ``reworded``: questions answered right every time, in one
    of two wordings ("Cedar7." or the whole sentence) by the ask's parity. ``fail``: question -> the request numbers
    answered with HTTP 500."""

    def __init__(self, wavy: set[str], reworded: set[str] = frozenset(), fail: dict[str, set[int]] | None = None) -> None:
        super().__init__()
        self.wavy, self.reworded, self.fail = wavy, reworded, fail or {}
        self.counts: Counter[str] = Counter()
        self.right: dict[str, list[bool]] = {}  # question -> whether each answered request was right

    def handle(self, h: StandInHandler) -> None:
        body = json.loads(h.body())
        q = body["question"]
        i = int(q.rsplit(" ", 1)[1].rstrip("?"))
        with self._lock:
            self.counts[q] += 1
            n = self.counts[q]
        if n in self.fail.get(q, set()):
            h.reply(500, b'{"error": "scripted failure"}')
            return
        right = random.Random(f"{q}\x00{n}").random() < 0.5 if q in self.wavy else True
        with self._lock:
            self.right.setdefault(q, []).append(right)
        answer = truth(i) if right else wrong(i)
        if q in self.reworded and n % 2 == 0:
            answer = f"{name(i)}."
        first = f"region-{i}" if right else f"region-{(i + 1) % REGIONS}"
        docs = [{"id": d, "text": f"text of {d}", "score": 1.0 - r / 10} for r, d in
                enumerate([first, "guide-1", "guide-2", "guide-3", "guide-4", "guide-5"])]
        h.reply(200, json.dumps({"retrieved": docs, "answer": answer}).encode())


SPEC = """\
version: 1
golden_set: golden_set.jsonl
target:
  http: {{url: "{url}", concurrency: 4, retries: 0}}
cache: {{path: .rag-gate/cache.sqlite}}
stages:
  retrieval:
    metrics: [hit_rate@5]
  robustness:
    stability:
      repeats: {repeats}
      sample: {{size: {sample}, seed: 7}}
      method: {method}
      correctness: {{method: offline, threshold: 0.5}}
    gates:
      correctness_flip_rate: {{max: 0.05}}
      retrieval_stability@5: {{min: 0.9}}
"""

JUDGE = "judge:\n  base_url: {url}\n  model: judge-2024-11-20\n  api_key_env: JUDGE_KEY\n  max_retries: 1\n"


def run(work: Path, url: str, *, method: str = "token_f1", repeats: int = REPEATS, sample: int | str = SAMPLE,
        judge: str = "") -> tuple[int, dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    golden = [{"id": f"r{i:02d}", "question": question(i), "ground_truth": truth(i), "relevant_doc_ids": [f"region-{i}"]}
              for i in range(REGIONS)]
    (work / "golden_set.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden))
    (work / "rag-eval.yml").write_text(judge + SPEC.format(url=url, repeats=repeats, sample=sample, method=method))
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "report.json",
                           "--markdown", "comment.md", "--no-progress"], cwd=work, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JUDGE_KEY": "k-123456"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads((work / "report.json").read_text())


def stability(report: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    stage = report["stages"]["robustness"]
    return stage["metrics"], stage["stability"]


@pytest.fixture
def deterministic() -> Iterator[WavyRag]:
    with WavyRag(set()) as srv:
        yield srv


def test_a_wavy_rag_flips_at_the_rate_its_design_gives(tmp_path: Path) -> None:
    wavy = wavy_questions(0.3)
    with WavyRag(wavy) as srv:
        code, report = run(tmp_path, srv.base_url + "/")
        counts, right = dict(srv.counts), dict(srv.right)
    metrics, info = stability(report)
    gates = {g["metric"]: g["status"] for g in report["stages"]["robustness"]["gates"]}
    assert code == 1 and gates == {"correctness_flip_rate": "fail", "retrieval_stability@5": "pass"}
    sampled = {c["question"] for c in info["cases"]}
    assert len(sampled) == SAMPLE and len(wavy) == 24
    w = len(sampled & wavy)
    expected = w / SAMPLE * (1 - ALL_ALIKE)
    rate = metrics["correctness_flip_rate"]
    sd = math.sqrt(w * ALL_ALIKE * (1 - ALL_ALIKE)) / SAMPLE
    assert abs(rate - expected) <= 3 * sd + 1e-9, (rate, expected, sd)
    low, high = info["flip_interval"]
    assert low <= expected <= high and (low, high) == pytest.approx(wilson_interval(round(rate * SAMPLE), SAMPLE))
    # what the service served decides each case: a case flipped exactly when its four answers were not all right or all wrong
    for c in info["cases"]:
        served = right[c["question"]]
        assert sorted(c["correct"]) == sorted(served) and c["flipped"] == (len(set(served)) > 1), c
        assert c["flipped"] is False or c["question"] in wavy
        assert len(c["answers"]) == len(c["retrieved"]) == REPEATS + 1
    flipped = {c["id"] for c in info["cases"] if c["flipped"]}
    assert rate == len(flipped) / SAMPLE and flipped <= set(info["unstable"])
    # a flip changes the answer (token F1 5/6: one name of six tokens) and the first passage (Jaccard 4/6)
    assert metrics["answer_stability"] < 1.0 and metrics["retrieval_stability@5"] < 1.0
    assert all(c["agreement"] < 1.0 and c["jaccard"] < 1.0 for c in info["cases"] if c["flipped"])
    # three more calls per sampled question, counted at the service; one for every other question
    assert info["target_calls"] == report["stages"]["robustness"]["target_calls"] == REPEATS * SAMPLE
    assert sorted(Counter(counts.values()).items()) == [(1, REGIONS - SAMPLE), (REPEATS + 1, SAMPLE)]
    assert all(counts[q] == REPEATS + 1 for q in sampled)
    assert "Stability test" in (tmp_path / "comment.md").read_text()


def test_a_deterministic_rag_is_perfectly_stable(tmp_path: Path, deterministic: WavyRag) -> None:
    code, report = run(tmp_path, deterministic.base_url + "/", repeats=2)
    metrics, info = stability(report)
    assert code == 0 and {g["status"] for g in report["stages"]["robustness"]["gates"]} == {"pass"}
    assert metrics["correctness_flip_rate"] == 0.0
    assert metrics["answer_stability"] == 1.0 and metrics["retrieval_stability@5"] == 1.0
    assert info["unstable"] == [] and info["repeats"] == 2 and info["k"] == 5
    assert info["flip_interval"] == pytest.approx([0.0, wilson_interval(0, SAMPLE)[1]])
    assert info["flip_interval"][1] > 0.05  # 0 flips in 60 cases still allows several per cent
    assert info["target_calls"] == 2 * SAMPLE and sum(deterministic.counts.values()) == REGIONS + 2 * SAMPLE
    assert all(c["correct"] == [True] * 3 and c["retrieved"][0] == c["retrieved"][2] for c in info["cases"])


def test_failed_asks_are_left_out_and_a_case_without_two_is_errored(tmp_path: Path) -> None:
    one, every = question(3), question(4)
    with WavyRag(set(), fail={one: {3}, every: {2, 3, 4}}) as srv:
        _, report = run(tmp_path, srv.base_url + "/", sample="all")
        counts = dict(srv.counts)
    metrics, info = stability(report)
    cases = {c["question"]: c for c in info["cases"]}
    partial, errored = cases[one], cases[every]
    assert partial["answers"].count(None) == 1 and partial["retrieved"].count([]) == 1
    assert partial["jaccard"] == 1.0 and partial["agreement"] == 1.0 and partial["flipped"] is False
    assert partial["correct"].count(None) == 1 and partial["correct"].count(True) == REPEATS
    assert errored["answers"][1:] == [None] * REPEATS and errored["answers"][0] == truth(4)
    assert errored["jaccard"] is None and errored["agreement"] is None and errored["flipped"] is None
    assert metrics["correctness_flip_rate"] == 0.0 and metrics["retrieval_stability@5"] == 1.0
    assert info["target_calls"] == REPEATS * REGIONS and counts[every] == REPEATS + 1  # failed calls are calls made
    assert info["flip_interval"] == pytest.approx(list(wilson_interval(0, REGIONS - 1)))  # the errored case left out


def _same_answer(prompt: str) -> Any:
    """The judge's same-meaning verdict: the same words once the question's are left out."""
    payload = json.loads(prompt.split("Input:\n", 1)[1])
    asked = set(squad_tokens(payload["question"]))
    a, b = ({t for t in squad_tokens(payload[k]) if t not in asked} for k in ("answer_1", "answer_2"))
    return {"same": a == b}


def test_judged_agreement_reads_meaning_and_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_server, "MATCHERS", [("rag-gate/compare_answers", "Task: decide whether two answers",
                                                    _same_answer), *judge_server.MATCHERS])
    wavy = wavy_questions(0.3)
    reworded = {question(i) for i in range(REGIONS)} - wavy
    with JudgeServer() as judge:
        header = JUDGE.format(url=judge.url)
        with WavyRag(wavy, reworded) as srv:
            _, by_f1 = run(tmp_path / "f1", srv.base_url + "/")
        with WavyRag(wavy, reworded) as srv:
            _, judged = run(tmp_path / "judge", srv.base_url + "/", method="judge", judge=header)
        first = judge.calls
        with WavyRag(wavy, reworded) as srv:
            _, again = run(tmp_path / "judge", srv.base_url + "/", method="judge", judge=header)
        second = judge.calls - first
        unknown = judge.unknown_prompts
    f1, info_f1 = stability(by_f1)
    js, info_j = stability(judged)
    assert not unknown
    steady = [c for c in info_j["cases"] if c["question"] in reworded]
    assert steady and all(c["agreement"] == 1.0 for c in steady)  # "Cedar7." says what the sentence says
    # token F1: two pairs of the six alike, four "Cedar7." against the sentence (2/7)
    assert all(c["agreement"] == pytest.approx((2 + 4 * 2 / 7) / 6) for c in info_f1["cases"] if c["question"] in reworded)
    assert js["answer_stability"] > f1["answer_stability"]
    assert js["correctness_flip_rate"] == f1["correctness_flip_rate"]  # correctness does not depend on the method
    assert all(c["agreement"] < 1.0 for c in info_j["cases"] if c["flipped"])  # a wrong capital is another answer
    assert info_j["method"] == "judge" and info_j["usage"]["calls"] == first > 0
    assert second == 0 and stability(again)[0] == js  # every verdict came from the cache
