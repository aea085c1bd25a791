"""The action's test harness: the action's own entry point run in a subprocess, as the runner starts it, with
GitHub's environment (INPUT_*, GITHUB_*: the event file, the step summary, outputs), against the GitHub stand-in on
127.0.0.1 as GITHUB_API_URL, in a copy of the quickstart as the workspace."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.io.reports import check_document
from gate.render.markdown import marker
from tests.support.github_server import READ_TOKEN, WRITE_TOKEN, GitHubServer

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
_runs = itertools.count(1)  # each run of the action gets its own runner folder
REPO = "owner/repo"
MARK = marker()
HISTORY = "rag-gate/history.jsonl"
HISTORY_BRANCH = "rag-gate-history"
PR = 17
HEAD = "9e" * 20  # a PR head commit (the fake needs to know it only for mode report)


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    """A checkout of the quickstart: its spec, golden set, RAG and committed baseline (no judge cache)."""
    dest = tmp_path / name
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", ".mypy_cache", "__pycache__", ".pytest_cache"))
    assert (dest / "eval" / "baseline.json").is_file() and not (dest / ".rag-gate").exists()
    return dest


def edit_spec(ws: Path, old: str, new: str) -> None:
    """The workspace's rag-eval.yml with ``old`` (which it must hold) replaced by ``new``."""
    spec = ws / "rag-eval.yml"
    text = spec.read_text(encoding="utf-8")
    assert old in text
    spec.write_text(text.replace(old, new), encoding="utf-8")


def impossible_threshold(ws: Path) -> None:
    edit_spec(ws, "hit_rate@5: {min: 0.80,", "hit_rate@5: {min: 0.99,")


def restore_threshold(ws: Path) -> None:
    shutil.copy(QUICKSTART / "rag-eval.yml", ws / "rag-eval.yml")


def pr_event(number: int = PR, head: str = HEAD, base: str = "0" * 40) -> dict[str, Any]:
    return {"action": "synchronize", "number": number,
            "pull_request": {"number": number, "head": {"sha": head, "ref": "feature"}, "base": {"sha": base, "ref": "main"}},
            "repository": {"full_name": REPO, "default_branch": "main"}}


def push_event(sha: str) -> dict[str, Any]:
    return {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO, "default_branch": "main"}}


def workflow_run_event(head: str, head_repository: str = "contributor/repo") -> dict[str, Any]:
    """A workflow_run event of the fork's pull_request run (the fake server puts a fork's head in contributor/<name>)."""
    return {"action": "completed", "workflow_run": {"head_sha": head, "event": "pull_request", "conclusion": "failure",
                                                    "pull_requests": [], "head_repository": {"full_name": head_repository}},
            "repository": {"full_name": REPO, "default_branch": "main"}}


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    token: str

    def lines(self, command: str) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln.startswith(f"::{command}")]

    def __str__(self) -> str:  # shown when an assertion fails
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def parse_outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT in the heredoc form: name<<DELIMITER, the value's lines, DELIMITER."""
    out, lines = {}, iter(text.splitlines())
    for line in lines:
        name, sep, delimiter = line.partition("<<")
        assert sep and delimiter, f"not a heredoc output line: {line!r}"
        value = []
        for v in lines:
            if v == delimiter:
                break
            value.append(v)
        else:
            raise AssertionError(f"output {name} is not closed by {delimiter}")
        out[name] = "\n".join(value)
    return out


def run_action(gh: GitHubServer, ws: Path, event_name: str, event: dict[str, Any], *, token: str = WRITE_TOKEN,
               mode: str | None = None, comment: str | None = None, sha: str = "c0ffee" * 6 + "beef", ref_name: str = "feature",
               inputs: dict[str, str] | None = None, extra_env: dict[str, str] | None = None) -> Result:
    """One step of a job: GitHub's environment for the container, the entry point, what it left behind."""
    n = next(_runs)
    runner = ws.parent / f"runner-{n}"  # the runner's files live outside the workspace, as on GitHub
    runner.mkdir()
    (runner / "event.json").write_text(json.dumps(event), encoding="utf-8")
    (runner / "output").touch()
    (runner / "summary").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "ACTIONS_"))
           and k not in ("OPENAI_API_KEY", "JUDGE_BASE_URL")}  # no judge key, as on a fork's pull request
    env.update({
        "GITHUB_ACTIONS": "true", "CI": "true",
        "GITHUB_WORKSPACE": str(ws), "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": gh.api_url,
        "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(runner / "event.json"),
        "GITHUB_OUTPUT": str(runner / "output"), "GITHUB_STEP_SUMMARY": str(runner / "summary"),
        "GITHUB_SHA": sha, "GITHUB_REF_NAME": ref_name,
        "INPUT_CONFIG": "rag-eval.yml", "INPUT_GITHUB-TOKEN": token, "INPUT_COMMENT": comment or "always",
        "INPUT_MODE": mode or "", "INPUT_REPORT-PATH": "rag-gate-report.json",
        "INPUT_HISTORY-BRANCH": HISTORY_BRANCH, "INPUT_HISTORY-PATH": HISTORY,
    })
    for k, v in (inputs or {}).items():
        env[f"INPUT_{k.upper()}"] = v
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, str(ROOT / "entrypoint.py")], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=120)
    result = Result(proc.returncode, proc.stdout, proc.stderr, parse_outputs((runner / "output").read_text(encoding="utf-8")),
                    (runner / "summary").read_text(encoding="utf-8"), token)
    assert "Traceback" not in proc.stdout + proc.stderr, str(result)
    assert_token_hidden(result)
    return result


