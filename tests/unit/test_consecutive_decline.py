"""consecutive_decline: N: a slide no single drop shows, decided on the history's values and this run's."""

from __future__ import annotations

import pytest

from gate.core.gates import decline_check


@pytest.mark.parametrize(("series", "status"), [
    ([0.90, 0.89, 0.88, 0.87], "fail"),  # three falls in a row
    ([0.90, 0.91, 0.89, 0.88], "pass"),  # only two
    ([0.90, 0.89, 0.89, 0.88], "pass"),  # a flat step breaks the run
    ([0.95, 0.90, 0.91, 0.90, 0.89, 0.88], "fail"),  # the last three only
])
def test_three_falls_fire_and_two_do_not(series: list[float], status: str) -> None:
    check = decline_check(3, series, higher_is_better=True)
    assert check.status == status, check.detail
    assert " → ".join(f"{v:g}" for v in series[-4:]) in check.detail


def test_lower_is_better_metrics_decline_upwards_and_a_short_history_is_skipped() -> None:
    assert decline_check(2, [100.0, 120.0, 150.0], higher_is_better=False).status == "fail"
    assert decline_check(2, [150.0, 120.0, 100.0], higher_is_better=False).status == "pass"
    short = decline_check(3, [0.9, 0.8], higher_is_better=True)
    assert short.status == "skipped" and short.detail == "needs 3 earlier runs in the history, has 1"
