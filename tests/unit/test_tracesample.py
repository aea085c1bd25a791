"""The traces sample (gate.core.tracesample): seeded, stratified by UTC day, within [since, until), under max."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from gate.core.traces import Trace
from gate.core.tracesample import UNDATED, sample_traces

DAY = datetime(2024, 5, 6, tzinfo=UTC)


def traces_on(day: int, n: int, prefix: str = "t") -> list[Trace]:
    """``n`` traces spread over UTC day ``day`` (0 is 2024-05-06)."""
    start = DAY + timedelta(days=day)
    return [Trace(id=f"{prefix}{day}-{i:04d}", question="q?", line=i + 1, timestamp=start + timedelta(seconds=i * 86400 // n))
            for i in range(n)]


def undated(n: int) -> list[Trace]:
    return [Trace(id=f"u-{i}", question="q?", line=i + 1) for i in range(n)]


def sample(traces, rate=0.1, max=None, seed=7, since=None, until=None):
    return sample_traces(traces, rate=rate, max=max, seed=seed, since=since, until=until)


def by_hash(traces: list[Trace], seed: int, k: int) -> set[str]:
    """The k ids first in the order of sha256("<seed>:<id>"), the order the sample takes a day's traces in."""
    return {t.id for t in sorted(traces, key=lambda t: hashlib.sha256(f"{seed}:{t.id}".encode()).digest())[:k]}


def test_the_same_traces_seed_and_settings_give_the_same_sample() -> None:
    traces = traces_on(0, 300) + traces_on(1, 200)
    shuffled = random.Random(1).sample(traces, len(traces))
    first = sample(traces, rate=0.05)
    assert [t.id for t in first.traces] == [t.id for t in sample(shuffled, rate=0.05).traces]
    assert {t.id for t in first.traces} != {t.id for t in sample(traces, rate=0.05, seed=8).traces}


def test_within_a_day_the_traces_first_in_seeded_hash_order_are_taken() -> None:
    day0, day1 = traces_on(0, 50), traces_on(1, 30)
    got = sample(day0 + day1, rate=0.2, seed=42)
    assert got.by_day == {"2024-05-06": 10, "2024-05-07": 6}
    assert {t.id for t in got.traces} == by_hash(day0, 42, 10) | by_hash(day1, 42, 6)


def test_a_day_with_ten_times_the_traffic_gets_ten_times_the_sample() -> None:
    got = sample(traces_on(0, 2000) + traces_on(1, 200), rate=0.05)
    assert got.by_day == {"2024-05-06": 100, "2024-05-07": 10}
    assert got.window_by_day == {"2024-05-06": 2000, "2024-05-07": 200}
    assert got.in_window == 2200 and len(got.traces) == 110


def test_the_size_is_the_rounded_rate_of_the_window_and_days_settle_fractions_by_largest_remainder() -> None:
    # 3 days of 5: 0.1 x 15 = 1.5, rounded half up: 2; each day's share is 0.5, so two days give one, one none
    got = sample(traces_on(0, 5) + traces_on(1, 5) + traces_on(2, 5), rate=0.1)
    assert len(got.traces) == 2 and sorted(got.by_day.values()) == [0, 1, 1]
    # rate 0.3 of 12, 9 and 1: shares 3.6, 2.7 and 0.3, floors 3, 2 and 0, the size round(6.6) = 7
    got = sample(traces_on(0, 12) + traces_on(1, 9) + traces_on(2, 1), rate=0.3)
    assert got.by_day == {"2024-05-06": 4, "2024-05-07": 3, "2024-05-08": 0}  # remainders .6 and .7 get one each


def test_a_window_with_traces_gives_at_least_one() -> None:
    got = sample(traces_on(0, 10), rate=0.01)
    assert len(got.traces) == 1 and got.by_day == {"2024-05-06": 1}
    assert sample(traces_on(0, 10), rate=0).traces == []
    assert sample([], rate=0.5).traces == [] and sample([], rate=0.5).in_window == 0


def test_over_max_every_day_is_scaled_down_in_proportion() -> None:
    got = sample(traces_on(0, 900) + traces_on(1, 100), rate=1.0, max=100)
    assert got.by_day == {"2024-05-06": 90, "2024-05-07": 10}
    month = [t for d in range(30) for t in traces_on(d, 100, prefix="m")]
    got = sample(month, rate=0.5, max=300)
    assert len(got.traces) == 300 and set(got.by_day.values()) == {10}
    assert sample(month, rate=0.5, max=0).traces == []
    assert len(sample(month, rate=0.05, max=1000).traces) == 150  # under max: the rate alone


