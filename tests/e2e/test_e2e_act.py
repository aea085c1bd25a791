"""End to end under the `act` runner, as GitHub would run it: workflows in tests/e2e/workflows that use
`uses: ./` build the action's image from the Dockerfile and run it against the quickstart RAG served
over HTTP and a GitHub API server on 127.0.0.1 (tests/support/github_server.py):

- gate.yml (pull_request): run 1 creates the comment, run 2 edits it, a failing gate fails the job,
  a fork's read-only token skips the comment and still fails the job;
- record.yml (push to main): the run lands on the history branch, a read-only token fails the job
  and names the permission, and a PR based on that commit gates against that entry;
- comment.yml (workflow_run): the fork-safe follow-up comments for a fork's PR from its report,
  refuses a report whose head commit is not the run's, and posts a hostile report as text only;
- record-x10.yml: ten record jobs at once end with ten history entries;
- judge.yml: the judge stages (ragas and deepeval as pinned in the image) judge through
  JUDGE_BASE_URL (tests/support/judge_server.py) with the key from a secret, masked in the log;
- the release variant of action.yml (`image: docker://...`) runs the image without building it.

Needs Docker and act (.ci/container-env.sh sets both up; .ci/run calls it). Where
Docker cannot run, the tests are skipped and say why. The first run builds the image (~1 min);
later runs take a few seconds each.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.github_server import READ_TOKEN, WRITE_TOKEN, GitHubServer
from tests.support.judge_server import JudgeServer
from tests.support.quickrag import serve_quickrag

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_ENV = ROOT / ".ci" / "container-env.sh"
SPEC = "examples/quickstart/rag-eval.e2e.yml"
JUDGE_SPEC = "examples/quickstart/rag-eval.e2e-judge.yml"
JUDGE_KEY = "sk-test-JudgeKey0123456789abcdef"


def _act() -> str:
    """The act binary, or skip with the reason."""
    if shutil.which("docker") is None:
        pytest.skip("Docker is not installed here: the act end-to-end test needs it (run .ci/container-env.sh)")
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine runs here: the act end-to-end test needs one (run .ci/container-env.sh)")
    if not CONTAINER_ENV.exists():
        pytest.skip(f"{CONTAINER_ENV} is missing: it provides the act runner and the base image")
    proc = subprocess.run(["bash", str(CONTAINER_ENV)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.skip(f"container-env.sh could not set up Docker and act: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def act() -> str:
    return _act()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the working tree: act runs `uses: ./` from it and we edit its spec freely."""
    dest = tmp_path_factory.mktemp("e2e") / "repo"
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", ".rag-gate", "__pycache__", ".pytest_cache", "*.egg-info"))
    spec = (dest / "examples/quickstart/rag-eval.yml").read_text()
    start = spec.index("  python:")
    end = spec.index("  k: 10")
    (dest / SPEC).write_text(spec[:start] + '  http: {url: "${RAG_URL}", concurrency: 4}\n' + spec[end:])
    judge_spec = (dest / "examples/quickstart/rag-eval.judge.yml").read_text()
    assert '  python: "quickrag:answer"\n' in judge_spec
    (dest / JUDGE_SPEC).write_text(judge_spec.replace('  python: "quickrag:answer"\n', '  http: {url: "${RAG_URL}", concurrency: 4}\n'))
    return dest


@pytest.fixture(scope="module")
def rag_url() -> Iterator[str]:
    yield from serve_quickrag()


def pr_event(gh: GitHubServer, pr: int, head: str, base: str | None = None) -> dict:
    return {"action": "synchronize", "number": pr,
            "pull_request": {"number": pr, "head": {"sha": head, "ref": "feature"},
                             "base": {"sha": base or gh.branch_sha("main", "owner/repo"), "ref": "main"}},
            "repository": {"full_name": "owner/repo", "default_branch": "main"}}


