"""Answer checks, share gates, the RAG's own health and where it broke, end to end: the real CLI on copies of the
quickstart (its BM25 RAG, re-chunked or with a changed answer format), an HTTP RAG service and an OpenAI-compatible
judge on 127.0.0.1, the comment read in cmark-gfm's HTML."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.support.judge_server import JudgeServer
from tests.support.markup import render
from tests.support.rag_server import RagServer

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
KEY = "sk-test-0123456789abcdef"

FORMATTED = '''from . import rag


def hashes(question, k=5):
    out = rag.answer(question, k)
    out["answer"] = "### Answer\\n" + out["answer"]
    return out


def bold(question, k=5):
    out = rag.answer(question, k)
    out["answer"] = "**Answer**\\n" + out["answer"]
    return out
'''

INVENT = '''from . import rag

CLAIM = " Members also get free parking every Tuesday at 9 pm."


def answer(question, k=5):
    out = rag.answer(question, k)
    if out["answer"] != rag.REFUSAL:
        out["answer"] += CLAIM
    return out
'''


def copy_quickstart(tmp: Path) -> Path:
    dest = tmp / "qs"
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "eval", "__pycache__"))
    return dest


def rag_gate(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "JUDGE_BASE_URL", "QUICKRAG_CORPUS")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True,
                          text=True, timeout=300)


def baseline_then(project: Path, spec: str, change: str, env: dict[str, str] | None = None,
                  first_env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], str]:
    """Run the spec and take it as the baseline; apply ``change`` (a function of the spec text); run again: (the second
    run, its report, its comment)."""
    path = project / "spec.yml"
    path.write_text(spec, encoding="utf-8")
    first = rag_gate(project, "run", "--config", "spec.yml", "--report", "base.json", "--no-progress", env=env if first_env is None else first_env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert rag_gate(project, "baseline", "update", "--config", "spec.yml", "--report", "base.json").returncode == 0
    path.write_text(change, encoding="utf-8")
    proc = rag_gate(project, "run", "--config", "spec.yml", "--report", "report.json", "--markdown", "comment.md", "--no-progress",
                    env=env)
    report = json.loads((project / "report.json").read_text(encoding="utf-8"))
    return proc, report, (project / "comment.md").read_text(encoding="utf-8")


class _Text(HTMLParser):
    """The text of the rendered comment's first list (the layer lines) and of all of it."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[str] = []
        self.text: list[str] = []
        self._in_li = 0
        self._lists = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "ul":
            self._lists += 1
        if tag == "li" and self._lists == 1:
            self._in_li += 1
            self.items.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self._in_li:
            self._in_li -= 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_li:
            self.items[-1] += data


def opening_lines(comment: str) -> tuple[list[str], str]:
    """The layer lines the comment opens with (the first list, after "Where it broke", before any stage heading), and
    the whole comment's text, both from cmark-gfm's HTML."""
    html = render(comment)
    head = html.split("<h3>", 1)[0]
    assert "Where it broke" in head, head
    parser = _Text()
    parser.feed(head)
    whole = _Text()
    whole.feed(html)
    return parser.items, "".join(whole.text)


