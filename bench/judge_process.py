"""The test judge of tests/support/judge_server.py for the benchmarks: in a child process (``process``, so that its
threads do not compete with the client for the GIL) or in a thread of this one (``thread``).

    with Judge(latency=0.2, where="process", stats=my_stats) as judge:
        ... judge.url ... judge.stats() ... judge.reset()

``stats(server) -> dict`` and ``setup()`` (run before the server starts, e.g. to teach it more prompts) must be
module-level functions: a spawned child gets them by reference.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

Stats = Callable[[Any], dict[str, Any]]


def reset_server(srv: Any) -> None:
    with srv._lock:  # the test server keeps everything it saw; start each run from zero
        srv.requests.clear()
        srv.unknown_prompts.clear()
        srv.max_in_flight = srv._in_flight


def _serve(conn: Any, latency: float, stats: Stats, setup: Callable[[], None] | None) -> None:  # the child process
    from tests.support.judge_server import JudgeServer

    if setup is not None:
        setup()
    with JudgeServer(latency=latency) as srv:
        conn.send(srv.url)
        while True:
            cmd = conn.recv()
            if cmd == "stats":
                conn.send(stats(srv))
            elif cmd == "reset":
                reset_server(srv)
                conn.send("ok")
            else:
                break


class Judge:
    """A fresh JudgeServer, in a child process (``process``) or a thread of this one (``thread``)."""

    def __init__(self, latency: float, where: str, stats: Stats, setup: Callable[[], None] | None = None) -> None:
        self._proc: Any = None
        self._srv: Any = None
        self._conn: Any = None
        self._stats = stats
        if where == "thread":
            from tests.support.judge_server import JudgeServer

            if setup is not None:
                setup()
            self._srv = JudgeServer(latency=latency).__enter__()
            self.url = self._srv.url
            return
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, latency, stats, setup), daemon=True)
        self._proc.start()
        deadline = time.monotonic() + 60
        while not self._conn.poll(0.1):
            if not self._proc.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the judge server process did not start (exit code {self._proc.exitcode})")
        self.url = self._conn.recv()

    def stats(self) -> dict[str, Any]:
        if self._srv is not None:
            return self._stats(self._srv)
        self._conn.send("stats")
        return self._conn.recv()

    def reset(self) -> None:
        if self._srv is not None:
            reset_server(self._srv)
            return
        self._conn.send("reset")
        self._conn.recv()

    def close(self) -> None:
        if self._srv is not None:
            self._srv.__exit__(None, None, None)
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._conn.send("stop")
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.terminate()  # this benchmark's own child, by its handle
                self._proc.join(5)

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
