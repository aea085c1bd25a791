"""How fast rag-gate's generation stage judges, against ragas's and deepeval's own evaluate().

Every judge call goes to the real OpenAI-compatible test judge of tests/support/judge_server.py on
127.0.0.1 with a fixed latency (default 200 ms). By default the judge runs in a child process,
so that its threads do not compete with the client for the GIL (``--server thread`` keeps it
in-process). The cases are the 40 questions of examples/quickstart/golden_set.jsonl answered
by ``quickrag.answer`` (one-sentence answers, 3 contexts each; the 8 questions the RAG should
refuse are judged too, as a real judge would see them). Sections:

  1. rag-gate, ragas faithfulness + answer_relevancy: ``gate.stages.generation.generation_stage``
     with a NullCache (every case judged), judge concurrency 16, best of --repeat: wall time,
     judge calls (server and the stage's usage), ideal = calls x latency / concurrency, ideal/actual;
  2. ``ragas.evaluate()`` (deprecated, old-style metrics) on the same 40 cases: fully default
     (client from OPENAI_BASE_URL), with ``llm_factory`` + modern embeddings, and with the
     LangChain wrappers (the combination that computes both metrics);
  3. rag-gate with engine deepeval (faithfulness), and deepeval's own ``evaluate()`` with its
     ``OpenAIModel(base_url=...)``, default and with the settings rag-gate uses;
  4. section 1 with a real JudgeCache in a temporary folder, run twice (second run: calls, time);
  5. import cost: whether ``python -X importtime -c "import gate.run.flow"`` lists ragas/deepeval/openai,
     and the wall time of ``import gate.run.flow`` / ``import ragas`` / ``import deepeval`` in a subprocess.

    python bench/bench_judges.py [--latency 0.2] [--concurrency 16] [--repeat 2] [--server process] [--sections 1 2 3 4 5]

Takes 2-3 minutes on 2 cores. Prints figures and makes no pass/fail judgement on speed. Exit
status 1 if something errored: a rag-gate section raised, a judged score errored, the stage's
call count disagreed with the server's, or the server saw a prompt it does not recognise.
The comparison runs (ragas/deepeval evaluate()) only report why when they fail.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import io
import logging
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
for _p in (str(QUICKSTART), str(ROOT)):  # tests.support.judge_server and quickrag
    if _p not in sys.path:
        sys.path.insert(0, _p)
from bench.judge_process import Judge  # noqa: E402

# Before ragas or deepeval is imported anywhere (here, in the judge process, in subprocesses).
os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # "1" does not turn ragas's telemetry off
os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] = "1"
os.environ["DEEPEVAL_DISABLE_DOTENV"] = "1"
os.environ.setdefault("DEEPEVAL_DISABLE_LEGACY_KEYFILE", "1")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "0")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")

MODEL = "gpt-4o-mini-2024-07-18"
EMBEDDINGS = "text-embedding-3-small"
# ragas's old-style AnswerRelevancy (ragas.metrics._answer_relevance, used by evaluate()) words its
# instruction differently from the collections prompt the test judge knows; teach the judge process
# that wording too (tests/support/judge_server.py itself is not changed), or evaluate() gets HTTP 400s.
LEGACY_AR_PHRASE = "Generate a question for the given answer and Identify if answer is noncommittal"


# -- the judge server (in a child process by default) -----------------------------------------


def _teach_legacy_prompts() -> None:
    import tests.support.judge_server as js

    if not any(name == "ragas-legacy/question" for name, _, _ in js.MATCHERS):
        js.MATCHERS.insert(0, ("ragas-legacy/question", LEGACY_AR_PHRASE, js._ragas_question))


def _server_stats(srv: Any) -> dict[str, Any]:
    reqs = list(srv.requests)
    chat = [r for r in reqs if r.path.endswith("/chat/completions")]
    return {
        "calls": len(reqs),
        "chat": len(chat),
        "embeddings": sum(1 for r in reqs if r.path.endswith("/embeddings")),
        "max_in_flight": srv.max_in_flight,
        "unknown": len(srv.unknown_prompts),
        "failed": sum(1 for r in reqs if r.status != 200),
        "n": sorted({int(r.body["n"]) for r in chat if isinstance(r.body, dict) and r.body.get("n")}),
    }


# -- the cases ---------------------------------------------------------------------------------


def build_cases() -> tuple[list[Any], dict[str, Any]]:
    """The 40 golden questions answered by quickrag (all typed answerable so the stage judges all 40)."""
    from quickrag import answer

    from gate.core.model import TargetOutput
    from gate.io.golden import load_golden_set

    cases, outputs = [], {}
    for case in load_golden_set(QUICKSTART / "golden_set.jsonl"):
        result = answer(case.question)
        cases.append(dataclasses.replace(case, type="answerable"))
        outputs[case.id] = TargetOutput(case_id=case.id, answer=result["answer"], contexts=list(result["contexts"]))
    return cases, outputs


# -- measurements ------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    section: str
    label: str
    wall: float | None = None
    server: dict[str, Any] = dataclasses.field(default_factory=dict)
    usage_calls: int | None = None
    scores: dict[str, str] = dataclasses.field(default_factory=dict)  # metric -> "mean (n NaN/errored)"
    cpu: float | None = None
    runs: list[float] = dataclasses.field(default_factory=list)
    note: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[Row] = []
        self.errors: list[str] = []
        self.cases, self.outputs = build_cases()

    def ideal(self, calls: int) -> float:
        return calls * self.args.latency / self.args.concurrency

    def judge(self) -> Judge:
        return Judge(self.args.latency, self.args.server, _server_stats, setup=_teach_legacy_prompts)

    def judge_cfg(self, url: str) -> dict[str, Any]:
        return {"base_url": url, "model": MODEL, "embeddings_model": EMBEDDINGS, "temperature": 0,
                "concurrency": self.args.concurrency, "timeout_s": 60, "max_retries": 3}

    def error(self, text: str) -> None:
        self.errors.append(text)
        print(f"  ERROR: {text}")

    def show(self, row: Row) -> None:
        calls = row.server.get("calls")
        parts = [f"  {row.label}:"]
        if row.wall is not None:
            parts.append(f"wall {row.wall:.2f} s" + (f" (runs {', '.join(f'{r:.2f}' for r in row.runs)})" if len(row.runs) > 1 else ""))
        if calls is not None:
            parts.append(f"calls {calls} (chat {row.server['chat']}, embeddings {row.server['embeddings']}"
                         f"{', failed ' + str(row.server['failed']) if row.server.get('failed') else ''})")
            if row.usage_calls is not None:
                parts.append(f"usage.calls {row.usage_calls}")
            if calls and row.wall:
                parts.append(f"ideal {self.ideal(calls):.2f} s, ideal/actual {self.ideal(calls) / row.wall:.0%}")
            if row.server.get("max_in_flight") is not None:
                parts.append(f"max in flight {row.server['max_in_flight']}")
        if row.cpu is not None:
            parts.append(f"client CPU {row.cpu:.2f} s")
        print(parts[0] + " " + ", ".join(parts[1:]))
        if row.scores:
            print("      scores: " + "; ".join(f"{k} {v}" for k, v in row.scores.items()))
        if row.note:
            print(f"      {row.note}")
        self.rows.append(row)

    # -- rag-gate -------------------------------------------------------------------------

    def stage(self, cfg: dict[str, Any], make_cache: Callable[[], Any], judge: Judge) -> tuple[float, float, dict[str, Any], dict[str, Any]]:
        """One generation_stage run against ``judge``: (wall, client CPU, stage, server stats of this run)."""
        from gate.config.loader import filled
        from gate.core.settings import GenerationSettings
        from gate.judges import resolve_judge
        from gate.stages.context import StageContext
        from gate.stages.generation import generation_stage

        settings = GenerationSettings.read(filled("$defs/generation_stage", cfg))
        judge_settings, no_judge = resolve_judge(filled("properties/judge", self.judge_cfg(judge.url)), {})
        before = judge.stats()
        cache = make_cache()
        try:
            with _leftovers() as leftovers:
                ctx = StageContext(self.cases, self.outputs, cache, judge=judge_settings, no_judge=no_judge)
                c0, t0 = time.process_time(), time.perf_counter()
                stage = generation_stage(settings, ctx)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        finally:
            cache.close()
        if leftovers:
            self.error(f"rag-gate left {len(leftovers)} asyncio errors behind after the stage: {_short(leftovers[0])}")
        after = judge.stats()
        run = {k: after[k] - before[k] for k in ("calls", "chat", "embeddings", "unknown", "failed")}
        run["max_in_flight"] = after["max_in_flight"] if run["calls"] else None  # the server's, since it started
        run["n"] = after["n"]
        return wall, cpu, stage, run

    def check_stage(self, label: str, stage: dict[str, Any], server: dict[str, Any]) -> None:
        if stage["scores"]["errored"]:
            first = next(s["error"] for s in stage["samples"] if s["error"])
            self.error(f"{label}: {stage['scores']['errored']} scores errored, e.g. {first}")
        if stage["usage"]["calls"] != server["calls"]:
            self.error(f"{label}: the stage counted {stage['usage']['calls']} judge calls, the server saw {server['calls']}")
        if server["unknown"]:
            self.error(f"{label}: the judge did not recognise {server['unknown']} prompts")

    def rag_gate(self, section: str, label: str, cfg: dict[str, Any]) -> None:
        from gate.judges.cache import NullCache

        best: Row | None = None
        runs = []
        for _ in range(self.args.repeat):
            with self.judge() as judge:
                wall, cpu, stage, server = self.stage(cfg, NullCache, judge)
            self.check_stage(label, stage, server)
            runs.append(wall)
            row = Row(section, label, wall, server, stage["usage"]["calls"], _stage_scores(stage), cpu)
            if _faster(row, best):
                best = row
        assert best is not None
        best.runs = runs
        self.show(best)

    def cached(self) -> None:
        from gate.judges.cache import JudgeCache

        cfg = {"engine": "ragas", "metrics": ["faithfulness", "answer_relevancy"]}
        with tempfile.TemporaryDirectory(prefix="rag-gate-bench-cache-") as tmp, self.judge() as judge:
            path = Path(tmp) / "judge-cache.sqlite"
            for run in (1, 2):
                wall, cpu, stage, server = self.stage(cfg, lambda: JudgeCache(path), judge)
                self.check_stage(f"cache run {run}", stage, server)
                u = stage["usage"]
                self.show(Row("4", f"rag-gate ragas, JudgeCache, run {run}", wall, server, u["calls"], _stage_scores(stage), cpu,
                              note=f"cache hits {u['cache_hits']}, misses {u['cache_misses']}; file {path.stat().st_size / 1024:.0f} KiB"))

    # -- ragas.evaluate() -------------------------------------------------------------------

    def ragas_evaluate(self) -> None:
        import ragas
        from ragas import EvaluationDataset

        print(f"  ragas {ragas.__version__}; evaluate() defaults: RunConfig(max_workers=16, timeout=180, max_retries=10); "
              "show_progress=False (no bar)")
        rows = [{"user_input": c.question, "response": self.outputs[c.id].answer, "retrieved_contexts": self.outputs[c.id].contexts}
                for c in self.cases]
        dataset = EvaluationDataset.from_list(rows)

        def fully_default(url: str) -> dict[str, Any]:
            return {}  # evaluate() builds llm_factory("gpt-4o-mini", client=OpenAI()) from OPENAI_BASE_URL / OPENAI_API_KEY

        def factory(url: str) -> dict[str, Any]:
            import openai
            from ragas.embeddings import embedding_factory
            from ragas.llms import llm_factory

            client = openai.AsyncOpenAI(base_url=url, api_key="not-needed")
            return {"llm": llm_factory(MODEL, provider="openai", client=client),
                    "embeddings": embedding_factory("openai", model=EMBEDDINGS, client=client, interface="modern")}

        def langchain(url: str) -> dict[str, Any]:
            from langchain_openai import ChatOpenAI, OpenAIEmbeddings
            from pydantic import SecretStr
            from ragas.embeddings import LangchainEmbeddingsWrapper
            from ragas.llms import LangchainLLMWrapper

            # check_embedding_ctx_length=False: otherwise langchain downloads a tiktoken file (fails offline)
            key = SecretStr("not-needed")
            return {"llm": LangchainLLMWrapper(ChatOpenAI(model=MODEL, base_url=url, api_key=key)),
                    "embeddings": LangchainEmbeddingsWrapper(OpenAIEmbeddings(
                        model=EMBEDDINGS, base_url=url, api_key=key, check_embedding_ctx_length=False))}

        variants = [
            ("evaluate(), all defaults (OPENAI_BASE_URL)", fully_default, 1),
            ("evaluate(), llm_factory + embedding_factory", factory, 1),
            ("evaluate(), LangchainLLMWrapper + LangchainEmbeddingsWrapper", langchain, self.args.repeat),
        ]
        for label, make, repeat in variants:
            best: Row | None = None
            runs = []
            for _ in range(repeat):
                try:
                    row = self._one_evaluate(label, dataset, make)
                except Exception as exc:  # a comparison: say why, go on
                    print(f"  {label}: could not run: {type(exc).__name__}: {_short(str(exc), 400)}")
                    break
                runs.append(row.wall or 0.0)
                if _faster(row, best):
                    best = row
            if best is not None:
                best.runs = runs
                self.show(best)

    def _one_evaluate(self, label: str, dataset: Any, make: Callable[[str], dict[str, Any]]) -> Row:
        from ragas import evaluate

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "Importing faithfulness from 'ragas.metrics' is deprecated"
            from ragas.metrics import answer_relevancy, faithfulness

        with self.judge() as judge, _env(OPENAI_BASE_URL=judge.url, OPENAI_API_KEY="not-needed"), \
                _captured_logs("ragas") as logs, _leftovers() as leftovers, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kwargs = make(judge.url)
            c0, t0 = time.process_time(), time.perf_counter()
            result = evaluate(dataset, metrics=[faithfulness, answer_relevancy], show_progress=False, **kwargs)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            server = judge.stats()
        df = cast(Any, result).to_pandas()
        scores = {}
        for metric in ("faithfulness", "answer_relevancy"):
            values = [float(v) for v in df[metric]]
            ok = [v for v in values if not math.isnan(v)]
            scores[metric] = (f"{sum(ok) / len(ok):.3f}" if ok else "-") + f" ({len(values) - len(ok)} of {len(values)} NaN)"
        notes = []
        job_errors = [m for m in logs if m.startswith("Exception raised in Job")]
        if job_errors:
            kinds = sorted({re.sub(r"^Exception raised in Job\[\d+\]: ", "", m) for m in job_errors})
            notes.append(f"{len(job_errors)} jobs failed (logged, then NaN): " + "; ".join(_short(k, 160) for k in kinds[:2]))
        fewer = [m for m in logs if "generations instead of requested" in m]
        if fewer:
            notes.append(f"'{_short(fewer[0], 90)}' x{len(fewer)} (answer_relevancy strictness 3 -> 1 question)")
        if server["n"]:
            notes.append(f"chat requests asked n={server['n']} choices in one request; the test judge returns 1")
        if leftovers:
            notes.append(f"{len(leftovers)} x asyncio '{_short(leftovers[0], 80)}' after the run (clients closed after their loop)")
        return Row("2", label, wall, server, None, scores, cpu, note="\n      ".join(notes))

    # -- deepeval.evaluate() ----------------------------------------------------------------

    def deepeval_evaluate(self) -> None:
        from deepeval.evaluate import evaluate
        from deepeval.evaluate.configs import AsyncConfig, DisplayConfig
        from deepeval.metrics import FaithfulnessMetric
        from deepeval.models import OpenAIModel
        from deepeval.test_case import LLMTestCase

        cases = [LLMTestCase(input=c.question, actual_output=self.outputs[c.id].answer,
                             retrieval_context=list(self.outputs[c.id].contexts)) for c in self.cases]
        quiet = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)
        # "gpt-4.1" is a model name deepeval knows: it asks for strict json_schema output
        variants: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
            ("deepeval evaluate(), defaults (max_concurrent=20 cases, include_reason)", {}, {}),
            ("deepeval evaluate(), include_reason=False, max_concurrent=16", {"include_reason": False},
             {"async_config": AsyncConfig(max_concurrent=self.args.concurrency)}),
        ]
        for label, metric_kwargs, eval_kwargs in variants:
            best: Row | None = None
            runs = []
            for _ in range(self.args.repeat):
                try:
                    with self.judge() as judge, _leftovers() as leftovers, warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = OpenAIModel(model="gpt-4.1", base_url=judge.url, api_key="not-needed", temperature=0)
                        metrics: list[Any] = [FaithfulnessMetric(model=model, **metric_kwargs)]
                        out = io.StringIO()
                        c0, t0 = time.process_time(), time.perf_counter()
                        with contextlib.redirect_stdout(out):
                            result = evaluate(cases, metrics, display_config=quiet, **eval_kwargs)
                        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                        server = judge.stats()
                except Exception as exc:
                    print(f"  {label}: could not run: {type(exc).__name__}: {_short(str(exc), 400)}")
                    break
                data = [tr.metrics_data[0] for tr in result.test_results if tr.metrics_data]
                ok = [d.score for d in data if d.score is not None and not d.error]
                errs = [d.error for d in data if d.error]
                scores = {"faithfulness": (f"{sum(ok) / len(ok):.3f}" if ok else "-") + f" ({len(errs)} of {len(data)} errored)"}
                runs.append(wall)
                row = Row("3", label, wall, server, None, scores, cpu)
                if _faster(row, best):
                    notes = [f"first error: {_short(errs[0])}"] if errs else []
                    if leftovers:
                        notes.append(f"{len(leftovers)} x asyncio '{_short(leftovers[0], 80)}' after the run "
                                     "(clients closed after their loop)")
                    row.note = "\n      ".join(notes)
                    best = row
            if best is not None:
                best.runs = runs
                self.show(best)

    # -- imports ----------------------------------------------------------------------------

    def imports(self) -> None:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import gate.run.flow"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        if proc.returncode != 0:
            self.error(f"python -c 'import gate.run.flow' failed: {_short(proc.stderr, 300)}")
            return
        modules = [m.group(1) for line in proc.stderr.splitlines() if (m := re.match(r"import time:.*\|\s+(\S+)\s*$", line))]
        tops = {m.split(".")[0] for m in modules}
        cum = next((int(m.group(1)) for line in proc.stderr.splitlines()
                    if (m := re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s+gate\.run\.flow$", line))), 0)
        print(f"  -X importtime 'import gate.run.flow': {len(modules)} modules, gate.run.flow cumulative {cum / 1e6:.3f} s")
        for name in ("ragas", "deepeval", "openai", "instructor", "langchain_core", "httpx", "pandas", "numpy"):
            print(f"      {name:<15} {'LISTED' if name in tops else 'not listed'}")
        heavy = sorted({"ragas", "deepeval", "openai"} & tops)
        if heavy:
            self.error(f"import gate.run.flow imports {', '.join(heavy)}")
        self.rows.append(Row("5", "import gate.run.flow lists ragas/deepeval/openai", note=", ".join(heavy) or "no"))

        with tempfile.TemporaryDirectory(prefix="rag-gate-bench-import-") as tmp:  # deepeval may write ./.deepeval
            for label, code, cwd in (("python -c pass", "pass", tmp), ("import gate.run.flow", "import gate.run.flow", str(ROOT)),
                                     ("import ragas", "import ragas", tmp), ("import deepeval", "import deepeval", tmp)):
                times = []
                for _ in range(self.args.repeat):
                    t0 = time.perf_counter()
                    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=180)
                    times.append(time.perf_counter() - t0)
                    if p.returncode != 0:
                        self.error(f"python -c {code!r} failed: {_short(p.stderr, 300)}")
                        break
                print(f"  {label:<16} {min(times):6.2f} s  (best of {len(times)}: {', '.join(f'{t:.2f}' for t in times)})")
                self.rows.append(Row("5", f"subprocess: {label}", min(times)))

    # -- summary ----------------------------------------------------------------------------

    def table(self) -> None:
        print("\nsummary (wall = best run; ideal = server calls x "
              f"{self.args.latency * 1000:.0f} ms / {self.args.concurrency})")
        head = f"{'#':<2} {'run':<66} {'wall s':>7} {'calls':>6} {'usage':>6} {'ideal s':>7} {'ideal/act':>9} {'in flight':>9}"
        print(head)
        print("-" * len(head))
        for r in self.rows:
            calls = r.server.get("calls")
            ideal = self.ideal(calls) if calls else None
            cells = [
                f"{r.section:<2}", f"{_short(r.label, 66):<66}",
                f"{r.wall:7.2f}" if r.wall is not None else f"{'':>7}",
                f"{calls:6d}" if calls is not None else f"{'':>6}",
                f"{r.usage_calls:6d}" if r.usage_calls is not None else f"{'-' if calls is not None else '':>6}",
                f"{ideal:7.2f}" if ideal else f"{'':>7}",
                f"{ideal / r.wall:9.0%}" if ideal and r.wall else f"{'':>9}",
                f"{r.server['max_in_flight']:9d}" if r.server.get("max_in_flight") is not None else f"{'':>9}",
            ]
            line = " ".join(cells)
            if r.note and r.section == "5":
                line = line.rstrip() + "  " + r.note
            print(line)


def _faster(row: Row, best: Row | None) -> bool:
    return best is None or (row.wall if row.wall is not None else math.inf) < (best.wall if best.wall is not None else math.inf)


def _stage_scores(stage: dict[str, Any]) -> dict[str, str]:
    errored: dict[str, int] = {}
    for s in stage["samples"]:
        for m in s["errors"]:
            errored[m] = errored.get(m, 0) + 1
    return {m: f"{v:.3f} ({errored.get(m, 0)} of {stage['sample']['size']} errored)" for m, v in stage["metrics"].items()}


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _leftovers() -> Iterator[list[str]]:
    """Errors the asyncio logger reports while the block runs and when its garbage is collected at the end
    (e.g. "Task exception was never retrieved ... Event loop is closed" from an HTTP client closed too late)."""
    with _captured_logs("asyncio", logging.ERROR) as messages:
        try:
            yield messages
        finally:
            gc.collect()


@contextlib.contextmanager
def _captured_logs(name: str, level: int = logging.WARNING) -> Iterator[list[str]]:
    """Collect the messages of logger ``name`` (and its children) instead of printing them."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text += f" [{type(record.exc_info[1]).__name__}: {record.exc_info[1]}]"
            messages.append(text)

    logger = logging.getLogger(name)
    handler, propagate, old_level = Collect(level), logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(level)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = propagate, old_level


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the judge waits before each answer")
    ap.add_argument("--concurrency", type=int, default=16, help="judge.concurrency for rag-gate")
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement (the best is reported)")
    ap.add_argument("--server", choices=("process", "thread"), default="process",
                    help="run the judge in a child process (default) or in a thread of this process")
    ap.add_argument("--sections", nargs="+", choices=("1", "2", "3", "4", "5"), default=["1", "2", "3", "4", "5"],
                    help="run only these sections")
    args = ap.parse_args()

    t_start = time.perf_counter()
    home = os.getcwd()
    bench: Bench | None = None
    with tempfile.TemporaryDirectory(prefix="rag-gate-bench-judges-") as work:
        os.chdir(work)  # deepeval writes ./.deepeval/; keep it out of the repository
        try:
            bench = Bench(args)
            print(f"{len(bench.cases)} cases from examples/quickstart (quickrag.answer, "
                  f"{sum(len(o.contexts) for o in bench.outputs.values()) / len(bench.outputs):.1f} contexts each); "
                  f"judge latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, best of {args.repeat}, "
                  f"judge server in a {args.server}")

            t0 = time.perf_counter()
            import ragas.metrics.collections  # noqa: F401

            import gate.judges.deepeval_engine  # noqa: F401
            import gate.judges.ragas_engine  # noqa: F401

            print(f"(importing ragas and the engines in-process first, not timed below: {time.perf_counter() - t0:.2f} s)")

            sections: list[tuple[str, Callable[[], None], bool]] = [
                ("1. rag-gate generation stage, ragas faithfulness + answer_relevancy, NullCache",
                 lambda: bench.rag_gate("1", "rag-gate ragas faithfulness+answer_relevancy",
                                        {"engine": "ragas", "metrics": ["faithfulness", "answer_relevancy"]}), True),
                ("2. ragas.evaluate() (deprecated), old-style faithfulness + answer_relevancy", bench.ragas_evaluate, False),
                ("3a. rag-gate generation stage, deepeval faithfulness, NullCache",
                 lambda: bench.rag_gate("3", "rag-gate deepeval faithfulness",
                                        {"engine": "deepeval", "metrics": ["faithfulness"]}), True),
                ("3b. deepeval.evaluate(), FaithfulnessMetric(model=OpenAIModel(base_url=...))", bench.deepeval_evaluate, False),
                ("4. section 1 with a JudgeCache in a temporary folder, twice", bench.cached, True),
                ("5. import cost (subprocesses)", bench.imports, True),
            ]
            for title, run, ours in sections:
                if title.split(".")[0].rstrip("ab") not in args.sections:
                    continue
                print(f"\n{title}")
                try:
                    run()
                except Exception as exc:
                    traceback.print_exc()
                    if ours:
                        bench.error(f"{title}: {type(exc).__name__}: {exc}")
                    else:
                        print(f"  could not run: {type(exc).__name__}: {_short(str(exc), 400)}")
            bench.table()
        finally:
            os.chdir(home)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if bench is None:
        return 1
    if bench.errors:
        print(f"{len(bench.errors)} error(s):")
        for e in bench.errors:
            print(f"  - {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
