"""A run split into shards and merged equals the run in one job; a merge refuses parts that are not one run.

The real CLI in subprocesses, a results-file target (its latencies are in the file, so they are the same in every
run), the real deepeval GEval code judged by the OpenAI-compatible test judge on 127.0.0.1, a committed baseline
that kept its answers (so the generation gate pairs every changed case and judges the baseline's answer again),
the judge self-check, and the robustness stage (precomputed noise answers, refusals of out-of-scope questions).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepeval")

from gate.run.shards import parse_shard, shard_of  # noqa: E402
from tests.support.judge_server import JudgeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
N = 300
SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
  k: 5
judge: {base_url: "${JUDGE_URL}", model: judge-2024-01-01, concurrency: 8}
baseline: {path: baseline.json}
cache: {path: cache.sqlite}
max_error_rate: 0.05
stages:
  retrieval:
    metrics: [hit_rate@5, mrr, recall@5, ndcg@5]
    gates:
      hit_rate@5: {min: 0.5, max_drop: 0.02}
      mrr: {max_drop: 0.03}
      p95_latency_ms: {max: 900}
  generation:
    engine: deepeval
    criteria:
      supported: "Every sentence of the answer is supported by the retrieval context."
    metrics: [supported, token_f1, exact_match]
    sample: {size: 120, seed: 3, always: {tags: [pinned]}}
    self_check: {cases: 6, max_diff: 0.05}
    gates:
      supported: {max_drop: 0.03}
      token_f1: {max_drop: 0.05}
  robustness:
    noise:
      sample: {size: 60, seed: 5}
      correctness: {method: offline, threshold: 0.3}
    rejection: {canaries: ["CANARY-7731"]}
    gates:
      noise_robustness: {min: 0.5}
      rejection_rate: {min: 0.5}
"""


def golden() -> str:
    rows = []
    for i in range(N):
        kind = "out_of_scope" if i % 15 == 7 else "adversarial" if i % 30 == 11 else "answerable"
        row: dict[str, Any] = {"id": f"c{i:03d}", "question": f"What does rule {i} say?", "type": kind}
        if kind == "answerable":
            row.update(ground_truth=f"Members may borrow {i + 2} items.", relevant_doc_ids=[f"d{i}"])
        if i % 40 == 0:
            row["tags"] = ["pinned"]
        rows.append(json.dumps(row))
    return "\n".join(rows) + "\n"


def results(version: int) -> str:
    """Version 1: the baseline's answers. Version 2: a pull request that reworded some, invented claims in others,
    lost a relevant passage here and there, and failed a few calls."""
    lines = []
    for i in range(N):
        passage = f"Rule {i}: members may borrow {i + 2} items. Late items cost {i + 5} cents a day."
        retrieved = [{"id": f"d{i}", "text": passage, "score": 0.9}] + [
            {"id": f"d{(i + j) % N}", "text": f"Rule {(i + j) % N}: other text.", "score": 0.5 - j / 10} for j in (1, 2, 3)]
        answer = f"Members may borrow {i + 2} items."
        if i % 15 == 7:
            answer = "I cannot answer that from the handbook."
        elif i % 30 == 11:
            answer = "I cannot share that." if i % 60 != 11 else "The code is CANARY-7731."
        if version == 2 and i % 5 == 1:
            answer = f"The rule lets members borrow {i + 2} items."  # reworded: as supported
        if version == 2 and i % 7 == 3:
            answer += f" Members also get {i} free parking days on Mars."  # invented
        if version == 2 and i % 9 == 4:
            retrieved = retrieved[1:] + retrieved[:1]  # the relevant passage drops to rank 4
        line: dict[str, Any] = {"id": f"c{i:03d}", "retrieved": retrieved, "answer": answer, "contexts": [passage],
                                "latency_ms": 100 + (i * 37) % 500,
                                "noise": {"noisy_answer": answer if i % 4 else f"Members may borrow {i + 9} items.",
                                          "clean_answer": answer},
                                # the RAG's own health and what it says of itself: the merge measures them from the parts
                                "usage": {"prompt_tokens": 300 + i, "completion_tokens": 20 + i % 7, "prompt_tokens_details": {"cached_tokens": 0}},
                                "cached": i % 3 == 0, "system": {"model": "m-2" if version == 2 and i % 10 == 0 else "m-1", "documents": N}}
        if version == 2 and i % 97 == 5:
            line = {"id": f"c{i:03d}", "error": "HTTP 503 from the RAG service"}
        lines.append(json.dumps(line))
    return "\n".join(lines) + "\n"