def test_the_window_is_since_inclusive_until_exclusive() -> None:
    edge = [Trace(id=name, question="q?", line=1, timestamp=DAY + timedelta(hours=h))
            for name, h in (("before", -0.001), ("at-since", 0), ("inside", 5), ("at-until", 10), ("after", 11))]
    got = sample(edge, rate=1.0, since=DAY, until=DAY + timedelta(hours=10))
    assert [t.id for t in got.traces] == ["at-since", "inside"]
    assert got.in_window == 2
    assert [t.id for t in sample(edge, rate=1.0, since=DAY + timedelta(hours=5)).traces] == ["inside", "at-until", "after"]
    assert [t.id for t in sample(edge, rate=1.0, until=DAY).traces] == ["before"]


def test_a_window_without_a_zone_is_utc() -> None:
    traces = traces_on(0, 24)
    naive = sample(traces, rate=1.0, since=datetime(2024, 5, 6, 12), until=datetime(2024, 5, 7))
    aware = sample(traces, rate=1.0, since=DAY + timedelta(hours=12), until=DAY + timedelta(days=1))
    assert [t.id for t in naive.traces] == [t.id for t in aware.traces] and len(aware.traces) == 12


def test_undated_traces_are_counted_not_sampled_when_a_window_is_set() -> None:
    got = sample(traces_on(0, 20) + undated(30), rate=0.5, since=DAY)
    assert got.undated == 30 and got.in_window == 20
    assert UNDATED not in got.by_day and all(t.timestamp is not None for t in got.traces)
    assert len(got.traces) == 10


def test_undated_traces_are_their_own_stratum_without_a_window() -> None:
    got = sample(traces_on(0, 20) + undated(30), rate=0.5)
    assert got.undated == 30 and got.in_window == 50
    assert got.by_day == {"2024-05-06": 10, UNDATED: 15}
    assert [t.id for t in got.traces][-15:] == sorted(t.id for t in got.traces if t.timestamp is None)  # last, by id


def test_days_are_utc_days() -> None:
    minus2 = timezone(timedelta(hours=-2))
    late = Trace(id="late", question="q?", line=1, timestamp=datetime(2024, 5, 6, 23, 30, tzinfo=minus2))  # 01:30 UTC on the 7th
    early = Trace(id="early", question="q?", line=2, timestamp=datetime(2024, 5, 7, 0, 30, tzinfo=timezone(timedelta(hours=2))))
    assert sample([late, early], rate=1.0).by_day == {"2024-05-06": 1, "2024-05-07": 1}


def test_the_sample_is_in_timestamp_order_ties_by_id() -> None:
    same = DAY + timedelta(hours=3)
    traces = [Trace(id=i, question="q?", line=1, timestamp=ts) for i, ts in
              (("c", same), ("a", same), ("z", DAY + timedelta(hours=1)), ("b", DAY + timedelta(hours=9)))]
    assert [t.id for t in sample(traces, rate=1.0).traces] == ["z", "a", "c", "b"]


def test_traffic_added_on_another_day_leaves_a_day_s_choice_alone() -> None:
    day0, day1 = traces_on(0, 100), traces_on(1, 100)
    before = sample(day0 + day1, rate=0.1)
    after = sample(day0 + day1 + traces_on(2, 100), rate=0.1)
    assert before.by_day["2024-05-06"] == after.by_day["2024-05-06"] == 10
    assert {t.id for t in before.traces if t.id.startswith("t0-")} == {t.id for t in after.traces if t.id.startswith("t0-")}
    # when a day's share moves, the traces it keeps are the first of the same order: 7.5 each of 15 (max), then 5 of 15
    capped = sample(day0 + day1, rate=0.1, max=15)
    thirds = sample(day0 + day1 + traces_on(2, 100), rate=0.1, max=15)
    a, b = ({t.id for t in s.traces if t.id.startswith("t0-")} for s in (capped, thirds))
    assert len(a) in (7, 8) and sorted(capped.by_day.values()) == [7, 8]
    assert len(b) == 5 and b < a
    assert a == by_hash(day0, 7, len(a)) and b == by_hash(day0, 7, 5)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"rate": 1.5}, "rate must be between 0 and 1"),
    ({"rate": -0.1}, "rate must be between 0 and 1"),
    ({"max": -1}, "max must be at least 0"),
    ({"since": DAY, "until": DAY}, "must be before until"),
])
def test_settings_out_of_range_are_refused(kwargs: dict, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        sample(traces_on(0, 3), **kwargs)