def assert_token_hidden(r: Result, *files: Path) -> None:
    """The token is printed once, in the ::add-mask:: line, and nowhere else."""
    assert r.stdout.splitlines()[0] == f"::add-mask::{r.token}", str(r)  # first, before anything could show it
    assert r.stdout.count(r.token) == 1, str(r)
    texts = [r.stderr, r.summary, json.dumps(r.outputs), *(f.read_text(encoding="utf-8") for f in files if f.exists())]
    for text in texts:
        assert r.token not in text


def comment_texts(gh: GitHubServer, number: int = PR) -> list[str]:
    return [c["body"] for c in gh.comments(number, REPO)]


def history(gh: GitHubServer) -> list[dict[str, Any]]:
    text = gh.file(HISTORY, HISTORY_BRANCH, REPO)
    return [json.loads(ln) for ln in (text or "").splitlines()]


# --------------------------------------------------------------------------- mode gate, pull requests


def fork_report(gh: GitHubServer, tmp_path: Path, head: str = HEAD, fail: bool = True, by_group: bool = False) -> Path:
    """The pull_request job of a fork's PR: gate with a read-only token, leave report.json as the artifact.
    ``by_group``: hit_rate@5 and mrr gated per category too (the report then holds per-group records)."""
    fork = workspace(tmp_path, "fork")
    if fail:
        impossible_threshold(fork)
    if by_group:
        spec = fork / "rag-eval.yml"
        text = spec.read_text(encoding="utf-8")
        assert "max_drop: 0.02}" in text and "mrr: {min: 0.60, max_drop: 0.03}" in text
        spec.write_text(text.replace("max_drop: 0.02}", "max_drop: 0.02, by: category, min_group_size: 3}", 1)
                        .replace("mrr: {min: 0.60, max_drop: 0.03}", "mrr: {min: 0.60, max_drop: 0.03, by: tag}"), encoding="utf-8")
    r = run_action(gh, fork, "pull_request", pr_event(head=head), token=READ_TOKEN)
    assert r.code == (1 if fail else 0) and gh.comments(PR, REPO) == []
    return fork / "rag-gate-report.json"


def report_workspace(tmp_path: Path, artifact: Path | None = None, text: str | None = None) -> Path:
    ws = tmp_path / f"report-{next(_runs)}"
    ws.mkdir()
    if artifact is not None:
        shutil.copy(artifact, ws / "rag-gate-report.json")
    if text is not None:
        (ws / "rag-gate-report.json").write_text(text, encoding="utf-8")
    return ws


def _run(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr


def regressed_quickstart(ws: Path) -> dict[str, Any]:
    """The quickstart's report (made in ``ws``), over a history of one run, after a change that garbles a third of its
    corpus: failed gates, per-group gates, worse cases, a flipped noisy answer, rejection misses, a trend; a warning and
    an errored case; the pull request and head commit of a fork's run."""
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    _run(ws, "run", "--config", "rag-eval.yml", "--report", "main.json", "-q")
    _run(ws, "history", "record", "--config", "rag-eval.yml", "--report", "main.json", "--branch", "main")
    corpus = [json.loads(line) for line in (ws / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    for i, doc in enumerate(corpus):
        if i % 3 == 0:
            doc["text"] = " ".join(reversed(doc["text"].split()[:12]))
    (ws / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    spec = (ws / "rag-eval.yml").read_text(encoding="utf-8")
    spec = spec.replace("hit_rate@5: {min: 0.80, max_drop: 0.02}", "hit_rate@5: {min: 0.99, max_drop: 0.02, by: category, "
                        "min_group_size: 3}").replace("mrr: {min: 0.60, max_drop: 0.03}", "mrr: {min: 0.60, max_drop: 0.03, by: tag}")
    (ws / "rag-eval.yml").write_text(spec, encoding="utf-8")
    _run(ws, "run", "--config", "rag-eval.yml", "--report", "pr.json", "-q")
    report = json.loads((ws / "pr.json").read_text(encoding="utf-8"))
    report["run"].update(pr=PR, head_sha=HEAD)
    report["warnings"].append("a warning of the run")
    report["stages"]["retrieval"]["samples"][0]["error"] = "upstream timeout"
    report["cases"] = report["cases"][:5]  # the comment shows none of them: fewer to copy, parse and mutate
    stages = report["stages"]
    assert stages["retrieval"]["worse_cases"] and stages["generation"]["worse_cases"] and report["history"]["runs"]
    assert any(g.get("groups") for g in stages["retrieval"]["gates"]) and stages["robustness"]["rejection"]["cases"]
    check_document(report, "report", file="seed")
    return report