def test_a_heading_format_change_fails_only_the_regex_check_naming_every_case_with_no_judge_call(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path)
    (project / "quickrag" / "formatted.py").write_text(FORMATTED, encoding="utf-8")
    spec = (project / "rag-eval.yml").read_text(encoding="utf-8")
    spec = spec.replace('function: "quickrag:answer" ', 'function: "quickrag.formatted:hashes"')
    spec = spec.replace("metrics: [token_f1, rouge_l, exact_match, faithfulness, answer_relevancy]", "metrics: [token_f1, rouge_l, exact_match]")
    spec = spec.replace("      faithfulness: {trend: {window: 7, max_drop: 0.03}}\n", "      check_pass_rate: {min: 1.0}\n")
    spec = spec.replace("    engine: ragas\n", "    engine: ragas\n    checks: {regex: '^### '}\n")
    with JudgeServer() as judge:  # a judge is configured and reachable: the checks must still call it never
        spec = spec.replace("cache:\n", f"judge: {{base_url: '{judge.url}', model: test-judge-2024-11-20, api_key_env: OPENAI_API_KEY}}\ncache:\n")
        assert "quickrag.formatted:hashes" in spec and "check_pass_rate" in spec and "regex" in spec
        proc, report, comment = baseline_then(project, spec, spec.replace("formatted:hashes", "formatted:bold"), env={"OPENAI_API_KEY": KEY})
        assert judge.requests == [] and judge.calls == 0
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gates = {(name, g["metric"]): g["status"] for name, st in report["stages"].items() for g in st.get("gates", [])}
    assert gates.pop(("generation", "check_pass_rate")) == "fail"
    assert gates and set(gates.values()) == {"pass"}, gates  # every judge-free gate the quickstart has still passes
    gen = report["stages"]["generation"]
    answerable = [json.loads(x)["id"] for x in (project / "golden_set.jsonl").read_text().splitlines()
                  if x.strip() and json.loads(x).get("type", "answerable") == "answerable"]
    assert gen["metrics"]["check_pass_rate"] == 0.0 and gen["baseline_metrics"]["check_pass_rate"] == 1.0
    assert [c["id"] for c in gen["checks"]["cases"]] == answerable and gen["checks"]["checked"] == len(answerable)
    assert all(c["failed"][0]["check"] == "regex" and "'**Answer**'" in c["failed"][0]["evidence"] for c in gen["checks"]["cases"])
    assert {c["code"] for c in report["diagnosis"]["cases"] if c["moved"]} == {"format_broken"}
    items, text = opening_lines(comment)
    assert len(items) == 1 and items[0].startswith(f"format: {len(answerable)} cases broke the answers' form")
    for case_id in answerable:  # the comment names every case
        assert re.search(rf"\b{case_id}\b", text), case_id
    assert "FAIL check_pass_rate" in proc.stdout and "regex: no line matches" in proc.stdout


