"""select_sample: deterministic, stable under small golden-set edits, uniform, pinned tags on top."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gate.core.model import GoldenCase
from gate.core.sampling import select_sample

ROOT = Path(__file__).resolve().parents[2]


def golden(n: int, *, prefix: str = "q", tagged: set[int] = frozenset()) -> list[GoldenCase]:
    return [
        GoldenCase(id=f"{prefix}{i:03d}", question=f"question {i}?", line=i + 1, tags=("badcase",) if i in tagged else ())
        for i in range(n)
    ]


def ids(cases: list[GoldenCase]) -> list[str]:
    return [c.id for c in cases]


# --------------------------------------------------------------------------- determinism


def test_same_seed_and_golden_set_give_the_same_sample():
    cases = golden(100)
    first = ids(select_sample(cases, 40, seed=7))
    assert len(first) == 40
    for _ in range(3):
        assert ids(select_sample(cases, 40, seed=7)) == first
    # rebuilt objects, same content: the sample depends on ids, not object identity
    assert ids(select_sample(golden(100), 40, seed=7)) == first


_CHILD = """
import json, sys
from gate.core.model import GoldenCase
from gate.core.sampling import select_sample
cases = [GoldenCase(id=f"q{i:03d}", question=f"question {i}?", line=i + 1) for i in range(100)]
print(json.dumps([c.id for c in select_sample(cases, 40, seed=7)]))
"""


@pytest.mark.parametrize("hashseed", ["0", "1", "4242"])
def test_sample_is_the_same_in_another_process_whatever_pythonhashseed(hashseed):
    here = ids(select_sample(golden(100), 40, seed=7))
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == here


def test_different_seeds_give_different_samples():
    cases = golden(100)
    samples = {tuple(ids(select_sample(cases, 40, seed=s))) for s in range(20)}
    assert len(samples) == 20
    assert set(ids(select_sample(cases, 40, seed=7))) != set(ids(select_sample(cases, 40, seed=8)))


# --------------------------------------------------------------------------- size


@pytest.mark.parametrize("size", [10, 11, 50])
def test_size_at_or_above_the_set_takes_every_case(size):
    cases = golden(10)
    assert ids(select_sample(cases, size, seed=3)) == ids(cases)


def test_all_takes_every_case_in_order():
    cases = golden(37)
    assert ids(select_sample(cases, "all", seed=99)) == ids(cases)


def test_empty_golden_set_gives_empty_sample():
    assert select_sample([], 40, seed=7) == []
    assert select_sample([], "all") == []


@pytest.mark.parametrize("size", [1, 5, 40, 99])
def test_size_is_respected_without_pins(size):
    assert len(select_sample(golden(100), size, seed=1)) == size


# --------------------------------------------------------------------------- pinned tags


def test_always_tags_are_added_on_top_of_size():
    tagged = set(range(0, 100, 5))  # 20 bad cases
    cases = golden(100, tagged=tagged)
    plain = set(ids(select_sample(cases, 40, seed=7)))
    pinned = {f"q{i:03d}" for i in tagged}
    with_pins = ids(select_sample(cases, 40, seed=7, always_tags=["badcase"]))
    # the seeded 40 stay, every tagged case is added, nothing else
    assert set(with_pins) == plain | pinned
    assert len(with_pins) == len(plain | pinned)
    assert len(with_pins) > 40  # some tagged cases were not among the random 40
    assert pinned <= set(with_pins)


def test_always_tags_that_no_case_has_change_nothing():
    cases = golden(50, tagged={1, 2})
    assert select_sample(cases, 10, seed=4, always_tags=["nonexistent"]) == select_sample(cases, 10, seed=4)


def test_always_with_size_all_is_just_all():
    cases = golden(20, tagged={3})
    assert ids(select_sample(cases, "all", always_tags=["badcase"])) == ids(cases)


# --------------------------------------------------------------------------- order


def test_sample_is_in_golden_set_order_and_independent_of_it():
    cases = golden(100, tagged={4, 50, 97})
    shuffled = cases[:]
    random.Random(5).shuffle(shuffled)
    picked = select_sample(shuffled, 30, seed=11, always_tags=["badcase"])
    # returned in the order of the list given
    positions = [shuffled.index(c) for c in picked]
    assert positions == sorted(positions)
    # the same cases whatever the file order
    assert set(ids(picked)) == set(ids(select_sample(cases, 30, seed=11, always_tags=["badcase"])))


# --------------------------------------------------------------------------- stability


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_adding_one_case_moves_at_most_one_in_and_one_out(seed):
    cases = golden(100)
    before = set(ids(select_sample(cases, 40, seed=seed)))
    entered_any = False
    for j in range(30):
        new = GoldenCase(id=f"new-{j}", question="a new question?", line=101)
        after = set(ids(select_sample([*cases, new], 40, seed=seed)))
        assert len(after) == 40
        came_in, went_out = after - before, before - after
        assert len(came_in) <= 1 and len(went_out) <= 1
        assert len(came_in) == len(went_out)
        if came_in:
            assert came_in == {new.id}  # only the new case can enter
            entered_any = True
    assert entered_any  # 30 new ids, each with a 40/101 chance: some must have entered


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_removing_one_case_moves_at_most_one_in_and_one_out(seed):
    cases = golden(100)
    before = set(ids(select_sample(cases, 40, seed=seed)))
    for j in range(0, 100, 3):
        removed = cases[j].id
        after = set(ids(select_sample([c for c in cases if c.id != removed], 40, seed=seed)))
        assert len(after) == 40
        came_in, went_out = after - before, before - after
        if removed in before:
            assert went_out == {removed} and len(came_in) == 1
        else:
            assert after == before


def test_a_naive_reshuffle_would_not_be_stable():
    """Control: the stability above is a property of the design, not of any seeded sample."""
    cases = golden(100)
    naive_before = set(random.Random(7).sample(ids(cases), 40))
    naive_after = set(random.Random(7).sample([*ids(cases), "new-0"], 40))
    assert len(naive_before - naive_after) > 1
    ours_before = set(ids(select_sample(cases, 40, seed=7)))
    ours_after = set(ids(select_sample([*cases, GoldenCase(id="new-0", question="?", line=1)], 40, seed=7)))
    assert len(ours_before - ours_after) <= 1


# --------------------------------------------------------------------------- uniformity


def test_each_case_is_chosen_about_size_over_n_of_the_time():
    n, size, seeds = 50, 10, 3000
    cases = golden(n)
    counts: Counter[str] = Counter()
    for seed in range(seeds):
        counts.update(ids(select_sample(cases, size, seed=seed)))
    expected = seeds * size / n  # 600
    assert set(counts) == set(ids(cases))
    # binomial sd ~ sqrt(3000 * 0.2 * 0.8) ~ 22: +-25 % is more than 6 sd
    for cid, k in counts.items():
        assert 0.75 * expected < k < 1.25 * expected, (cid, k, expected)
    # chi-square-like statistic: expectation ~ n * (1 - size / n) = 40; far above means not uniform
    chi2 = sum((k - expected) ** 2 / expected for k in counts.values())
    assert chi2 < 100, chi2
    # and positions do not matter: the first and last fifth of the file are picked equally often
    first = sum(counts[c.id] for c in cases[:10])
    last = sum(counts[c.id] for c in cases[-10:])
    assert abs(first - last) < 0.1 * first
