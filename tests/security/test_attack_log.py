"""Attack 3: untrusted text in the job log becomes a workflow command. GitHub's runner reads stdout and stderr line by
line (a line ends at CR, LF or CRLF); a line whose text after leading blanks starts with ``::`` is a command, and so
is any line that holds ``##[`` anywhere. A target's 400 body once made the log print
``::error title=Security::Your token leaked, rotate it at https://evil.example/rotate``.

Here the real action runs against a target whose error bodies, answers and ids carry commands (with CRs, leading
blanks and ``##[``), and a golden set whose questions do. Its stdout and stderr are read the way the runner reads
them; every line that would be a command must be one rag-gate emits on purpose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support.action import REPO, pr_event, run_action
from tests.support.github_server import GitHubServer
from tests.support.rag_server import RagServer, reply, status

ATTACKS = [
    "::error title=Security::Your token leaked, rotate it at https://evil.example/rotate",
    "fine\r::set-output name=verdict::pass",
    "fine\n   ::add-mask::visible-words",
    "see the resource ##[stop-commands]x9f2a1 mid-line",
    "::stop-commands::deadbeef\r\n::warning::after a forged stop",
]
OURS = re.compile(r"^::(add-mask|group|endgroup|stop-commands|error|warning|notice)( [^:]*)?::|^::[0-9a-f]{32}::$")


def runner_lines(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


def commands(text: str) -> list[str]:
    """The lines GitHub's runner would treat as workflow commands (either form)."""
    return [ln for ln in runner_lines(text) if ln.lstrip().startswith("::") or "##[" in ln]


def test_the_runner_model_sees_every_attack_undefended():
    for attack in ATTACKS:
        assert commands(attack), attack


def hostile_rag(req: Any) -> Any:
    q = req.question or ""
    n = int(q.rsplit(" ", 1)[-1])
    if n % 2:
        return status(400, body=ATTACKS[n % len(ATTACKS)])
    return reply({"retrieved": [{"id": f"doc-{n} {ATTACKS[(n + 1) % len(ATTACKS)]}", "text": ATTACKS[n % len(ATTACKS)]}],
                  "answer": ATTACKS[(n + 2) % len(ATTACKS)]})


SPEC = """\
version: 1
golden_set: golden.jsonl
max_error_rate: 0.2
target:
  http: {url: "${RAG_URL}", retries: 0}
stages:
  retrieval:
    metrics: [hit_rate@1]
    gates: {hit_rate@1: {min: 0.9}}
  robustness:
    rejection: {}
"""


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "rag-eval.yml").write_text(SPEC, encoding="utf-8")
    rows = [{"id": f"c{n} {ATTACKS[n % len(ATTACKS)]}", "question": f"{ATTACKS[n % len(ATTACKS)]} number {n}",
             "relevant_doc_ids": [f"doc-{n}"]} for n in range(10)]
    rows.append({"id": "oos", "question": "::warning::out of scope number 10", "type": "out_of_scope"})
    (ws / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return ws


def test_no_untrusted_text_starts_a_workflow_command(tmp_path):
    ws = workspace(tmp_path)
    with RagServer({}, behaviour=hostile_rag) as rag, GitHubServer(repos=(REPO,)) as gh:
        url = rag.url
        r = run_action(gh, ws, "pull_request", pr_event(), extra_env={"RAG_URL": url})
    assert r.code == 3, str(r)  # half of the calls failed: above max_error_rate
    assert "Your token leaked" in r.stdout  # the attack text did reach the log, as text
    assert commands(r.stderr) == []
    for line in commands(r.stdout):
        assert OURS.match(line), line
        assert "##[" not in line, line
        if line.startswith("::add-mask::"):
            assert line.removeprefix("::add-mask::") in (r.token, url), line  # the token and the ${RAG_URL} the spec reads
    lines = runner_lines(r.stdout)
    masks = [i for i, ln in enumerate(lines) if ln.startswith("::add-mask::")]
    assert masks == [0, 1] and lines[1] == f"::add-mask::{url}"  # every secret masked before anything else is printed
    stops = [ln for ln in runner_lines(r.stdout) if ln.startswith("::stop-commands::")]
    assert len(stops) == 1 and f"::{stops[0].split('::')[2]}::" in r.stdout.splitlines()  # the run is inside a stop window
    errors = [ln for ln in runner_lines(r.stdout) if ln.startswith("::error")]
    # the run error quotes the commonest body (a forged set-output): as the data of rag-gate's own ::error, inert
    assert any("::set-output name=verdict::pass" in ln for ln in errors), errors


def test_the_cli_log_is_inert_too(tmp_path):
    """`rag-gate run` in a workflow's own step prints the same report: no stop window there, the escaping alone holds."""
    import os
    import subprocess
    import sys

    ws = workspace(tmp_path)
    with RagServer({}, behaviour=hostile_rag) as rag:
        env = {**os.environ, "RAG_URL": rag.url, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--no-progress"], cwd=ws, env=env,
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "Your token leaked" in proc.stdout, proc.stdout + proc.stderr
    assert commands(proc.stdout) == [] and commands(proc.stderr) == []
