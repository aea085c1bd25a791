"""The slim action (slim/action.yml, `image: ../Dockerfile.slim`) under the act runner: act builds its image from the
repository's root, as GitHub's runner does (the Dockerfile's folder is the build context), and gates the quickstart
served over HTTP; the image is at most 250 MB; in it a spec that names a judge metric is refused before any question
is sent (exit 2), with a message that says to use the full action.

Needs Docker and act (.ci/container-env.sh sets both up); where Docker cannot run the tests are skipped and say why."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_e2e_act import SPEC, _act, run_act
from tests.support.github_server import WRITE_TOKEN, GitHubServer
from tests.support.quickrag import serve_quickrag

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 250 * 10**6
ACT_IMAGE = "act-slim-dockeraction:latest"  # act's name for the image of the local action ./slim
WORKFLOW = """\
name: rag-gate e2e slim
on: pull_request
permissions:
  pull-requests: write
jobs:
  gate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: rag-gate (slim)
        id: gate
        uses: ./slim
        with:
          config: CONFIG
          comment: always
"""


@pytest.fixture(scope="module")
def act() -> str:
    return _act()


@pytest.fixture(scope="module")
def rag_url() -> Iterator[str]:
    yield from serve_quickrag()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the working tree with the quickstart spec over HTTP and two workflows using `./slim`: that spec, and
    the judge spec (its target a closed port: a question sent would end the run with exit 3, not 2)."""
    dest = tmp_path_factory.mktemp("slim") / "repo"
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", ".rag-gate", "__pycache__", ".pytest_cache", "*.egg-info",
                                                              "build", "dist"))
    spec = (dest / "examples/quickstart/rag-eval.yml").read_text()
    (dest / SPEC).write_text(spec[:spec.index("  python:")] + '  http: {url: "${RAG_URL}", concurrency: 4}\n' + spec[spec.index("  k: 10"):])
    judge = (dest / "examples/quickstart/rag-eval.judge.yml").read_text()
    assert '  python: "quickrag:answer"\n' in judge
    (dest / "examples/quickstart/rag-eval.slim-judge.yml").write_text(
        judge.replace('  python: "quickrag:answer"\n', '  http: {url: "http://127.0.0.1:9/query"}\n'))
    workflows = dest / "tests/e2e/workflows"
    (workflows / "slim.yml").write_text(WORKFLOW.replace("CONFIG", SPEC))
    (workflows / "slim-judge.yml").write_text(WORKFLOW.replace("CONFIG", "examples/quickstart/rag-eval.slim-judge.yml"))
    return dest


def _image_env(image: str) -> list[str]:
    return json.loads(subprocess.run(["docker", "image", "inspect", "-f", "{{json .Config.Env}}", image], capture_output=True,
                                     text=True, check=True).stdout)


def test_the_slim_action_gates_the_quickstart_under_act_and_its_image_is_small(act: str, repo: Path, rag_url: str) -> None:
    subprocess.run(["docker", "rmi", ACT_IMAGE], capture_output=True)  # built by this run, from this tree
    with GitHubServer(repos=("owner/repo",)) as gh:
        code, out, log = run_act(act, repo, gh, rag_url, 41, "4a" * 20, WRITE_TOKEN, workflow="slim.yml")
        assert code == 0 and out.get("verdict") == "pass" and out["_job"] == "success", log[-3000:]
        (comment,) = gh.comments(41, "owner/repo")
        assert "<!-- rag-gate:comment" in comment["body"] and "hit_rate@5" in comment["body"]
    assert "RAG_GATE_IMAGE=slim" in _image_env(ACT_IMAGE), "act did not build ./slim from Dockerfile.slim"
    size = int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", ACT_IMAGE], capture_output=True, text=True,
                              check=True).stdout)
    assert size <= MAX_BYTES, f"the slim image is {size / 1e6:.0f} MB, over {MAX_BYTES / 1e6:.0f} MB"
    metrics = json.loads(out["metrics"])
    assert metrics["retrieval"]["hit_rate@5"] == pytest.approx(0.90625) and "generation" in metrics