def run_act(act: str, repo: Path, gh: GitHubServer, rag_url: str, pr: int = 0, head: str = "", token: str = WRITE_TOKEN, *,
            event_name: str = "pull_request", workflow: str = "gate.yml", event: dict | None = None,
            bind: bool = False, extra: list[str] | None = None, hidden: tuple[str, ...] = ()) -> tuple[int, dict[str, str], str]:
    """One workflow run under act; returns act's exit code, the step outputs (and the job result as "_job"), the log."""
    event = event or pr_event(gh, pr, head)
    event_path = repo.parent / f"event-{uuid.uuid4().hex}.json"
    event_path.write_text(json.dumps(event))
    proc = subprocess.run(
        [act, event_name, "-W", f"tests/e2e/workflows/{workflow}", "-e", str(event_path),
         "-P", "ubuntu-latest=local/runner:bookworm", "--pull=false", "--rm", "--json", *(["--bind"] if bind else []), *(extra or []),
         "--env", f"GITHUB_API_URL={gh.api_url}", "--env", "GITHUB_REPOSITORY=owner/repo", "--env", f"RAG_URL={rag_url}",
         "-s", f"GITHUB_TOKEN={token}"],
        cwd=repo, capture_output=True, text=True, timeout=900, env={**os.environ, "HOME": str(repo.parent)},
    )
    outputs: dict[str, str] = {}
    job = ""
    shown = []  # the log as the runner shows it (act's JSON lines also carry each command's raw text)
    for line in proc.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            shown.append(line)
            continue
        shown.append(str(d.get("msg", "")))
        if d.get("command") == "set-output":
            outputs[d.get("name", "")] = d.get("arg", "")
        job = d.get("jobResult", job) or job
    log = proc.stdout + proc.stderr
    for secret in (token, *hidden):
        assert "***" in "\n".join(shown) and secret not in "\n".join(shown) + proc.stderr, \
            f"a secret is not masked in the log:\n{log[-3000:]}"
    return proc.returncode, {**outputs, "_job": job}, log


def test_pull_request_workflow_under_act(act: str, repo: Path, rag_url: str) -> None:
    with GitHubServer(repos=("owner/repo",)) as gh:
        # run 1: the gate passes and creates the comment
        code, out, log = run_act(act, repo, gh, rag_url, 17, "9e" * 20, WRITE_TOKEN)
        assert code == 0, log[-3000:]
        assert out.get("verdict") == "pass" and out["_job"] == "success"
        comments = gh.comments(17, "owner/repo")
        assert len(comments) == 1 and "<!-- rag-gate:comment" in comments[0]["body"]
        first_id = comments[0]["id"]
        # run 2 (a new push): the same comment is edited
        code, out, log = run_act(act, repo, gh, rag_url, 17, "ab" * 20, WRITE_TOKEN)
        assert code == 0, log[-3000:]
        comments = gh.comments(17, "owner/repo")
        assert [c["id"] for c in comments] == [first_id]
        assert gh.count(method="PATCH") >= 1 or "comment unchanged" in log
        # a failing gate fails the job
        spec = repo / SPEC
        spec.write_text(spec.read_text().replace("hit_rate@5: {min: 0.80,", "hit_rate@5: {min: 0.99,"))
        code, out, log = run_act(act, repo, gh, rag_url, 17, "cd" * 20, WRITE_TOKEN)
        assert code != 0 and out.get("verdict") == "fail" and out["_job"] == "failure", log[-3000:]
        assert "hit_rate@5 gate failed" in log
        assert "❌" in gh.comments(17, "owner/repo")[0]["body"]
        # a fork's read-only token: the comment is skipped, the job still fails
        code, out, log = run_act(act, repo, gh, rag_url, 18, "ef" * 20, READ_TOKEN)
        assert code != 0 and out.get("verdict") == "fail", log[-3000:]
        assert "the comment was skipped" in log
        assert gh.comments(18, "owner/repo") == []
        spec.write_text(spec.read_text().replace("hit_rate@5: {min: 0.99,", "hit_rate@5: {min: 0.80,"))


