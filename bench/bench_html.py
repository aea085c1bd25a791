"""The HTML report at scale: its size, how long it takes to write, and how long Chromium takes to open it and to
filter, sort, search and open a case.

A copy of the quickstart whose golden set is repeated to --cases cases (2,000 by default: 50 copies of the 40, ids
made unique), every answerable case judged by the offline generation metrics, a baseline from a first run, then a
run of a worse target (on fee and fine questions the best passage drops to rank 6 and the answer is drawn from what
is left), written with --html. The page is opened in the distribution's headless Chromium over the DevTools protocol
(tests/support/cdp.py), best of --repeat loads.

    python bench/bench_html.py [--cases 2000] [--repeat 5] [--keep report.html]

The table shows 200 cases a page (the page-size menu has "all on one page"; its time is measured too).
Exit status 1 if the page made a network request, logged an error, or did not show its first page of 200 cases.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.test_html_report import QUICKSTART, WORSE  # noqa: E402
from tests.support.cdp import Browser, chromium  # noqa: E402


def rag_gate(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=1800)


def workspace(folder: Path, n: int) -> Path:
    ws = folder / "qs"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    cases = [json.loads(line) for line in (ws / "golden_set.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for i in range(n):
        case = dict(cases[i % len(cases)])
        case["id"] = f"{case['id']}-{i // len(cases):03d}"
        out.append(json.dumps(case))
    (ws / "golden_set.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    spec = ws / "rag-eval.yml"
    text = spec.read_text(encoding="utf-8").replace("sample: {size: 20, seed: 7, always: {tags: [badcase]}}", f"sample: {{size: {n}}}")
    spec.write_text(text, encoding="utf-8")
    (ws / "worse.py").write_text(WORSE, encoding="utf-8")
    return ws


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", metavar="PATH", help="copy the HTML report here")
    args = parser.parse_args()
    if chromium() is None:
        print("needs Chromium (apt-get install chromium)")
        return 1
    with tempfile.TemporaryDirectory(prefix="rag-gate-bench-html-") as tmp:
        ws = workspace(Path(tmp), args.cases)
        first = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "base.json", "--no-progress", "-q")
        if first.returncode not in (0, 1):
            print(first.stdout + first.stderr)
            return 1
        assert rag_gate(ws, "baseline", "update", "--config", "rag-eval.yml", "--report", "base.json").returncode == 0
        spec = ws / "rag-eval.yml"
        spec.write_text(spec.read_text(encoding="utf-8").replace('function: "quickrag:answer"', 'function: "worse:answer"'), encoding="utf-8")
        t0 = time.perf_counter()
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--no-progress", "-q")
        without = time.perf_counter() - t0
        t0 = time.perf_counter()
        proc = rag_gate(ws, "run", "--config", "rag-eval.yml", "--report", "report.json", "--html", "report.html", "--no-progress", "-q")
        with_html = time.perf_counter() - t0
        print(proc.stdout.strip())
        page = ws / "report.html"
        if args.keep:
            shutil.copy(page, args.keep)
        report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
        data = page.read_text(encoding="utf-8")
        start = data.index('id="rag-gate-data">') + len('id="rag-gate-data">')
        block = data[start:data.index("</script>", start)]
        worse = sum(len(s.get("worse_cases", [])) for s in report["stages"].values())
        print(f"{len(report['cases'])} cases ({worse} worse-case records), judged by the generation stage: "
              f"{len(report['stages']['generation']['samples'])}")
        print(f"HTML report: {page.stat().st_size / 1e6:.2f} MB ({len(block.encode()) / 1e6:.2f} MB of it the data, "
              f"{(page.stat().st_size - len(block.encode())) / 1e3:.0f} kB the page's CSS and script); "
              f"report.json {(ws / 'report.json').stat().st_size / 1e6:.2f} MB")
        print(f"the run with --html: {with_html:.2f} s, without: {without:.2f} s (one run each, CLI in a subprocess)")

        loads, actions = [], []
        ok = True
        with Browser(Path(tmp) / "chromium", width=1400, height=1000) as b:
            for _ in range(args.repeat):
                b.events.clear()
                b.open("about:blank")
                t0 = time.perf_counter()
                b.open(page.as_uri())
                wall = time.perf_counter() - t0
                timing = b.evaluate("(() => { const n = performance.getEntriesByType('navigation')[0]; const m = "
                                    "performance.getEntriesByName('rag-gate-ready')[0]; return [n.domInteractive, m.startTime, "
                                    "n.loadEventEnd]; })()")
                loads.append((wall, *timing))
                actions.append(b.evaluate("""(() => {
                  const t = (f) => { const s = performance.now(); f(); return performance.now() - s; };
                  const choose = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('change')); };
                  const out = {};
                  out.filter_worse = t(() => choose('f-status', 'worse'));
                  out.filter_all = t(() => choose('f-status', 'all'));
                  out.search = t(() => { const s = document.getElementById('search'); s.value = 'dvd'; s.dispatchEvent(new Event('input')); });
                  out.search_clear = t(() => { const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); });
                  out.sort = t(() => document.querySelector('#cases th[data-key="retrieval:mrr"]').click());
                  out.open_case = t(() => document.querySelector('#cases tr.case').click());
                  out.next_page = t(() => document.getElementById('next').click());
                  out.all_on_one_page = t(() => { choose('page-size', '0'); document.body.offsetHeight; });
                  out.back_to_200 = t(() => { choose('page-size', '200'); document.body.offsetHeight; });
                  return out; })()"""))
                rows = b.evaluate("document.querySelectorAll('#cases tr.case').length")
                shown = b.evaluate("document.getElementById('shown').textContent")
                requests = [u for u in b.requests() if u.split("#")[0] != page.as_uri() and u != "about:blank"]
                errors = b.console_errors()
                n = len(report["cases"])
                if rows != min(200, n) or (n > 200 and not shown.endswith(f"of {n} matching cases ({n} in all)")) or requests or errors:
                    print(f"FAILED: {rows} rows ({shown!r}) for {n} cases; requests {requests}; errors {errors}")
                    ok = False
            heap = b.evaluate("performance.memory ? performance.memory.usedJSHeapSize : null")
        best = min(loads, key=lambda x: x[0])
        print(f"open in Chromium, best of {args.repeat}: {best[0] * 1000:.0f} ms to the load event (DOM interactive at "
              f"{best[1]:.0f} ms, the page drawn by its script at {best[2]:.0f} ms, load event at {best[3]:.0f} ms); "
              f"worst {max(x[0] for x in loads) * 1000:.0f} ms")
        for key in actions[0]:
            print(f"  {key:<13} {min(a[key] for a in actions):7.1f} ms (best)  {max(a[key] for a in actions):7.1f} ms (worst)")
        if heap:
            print(f"JS heap after the page is drawn: {heap / 1e6:.1f} MB")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
