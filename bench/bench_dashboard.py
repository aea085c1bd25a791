"""The dashboard at scale: its size, how long the command takes to write it, and how long Chromium takes to draw it.

A seeded history of --runs runs (200 by default, what the history keeps) with 12 metrics (retrieval, judge and
robustness figures; tests/e2e/test_dashboard_browser.py's make_history: kinds, changes, failing runs), drawn without
a spec (one chart per metric: 12 charts of --runs points, and a table of --runs rows with 12 metric columns).

* the command (``rag-gate dashboard``, in a subprocess: start-up included), best of --repeat, on a history file whose
  lines hold the fields report.schema.json knows (the command reads the file through the schema);
* the same runs with the entries' newer fields (kind, url, changes, system), rendered in process: the page's size;
* both pages opened in the distribution's headless Chromium (tests/support/cdp.py), best of --repeat: the time to the
  page's "rag-gate-ready" mark (its script done: every chart and the table drawn) and to the load event.

    python bench/bench_dashboard.py [--runs 200] [--repeat 5] [--seed 7] [--keep dashboard.html]

Exit status 1 if a page is over --max-kb (1000 kB), takes over --max-load-ms (2000 ms) to draw, made a network request
or logged an error.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.test_dashboard_browser import SHOTS, make_history, rag_gate_dashboard, write_workspace  # noqa: E402
from tests.support.cdp import Browser, chromium  # noqa: E402


def write_times(ws: Path, repeat: int) -> tuple[list[float], str]:
    """The command's wall time, ``repeat`` times, and what it printed."""
    times, said = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = rag_gate_dashboard(ws, "--history", "eval/history.jsonl", "--out", "dashboard.html")
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"rag-gate dashboard failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        said = proc.stdout.strip()
    return times, said


def load_times(b: Browser, page: Path, repeat: int) -> tuple[list[tuple[float, float, float]], list[str]]:
    """(wall ms to the load event, ms to the ready mark, ms to the load event end) per load; the problems seen."""
    loads, problems = [], []
    for _ in range(repeat):
        b.events.clear()
        b.open("about:blank")
        t0 = time.perf_counter()
        b.open(page.as_uri())
        wall = (time.perf_counter() - t0) * 1000
        ready, end = b.evaluate("(() => { const n = performance.getEntriesByType('navigation')[0]; const m = "
                                "performance.getEntriesByName('rag-gate-ready')[0]; return [m ? m.startTime : -1, n.loadEventEnd]; })()")
        loads.append((wall, ready, end))
        requests = [u for u in b.requests() if u.split("#")[0] not in (page.as_uri(), "about:blank")]
        errors = b.console_errors()
        if ready < 0 or requests or errors:
            problems.append(f"{page.name}: ready mark {ready}, requests {requests}, errors {errors}")
    return loads, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", metavar="PATH", help="copy the page with the newer fields here")
    parser.add_argument("--max-kb", type=float, default=1000.0)
    parser.add_argument("--max-load-ms", type=float, default=2000.0)
    args = parser.parse_args()
    from gate.cli.dashboard import page_assets
    from gate.render.dashboard import render_dashboard

    entries = make_history(args.runs, args.seed)
    ok = True
    with tempfile.TemporaryDirectory(prefix="rag-gate-bench-dashboard-") as tmp:
        ws = write_workspace(Path(tmp) / "ws", entries)
        times, said = write_times(ws, args.repeat)
        cli_page = ws / "dashboard.html"
        full_page = ws / "full.html"
        full_page.write_text(render_dashboard(entries, None, None, page_assets()), encoding="utf-8")
        if args.keep:
            shutil.copy(full_page, args.keep)
        print(said)
        pages = [("the command's page (today's schema fields)", cli_page), ("with kind, url, changes, system", full_page)]
        for label, page in pages:
            kb = page.stat().st_size / 1000
            ok &= kb <= args.max_kb
            print(f"{label}: {kb:.0f} kB")
        print(f"rag-gate dashboard ({args.runs} runs, 12 metrics), best of {args.repeat}: {min(times) * 1000:.0f} ms "
              f"(worst {max(times) * 1000:.0f} ms; a subprocess: Python's start-up included)")
        if chromium() is None:
            print("no Chromium (apt-get install chromium): load time not measured")
            return 0 if ok else 1
        with Browser(Path(tmp) / "chromium", width=1400, height=1000) as b:
            for label, page in pages:
                loads, problems = load_times(b, page, args.repeat)
                best = min(loads, key=lambda x: x[1])
                print(f"open in Chromium, {label}, best of {args.repeat}: drawn (rag-gate-ready) at {best[1]:.0f} ms, load event "
                      f"at {best[2]:.0f} ms, {best[0]:.0f} ms wall; worst drawn at {max(x[1] for x in loads):.0f} ms")
                for problem in problems:
                    print("FAILED:", problem)
                ok &= not problems and max(x[1] for x in loads) <= args.max_load_ms
            SHOTS.mkdir(parents=True, exist_ok=True)
            shot = b.screenshot(SHOTS / "dashboard-bench.png", full_page=False)
            print(f"screenshot: {shot}")
    print("within budget" if ok else f"OVER BUDGET ({args.max_kb:.0f} kB, {args.max_load_ms:.0f} ms) or a problem above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
