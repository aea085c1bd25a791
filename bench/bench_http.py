"""How close the HTTP target gets to ideal parallelism against a service with fixed latency.

Starts the test service of tests/support/rag_server.py on 127.0.0.1 with a fixed latency per request
(default 50 ms), asks it for N cases (default 480) through gate.run.ask.collect_outputs with a
real gate.targets.http.HttpTarget, and prints for each concurrency (default 16, and 8 and 32
for context) the wall time (best of --repeat), the ideal time N x latency / concurrency, the
efficiency ideal / actual, and the most requests the server saw in flight at once.

    python bench/bench_http.py [--cases 480] [--latency 0.05] [--concurrency 16 8 32] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.support.rag_server

from gate.config.loader import filled  # noqa: E402
from gate.core.model import GoldenCase  # noqa: E402
from gate.run.ask import collect_outputs  # noqa: E402
from gate.targets.http import HttpTarget  # noqa: E402
from tests.support.rag_server import RagServer, response  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=480)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the server waits before each answer")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 8, 32])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    cases = [GoldenCase(id=f"c{i:04d}", question=f"question {i}?", line=i + 1, relevant={f"d{i}": 1}) for i in range(args.cases)]
    responses = {c.question: response([f"d{int(c.id[1:])}", *(f"x{j}" for j in range(9))], text=lambda d: f"passage {d} " * 10)
                 for c in cases}
    ok = True
    print(f"{args.cases} cases, server latency {args.latency * 1000:.0f} ms per request, best of {args.repeat}")
    print(f"{'concurrency':>11}  {'wall s':>7}  {'ideal s':>7}  {'efficiency':>10}  {'cases/s':>8}  {'max in flight':>13}  errors")
    with RagServer(responses, latency=args.latency) as srv:
        for conc in args.concurrency:
            best, max_in_flight, errors = float("inf"), 0, 0
            for _ in range(args.repeat):
                srv.reset()
                cfg = filled("$defs/http_target", {"url": srv.url, "concurrency": conc, "timeout_s": 30, "retries": 0})
                target = HttpTarget(cfg)
                t0 = time.perf_counter()
                with target:
                    outputs = collect_outputs(target, cases, 10)
                elapsed = time.perf_counter() - t0
                errors = sum(1 for o in outputs.values() if o.error)
                if len(outputs) != len(cases) or errors or len(srv.requests) != len(cases):
                    ok = False
                if elapsed < best:
                    best, max_in_flight = elapsed, srv.max_in_flight
            ideal = args.cases * args.latency / conc
            print(f"{conc:>11}  {best:7.3f}  {ideal:7.3f}  {ideal / best:10.1%}  {args.cases / best:8.0f}  {max_in_flight:>13}  {errors}")
            if max_in_flight > conc:
                print(f"  FAIL: {max_in_flight} requests in flight with concurrency {conc}")
                ok = False
    if not ok:
        print("FAIL: some cases errored or went missing")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
