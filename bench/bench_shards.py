"""One job against N shards run in parallel (processes) and merged: the wall time a CI matrix saves.

Starts the test RAG service of tests/support/rag_server.py on 127.0.0.1 with a fixed latency per request (default 200 ms),
writes a spec whose HTTP target asks it with concurrency 4 (retrieval metrics and the generation metrics that need
no judge), and times, with the real CLI in subprocesses:

    one job     rag-gate run over every case (default 480)
    N shards    rag-gate run --shard I/N, the N processes started together (what a matrix does)
    merge       rag-gate merge of the N parts

It checks that the merged metrics equal the one job's (but for the latencies, measured live) and prints the wall
times, the ideal (cases x latency / concurrency, per job), and the speed-up.

    python bench/bench_shards.py [--cases 480] [--latency 0.2] [--concurrency 4] [--shards 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root, for tests.support.rag_server

from tests.support.rag_server import RagServer, response  # noqa: E402

LIVE = {"mean_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms"}
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  http: {{url: "{url}", concurrency: {concurrency}, timeout_s: 30}}
  k: 10
cache: {{path: cache.sqlite}}
stages:
  retrieval:
    metrics: [hit_rate@5, mrr, recall@5, ndcg@10]
    gates:
      hit_rate@5: {{min: 0.5}}
  generation:
    metrics: [token_f1, exact_match, rouge_l]
    sample: {{size: all}}
"""


def rag_gate(ws: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "gate", *args, "--config", "rag-eval.yml"], cwd=ws, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen[str], what: str) -> None:
    out, err = proc.communicate(timeout=900)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{what} exited {proc.returncode}:\n{out}\n{err}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=480)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the service waits before each answer")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight per job")
    ap.add_argument("--shards", type=int, default=3)
    args = ap.parse_args()

    golden = "".join(json.dumps({"id": f"c{i:04d}", "question": f"What does rule {i} say?", "ground_truth": f"rule {i} says {i % 7}",
                                 "relevant_doc_ids": [f"d{i}"]}) + "\n" for i in range(args.cases))
    responses = {f"What does rule {i} say?": response([f"d{(i + (i % 3)) % args.cases}", *(f"d{(i + j) % args.cases}" for j in range(1, 10))],
                                                      answer=f"rule {i} says {i % 5}", text=lambda d: f"passage {d} " * 20)
                 for i in range(args.cases)}
    with tempfile.TemporaryDirectory() as tmp, RagServer(responses, latency=args.latency) as srv:
        ws = Path(tmp)
        (ws / "golden.jsonl").write_text(golden, encoding="utf-8")
        (ws / "rag-eval.yml").write_text(SPEC.format(url=srv.url, concurrency=args.concurrency), encoding="utf-8")

        t0 = time.perf_counter()
        finished(rag_gate(ws, "run", "--report", "one.json", "--no-progress", "--quiet"), "the one job")
        one_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        procs = [rag_gate(ws, "run", "--shard", f"{i}/{args.shards}", "--report", f"part-{i}.json", "--no-progress", "--quiet")
                 for i in range(1, args.shards + 1)]
        for i, proc in enumerate(procs, 1):
            finished(proc, f"shard {i}")
        shards_s = time.perf_counter() - t0
        parts = [json.loads((ws / f"part-{i}.json").read_text(encoding="utf-8")) for i in range(1, args.shards + 1)]

        t0 = time.perf_counter()
        finished(rag_gate(ws, "merge", *(f"part-{i}.json" for i in range(1, args.shards + 1)), "--report", "merged.json",
                          "--quiet"), "the merge")
        merge_s = time.perf_counter() - t0

        one, merged = (json.loads((ws / n).read_text(encoding="utf-8")) for n in ("one.json", "merged.json"))
        same = all({m: v for m, v in one["stages"][s]["metrics"].items() if m not in LIVE}
                   == {m: v for m, v in merged["stages"][s]["metrics"].items() if m not in LIVE} for s in one["stages"])

    ideal_one = args.cases * args.latency / args.concurrency
    biggest = max(p["shard"]["cases"] for p in parts)
    ideal_shard = biggest * args.latency / args.concurrency
    print(f"{args.cases} cases, service latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency} per job, "
          f"{args.shards} shards of {', '.join(str(p['shard']['cases']) for p in parts)} cases")
    print(f"{'':<28} {'wall s':>7}  {'ideal s':>7}")
    print(f"{'one job':<28} {one_s:7.2f}  {ideal_one:7.2f}")
    print(f"{f'{args.shards} shards in parallel':<28} {shards_s:7.2f}  {ideal_shard:7.2f}")
    print(f"{'merge':<28} {merge_s:7.2f}")
    print(f"{'shards + merge':<28} {shards_s + merge_s:7.2f}   speed-up {one_s / (shards_s + merge_s):.2f}x")
    print(f"merged metrics equal the one job's (latencies aside): {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
