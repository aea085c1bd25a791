"""The time a run may take (the spec's ``max_duration_s``), on a monotonic clock.

Every wait is capped by the time left (a Retry-After of 30 s with 5 s left waits 5 s); once the time is up,
whatever has not started is not started: a target call or a judge score ends as an error saying "deadline
reached", what is done is kept, and the run's verdict is ``error`` (exit 3) with a sentence saying how far it got.
"""

from __future__ import annotations

import time
from collections.abc import Callable

REACHED = "deadline reached (max_duration_s)"


ABANDONED = "rag_gate_abandoned"  # an attribute set (True) on a thread left to a call that ran past the deadline

class Deadline:
    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._start = clock()

    def elapsed(self) -> float:
        return self._clock() - self._start

    def left(self) -> float | None:
        """Seconds left (0 when the time is up); None without a limit."""
        return None if self.seconds is None else max(0.0, self.seconds - self.elapsed())

    def reached(self) -> bool:
        left = self.left()
        return left is not None and left <= 0.0

    def cap(self, seconds: float) -> float:
        """``seconds``, or the time left if that is shorter."""
        left = self.left()
        return seconds if left is None else min(seconds, left)


NO_DEADLINE = Deadline(None)