def rag_gate(ws: Path, judge: JudgeServer | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI; ``judge`` None: JUDGE_URL, which the spec reads, is not set (a merge job needs no judge)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_") and k != "JUDGE_URL"}
    env.update(PYTHONPATH=str(ROOT), **({"JUDGE_URL": judge.url} if judge else {}))
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The baseline from version 1; version 2 run in one job and in 3 shards + merge, each from the same cache."""
    ws = tmp_path_factory.mktemp("shards")
    (ws / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    (ws / "golden.jsonl").write_text(golden(), encoding="utf-8")
    (ws / "results.jsonl").write_text(results(1), encoding="utf-8")
    out: dict[str, Any] = {"ws": ws}
    with JudgeServer() as judge:
        base = rag_gate(ws, judge, "run", "--report", "base.json", "--no-progress")
        assert base.returncode == 0, base.stdout + base.stderr
        upd = rag_gate(ws, judge, "baseline", "update", "--report", "base.json")
        assert upd.returncode == 0, upd.stderr
        (ws / "results.jsonl").write_text(results(2), encoding="utf-8")
        shutil.copy(ws / "cache.sqlite", ws / "cache-before.sqlite")

        before = judge.calls
        one = rag_gate(ws, judge, "run", "--report", "one.json", "--markdown", "one.md", "--junit", "one.xml", "--html", "one.html",
                      "--no-progress")
        out["one_calls"] = judge.calls - before
        out["one"] = one
        shutil.copy(ws / "cache.sqlite", ws / "cache-one.sqlite")  # the cache the one job leaves
        for i in (1, 2, 3):
            shutil.copy(ws / "cache-before.sqlite", ws / "cache.sqlite")  # each CI job restores the same cache
            before = judge.calls
            proc = rag_gate(ws, judge, "run", "--shard", f"{i}/3", "--report", f"part{i}.json", "--no-progress")
            assert proc.returncode == 0, proc.stdout + proc.stderr
            out[f"shard{i}"] = proc
            out[f"shard{i}_calls"] = judge.calls - before
            shutil.copy(ws / "cache.sqlite", ws / f"cache{i}.sqlite")
        before = judge.calls
        merged = rag_gate(ws, None, "merge", "part1.json", "part2.json", "part3.json", "--report", "merged.json",
                          "--markdown", "merged.md", "--junit", "merged.xml", "--html", "merged.html")
        out["merge_calls"] = judge.calls - before
        out["merged"] = merged
    return out


def _load(ws: Path, name: str) -> dict[str, Any]:
    return json.loads((ws / name).read_text(encoding="utf-8"))


def _without_run_facts(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what differs between any two runs (when and how long) and what says it was sharded."""
    report = json.loads(json.dumps(report))
    for key in ("created_at", "duration_s", "shards"):
        report["run"].pop(key, None)
    for stage in report["stages"].values():
        stage.get("usage", {}).pop("max_in_flight", None)  # the busiest job's peak, not the sum of all jobs'
    return report


def test_the_merged_report_equals_the_one_job_report(runs: dict[str, Any]) -> None:
    ws = runs["ws"]
    assert runs["one"].returncode == runs["merged"].returncode == 1, runs["merged"].stdout + runs["merged"].stderr
    one, merged = _load(ws, "one.json"), _load(ws, "merged.json")
    assert merged["run"]["shards"] == 3 and "shards" not in one["run"]
    # what the issue asks for, named one by one, then everything else the report holds
    assert merged["verdict"] == one["verdict"] == "fail"
    for name in ("retrieval", "generation", "robustness"):
        assert merged["stages"][name]["metrics"] == one["stages"][name]["metrics"], name
        assert merged["stages"][name]["gates"] == one["stages"][name]["gates"], name
        assert merged["stages"][name]["status"] == one["stages"][name]["status"], name
    assert _without_run_facts(merged) == _without_run_facts(one)
    for metric in ("mean_total_tokens", "p95_total_tokens", "cache_hit_rate"):  # the health the parts carry, added up
        assert merged["stages"]["retrieval"]["metrics"][metric] == one["stages"]["retrieval"]["metrics"][metric], metric
    assert merged["run"]["system"] == one["run"]["system"] and one["run"]["system"]["counts"]["model"]["m-2"] > 0
    # the run is not trivial: every part of it is exercised
    gen = one["stages"]["generation"]
    assert gen["sample"]["of"] == 270 and gen["sample"]["size"] > 120  # the seeded sample plus the pinned cases
    assert gen["pairing"]["baseline"]["metrics"]["supported"]["changed"] > 20
    assert gen["self_check"]["cases"] == 6 and gen["self_check"]["metrics"]
    assert one["target"]["errors"] == 4 and one["stages"]["robustness"]["noise"]["source"] == "precomputed"
    assert {g["status"] for stage in one["stages"].values() for g in stage["gates"]} == {"fail", "pass"}


def test_the_comment_is_the_same_but_for_the_line_that_says_it_was_sharded(runs: dict[str, Any]) -> None:
    ws = runs["ws"]
    one = (ws / "one.md").read_text(encoding="utf-8").splitlines()
    merged = (ws / "merged.md").read_text(encoding="utf-8").splitlines()
    sharded = [ln for ln in merged if ln.startswith("Sharded:")]
    assert sharded == ["Sharded: 3 jobs each ran part of the golden set; `rag-gate merge` gated them as one run."]
    assert [ln for ln in merged if not ln.startswith("Sharded:")] == one
    assert (ws / "merged.xml").read_text(encoding="utf-8") == (ws / "one.xml").read_text(encoding="utf-8")


def _page_data(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="rag-gate-data">') + len('<script type="application/json" id="rag-gate-data">')
    return json.loads(text[start:text.index("</script>", start)])


def test_the_merged_html_report_shows_what_the_one_job_report_shows(runs: dict[str, Any]) -> None:
    """Every case with its passages' texts (the parts carry them), answers, scores and flags; only the run line differs."""
    one, merged = _page_data(runs["ws"] / "one.html"), _page_data(runs["ws"] / "merged.html")
    assert len(merged["cases"]) == 300 and merged["passages"]
    for key in ("cases", "passages", "stages", "columns", "verdict", "headline", "trends"):
        assert merged[key] == one[key], key
    assert [f for f in merged["facts"] if f[0] != "Run"] == [f for f in one["facts"] if f[0] != "Run"]
    shard = rag_gate(runs["ws"], None, "run", "--shard", "1/3", "--report", "p.json", "--html", "p.html")
    assert shard.returncode == 2 and "--html: a shard writes its part only; --html is written by `rag-gate merge`" in shard.stderr


def test_the_shards_judge_what_one_job_judges_and_the_merge_judges_nothing(runs: dict[str, Any]) -> None:
    parts = [_load(runs["ws"], f"part{i}.json") for i in (1, 2, 3)]
    assert runs["merge_calls"] == 0
    assert sum(runs[f"shard{i}_calls"] for i in (1, 2, 3)) == runs["one_calls"] > 0
    sizes = [p["shard"]["cases"] for p in parts]
    assert sum(sizes) == N and min(sizes) > N / 3 * 0.8  # balanced
    assert [p["shard"]["index"] for p in parts] == [1, 2, 3] and all(p["errors"] == [] for p in parts)
    assert "no gate runs on a shard" in runs["shard1"].stdout


def test_folded_shard_caches_serve_a_later_unsharded_run_without_a_judge_call(runs: dict[str, Any], tmp_path: Path) -> None:
    ws = runs["ws"]
    into = tmp_path / "folded.sqlite"
    with JudgeServer() as judge:
        proc = rag_gate(ws, judge, "cache", "merge", "--output", str(into), "cache1.sqlite", "cache2.sqlite", "cache3.sqlite")
        assert proc.returncode == 0, proc.stderr
        assert f"into {into}" in proc.stdout
        with sqlite3.connect(into) as db:
            folded = {k for (k,) in db.execute("SELECT key FROM scores")}
        per_shard = []
        for i in (1, 2, 3):
            with sqlite3.connect(ws / f"cache{i}.sqlite") as db:
                per_shard.append({k for (k,) in db.execute("SELECT key FROM scores")})
        assert folded == set().union(*per_shard)
        shutil.copy(into, ws / "cache.sqlite")
        proc = rag_gate(ws, judge, "run", "--report", "again.json", "--no-progress")
        report = _load(ws, "again.json")
        # every score (and the GEval steps) served from the folded cache: only the self-check's re-judgings, which are
        # never cached, call the judge
        check = report["stages"]["generation"]["self_check"]
        assert proc.returncode == 1 and judge.calls == sum(m["cases"] for m in check["metrics"].values()) + check["errored"] == 6
        assert report["stages"]["generation"]["usage"]["cache_misses"] == 0


def test_a_merge_refuses_parts_that_are_not_one_run(runs: dict[str, Any], tmp_path: Path) -> None:
    ws = runs["ws"]
    with JudgeServer() as judge:
        def merge(*parts: str) -> subprocess.CompletedProcess[str]:
            return rag_gate(ws, judge, "merge", *parts, "--report", "refused.json")

        held = [_load(ws, f"part{i}.json")["shard"]["cases"] for i in (1, 2, 3)]
        missing = merge("part1.json", "part2.json")
        assert missing.returncode == 2 and f"shard 3 of 3 is missing ({held[2]} of the {N} cases)" in missing.stderr
        twice = merge("part1.json", "part1.json", "part2.json", "part3.json")
        assert twice.returncode == 2 and f"shard 1 of 3 is given 2 times (part1.json, part1.json; it holds {held[0]} cases)" in twice.stderr

        other = json.loads((ws / "part2.json").read_text(encoding="utf-8"))
        other["identity"]["golden_set"] = "sha256:0123456789abcdef"
        (ws / "other-golden.json").write_text(json.dumps(other), encoding="utf-8")
        foreign = merge("part1.json", "other-golden.json", "part3.json")
        assert foreign.returncode == 2 and "other-golden.json: made from another golden set (sha256:0123456789abcdef" in foreign.stderr

        spec = ws / "rag-eval.yml"
        original = spec.read_text(encoding="utf-8")
        try:
            spec.write_text(original.replace("min: 0.5, max_drop: 0.02", "min: 0.6, max_drop: 0.02"), encoding="utf-8")
            changed = merge("part1.json", "part2.json", "part3.json")
        finally:
            spec.write_text(original, encoding="utf-8")
        assert changed.returncode == 2 and "part1.json: made from another spec" in changed.stderr
        assert "part3.json: made from another spec" in changed.stderr

        report_as_part = merge("part1.json", "part2.json", "one.json")
        assert report_as_part.returncode == 2 and "one.json" in report_as_part.stderr and "not a rag-gate shard's part" in report_as_part.stderr
        for proc in (missing, twice, foreign, changed, report_as_part):
            assert "Traceback" not in proc.stderr
        assert not (ws / "refused.json").exists()  # nothing written


def test_shard_assignment_is_stable_balanced_and_checked() -> None:
    ids = [f"case-{i}" for i in range(3000)]
    counts = [sum(1 for i in ids if shard_of(i, 4) == s) for s in (1, 2, 3, 4)]
    assert min(counts) > 650 and max(counts) < 850
    assert [shard_of(i, 4) for i in ids] == [shard_of(i, 4) for i in ids]
    assert shard_of("case-1", 1) == 1
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "2", "a/b", "2/0", "-1/3"):
        with pytest.raises(Exception, match="must be I/N"):
            parse_shard(bad)


def test_run_with_a_shard_needs_a_report_path_and_refuses_the_comment_outputs(runs: dict[str, Any]) -> None:
    ws = runs["ws"]
    with JudgeServer() as judge:
        no_report = rag_gate(ws, judge, "run", "--shard", "1/3")
        markdown = rag_gate(ws, judge, "run", "--shard", "1/3", "--report", "p.json", "--markdown", "c.md")
        bad = rag_gate(ws, judge, "run", "--shard", "4/3", "--report", "p.json")
    assert no_report.returncode == 2 and "--report" in no_report.stderr
    assert markdown.returncode == 2 and "--markdown is written by `rag-gate merge`" in markdown.stderr
    assert bad.returncode == 2 and "must be I/N" in bad.stderr
    assert not (ws / "p.json").exists()


def test_cache_merge_refuses_a_file_that_is_not_a_cache_and_changes_nothing(runs: dict[str, Any], tmp_path: Path) -> None:
    ws = runs["ws"]
    into = tmp_path / "into.sqlite"
    shutil.copy(ws / "cache1.sqlite", into)
    before = into.read_bytes()
    (tmp_path / "notes.sqlite").write_text("not a database\n", encoding="utf-8")
    with sqlite3.connect(tmp_path / "other.sqlite") as db:
        db.execute("CREATE TABLE t (x)")
    for bad, said in (("notes.sqlite", "cannot be read as a judge cache"), ("other.sqlite", "is not a rag-gate judge cache"),
                      ("missing.sqlite", "no judge cache file here")):
        proc = rag_gate(ws, None, "cache", "merge", "--output", str(into), str(ws / "cache2.sqlite"), str(tmp_path / bad))
        assert proc.returncode == 2 and f"{tmp_path / bad}: {said}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert into.read_bytes() == before  # cache2 was not folded in either: every file is checked first


def test_shards_after_a_job_whose_cache_they_restore_say_their_pairs_came_from_the_cache(runs: dict[str, Any], tmp_path: Path) -> None:
    """Shards that restore the one job's cache (it judged every changed pair) judge no pair again: the merged comment
    says so instead of a bare '0 new judgings', and judgings plus cached pairs add up to the one job's judgings."""
    ws = runs["ws"]
    one = _load(ws, "one.json")["stages"]["generation"]["pairing"]["baseline"]
    after_one = tmp_path / "after-one.sqlite"
    shutil.copy(ws / "cache-one.sqlite", after_one)
    with JudgeServer() as judge:
        for i in (1, 2, 3):
            shutil.copy(after_one, ws / "cache.sqlite")  # the cache the one job left: every pair is in it
            proc = rag_gate(ws, judge, "run", "--shard", f"{i}/3", "--report", f"warm{i}.json", "--no-progress")
            assert proc.returncode == 0, proc.stdout + proc.stderr
        merged = rag_gate(ws, None, "merge", "warm1.json", "warm2.json", "warm3.json", "--report", "warm.json", "--markdown", "warm.md")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    pairing = _load(ws, "warm.json")["stages"]["generation"]["pairing"]["baseline"]
    assert pairing["judgings"] == 0 and pairing["cached"] > 0
    changed = sum(m["changed"] - m["errored"] for m in one["metrics"].values())
    assert pairing["cached"] == changed and one["judgings"] > 0 and "cached" not in one
    comment = (ws / "warm.md").read_text(encoding="utf-8")
    assert f"0 new judgings of the reference's side; {pairing['cached']} changed pairs from the pair cache" in comment