def test_a_judge_spec_is_refused_in_the_slim_image_before_any_question(act: str, repo: Path) -> None:
    with GitHubServer(repos=("owner/repo",)) as gh:
        code, out, log = run_act(act, repo, gh, "http://127.0.0.1:9/query", 42, "4b" * 20, WRITE_TOKEN, workflow="slim-judge.yml")
        assert code != 0 and out["_job"] == "failure", log[-3000:]
        assert "the judge metrics need the judge engines" in log and "the action's slim image" in log, log[-3000:]
        assert "OWNER/rag-gate/slim@VERSION" in log
    # the same image run directly: the exit status itself, and nothing asked of the (closed) target
    ws = repo / "examples" / "quickstart"
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{ws}:/w", "-w", "/w", "--entrypoint", "rag-gate",
                           ACT_IMAGE, "run", "--config", "rag-eval.slim-judge.yml", "--no-progress"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "rag-eval.slim-judge.yml:" in proc.stderr and "stages.generation.metrics" in proc.stderr
    assert "use the full action" in proc.stderr and "Traceback" not in proc.stderr


def test_in_the_image_python_is_pid_1_and_a_sigterm_still_stops_the_run(repo: Path, tmp_path: Path) -> None:
    """``docker stop`` (what a cancelled job's runner does) sends SIGTERM to the image's PID 1, Python running
    entrypoint.py, which the kernel spares every signal it has no handler for: the action's handler is what stops it.
    The container reaches the stand-ins on the host's 127.0.0.1 (host network); workspace and runner files sit at the
    same paths inside."""
    from tests.integration.test_action_signals import CASES, LATENCY_S, _environment, _workspace
    from tests.support.rag_server import RagServer, response, slow

    if subprocess.run(["docker", "image", "inspect", ACT_IMAGE], capture_output=True).returncode != 0:
        subprocess.run(["docker", "build", "-q", "-f", "Dockerfile.slim", "-t", ACT_IMAGE, "."], cwd=repo, check=True,
                       capture_output=True, timeout=900)
    responses = {f"question {i}?": response([f"d{i}"]) for i in range(CASES)}
    behaviour = lambda req: None if req.question == "question 0?" else slow(LATENCY_S)  # noqa: E731
    name = f"rag-gate-sigterm-{tmp_path.name}"
    with RagServer(responses, behaviour=behaviour) as rag, GitHubServer(repos=("owner/repo",)) as gh:
        ws = _workspace(tmp_path, rag.url, 4)
        runner = tmp_path / "runner"
        env = {k: v for k, v in _environment(gh, ws, runner).items() if k.startswith(("GITHUB_", "INPUT_", "CI"))}
        env["GITHUB_REPOSITORY"] = "owner/repo"
        args = [f"--env={k}={v}" for k, v in env.items()]
        subprocess.run(["docker", "run", "-d", "--name", name, "--network", "host", "-v", f"{tmp_path}:{tmp_path}", "-w", str(ws),
                        *args, ACT_IMAGE], check=True, capture_output=True, timeout=60)
        try:
            pid1 = subprocess.run(["docker", "exec", name, "cat", "/proc/1/cmdline"], capture_output=True, timeout=30)
            started = time.monotonic()
            while len(rag.requests) < 2 and time.monotonic() - started < 60:
                time.sleep(0.1)
            assert len(rag.requests) >= 2, subprocess.run(["docker", "logs", name], capture_output=True, text=True).stdout[-3000:]
            sent = time.monotonic()
            subprocess.run(["docker", "stop", "--time", "30", name], check=True, capture_output=True, timeout=60)
            took = time.monotonic() - sent
            code = int(subprocess.run(["docker", "inspect", "-f", "{{.State.ExitCode}}", name], capture_output=True, text=True,
                                      check=True).stdout)
            logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True, timeout=30)
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    shown = f"exit {code} after {took:.1f} s\n{logs.stdout[-3000:]}\n{logs.stderr[-2000:]}"
    assert pid1.stdout.split(b"\0")[:2] == [b"python", b"/action/entrypoint.py"], pid1.stdout  # Python is PID 1
    assert code == 143 and took < 15, shown  # its own exit on SIGTERM, long before docker stop's 30 s SIGKILL (137)
    assert "the run was cancelled (SIGTERM) before it finished" in logs.stdout and "Traceback" not in logs.stdout + logs.stderr, shown
    assert "rag-gate: cancelled" in (runner / "summary").read_text(encoding="utf-8")
