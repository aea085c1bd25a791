"""`rag-gate validate --ping`: one question to the target, one tiny call to the judge (the test judge on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

from tests.support.judge_server import JudgeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
KEY = "sk-test-PingKey0123456789abcdef"


def ping(ws: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    env.update(PYTHONPATH=str(ROOT), JUDGE_BASE_URL=url, OPENAI_API_KEY=KEY)
    return subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.judge.yml", "--ping"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    dest = tmp_path / "qs"
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    text = (dest / "rag-eval.judge.yml").read_text(encoding="utf-8")
    (dest / "rag-eval.judge.yml").write_text(text.replace("  concurrency: 16\n", "  concurrency: 16\n  max_retries: 0\n  timeout_s: 5\n"),
                                             encoding="utf-8")
    return dest


def test_both_answer(ws: Path) -> None:
    with JudgeServer() as judge:
        proc = ping(ws, judge.url)
        asked = judge.calls
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "target (python): answered case q01 in " in proc.stdout and "(10 passages, an answer)" in proc.stdout
    assert "judge: gpt-4o-mini-2024-07-18 answered a refusal check in " in proc.stdout and "read the answer right" in proc.stdout
    assert asked == 1 and KEY not in proc.stdout + proc.stderr


def test_an_unreachable_judge_is_said_and_exits_3(ws: Path) -> None:
    proc = ping(ws, "http://127.0.0.1:9/v1")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "target (python): answered case q01" in proc.stdout
    assert "judge: NOT reachable or not usable: cannot reach the judge at *** (1 attempts)" in proc.stdout  # a ${NAME} value is masked
    assert KEY not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


# --- the calls a run makes: the answer, and the noise test's answer from given contexts ------------------------------------

from tests.support.rag_server import RagServer, reply, response  # noqa: E402

Q = "What is the loan period?"
NOISE_SPEC = """\
version: 1
golden_set: golden.jsonl
target:
  http: {target}
  k: 5
stages:
  retrieval:
    metrics: [hit_rate@5]
  robustness:
    noise:
      distractors: 1
      source: corpus
      sample: {{size: 5, seed: 7}}
      correctness: {{method: offline, threshold: 0.3}}
    rejection: {{}}
