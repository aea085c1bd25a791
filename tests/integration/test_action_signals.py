"""A cancelled job: the runner (or ``docker stop``) sends SIGINT or SIGTERM to the action while it asks a slow target.

The action's real entry point (``python entrypoint.py``) runs in a subprocess with GitHub's environment, against a
RAG service that takes 30 s an answer and the GitHub stand-in. Once the service has been asked, the signal is sent;
the action must stop within seconds (not after the answers in flight, nor after every case), resume the workflow
commands it stopped (the stop-commands token printed again, before anything that must be read as a command), print
one ``::error::``, write the job summary ("the run was cancelled") and exit 130 for SIGINT, 143 for SIGTERM, without
a traceback. (In the Docker image Python is PID 1, which ignores a SIGTERM it has no handler for: the handler is
what makes it stop at all.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gate.core.errors import EXIT_INTERRUPTED, EXIT_TERMINATED
from gate.github.commands import GRACE_S
from tests.support.action import PR, REPO, ROOT, pr_event
from tests.support.github_server import WRITE_TOKEN, GitHubServer
from tests.support.rag_server import RagServer, response, slow

CASES = 40
LATENCY_S = 30.0  # an answer: far longer than the action may take to stop


def _workspace(tmp_path: Path, url: str, concurrency: int) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    golden = [{"id": f"q{i}", "question": f"question {i}?", "relevant_doc_ids": [f"d{i}"]} for i in range(CASES)]
    (ws / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    (ws / "rag-eval.yml").write_text(f"""\
version: 1
golden_set: golden.jsonl
target: {{http: {{url: "{url}", concurrency: {concurrency}, retries: 0, timeout_s: 60}}}}
max_error_rate: 1
stages:
  retrieval:
    metrics: [hit_rate@5]
    gates:
      hit_rate@5: {{min: 0.5}}
""", encoding="utf-8")
    return ws


def _environment(gh: GitHubServer, ws: Path, runner: Path) -> dict[str, str]:
    runner.mkdir()
    (runner / "event.json").write_text(json.dumps(pr_event()), encoding="utf-8")
    (runner / "summary").touch()
    (runner / "output").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "ACTIONS_"))}
    env.update({
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_WORKSPACE": str(ws), "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": gh.api_url, "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(runner / "event.json"),
        "GITHUB_OUTPUT": str(runner / "output"), "GITHUB_STEP_SUMMARY": str(runner / "summary"), "GITHUB_SHA": "c0ffee" * 6 + "beef",
        "GITHUB_REF_NAME": "feature", "INPUT_CONFIG": "rag-eval.yml", "INPUT_GITHUB-TOKEN": WRITE_TOKEN, "INPUT_COMMENT": "always",
    })
    return env


@pytest.mark.parametrize(("signum", "concurrency"), [(signal.SIGTERM, 8), (signal.SIGINT, 8), (signal.SIGTERM, 1)],
                         ids=["SIGTERM-threads", "SIGINT-threads", "SIGTERM-one-at-a-time"])
def test_a_cancelled_run_stops_resumes_commands_and_says_so(tmp_path, signum, concurrency):
    """The first case is answered at once (a target is asked one case alone first, to fail fast when it is down); the
    others take LATENCY_S: the signal comes while ``concurrency`` of them are in flight."""
    responses = {f"question {i}?": response([f"d{i}"]) for i in range(CASES)}
    behaviour = lambda req: None if req.question == "question 0?" else slow(LATENCY_S)  # noqa: E731
    with RagServer(responses, behaviour=behaviour) as rag, GitHubServer(repos=(REPO,)) as gh:
        ws = _workspace(tmp_path, rag.url, concurrency)
        runner = tmp_path / "runner"
        proc = subprocess.Popen([sys.executable, str(ROOT / "entrypoint.py")], cwd=ws, env=_environment(gh, ws, runner),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            started = time.monotonic()
            while len(rag.requests) < min(1 + concurrency, CASES) and time.monotonic() - started < 60 and proc.poll() is None:
                time.sleep(0.05)
            assert len(rag.requests) > 1, "the action did not get to ask the target"
            time.sleep(0.3)
            proc.send_signal(signum)
            sent = time.monotonic()
            stdout, stderr = proc.communicate(timeout=60)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        asked = len(rag.requests)
        comments = gh.comments(PR, REPO)
    shown = f"exit {proc.returncode} after {took:.1f} s\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    assert proc.returncode == {signal.SIGTERM: EXIT_TERMINATED, signal.SIGINT: EXIT_INTERRUPTED}[signum], shown
    assert took < GRACE_S + 5 < LATENCY_S, shown  # it did not wait for the answers in flight, nor ask the other cases
    assert asked <= 1 + concurrency and comments == []
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr, shown
    lines = stdout.splitlines()
    stops = [i for i, ln in enumerate(lines) if ln.startswith("::stop-commands::")]
    assert stops, shown
    for i in stops:  # every stop is resumed: the token printed again on its own line
        token = lines[i].removeprefix("::stop-commands::")
        assert f"::{token}::" in lines[i + 1:], shown
    resumed = max(lines.index(f"::{lines[i].removeprefix('::stop-commands::')}::") for i in stops)
    errors = [i for i, ln in enumerate(lines) if ln.startswith("::error")]
    assert len(errors) == 1 and errors[0] > resumed, shown  # after the resume: the runner reads it as a command
    name = signal.Signals(signum).name
    assert re.search(rf"the run was cancelled \({name}\) before it finished", lines[errors[0]]), shown
    summary = (runner / "summary").read_text(encoding="utf-8")
    assert "rag-gate: cancelled" in summary and f"the run was cancelled ({name})" in summary, summary
