"""End to end under the `act` runner, as GitHub would run it: a pull_request workflow that uses
`uses: ./` builds the action's image from the Dockerfile and runs it against the quickstart RAG
served over HTTP and a GitHub API server on 127.0.0.1 (tests/github_server.py).

Needs Docker and act (../shared/tools/container-env.sh sets both up; .ci/run calls it). Where
Docker cannot run, the test is skipped and says why. The first run builds the image (~1 min);
later runs take a few seconds each.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.github_server import READ_TOKEN, WRITE_TOKEN, GitHubServer
from tests.quickrag_service import serve_quickrag

ROOT = Path(__file__).resolve().parents[1]
CONTAINER_ENV = ROOT.parent / "shared" / "tools" / "container-env.sh"
SPEC = "examples/quickstart/rag-eval.e2e.yml"


def _act() -> str:
    """The act binary, or skip with the reason."""
    if shutil.which("docker") is None:
        pytest.skip("Docker is not installed here: the act end-to-end test needs it (run ../shared/tools/container-env.sh)")
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine runs here: the act end-to-end test needs one (run ../shared/tools/container-env.sh)")
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
    return dest


@pytest.fixture(scope="module")
def rag_url() -> Iterator[str]:
    yield from serve_quickrag()


def run_act(act: str, repo: Path, gh: GitHubServer, rag_url: str, pr: int, head: str, token: str) -> tuple[int, dict[str, str], str]:
    event = {"action": "synchronize", "number": pr,
             "pull_request": {"number": pr, "head": {"sha": head, "ref": "feature"},
                              "base": {"sha": gh.branch_sha("main", "owner/repo"), "ref": "main"}},
             "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    event_path = repo.parent / "event.json"
    event_path.write_text(json.dumps(event))
    proc = subprocess.run(
        [act, "pull_request", "-W", "tests/e2e/workflows/gate.yml", "-e", str(event_path),
         "-P", "ubuntu-latest=local/runner:bookworm", "--pull=false", "--rm", "--json",
         "--env", f"GITHUB_API_URL={gh.api_url}", "--env", "GITHUB_REPOSITORY=owner/repo", "--env", f"RAG_URL={rag_url}",
         "-s", f"GITHUB_TOKEN={token}"],
        cwd=repo, capture_output=True, text=True, timeout=900, env={**os.environ, "HOME": str(repo.parent)},
    )
    outputs: dict[str, str] = {}
    job = ""
    for line in proc.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("command") == "set-output":
            outputs[d.get("name", "")] = d.get("arg", "")
        job = d.get("jobResult", job) or job
    return proc.returncode, {**outputs, "_job": job}, proc.stdout + proc.stderr


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