"""


def ping_http(tmp: Path, target: str, *, noise: bool = True) -> subprocess.CompletedProcess[str]:
    (tmp / "golden.jsonl").write_text(json.dumps({"id": "q1", "question": Q, "ground_truth": "21 days.",
                                                  "relevant_doc_ids": ["d1"]}) + "\n", encoding="utf-8")
    spec = NOISE_SPEC.format(target=target)
    if not noise:
        spec = spec[:spec.index("  robustness:")]
    (tmp / "rag-eval.yml").write_text(spec, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.yml", "--ping"], cwd=tmp,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)


def target_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr
    return [ln for ln in proc.stdout.splitlines() if ln.startswith("target")]


def test_ping_makes_the_noise_tests_call_with_the_cases_own_passages(tmp_path: Path) -> None:
    with RagServer({Q: response(["d1", "d2"], answer="21 days.")}) as srv:
        proc = ping_http(tmp_path, f'{{url: "{srv.url}", retries: 0}}')
        bodies = [r.body for r in srv.requests]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer, noise = target_lines(proc)
    assert answer.startswith("target (http): answered case q1 in ") and "(2 passages, an answer)" in answer
    assert noise.startswith("target (http), the noise test's call (an answer from 2 given contexts): answered case q1 in ")
    assert bodies == [{"question": Q, "k": 5}, {"question": Q, "contexts": ["text of d1", "text of d2"]}]


def test_ping_fails_on_a_contexts_call_that_would_fail_while_the_answer_call_passes(tmp_path: Path) -> None:
    with RagServer({Q: response(["d1"], answer="21 days.")}) as main, \
            RagServer(default=reply({"output": {"reply": "x"}, "metadata": {"run_id": "r", "feedback_tokens": []}})) as other:
        proc = ping_http(tmp_path, f'{{url: "{main.url}", retries: 0, contexts: {{url: "{other.url}"}}}}')
        asked, other_url = [r.body for r in other.requests], other.url
    assert proc.returncode == 3, proc.stdout + proc.stderr  # as when the answer call fails
    answer, noise = target_lines(proc)
    assert answer.startswith("target (http): answered case q1 in ")
    assert noise.startswith(f"target (http), the noise test's call (an answer from 1 given contexts): returned the wrong shape "
                            f"for case q1: {other_url}: an object with keys ")
    assert "an object with keys 'output', 'metadata'" in noise  # what was received
    assert "target.http.contexts.response.answer" in noise and "NOT reachable" not in proc.stdout
    assert asked == [{"question": Q, "contexts": ["text of d1"]}]


def test_ping_says_not_reachable_only_when_the_contexts_url_cannot_be_reached(tmp_path: Path) -> None:
    from tests.support.standin import free_port

    with RagServer({Q: response(["d1"], answer="21 days.")}) as main:
        proc = ping_http(tmp_path, f'{{url: "{main.url}", retries: 0, contexts: {{url: "http://127.0.0.1:{free_port()}/answer"}}}}')
    assert proc.returncode == 3
    _, noise = target_lines(proc)
    assert "the noise test's call (an answer from 1 given contexts): NOT reachable for case q1: http://127.0.0.1:" in noise
    assert "connection failed" in noise


def test_ping_says_the_wrong_shape_of_the_answer_call_and_makes_no_other(tmp_path: Path) -> None:
    with RagServer(default=reply({"output": "21 days.", "metadata": {"run_id": "r", "feedback_tokens": []}})) as srv:
        proc = ping_http(tmp_path, f'{{url: "{srv.url}", retries: 0}}')
        calls, url = len(srv.requests), srv.url
    assert proc.returncode == 3
    (line,) = target_lines(proc)
    assert line.startswith(f"target (http): returned the wrong shape for case q1: {url}: no 'retrieved' field (got an object with keys ")
    assert line.count("wrong shape") == 1, line  # said once
    assert "an object with keys 'output', 'metadata'" in line
    assert "set `preset: langserve`" in line and "NOT reachable" not in line and calls == 1


def test_ping_without_the_noise_test_makes_only_the_answer_call(tmp_path: Path) -> None:
    with RagServer({Q: response(["d1"], answer="21 days.")}) as srv:
        proc = ping_http(tmp_path, f'{{url: "{srv.url}", retries: 0}}', noise=False)
        calls = len(srv.requests)
    assert proc.returncode == 0 and len(target_lines(proc)) == 1 and calls == 1


def test_ping_says_a_chain_with_no_passages_leaves_the_retrieval_metrics_nothing(tmp_path: Path) -> None:
    invoked = {"output": "21 days.", "metadata": {"run_id": "r", "feedback_tokens": []}}
    with RagServer(default=reply(invoked), question_field="input") as srv:
        proc = ping_http(tmp_path, f'{{url: "{srv.url}", retries: 0, preset: langserve}}', noise=False)
        paths = [r.path for r in srv.requests]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = target_lines(proc)
    assert "(0 passages, an answer): the retrieval metrics need them (target.http.response.retrieved;" in line
    assert paths == ["/invoke"]


def test_ping_of_the_python_target_makes_the_noise_tests_call(tmp_path: Path) -> None:
    dest = tmp_path / "qs"
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "JUDGE_", "OPENAI_"))}
    proc = subprocess.run([sys.executable, "-m", "gate", "validate", "--config", "rag-eval.yml", "--ping"], cwd=dest,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer, noise = target_lines(proc)
    assert "answered case q01" in answer and "(10 passages, an answer)" in answer
    assert noise.startswith("target (python), the noise test's call (an answer from 3 given contexts): answered case q01 in ")


def test_a_service_that_answers_an_error_status_is_reached_not_unreachable(tmp_path: Path) -> None:
    from tests.support.rag_server import status

    with RagServer({}, default=status(404)) as srv:
        proc = ping_http(tmp_path, f'{{url: "{srv.url}", retries: 0}}', noise=False)
    assert proc.returncode == 3
    (line,) = target_lines(proc)
    assert line.startswith("target (http): reached, but it answered HTTP 404 for case q1: ") and "NOT reachable" not in line


def test_a_refused_first_case_stops_the_run_there(tmp_path: Path) -> None:
    from tests.support.rag_server import status

    (tmp_path / "golden.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "relevant_doc_ids": ["d1"]})
                                                   + "\n" for i in range(20)), encoding="utf-8")
    with RagServer({}, default=status(401)) as srv:
        (tmp_path / "rag-eval.yml").write_text(f'version: 1\ngolden_set: golden.jsonl\ntarget:\n  http: {{url: "{srv.url}", retries: 0}}\n'
                                               "stages:\n  retrieval:\n    metrics: [hit_rate@5]\n", encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--no-progress"], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
        asked = len(srv.requests)
    assert proc.returncode == 3 and asked == 1, proc.stdout + proc.stderr
    assert "the target refused the first case (q0), as it would every case: " in proc.stderr and "HTTP 401" in proc.stderr
    assert "no other case was asked" in proc.stderr and "Traceback" not in proc.stderr