def test_rechunking_is_diagnosed_in_the_retrieval_layer_in_the_comments_opening_lines(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path)
    rows = [json.loads(x) for x in (project / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    cut = []
    for row in rows:  # every passage cut in two at its middle sentence: the second half a chunk of its own
        parts = re.split(r"(?<=[.!?])\s+", row["text"])
        half = len(parts) // 2
        cut += [{**row, "text": " ".join(parts[:half])}, {**row, "id": row["id"] + "_b", "text": " ".join(parts[half:])}] if half else [row]
    (project / "rechunked.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cut), encoding="utf-8")
    spec = (project / "rag-eval.yml").read_text(encoding="utf-8")
    proc, report, comment = baseline_then(project, spec, spec, env={"QUICKRAG_CORPUS": "rechunked.jsonl"}, first_env={})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    worse = {w["id"]: w for w in report["stages"]["retrieval"]["worse_cases"]}
    codes = {c["id"]: c for c in report["diagnosis"]["cases"] if c["layer"] == "retrieval"}
    assert worse and set(codes) == set(worse)
    for case_id, c in codes.items():
        lost = worse[case_id]["lost"]
        expected = "not_retrieved" if any(x["left_top_k"] for x in lost) else "ranked_lower"  # lower in the top k, or from below it
        assert c["code"] == expected and c["moved"], (case_id, c, lost)
    counts = {code: sum(1 for c in codes.values() if c["code"] == code) for code in ("not_retrieved", "ranked_lower")}
    assert counts["not_retrieved"] and counts["ranked_lower"]
    items, _ = opening_lines(comment)
    assert items[0].startswith(f"retrieval: {len(codes)} cases lost their relevant passage ({counts['not_retrieved']} dropped out of "
                               f"the top 5, {counts['ranked_lower']} ranked lower) → look at chunking and the reranker before the prompt")
    assert not any(i.startswith("generation:") for i in items)


@pytest.mark.skipif(not all(map(__import__("importlib").util.find_spec, ["ragas"])), reason="needs the judge engines")
def test_an_invented_claim_is_diagnosed_unfaithful_and_a_judged_share_gate_names_its_cases(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path)
    (project / "quickrag" / "invent.py").write_text(INVENT, encoding="utf-8")
    spec = (project / "rag-eval.judge.yml").read_text(encoding="utf-8")
    spec = spec.replace("metrics: [faithfulness, answer_relevancy, context_recall, deepeval/faithfulness, token_f1]", "metrics: [faithfulness]")
    spec = spec.replace("    self_check: {cases: 5, max_diff: 0.02}\n", "")
    spec = re.sub(r"    gates:\n      faithfulness:.*\n      answer_relevancy:.*\n      token_f1:.*\n",
                  "    gates:\n      faithfulness: {max_drop: 0.05, share_below: {value: 0.8, max: 0.2}}\n", spec)
    assert "share_below" in spec
    with JudgeServer() as judge:
        env = {"OPENAI_API_KEY": KEY, "JUDGE_BASE_URL": judge.url}
        proc, report, comment = baseline_then(project, spec, spec.replace('python: "quickrag:answer"', 'python: "quickrag.invent:answer"'), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gen = report["stages"]["generation"]
    (gate,) = [g for g in gen["gates"] if g["metric"] == "faithfulness"]
    (share,) = [c for c in gate["checks"] if c["kind"] == "share_below"]
    scores = {s["id"]: s["metrics"]["faithfulness"] for s in gen["samples"] if "faithfulness" in s["metrics"]}
    below = [cid for cid, v in scores.items() if v < 0.8]
    assert share["status"] == "fail" and len(below) / len(scores) > 0.2
    assert share["detail"].startswith(f"{len(below)} of {len(scores)} judged cases")
    assert all(cid in share["detail"] for cid in below[:10])
    unfaithful = [c for c in report["diagnosis"]["cases"] if c["code"] == "unfaithful"]
    assert unfaithful and all(c["layer"] == "generation" and c["evidence"].startswith("faithfulness ") for c in unfaithful)
    assert not [c for c in report["diagnosis"]["cases"] if c["layer"] == "retrieval"]
    items, text = opening_lines(comment)
    assert items[0].startswith(f"generation: {len(unfaithful)} cases answered worse ({len(unfaithful)} less faithful to their passages)")
    assert "share_below" in text and f"{len(below)} of {len(scores)} judged cases" in text


@pytest.mark.skipif(not all(map(__import__("importlib").util.find_spec, ["ragas"])), reason="needs the judge engines")
def test_a_judged_share_gate_the_sample_cannot_show_is_refused_with_why(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path)
    spec = (project / "rag-eval.judge.yml").read_text(encoding="utf-8")
    spec = spec.replace("metrics: [faithfulness, answer_relevancy, context_recall, deepeval/faithfulness, token_f1]", "metrics: [faithfulness]")
    spec = spec.replace("    self_check: {cases: 5, max_diff: 0.02}\n", "")
    spec = re.sub(r"    gates:\n      faithfulness:.*\n      answer_relevancy:.*\n      token_f1:.*\n",
                  "    gates:\n      faithfulness: {share_below: {value: 0.8, max: 0.01}}\n", spec)
    (project / "spec.yml").write_text(spec, encoding="utf-8")
    with JudgeServer() as judge:
        proc = rag_gate(project, "run", "--config", "spec.yml", "--report", "report.json", "--no-progress",
                        env={"OPENAI_API_KEY": KEY, "JUDGE_BASE_URL": judge.url})
    report = json.loads((project / "report.json").read_text(encoding="utf-8"))
    (gate,) = [g for g in report["stages"]["generation"]["gates"] if g["metric"] == "faithfulness"]
    n = report["stages"]["generation"]["sample"]["size"]
    assert n < 100 and gate["status"] == "error" and proc.returncode == 3, proc.stdout + proc.stderr
    assert f"max 1.00% over {n} judged cases means no case at all" in gate["reason"]
    assert "judge at least 100 cases" in gate["reason"] and "max: 0" in gate["reason"]


def _project(tmp: Path, results: list[dict[str, Any]], gates: str) -> Path:
    golden = [{"id": f"q{i:02d}", "question": f"What is rule {i}?", "ground_truth": "x", "relevant_doc_ids": [f"d{i}"]} for i in range(20)]
    (tmp / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in golden), encoding="utf-8")
    (tmp / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    (tmp / "rag-eval.yml").write_text(f"version: 1\ngolden_set: golden.jsonl\ntarget: {{results: results.jsonl}}\n"
                                      f"stages:\n  retrieval:\n    metrics: [mrr]\n    gates:\n{gates}", encoding="utf-8")
    return tmp


def _ranked(i: int, misses: int) -> list[dict[str, str]]:
    """q00..q(misses-1) find their document at rank 2 (mrr 0.5), the others at rank 1."""
    return ([{"id": "other"}] if i < misses else []) + [{"id": f"d{i}"}]


@pytest.mark.parametrize("misses, limit, status", [(2, 0.1, "pass"), (3, 0.1, "fail"), (0, 0.0, "pass"), (1, 0.0, "fail")])
def test_share_below_on_mrr_counts_the_cases_below_and_names_them(tmp_path: Path, misses: int, limit: float, status: str) -> None:
    results = [{"id": f"q{i:02d}", "retrieved": _ranked(i, misses)} for i in range(20)]
    project = _project(tmp_path, results, f"      mrr: {{share_below: {{value: 0.9, max: {limit}}}}}\n")
    proc = rag_gate(project, "run", "--report", "report.json", "--markdown", "comment.md", "--no-progress")
    report = json.loads((project / "report.json").read_text())
    (gate,) = report["stages"]["retrieval"]["gates"]
    (check,) = gate["checks"]
    assert check["kind"] == "share_below" and check["status"] == status, check
    assert proc.returncode == (0 if status == "pass" else 1), proc.stdout + proc.stderr
    named = [f"q{i:02d}" for i in range(misses)]
    assert check["detail"].startswith(f"{misses} of 20 cases ({misses / 20:.1%}) below 0.9")
    assert all(cid in check["detail"] for cid in named) and "q19" not in check["detail"]
    assert "judged" not in check["detail"]  # an exact figure: no sample behind it
    if status == "fail":
        assert all(cid in (project / "comment.md").read_text() for cid in named)


def test_share_above_is_for_lower_is_better_metrics_and_share_below_refused_on_them(tmp_path: Path) -> None:
    results = [{"id": f"q{i:02d}", "retrieved": _ranked(i, 0)} for i in range(20)]
    project = _project(tmp_path, results, "      p95_latency_ms: {share_below: {value: 100, max: 0.1}}\n")
    proc = rag_gate(project, "validate")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "rag-eval.yml" in proc.stderr and "p95_latency_ms" in proc.stderr and "share" in proc.stderr, proc.stderr


def test_usage_and_cached_give_the_health_metrics_and_their_gates(tmp_path: Path) -> None:
    results = [{"id": f"q{i:02d}", "retrieved": _ranked(i, 0), "answer": "x", "usage": {"prompt_tokens": 100 + i, "completion_tokens": 20},
                "cached": i < 5} for i in range(20)]
    project = _project(tmp_path, results, "      p95_total_tokens: {max: 130}\n      cache_hit_rate: {min: 0.3}\n")
    proc = rag_gate(project, "run", "--report", "report.json", "--no-progress")
    metrics = json.loads((project / "report.json").read_text())["stages"]["retrieval"]
    tokens = sorted(120.0 + i for i in range(20))
    assert metrics["metrics"]["mean_total_tokens"] == pytest.approx(sum(tokens) / 20)
    assert metrics["metrics"]["cache_hit_rate"] == 0.25
    status = {g["metric"]: g["status"] for g in metrics["gates"]}
    assert status == {"p95_total_tokens": "fail", "cache_hit_rate": "fail"}, metrics["gates"]  # p95 of 120..139 > 130; 0.25 < 0.3
    assert proc.returncode == 1 and "cache_hit_rate" in proc.stdout and "tokens" in proc.stdout


def test_a_target_that_reports_no_usage_gets_the_health_metrics_as_not_evaluated_with_why(tmp_path: Path) -> None:
    results = [{"id": f"q{i:02d}", "retrieved": _ranked(i, 0)} for i in range(20)]
    project = _project(tmp_path, results, "      p95_total_tokens: {max: 130}\n      cache_hit_rate: {min: 0.3}\n      mrr: {min: 0.5}\n")
    proc = rag_gate(project, "run", "--report", "report.json", "--no-progress")
    stage = json.loads((project / "report.json").read_text())["stages"]["retrieval"]
    assert "mean_total_tokens" not in stage["metrics"] and "cache_hit_rate" not in stage["metrics"]
    assert stage["not_evaluated"]["p95_total_tokens"].startswith("not evaluated: the target reported no usage")
    assert "cached flag" in stage["not_evaluated"]["cache_hit_rate"]
    assert "mean_total_tokens" not in stage["not_evaluated"]  # not gated: nothing to say
    assert {g["metric"]: g["status"] for g in stage["gates"]} == {"p95_total_tokens": "skipped", "cache_hit_rate": "skipped", "mrr": "pass"}
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_http_target_maps_usage_and_cached_like_its_other_fields(tmp_path: Path) -> None:
    questions = {f"What is rule {i}?": {"hits": [{"id": f"d{i}"}], "reply": "x", "meta": {"tokens": {"total_tokens": 50 * (i + 1)},
                                                                                         "from_cache": i % 4 == 0}}
                 for i in range(20)}
    with RagServer(questions) as srv:
        project = _project(tmp_path, [], "      mean_total_tokens: {max: 600}\n")
        spec = (project / "rag-eval.yml").read_text().replace(
            "target: {results: results.jsonl}",
            f"target:\n  http:\n    url: {srv.url}\n    response: {{retrieved: hits, answer: reply, usage: meta.tokens, cached: meta.from_cache}}")
        (project / "rag-eval.yml").write_text(spec)
        proc = rag_gate(project, "run", "--report", "report.json", "--no-progress")
    stage = json.loads((project / "report.json").read_text())["stages"]["retrieval"]
    assert stage["metrics"]["mean_total_tokens"] == sum(50 * (i + 1) for i in range(20)) / 20 == 525
    assert stage["metrics"]["cache_hit_rate"] == 5 / 20
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_wrong_usage_or_cached_value_is_an_error_of_that_case_naming_the_field(tmp_path: Path) -> None:
    results = [{"id": f"q{i:02d}", "retrieved": _ranked(i, 0), "cached": "yes" if i == 3 else True} for i in range(20)]
    project = _project(tmp_path, results, "      cache_hit_rate: {min: 0.3}\n")
    proc = rag_gate(project, "run", "--report", "report.json", "--no-progress")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "results.jsonl" in proc.stderr and ":4" in proc.stderr and "'cached' must be true or false, got str" in proc.stderr


def test_corpus_check_cli_finds_each_defect_and_exits_as_golden_check(tmp_path: Path) -> None:
    chunks = [
        {"id": "json", "text": '{"plan": "basic", "limits": [1, 2'},
        {"id": "code", "text": "Install it:\n```bash\npip install x"},
        {"id": "table", "text": "| Basic | $5 |\n| Pro | $9 |"},
        {"id": "heading", "text": "Fees are listed below.\n## Late fees"},
        {"id": "empty", "text": "   "},
        {"id": "dup1", "text": "Opening hours are 9 to 5."},
        {"id": "dup2", "text": "Opening  hours are 9 to 5."},
        {"id": "fine", "text": "| Plan | Price |\n|---|---|\n| Basic | $5 |\n\n```\ncode\n```\n{\"a\": [1]}"},
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks), encoding="utf-8")
    proc = rag_gate(tmp_path, "corpus", "check", "--corpus", "corpus.jsonl", "--json", "findings.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = json.loads((tmp_path / "findings.json").read_text())["findings"]
    assert sorted((f["code"], tuple(f["chunks"])) for f in found) == sorted([
        ("cut_json", ("json",)), ("cut_code_block", ("code",)), ("cut_table", ("table",)), ("orphan_heading", ("heading",)),
        ("empty_chunk", ("empty",)), ("duplicate_chunk", ("dup1", "dup2"))])
    assert {f["code"]: f["level"] for f in found}["orphan_heading"] == "warning"
    clean = [c for c in chunks if c["id"] in ("heading", "fine", "dup1")]
    (tmp_path / "clean.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clean), encoding="utf-8")
    ok = rag_gate(tmp_path, "corpus", "check", "--corpus", "clean.jsonl", "--max-tokens", "5")
    assert ok.returncode == 0 and "orphan_heading" in ok.stdout and "oversized_chunk" in ok.stdout, ok.stdout + ok.stderr
    for args, needle in ((["--corpus", "missing.jsonl"], "missing.jsonl"), (["--corpus", "clean.jsonl", "--max-tokens", "0"], "--max-tokens")):
        bad = rag_gate(tmp_path, "corpus", "check", *args)
        assert bad.returncode == 2 and needle in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    (tmp_path / "broken.jsonl").write_text('{"id": "a", "text": "x"}\n{"text": "no id"}\n', encoding="utf-8")
    bad = rag_gate(tmp_path, "corpus", "check", "--corpus", "broken.jsonl")
    assert bad.returncode == 2 and "broken.jsonl:2" in bad.stderr, bad.stderr


def test_golden_check_with_a_corpus_reports_the_corpus_findings_too(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path)
    rows = (project / "corpus.jsonl").read_text(encoding="utf-8")
    (project / "cut.jsonl").write_text(rows + json.dumps({"id": "extra#chunk_1", "text": "| a | b |\n| c | d |"}) + "\n", encoding="utf-8")
    clean = rag_gate(project, "golden", "check", "--corpus", "corpus.jsonl", "--json", "clean.json")
    cut = rag_gate(project, "golden", "check", "--corpus", "cut.jsonl", "--json", "cut.json")
    before = {f["code"] for f in json.loads((project / "clean.json").read_text())["findings"]}
    after = json.loads((project / "cut.json").read_text())["findings"]
    assert "cut_table" not in before and [f["chunks"] for f in after if f["code"] == "cut_table"] == [["extra#chunk_1"]]
    assert clean.returncode == 0 and cut.returncode == 1, cut.stdout