def test_record_on_the_default_branch_then_a_pr_gates_against_that_entry_under_act(act: str, repo: Path, rag_url: str) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    push = {"ref": "refs/heads/main", "after": head, "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    with GitHubServer(repos=("owner/repo",)) as gh:
        # a push to main: mode record is chosen from the event, the run lands on the history branch
        code, out, log = run_act(act, repo, gh, rag_url, event_name="push", workflow="record.yml", event=push)
        assert code == 0 and out.get("verdict") == "pass" and out["_job"] == "success", log[-3000:]
        assert "recorded in the history (rag-gate-history:rag-gate/history.jsonl)" in log
        (entry,) = [json.loads(ln) for ln in gh.file("rag-gate/history.jsonl", "rag-gate-history", "owner/repo").splitlines()]
        assert (entry["commit"], entry["branch"], entry["verdict"]) == (head, "main", "pass")
        assert entry["stages"]["retrieval"]["metrics"]["hit_rate@5"] == pytest.approx(0.90625)
        assert gh.file("rag-gate/history.jsonl", "main", "owner/repo") is None
        # a token that cannot write contents: the job fails and says which permission is missing
        code, out, log = run_act(act, repo, gh, rag_url, token=READ_TOKEN, event_name="push", workflow="record.yml", event=push)
        assert code != 0 and out["_job"] == "failure", log[-3000:]
        assert "contents: write" in log
        assert len(gh.file("rag-gate/history.jsonl", "rag-gate-history", "owner/repo").splitlines()) == 1
        # a PR based on that commit gates against its entry, and the comment says so
        code, out, log = run_act(act, repo, gh, rag_url, event=pr_event(gh, 21, "12" * 20, base=head))
        assert code == 0 and out.get("verdict") == "pass", log[-3000:]
        (comment,) = gh.comments(21, "owner/repo")
        assert f"entry of base commit {head[:7]} from" in comment["body"], comment["body"][:2000]


def test_a_forks_pr_is_commented_by_the_workflow_run_follow_up_under_act(act: str, repo: Path, rag_url: str) -> None:
    fork_head = "f0" * 20
    with GitHubServer(repos=("owner/repo",)) as gh:
        gh.add_pull(22, fork_head, gh.branch_sha("main", "owner/repo"))
        report = repo / "rag-gate-report.json"
        report.unlink(missing_ok=True)
        # the fork's pull_request run: read-only token, the gate runs, the comment is skipped, the report stays
        code, out, log = run_act(act, repo, gh, rag_url, 22, fork_head, READ_TOKEN, bind=True)
        assert code == 0 and out.get("verdict") == "pass", log[-3000:]
        assert "the comment was skipped" in log and gh.comments(22, "owner/repo") == []
        assert json.loads(report.read_text())["run"]["pr"] == 22
        assert json.loads(report.read_text())["run"]["url"].startswith("https://github.com/owner/repo/actions/runs/")
        page = (repo / "rag-gate-report.html").read_text(encoding="utf-8")  # written in the image, next to report.json
        assert page.startswith("<!doctype html>") and "Content-Security-Policy" in page and '"id":"q01"' in page
        artifact = repo / "fork-artifact"
        artifact.mkdir(exist_ok=True)
        shutil.copy(report, artifact / "rag-gate-report.json")  # what actions/download-artifact does on GitHub

        def follow_up(head: str) -> tuple[int, dict[str, str], str]:
            ev = {"action": "completed", "repository": {"full_name": "owner/repo", "default_branch": "main"},
                  "workflow_run": {"id": 99, "head_sha": head, "event": "pull_request", "conclusion": "success",
                                   "head_repository": {"full_name": "owner/repo"}}}
            return run_act(act, repo, gh, rag_url, event_name="workflow_run", workflow="comment.yml", event=ev, bind=True)

        # a workflow_run whose head is not the report's: refused, nothing posted
        code, out, log = follow_up("0d" * 20)
        assert code != 0 and out["_job"] == "failure", log[-3000:]
        assert "refusing to comment" in log and gh.comments(22, "owner/repo") == []
        # the real follow-up: the base repository's token posts the fork's comment
        code, out, log = follow_up(fork_head)
        assert code == 0 and out.get("verdict") == "pass" and out["_job"] == "success", log[-3000:]
        (comment,) = gh.comments(22, "owner/repo")
        assert "<!-- rag-gate:comment" in comment["body"] and "hit_rate@5" in comment["body"]
        # a hostile artifact (every string the schema lets through is markup, mentions, links; the verdict forged):
        # the same job posts text only, with the headline the gate decisions give
        from tests.security.test_attack_artifact import hostile
        from tests.support.markup import headline, inert_problems

        original = json.loads(report.read_text())
        bad, replaced = hostile(original)
        bad["run"].update(pr=22, head_sha=fork_head, comment_id="default")
        bad["verdict"], bad["exit_code"] = "fail", 1  # forged: the gates all passed
        assert replaced > 300
        (artifact / "rag-gate-report.json").write_text(json.dumps(bad), encoding="utf-8")
        code, out, log = follow_up(fork_head)
        assert code == 0 and out["_job"] == "success" and out.get("verdict") == "pass", log[-3000:]
        (comment,) = gh.comments(22, "owner/repo")
        page = "https://github.com/owner/repo/actions/runs/99"  # act's GITHUB_SERVER_URL and the event's run: its artifacts
        assert f"[this run's artifacts]({page})" in comment["body"]
        assert comment["body"].count("evil.example") > 20 and inert_problems(comment["body"], link=page) == []
        assert headline(comment["body"]).startswith("✅ rag-gate passed")


def test_ten_simultaneous_record_runs_under_act_end_with_ten_entries(act: str, repo: Path, rag_url: str) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    push = {"ref": "refs/heads/main", "after": head, "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    with GitHubServer(repos=("owner/repo",)) as gh:
        gh.put_file("rag-gate/history.jsonl", "rag-gate-history", "", "owner/repo")
        # the ten runs' first reads of the history wait for each other (they start together), at most 25 s: under the
        # client's 30 s timeout, so a container that starts late never turns a held read into a timeout and retries
        gh.hold_reads(10, timeout=25)
        code, out, log = run_act(act, repo, gh, rag_url, event_name="push", workflow="record-x10.yml", event=push,
                                 extra=["--concurrent-jobs", "10"])
        assert code == 0, log[-3000:]
        assert log.count('"jobResult":"success"') == 10 and log.count("recorded in the history") == 10, log[-3000:]
        entries = [json.loads(ln) for ln in gh.file("rag-gate/history.jsonl", "rag-gate-history", "owner/repo").splitlines()]
        assert len(entries) == 10 and {e["commit"] for e in entries} == {head}
        landed = gh.count(method="PUT", status=200)  # each landed write added one line: none lost, none twice
        conflicts = gh.count(method="PUT", status=409)
        assert landed == 10, f"{landed} writes landed, {conflicts} conflicts"
        print(f"10 record runs at once: 10 writes landed, {conflicts} stale-sha conflicts re-read and retried")


def test_the_release_variant_runs_the_published_image_without_building(act: str, repo: Path, rag_url: str) -> None:
    """The release workflow's action.yml (release/use_image.py) names a registry image: the runner starts it, builds nothing.
    The registry is out of reach here, so the image is built and tagged locally under its ghcr.io name and act does not pull."""
    image = "ghcr.io/owner/rag-gate:v9.9.9"
    build = subprocess.run(["docker", "build", "-q", "-t", image, str(repo)], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    action = repo / "action.yml"
    before = action.read_text()
    try:
        proc = subprocess.run([sys.executable, "release/use_image.py", f"docker://{image}"], cwd=repo, capture_output=True, text=True)
        assert proc.returncode == 0 and f'image: "docker://{image}"' in action.read_text(), proc.stderr
        with GitHubServer(repos=("owner/repo",)) as gh:
            code, out, log = run_act(act, repo, gh, rag_url, 23, "34" * 20, WRITE_TOKEN)
            assert code == 0 and out.get("verdict") == "pass", log[-3000:]
            assert "docker build" not in log and f"image={image}" in log, log[-3000:]
            (comment,) = gh.comments(23, "owner/repo")
            assert "hit_rate@5" in comment["body"]
    finally:
        action.write_text(before)
        subprocess.run(["docker", "rmi", image], capture_output=True)


def test_the_judge_stages_run_inside_the_image_under_act(act: str, repo: Path, rag_url: str) -> None:
    """ragas and deepeval, as pinned in the image, judge through the JUDGE_BASE_URL endpoint with the key from a secret."""
    with GitHubServer(repos=("owner/repo",)) as gh, JudgeServer() as judge:
        code, out, log = run_act(act, repo, gh, rag_url, 24, "56" * 20, workflow="judge.yml",
                                 extra=["--env", f"JUDGE_BASE_URL={judge.url}", "-s", f"OPENAI_API_KEY={JUDGE_KEY}"],
                                 hidden=(JUDGE_KEY,))
        assert code == 0 and out.get("verdict") == "pass", log[-3000:]
        assert judge.count("/chat/completions") > 0 and judge.count("/embeddings") > 0 and not judge.unknown_prompts
        metrics = json.loads(out["metrics"])["generation"]
        for name in ("faithfulness", "answer_relevancy", "context_recall", "deepeval/faithfulness", "stays_on_handbook"):
            assert 0.0 <= metrics[name] <= 1.0, metrics
        (comment,) = gh.comments(24, "owner/repo")
        assert "Judged 22 of 32 answerable cases · judge `gpt-4o-mini-2024-07-18`" in comment["body"]
        assert JUDGE_KEY not in comment["body"] and "Authorization" not in comment["body"]


def test_a_three_shard_matrix_and_a_merge_job_post_one_comment_equal_to_one_job_under_act(act: str, repo: Path,
                                                                                        rag_url: str) -> None:
    """shards.yml: three shard jobs (the action with `shard: I/3`) write their parts, a merge job (`mode: merge`) gates
    them together and posts the one comment. Its metrics are the ones a single job gets (the CLI, same spec, same
    service), but for latencies (measured live) and the noise test, whose corpus distractors come from each shard's
    own retrievals (the README says so, and so does the comment)."""
    parts = repo / "rag-gate-parts"
    shutil.rmtree(parts, ignore_errors=True)
    (repo / "rag-gate-report.json").unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    one = subprocess.run([sys.executable, "-m", "gate", "run", "--config", SPEC, "--report", str(repo.parent / "one-job.json"),
                          "--no-progress"], cwd=repo, env={**env, "RAG_URL": rag_url, "PYTHONPATH": str(repo)},
                         capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout + one.stderr
    single = json.loads((repo.parent / "one-job.json").read_text())
    with GitHubServer(repos=("owner/repo",)) as gh:
        code, out, log = run_act(act, repo, gh, rag_url, 31, "5a" * 20, WRITE_TOKEN, workflow="shards.yml", bind=True)
        assert code == 0 and out.get("verdict") == "pass" and out["_job"] == "success", log[-3000:]
        assert sorted(p.name for p in parts.iterdir()) == ["part-1.json", "part-2.json", "part-3.json"]
        sizes = [json.loads((parts / f"part-{i}.json").read_text())["shard"]["cases"] for i in (1, 2, 3)]
        assert sum(sizes) == single["golden_set"]["n"] and all(sizes)
        (comment,) = gh.comments(31, "owner/repo")  # exactly one comment: the shard jobs post none
    merged = json.loads((repo / "rag-gate-report.json").read_text())
    assert merged["run"]["shards"] == 3 and merged["verdict"] == single["verdict"] == "pass"
    assert "Sharded: 3 jobs each ran part of the golden set" in comment["body"]
    live = {"mean_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "clean_accuracy", "noisy_accuracy",
            "noise_robustness"}
    for name, stage in single["stages"].items():
        same = {m: v for m, v in stage["metrics"].items() if m not in live}
        assert same and {m: merged["stages"][name]["metrics"][m] for m in same} == same, name
    assert "corpus distractors" in comment["body"]
    for name, stage in merged["stages"].items():  # the comment shows the merged metrics
        for metric in stage["metrics"]:
            assert f"`{metric}`" in comment["body"], (name, metric)
