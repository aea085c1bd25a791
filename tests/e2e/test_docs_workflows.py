"""The workflows of README.md and docs/*.md, run under the `act` runner as they are printed.

Every complete workflow of those pages (a yaml block with `on:` and `jobs:`, found as
tests/integration/test_workflows.py finds them to lint them) is written unchanged into a repository made for the
test, and act runs it:

- the pull-request workflow: a failing gate fails the job AND saves the judge cache the run filled (its SQLite file
  has rows in `scores`); the next run restores it (the newest cache of the key's prefix) and judges nothing again;
- the shard workflow: one shard runs out of time (exit 3) and still uploads its part; the merge job runs all the
  same, merges what the shards left, says which shard is incomplete, and its verdict is `error`;
- the default-branch workflow: the run lands in the history and its judge cache is saved for the branch;
- the fork-safe follow-up: a fork's run (read-only token) uploads the report, the workflow_run job downloads it from
  that run and posts the comment.

What the test substitutes, and nothing else:

- `<owner>/rag-gate@<ref>` (the docs say `OWNER/rag-gate@v1`) is mapped to a copy of the working tree with act's
  `--local-repository`, so the action's Dockerfile is built from it;
- the remote actions act cannot fetch here, `actions/cache`, `actions/cache/restore`, `actions/cache/save`,
  `actions/upload-artifact` and `actions/download-artifact`, are mapped the same way to the stand-ins in
  tests/e2e/actions/ (same inputs and outputs; what they keep of the real actions' behaviour is in their scripts'
  docstrings). They keep caches and artifacts in a folder of the host that act binds into the job's containers at
  /standin-store (`--container-options -v`); `actions/checkout` is act's own (it copies the repository).

The surroundings a workflow assumes, provided by the test:

- the repository holds the quickstart's golden set and baseline and a `rag-eval.yml` whose target is the quickstart
  RAG over HTTP; a failing gate is made by raising its hit_rate@5 threshold to 0.99;
- the service image the pull-request workflow names (`ghcr.io/acme/rag-service:latest`) is built here from the
  quickstart (its HTTP service on the container port the workflow publishes). Under act the job's containers use the
  host's network, so the action reaches the service at its published port on localhost, not by its label `rag` (on
  GitHub's runner a Docker action shares the services' network): the test's spec says localhost;
- GitHub's API is tests/support/github_server.py on 127.0.0.1 (`GITHUB_API_URL`), the job token a secret, and
  `github.run_id` is set per run (`GITHUB_RUN_ID`), so that every run has its own cache key and artifacts.

Needs Docker and act (.ci/container-env.sh, as tests/e2e/test_e2e_act.py); where Docker cannot run, the act tests
are skipped and say why. The stand-ins themselves are checked first, without Docker. About 2.5 minutes here once the
action's image layers are cached (the first build of the image takes minutes more).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_e2e_act import _act, pr_event
from tests.integration.test_workflows import readme_workflows
from tests.support.github_server import READ_TOKEN, WRITE_TOKEN, GitHubServer
from tests.support.quickrag import serve_quickrag
from tests.support.standin import StandIn, StandInHandler

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
STANDINS = Path(__file__).parent / "actions"
STORE_IN_RUNNER = "/standin-store"
REMOTE = {  # the remote actions the docs use -> the stand-in folder act maps their repository to
    "actions/cache": STANDINS / "cache",
    "actions/upload-artifact": STANDINS / "upload-artifact",
    "actions/download-artifact": STANDINS / "download-artifact",
}
RUN_IDS = itertools.count(7001)


# --------------------------------------------------------------------------- the workflows of the docs


@dataclass(frozen=True)
class DocWorkflow:
    name: str  # where it is printed: README-1-0 is README.md's second yaml block, first document
    text: str  # exactly as printed
    doc: dict[str, Any] = field(compare=False, hash=False)

    @property
    def events(self) -> dict[str, Any]:
        on = self.doc.get("on", self.doc.get(True))  # YAML 1.1 reads the key `on` as true
        return {on: None} if isinstance(on, str) else dict.fromkeys(on) if isinstance(on, list) else dict(on)

    def steps(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for job_id, job in self.doc["jobs"].items():
            for step in job.get("steps", []):
                yield job_id, step

    @property
    def kind(self) -> str:
        """What the workflow is for: `gate` (pull requests), `shards`, `record` (the default branch), `comment` (the
        fork-safe follow-up), `watch` (scheduled runs), `traces` (scheduled runs of a traces spec)."""
        if "workflow_run" in self.events:
            return "comment"
        if "schedule" in self.events:  # a watch of a traces spec: its window of production traffic, exported first
            return "traces" if any("traces" in str((s.get("with") or {}).get("config", "")) for _, s in self.rag_gate_steps()) else "watch"
        if "push" in self.events:
            return "record"
        if any("shard" in (step.get("with") or {}) for _, step in self.steps()):
            return "shards"
        return "gate" if "pull_request" in self.events else "unknown"

    def rag_gate_steps(self) -> list[tuple[str, dict[str, Any]]]:
        return [(j, s) for j, s in self.steps() if re.fullmatch(r"[\w.-]+/rag-gate@[\w.-]+", s.get("uses", ""))]


def doc_workflows(tmp: Path) -> list[DocWorkflow]:
    """The complete workflows of README.md and docs/*.md, one per distinct text (a page may repeat another's)."""
    out: dict[str, DocWorkflow] = {}
    for path in readme_workflows(tmp):
        text = path.read_text(encoding="utf-8")
        out.setdefault(text, DocWorkflow(path.stem, text, yaml.safe_load(text)))
    return list(out.values())


def local_repositories(workflow: DocWorkflow, action_tree: Path) -> list[str]:
    """act's --local-repository arguments for every remote action the workflow uses; fails on one it cannot map."""
    mapped: dict[str, str] = {}
    for _, step in workflow.steps():
        uses = step.get("uses")
        if not uses or uses.startswith(("./", "docker://")):
            continue
        ref_path, _, ref = uses.partition("@")
        repo = "/".join(ref_path.split("/")[:2])
        if repo == "actions/checkout":
            continue  # act's own: it copies the repository it runs in
        if re.fullmatch(r"[\w.-]+/rag-gate", repo):
            mapped[f"{repo}@{ref}"] = str(action_tree)
        elif repo in REMOTE:
            mapped[f"{repo}@{ref}"] = str(REMOTE[repo])
        else:
            pytest.fail(f"{workflow.name}: no stand-in for `uses: {uses}` (act cannot fetch it here): add one to {STANDINS}")
    return [f"{k}={v}" for k, v in mapped.items()]


@pytest.fixture(scope="module")
def workflows(tmp_path_factory: pytest.TempPathFactory) -> list[DocWorkflow]:
    return doc_workflows(tmp_path_factory.mktemp("doc-workflows"))


def of_kind(workflows: list[DocWorkflow], kind: str) -> list[DocWorkflow]:
    found = [w for w in workflows if w.kind == kind]
    assert found, f"README.md and docs/ show no {kind} workflow"
    return found


def test_every_workflow_of_the_docs_is_one_this_module_runs(workflows: list[DocWorkflow], tmp_path: Path) -> None:
    kinds = {w.name: w.kind for w in workflows}
    assert "unknown" not in kinds.values(), f"a workflow of the docs this module does not know how to run: {kinds}"
    assert {"gate", "shards", "record", "comment", "watch", "traces"} <= set(kinds.values()), kinds
    for w in workflows:
        assert w.rag_gate_steps(), f"{w.name} does not use the action"
        local_repositories(w, tmp_path)  # every remote action has a stand-in


ALWAYS = re.compile(r"always\(\)|!\s*cancelled\(\)")


def test_the_workflows_keep_what_a_failed_run_paid_for(workflows: list[DocWorkflow]) -> None:
    """What the act tests below show, read off the workflows (so that it holds where Docker cannot run): no job carries
    the judge cache with actions/cache (it saves only when the job succeeds); a job that restores the cache saves or
    uploads it after the gate, and every step after the gate that saves or uploads runs `if: always()`; the job that
    needs the shards runs whatever they ended with."""
    for w in workflows:
        for job_id, job in w.doc["jobs"].items():
            steps = job.get("steps", [])
            uses = [s.get("uses", "") for s in steps]
            where = f"{w.name}, job {job_id}"
            assert not any(u.startswith("actions/cache@") for u in uses), \
                f"{where}: actions/cache saves only when the job succeeds; use actions/cache/restore and actions/cache/save"
            gate = [i for i, u in enumerate(uses) if re.fullmatch(r"[\w.-]+/rag-gate@[\w.-]+", u)]
            if gate:
                keeps = [s for s in steps[gate[-1] + 1:] if s.get("uses", "").startswith(("actions/cache/save@", "actions/upload-artifact@"))]
                for s in keeps:
                    assert ALWAYS.search(str(s.get("if", ""))), f"{where}: `{s['uses']}` after the gate needs if: always()"
                if any(u.startswith("actions/cache/restore@") for u in uses):
                    assert keeps, f"{where}: restores the judge cache but never saves it"
            if job.get("needs"):
                assert ALWAYS.search(str(job.get("if", ""))), \
                    f"{where}: needs {job['needs']}, so it is skipped when one of them fails: add if: ${{{{ !cancelled() }}}}"


# --------------------------------------------------------------------------- the stand-ins, without Docker


def standin(script: str, workspace: Path, store: Path, env: dict[str, str]) -> tuple[int, str, dict[str, str]]:
    """Run one stand-in script as act would (inputs as INPUT_*, GITHUB_* of a pull_request run); its exit code, its
    log and the outputs it set."""
    out_file = workspace.parent / f"out-{uuid.uuid4().hex}"
    event = workspace.parent / "event.json"
    event.write_text(json.dumps({"repository": {"full_name": "owner/repo", "default_branch": "main"}}))
    base = {"PATH": os.environ["PATH"], "STANDIN_STORE": str(store), "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_OUTPUT": str(out_file), "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "owner/repo",
            "GITHUB_RUN_ID": "1", "GITHUB_REF": "refs/pull/5/merge", "GITHUB_BASE_REF": "main"}
    proc = subprocess.run([sys.executable, str(STANDINS / script)], cwd=workspace, env={**base, **env},
                          capture_output=True, text=True, timeout=60)
    outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines()) if out_file.exists() else {}
    return proc.returncode, proc.stdout + proc.stderr, outputs


@pytest.fixture
def bench(tmp_path: Path) -> tuple[Path, Path]:
    workspace, store = tmp_path / "ws", tmp_path / "store"
    workspace.mkdir()
    store.mkdir()
    return workspace, store


def test_the_cache_stand_ins_restore_the_newest_prefix_match_and_never_overwrite_a_key(bench: tuple[Path, Path]) -> None:
    ws, store = bench
    db = ws / ".rag-gate" / "judge-cache.sqlite"
    db.parent.mkdir()
    save = "cache/save/save.py"
    restore = "cache/restore/restore.py"
    common = {"INPUT_PATH": ".rag-gate/judge-cache.sqlite"}
    code, log, _ = standin(restore, ws, store, {**common, "INPUT_KEY": "judge-1", "INPUT_RESTORE_KEYS": "judge-"})
    assert code == 0 and "Cache not found for input keys: judge-1, judge-" in log
    for run, text in (("1", "first"), ("2", "second")):
        db.write_text(text)
        code, log, _ = standin(save, ws, store, {**common, "INPUT_KEY": f"judge-{run}"})
        assert code == 0 and f"Cache saved with key: judge-{run}" in log, log
    db.write_text("third")  # the same key again: refused, the step still succeeds, the entry keeps its content
    code, log, _ = standin(save, ws, store, {**common, "INPUT_KEY": "judge-2"})
    assert code == 0 and "Unable to reserve cache with key judge-2" in log and "::warning::Cache save failed." in log
    db.unlink()
    code, log, out = standin(restore, ws, store, {**common, "INPUT_KEY": "judge-3", "INPUT_RESTORE_KEYS": "other-\njudge-"})
    assert code == 0 and db.read_text() == "second", log
    assert out == {"cache-primary-key": "judge-3", "cache-matched-key": "judge-2", "cache-hit": "false"}
    code, log, out = standin(restore, ws, store, {**common, "INPUT_KEY": "judge-1", "INPUT_RESTORE_KEYS": "judge-"})
    assert db.read_text() == "first" and out["cache-hit"] == "true"
    # other paths are another version: not found; a missing path saves nothing
    code, log, out = standin(restore, ws, store, {"INPUT_PATH": "other.sqlite", "INPUT_KEY": "judge-1", "INPUT_RESTORE_KEYS": "judge-"})
    assert code == 0 and "cache-matched-key" not in out
    code, log, _ = standin(save, ws, store, {"INPUT_PATH": "missing.sqlite", "INPUT_KEY": "judge-9"})
    assert code == 0 and "Path Validation Error" in log
    code, log, _ = standin(restore, ws, store, {**common, "INPUT_KEY": "none", "INPUT_FAIL_ON_CACHE_MISS": "true"})
    assert code == 1 and "fail-on-cache-miss" in log
    # scope: the default branch's caches are restored in a PR's run, a PR's never in another ref's run
    db.write_text("main")
    code, log, _ = standin(save, ws, store, {**common, "INPUT_KEY": "judge-main", "GITHUB_REF": "refs/heads/main"})
    code, log, out = standin(restore, ws, store, {**common, "INPUT_KEY": "x", "INPUT_RESTORE_KEYS": "judge-m",
                                                  "GITHUB_REF": "refs/pull/6/merge"})
    assert out.get("cache-matched-key") == "judge-main"
    code, log, out = standin(restore, ws, store, {**common, "INPUT_KEY": "x", "INPUT_RESTORE_KEYS": "judge-",
                                                  "GITHUB_REF": "refs/heads/main", "GITHUB_BASE_REF": ""})
    assert out.get("cache-matched-key") == "judge-main"


def test_the_artifact_stand_ins_search_paths_and_download_by_name_or_pattern(bench: tuple[Path, Path]) -> None:
    ws, store = bench
    up, down = "upload-artifact/upload.py", "download-artifact/download.py"
    for name in ("rag-gate-report.json", "rag-gate-report.html", "other.txt", ".hidden.json"):
        (ws / name).write_text(name)
    (ws / ".rag-gate").mkdir()
    (ws / ".rag-gate" / "judge-cache.sqlite").write_text("db")
    code, log, out = standin(up, ws, store, {"INPUT_NAME": "report", "INPUT_PATH": "rag-gate-report.*"})
    assert code == 0 and out["artifact-id"], log
    assert sorted(os.listdir(store / "artifacts/owner/repo/1/report/files")) == ["rag-gate-report.html", "rag-gate-report.json"]
    code, log, _ = standin(up, ws, store, {"INPUT_NAME": "report", "INPUT_PATH": "other.txt"})
    assert code == 1 and "(409) Conflict" in log
    code, log, _ = standin(up, ws, store, {"INPUT_NAME": "cache-1", "INPUT_PATH": ".rag-gate/judge-cache.sqlite"})
    assert code == 0 and os.listdir(store / "artifacts/owner/repo/1/cache-1/files") == ["judge-cache.sqlite"]
    code, log, _ = standin(up, ws, store, {"INPUT_NAME": "cache-2", "INPUT_PATH": ".rag-gate/"})  # a hidden folder is not searched
    assert code == 0 and "::warning::No files were found with the provided path: .rag-gate/" in log
    code, log, _ = standin(up, ws, store, {"INPUT_NAME": "x", "INPUT_PATH": "nothing-*", "INPUT_IF_NO_FILES_FOUND": "error"})
    assert code == 1 and "::error::No files were found" in log
    code, log, _ = standin(up, ws, store, {"INPUT_NAME": "x", "INPUT_PATH": "nothing-*", "INPUT_IF_NO_FILES_FOUND": "ignore"})
    assert code == 0 and "::" not in log
    code, log, _ = standin(up, ws, store, {"INPUT_NAME": "cache-2", "INPUT_PATH": "other.txt\n.hidden.json", "INPUT_INCLUDE_HIDDEN_FILES": "true"})
    assert code == 0 and sorted(os.listdir(store / "artifacts/owner/repo/1/cache-2/files")) == [".hidden.json", "other.txt"]
    into = ws / "got"
    code, log, out = standin(down, ws, store, {"INPUT_PATTERN": "cache-*", "INPUT_PATH": str(into)})
    assert code == 0 and sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file()) == \
        ["cache-1/judge-cache.sqlite", "cache-2/.hidden.json", "cache-2/other.txt"]
    assert out["download-path"] == str(into)
    merged = ws / "merged"
    code, log, _ = standin(down, ws, store, {"INPUT_PATTERN": "cache-*", "INPUT_PATH": str(merged), "INPUT_MERGE_MULTIPLE": "true"})
    assert sorted(os.listdir(merged)) == [".hidden.json", "judge-cache.sqlite", "other.txt"]
    code, log, _ = standin(down, ws, store, {"INPUT_PATTERN": "none-*", "INPUT_PATH": str(ws / "none")})
    assert code == 0 and "Total of 0 artifact(s) downloaded" in log
    code, log, _ = standin(down, ws, store, {"INPUT_NAME": "report"})
    assert code == 0 and (ws / "rag-gate-report.json").read_text() == "rag-gate-report.json"
    code, log, _ = standin(down, ws, store, {"INPUT_NAME": "missing"})
    assert code == 1 and "Artifact 'missing' not found" in log
    # another run's artifact: only with a token, from the run named by run-id
    code, log, _ = standin(down, ws, store, {"INPUT_NAME": "report", "GITHUB_RUN_ID": "2"})
    assert code == 1
    code, log, _ = standin(down, ws, store, {"INPUT_NAME": "report", "GITHUB_RUN_ID": "2", "INPUT_GITHUB_TOKEN": "t",
                                             "INPUT_RUN_ID": "1", "INPUT_REPOSITORY": "owner/repo"})
    assert code == 0, log


# --------------------------------------------------------------------------- running them under act


@pytest.fixture(scope="module")
def act() -> str:
    return _act()


@pytest.fixture(scope="module")
def action_tree(tmp_path_factory: pytest.TempPathFactory, act: str) -> Path:
    """A copy of the working tree: what `OWNER/rag-gate@v1` is mapped to (its Dockerfile builds the action's image)."""
    dest = tmp_path_factory.mktemp("action") / "rag-gate"
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", ".rag-gate", "__pycache__", ".pytest_cache", "*.egg-info",
                                                              "node_modules", ".git"))
    return dest


@dataclass
class Run:
    code: int
    log: str
    jobs: dict[str, str]  # job (matrix jobs: one per value) -> success | failure; a skipped job is absent
    outputs: dict[str, dict[str, str]]  # job -> the outputs its steps set
    started: set[str]  # jobs that ran at least one step

    def tail(self) -> str:
        return self.log[-4000:]


def cache_entries(store: Path) -> list[dict[str, Any]]:
    """The caches the stand-in of actions/cache/save stored, oldest first."""
    metas = [json.loads(p.read_text()) | {"dir": p.parent} for p in (store / "caches").glob("*/meta.json")]
    return sorted(metas, key=lambda m: m["created"])


def scores_rows(sqlite_file: Path) -> int:
    with sqlite3.connect(f"file:{sqlite_file}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT count(*) FROM scores").fetchone()[0]


def artifact(store: Path, run_id: int, name: str) -> Path:
    return store / "artifacts" / "owner" / "repo" / str(run_id) / name / "files"


def make_repo(where: Path, workflow: DocWorkflow, target: str, *, extra_spec: str = "") -> Path:
    """The repository the workflow runs in: the quickstart's golden set and baseline, a rag-eval.yml asking the RAG at
    `target` over HTTP, and the workflow as printed, committed."""
    repo = where / "repo"
    repo.mkdir(parents=True)
    shutil.copy(QUICKSTART / "golden_set.jsonl", repo / "golden_set.jsonl")
    shutil.copytree(QUICKSTART / "eval", repo / "eval")
    spec = (QUICKSTART / "rag-eval.yml").read_text()
    start, end = spec.index("  python:"), spec.index("  k: 10")
    spec = spec[:start] + f'  http: {{url: "{target}", concurrency: 4}}\n' + spec[end:]
    (repo / "rag-eval.yml").write_text(spec.replace("version: 1\n", "version: 1\n" + extra_spec, 1))
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "docs.yml").write_text(workflow.text)
    return committed(repo)


def committed(repo: Path) -> Path:
    """The repository, its files committed on main with GitHub's owner/repo as origin."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["remote", "add", "origin", "https://github.com/owner/repo.git"], ["add", "-A"],
                 ["commit", "-qm", "the workflow as printed"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
    return repo


def set_gate(repo: Path, threshold: str) -> None:
    spec = repo / "rag-eval.yml"
    spec.write_text(re.sub(r"hit_rate@5: \{min: [0-9.]+,", f"hit_rate@5: {{min: {threshold},", spec.read_text()))


def run_workflow(act: str, repo: Path, workflow: DocWorkflow, action_tree: Path, store: Path, gh: GitHubServer, *,
                 event_name: str, event: dict[str, Any], run_id: int, token: str = WRITE_TOKEN,
                 env: dict[str, str] | None = None, secrets: dict[str, str] | None = None) -> Run:
    """One run of the workflow under act, with the substitutions of the module docstring (as tests/e2e/test_e2e_act.py's
    run_act, which it follows: the same flags, the same reading of act's JSON log, the same masking check)."""
    event_path = repo.parent / f"event-{uuid.uuid4().hex}.json"
    event_path.write_text(json.dumps(event))
    maps = [a for m in local_repositories(workflow, action_tree) for a in ("--local-repository", m)]
    envs = [a for k, v in {"GITHUB_API_URL": gh.api_url, "GITHUB_REPOSITORY": "owner/repo", "GITHUB_RUN_ID": str(run_id),
                           **(env or {})}.items() for a in ("--env", f"{k}={v}")]
    proc = subprocess.run(
        [act, event_name, "-W", ".github/workflows/docs.yml", "-e", str(event_path), "-P", "ubuntu-latest=local/runner:bookworm",
         "--pull=false", "--rm", "--json", *maps, "--container-options", f"-v {store}:{STORE_IN_RUNNER}", *envs,
         "-s", f"GITHUB_TOKEN={token}", *[a for k, v in (secrets or {}).items() for a in ("-s", f"{k}={v}")]],
        cwd=repo, capture_output=True, text=True, timeout=900, env={**os.environ, "HOME": str(repo.parent)},
    )
    jobs: dict[str, str] = {}
    outputs: dict[str, dict[str, str]] = {}
    started: set[str] = set()
    shown = []
    for line in proc.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            shown.append(line)
            continue
        shown.append(str(d.get("msg", "")))
        job = str(d.get("job", ""))
        if d.get("stepResult") and d.get("stage") == "Main":
            started.add(job)
        if d.get("command") == "set-output":
            outputs.setdefault(job, {})[d.get("name", "")] = d.get("arg", "")
        if d.get("jobResult"):
            jobs[job] = d["jobResult"]
    log = proc.stdout + proc.stderr
    (repo.parent / f"act-{run_id}.log").write_text("\n".join(shown) + "\n" + proc.stderr)  # to read when a test fails
    assert token not in "\n".join(shown) + proc.stderr, f"the token is not masked in the log:\n{log[-3000:]}"
    return Run(proc.returncode, log, jobs, outputs, started)


def job_named(run: Run, prefix: str) -> list[str]:
    return sorted(j for j in {*run.jobs, *run.started, *run.outputs} if j.split("/")[-1].startswith(prefix))


@pytest.fixture(scope="module")
def rag_service(workflows: list[DocWorkflow], act: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service image the pull-request workflow names, built from the quickstart; yields the URL the action reaches
    it at under act (its published port on localhost)."""
    (w, *_) = of_kind(workflows, "gate")
    services = [s for job in w.doc["jobs"].values() for s in (job.get("services") or {}).values()]
    assert len(services) == 1, f"{w.name}: one service expected, the RAG system"
    service = services[0]
    host_port, _, port = str(service["ports"][0]).partition(":")
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", int(host_port))) == 0:
            pytest.skip(f"port {host_port}, which {w.name} publishes its service on, is taken on this machine")
    context = tmp_path_factory.mktemp("rag-service")
    shutil.copytree(QUICKSTART / "quickrag", context / "quickrag", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(QUICKSTART / "corpus.jsonl", context / "corpus.jsonl")
    (context / "Dockerfile").write_text(
        "FROM python:3.11-slim-bookworm\nCOPY . /srv/rag\nENV PYTHONPATH=/srv/rag\n"  # act sets a service's working dir
        f'CMD ["python3", "-m", "quickrag", "serve", "--host", "0.0.0.0", "--port", "{port or host_port}"]\n')
    build = subprocess.run(["docker", "build", "-q", "-t", service["image"], str(context)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    yield f"http://localhost:{host_port}/query"
    subprocess.run(["docker", "rmi", service["image"]], capture_output=True)


@pytest.mark.docker
def test_the_pull_request_workflow_saves_the_judge_scores_of_a_failing_gate_under_act(
        act: str, workflows: list[DocWorkflow], action_tree: Path, rag_service: str, tmp_path: Path) -> None:
    for w in of_kind(workflows, "gate"):
        where = tmp_path / w.name
        repo, store = make_repo(where, w, rag_service), where / "store"
        store.mkdir()
        set_gate(repo, "0.99")  # impossible: the quickstart's hit_rate@5 is 0.906
        with GitHubServer(repos=("owner/repo",)) as gh:
            first = next(RUN_IDS)
            run = run_workflow(act, repo, w, action_tree, store, gh, event_name="pull_request",
                               event=pr_event(gh, 17, "9e" * 20), run_id=first)
            (gate_job,) = run.jobs
            assert run.code != 0 and run.jobs[gate_job] == "failure", run.tail()
            assert run.outputs[gate_job].get("verdict") == "fail", run.tail()
            assert "hit_rate@5 gate failed" in run.log
            saved = cache_entries(store)
            assert len(saved) == 1, f"{w.name}: the failing run saved no judge cache:\n{run.tail()}"
            (entry,) = saved
            assert entry["scope"] == "refs/pull/17/merge" and str(first) in entry["key"]
            assert entry["files"] == [".rag-gate/judge-cache.sqlite"]  # the one file: no -wal beside it
            report = artifact(store, first, "rag-gate-report")
            doc = json.loads((report / "rag-gate-report.json").read_text())
            paid = sum(stage.get("usage", {}).get("cache_misses", 0) for stage in doc["stages"].values())
            assert doc["verdict"] == "fail" and paid > 0
            assert scores_rows(entry["dir"] / "files" / ".rag-gate" / "judge-cache.sqlite") >= paid, \
                "the saved cache lacks scores the run computed"
            assert (report / "rag-gate-report.html").exists()
            (comment,) = gh.comments(17, "owner/repo")
            assert "❌" in comment["body"]

            # the next push: the run restores that cache (the newest of the prefix) and judges nothing again
            set_gate(repo, "0.80")
            second = next(RUN_IDS)
            run = run_workflow(act, repo, w, action_tree, store, gh, event_name="pull_request",
                               event=pr_event(gh, 17, "ab" * 20), run_id=second)
            assert run.code == 0 and run.outputs[gate_job].get("verdict") == "pass", run.tail()
            assert f"Cache restored from key: {entry['key']}" in run.log, run.tail()
            usage = json.loads((artifact(store, second, "rag-gate-report") / "rag-gate-report.json").read_text())
            judged = usage["stages"]["generation"]["usage"]
            assert judged["cache_hits"] > 0 and judged["cache_misses"] == 0, judged
            assert [str(second) in e["key"] for e in cache_entries(store)] == [False, True]
            assert [c["id"] for c in gh.comments(17, "owner/repo")] == [comment["id"]]


class StallingRag(StandIn):
    """The quickstart RAG behind a stand-in that never answers the questions of some cases (their requests wait until
    the client gives up), so that the shard holding them runs out of time."""

    def __init__(self, upstream: str, stalled: set[str]) -> None:
        super().__init__()
        self.upstream, self.stalled = upstream, stalled

    def handle(self, h: StandInHandler) -> None:
        body = h.body()
        if json.loads(body or b"{}").get("question") in self.stalled:
            self.pause(300)
            h.drop()
            return
        req = urllib.request.Request(self.upstream, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            h.reply(resp.status, resp.read())


@pytest.mark.docker
def test_the_shard_workflow_merges_what_an_errored_shard_left_under_act(
        act: str, workflows: list[DocWorkflow], action_tree: Path, tmp_path: Path) -> None:
    from gate.run.shards import shard_of

    (w,) = of_kind(workflows, "shards")
    (shard_job,) = {j for j, s in w.rag_gate_steps() if "shard" in (s.get("with") or {})}
    n = len(w.doc["jobs"][shard_job]["strategy"]["matrix"]["shard"])
    cases = [json.loads(line) for line in (QUICKSTART / "golden_set.jsonl").read_text().splitlines() if line.strip()]
    late = 2  # this shard's cases are never answered: it reaches max_duration_s and exits 3
    stalled = {c["question"] for c in cases if shard_of(c["id"], n) == late}
    assert stalled and len(stalled) < len(cases)
    store = tmp_path / "store"
    store.mkdir()
    repo = make_repo(tmp_path, w, "${RAG_URL}", extra_spec="max_duration_s: 10\n")
    with GitHubServer(repos=("owner/repo",)) as gh:
        with contextlib.contextmanager(serve_quickrag)() as rag_url, StallingRag(rag_url, stalled) as rag:
            run_id = next(RUN_IDS)
            run = run_workflow(act, repo, w, action_tree, store, gh, event_name="pull_request",
                               event=pr_event(gh, 31, "5a" * 20), run_id=run_id, env={"RAG_URL": rag.base_url})
        shards = job_named(run, shard_job)
        assert len(shards) == n, run.tail()
        assert sorted(run.jobs.get(j, "skipped") for j in shards) == ["failure"] + ["success"] * (n - 1), run.tail()
        for i in range(1, n + 1):  # every shard uploaded its part, the one that ran out of time too
            (part_file,) = artifact(store, run_id, f"rag-gate-part-{i}").iterdir()
            part = json.loads(part_file.read_text())
            assert part["shard"]["index"] == i
            assert bool(part["errors"]) == (i == late), part["errors"]
            assert (artifact(store, run_id, f"rag-gate-cache-{i}") / "judge-cache.sqlite").exists()
        merge = job_named(run, "merge")
        assert merge and merge[0] in run.started, f"the merge job was skipped:\n{run.tail()}"
        assert run.jobs[merge[0]] == "failure" and run.outputs[merge[0]].get("verdict") == "error", run.tail()
        (comment,) = gh.comments(31, "owner/repo")
        assert f"shard {late} of {n}" in comment["body"] and "max_duration_s" in comment["body"], comment["body"][:3000]
    (entry,) = cache_entries(store)  # the merged cache, saved although the merge failed
    assert str(run_id) in entry["key"] and scores_rows(entry["dir"] / "files" / ".rag-gate" / "judge-cache.sqlite") > 0


@pytest.mark.docker
def test_the_default_branch_workflow_records_the_run_under_act(act: str, workflows: list[DocWorkflow], action_tree: Path,
                                                               tmp_path: Path) -> None:
    (w,) = of_kind(workflows, "record")
    store = tmp_path / "store"
    store.mkdir()
    repo = make_repo(tmp_path, w, "${RAG_URL}")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    push = {"ref": "refs/heads/main", "after": head, "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    with GitHubServer(repos=("owner/repo",)) as gh:
        with contextlib.contextmanager(serve_quickrag)() as rag_url:
            run = run_workflow(act, repo, w, action_tree, store, gh, event_name="push", event=push, run_id=next(RUN_IDS),
                               env={"RAG_URL": rag_url})
        assert run.code == 0 and set(run.jobs.values()) == {"success"}, run.tail()
        assert "recorded in the history (rag-gate-history:rag-gate/history.jsonl)" in run.log
        (entry,) = [json.loads(ln) for ln in gh.file("rag-gate/history.jsonl", "rag-gate-history", "owner/repo").splitlines()]
        assert (entry["commit"], entry["branch"], entry["verdict"]) == (head, "main", "pass")
    (cache,) = cache_entries(store)  # the default branch's cache: the one every pull request can restore
    assert cache["scope"] == "refs/heads/main" and scores_rows(cache["dir"] / "files" / ".rag-gate" / "judge-cache.sqlite") > 0


@pytest.mark.docker
def test_the_fork_follow_up_comments_from_the_pull_request_runs_artifact_under_act(
        act: str, workflows: list[DocWorkflow], action_tree: Path, rag_service: str, tmp_path: Path) -> None:
    (gate_wf, *_) = of_kind(workflows, "gate")
    (comment_wf,) = of_kind(workflows, "comment")
    store = tmp_path / "store"
    store.mkdir()
    fork_head = "f0" * 20
    with GitHubServer(repos=("owner/repo",)) as gh:
        gh.add_pull(22, fork_head, gh.branch_sha("main", "owner/repo"))
        pr_run = next(RUN_IDS)
        repo = make_repo(tmp_path / "pr", gate_wf, rag_service)
        run = run_workflow(act, repo, gate_wf, action_tree, store, gh, event_name="pull_request",
                           event=pr_event(gh, 22, fork_head), run_id=pr_run, token=READ_TOKEN)
        assert run.code == 0 and "the comment was skipped" in run.log and gh.comments(22, "owner/repo") == [], run.tail()
        assert (artifact(store, pr_run, "rag-gate-report") / "rag-gate-report.json").exists()
        repo = make_repo(tmp_path / "follow-up", comment_wf, rag_service)
        event = {"action": "completed", "repository": {"full_name": "owner/repo", "default_branch": "main"},
                 "workflow_run": {"id": pr_run, "head_sha": fork_head, "event": "pull_request", "conclusion": "success",
                                  "head_repository": {"full_name": "owner/repo"}}}
        run = run_workflow(act, repo, comment_wf, action_tree, store, gh, event_name="workflow_run", event=event, run_id=next(RUN_IDS))
        assert run.code == 0 and set(run.jobs.values()) == {"success"}, run.tail()
        (comment,) = gh.comments(22, "owner/repo")
        assert "<!-- rag-gate:comment" in comment["body"] and "hit_rate@5" in comment["body"]


WATCH_MARKER = "<!-- rag-gate:watch id=default -->"


def _bot_issues(gh: GitHubServer) -> list[dict[str, Any]]:
    return [i for i in gh.issues("owner/repo") if i["user"]["login"] == "github-actions[bot]"]


def _scheduled(act: str, repo: Path, w: DocWorkflow, action_tree: Path, store: Path, gh: GitHubServer, rag_url: str,
               run_id: int) -> Run:
    event = {"schedule": "17 6 * * 1", "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    return run_workflow(act, repo, w, action_tree, store, gh, event_name="schedule", event=event, run_id=run_id,
                        env={"RAG_URL": rag_url, "GITHUB_SERVER_URL": "https://github.com"})


@pytest.mark.docker
def test_the_watch_workflows_open_update_and_close_one_issue_under_act(act: str, workflows: list[DocWorkflow], action_tree: Path,
                                                                      tmp_path: Path) -> None:
    """Each scheduled workflow of the docs as printed: a pass (recorded), a failing run after the service's model
    changed (one issue: what changed first, the report, the run's link), two failing runs at once (still one issue:
    edited, two comments), a pass (commented "recovered", closed). A person's issue quoting the marker is never
    touched."""
    for i, w in enumerate(of_kind(workflows, "watch")):
        timeline = _watch_scenario(act, w, action_tree, tmp_path / f"w{i}")
        print(f"{w.name}: watch issue timeline:", "; ".join(timeline))


def _watch_scenario(act: str, w: DocWorkflow, action_tree: Path, tmp_path: Path) -> list[str]:
    from tests.support.markup import render

    tmp_path.mkdir(parents=True)
    store = tmp_path / "store"
    store.mkdir()
    repo = make_repo(tmp_path, w, "${RAG_URL}")
    timeline: list[str] = []
    with GitHubServer(repos=("owner/repo",)) as gh, \
            contextlib.contextmanager(serve_quickrag)(env={"QUICKRAG_MODEL": "answerer-2025-06"}) as old, \
            contextlib.contextmanager(serve_quickrag)(env={"QUICKRAG_MODEL": "answerer-2025-11"}) as new:
        human = gh.add_issue("is rag-gate watching?", f"quoting {WATCH_MARKER}", login="octocat")
        run = _scheduled(act, repo, w, action_tree, store, gh, old, next(RUN_IDS))
        assert run.code == 0 and set(run.jobs.values()) == {"success"}, run.tail()
        assert "rag-gate: passed: no open watch issue" in run.log and _bot_issues(gh) == []

        set_gate(repo, "0.99")
        failing = next(RUN_IDS)
        run = _scheduled(act, repo, w, action_tree, store, gh, new, failing)
        assert run.code != 0 and set(run.jobs.values()) == {"failure"}, run.tail()
        (issue,) = _bot_issues(gh)
        timeline.append(f"created #{issue['number']}")
        body = issue["body"].splitlines()
        assert body[0] == WATCH_MARKER and body[1].startswith("**What changed** since the last passing scheduled run")
        assert body[3] == "- `system.model`: answerer-2025-06 → answerer-2025-11", body[:6]
        assert f"[the run and its artifacts](https://github.com/owner/repo/actions/runs/{failing})" in issue["body"]
        labels = next(str(st["with"].get("issue-labels", "rag-gate")) for _, st in w.rag_gate_steps())
        assert [x["name"] for x in issue["labels"]] == labels.split(",")
        html = render(issue["body"])
        assert "<img" not in html and "<script" not in html and "rag-gate failed" in html
        if any(st["with"].get("dashboard") for _, st in w.rag_gate_steps()):
            assert any(artifact(store, failing, "*").parent.parent.glob("*/files/rag-gate-dashboard.html"))

        # two failing runs started at once, from two checkouts; act names a job's container after the workflow's name and
        # the job's, so the second checkout's copy of the workflow is renamed (on GitHub the workflow's concurrency group
        # would queue the second run: here they overlap, the harder case)
        ids = [next(RUN_IDS), next(RUN_IDS)]
        twin = tmp_path / "twin" / "repo"
        shutil.copytree(repo, twin, symlinks=True)
        twin_wf = twin / ".github" / "workflows" / "docs.yml"
        name, text = w.doc.get("name"), twin_wf.read_text()
        twin_wf.write_text(text.replace(f"name: {name}\n", f"name: {name} (twin)\n", 1) if name else f"name: (twin)\n{text}")
        assert "(twin)" in twin_wf.read_text()
        runs: dict[int, Run] = {}
        import threading

        threads = [threading.Thread(target=lambda i=i, r=r: runs.__setitem__(i, _scheduled(act, r, w, action_tree, store, gh, new, i)))
                   for i, r in zip(ids, (repo, twin), strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=900)
        assert all(runs[i].code != 0 for i in ids), [runs[i].tail() for i in ids]
        (issue,) = _bot_issues(gh)
        assert len(issue["comments_list"]) == 2 and all(c["body"].startswith("Still failing") for c in issue["comments_list"])
        timeline += ["edited, commented", "edited, commented"]

        set_gate(repo, "0.80")
        run = _scheduled(act, repo, w, action_tree, store, gh, new, next(RUN_IDS))
        assert run.code == 0, run.tail()
        (issue,) = _bot_issues(gh)
        assert issue["state"] == "closed" and issue["comments_list"][-1]["body"].startswith("Recovered")
        timeline += ["commented recovered", "closed"]
        (still,) = [i for i in gh.issues("owner/repo") if i["number"] == human["number"]]
        assert still["body"] == human["body"] and still["state"] == "open" and still["comments_list"] == []
        entries = [json.loads(ln) for ln in (gh.file("rag-gate/history.jsonl", "rag-gate-history", "owner/repo") or "").splitlines()]
        assert [e["kind"] for e in entries] == ["schedule"] * 5 and [e["verdict"] for e in entries] == ["pass", "fail", "fail", "fail", "pass"]
    (tmp_path / "watch-timeline.txt").write_text("\n".join(timeline) + "\n")
    return timeline


# --------------------------------------------------------------------------- a traces spec on a schedule

def make_traces_repo(where: Path, workflow: DocWorkflow) -> Path:
    """The repository a traces workflow runs in: the config it names (a traces spec judged by the stand-in), an export
    script for the step before it (it prints the week's traces, $WEEK), and the workflow as printed, committed."""
    from tests.integration.test_traces_run import SPEC, traces

    repo = where / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (config,) = {str(st["with"]["config"]) for _, st in workflow.rag_gate_steps()}
    (repo / config).write_text(SPEC.format(anchor=40, gates="      supported: {max_drop: 0.03}"))
    export = [s for _, s in workflow.steps() if "traces.jsonl" in str(s.get("run", ""))]
    assert export, f"{workflow.name}: no step writes traces.jsonl"
    script = Path(str(export[0]["run"]).split()[0])
    (repo / script).parent.mkdir(parents=True, exist_ok=True)
    (repo / script).write_text('#!/bin/sh\ncat "$(dirname "$0")/week-$WEEK.jsonl"\n')
    (repo / script).chmod(0o755)
    for week, (bad, day) in enumerate(((5, 1), (5, 8), (2, 15), (5, 22)), start=1):
        rows = traces(f"w{week}-", day, bad)
        (repo / script).parent.joinpath(f"week-{week}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (repo / ".github" / "workflows" / "docs.yml").write_text(workflow.text)
    return committed(repo)


@pytest.mark.docker
def test_the_traces_workflow_alerts_on_a_real_drop_not_on_a_harsher_judge_under_act(act: str, workflows: list[DocWorkflow],
                                                                                    action_tree: Path, tmp_path: Path) -> None:
    """The traces workflow of the docs as printed, four weeks: a first window (recorded, nothing to compare); a judge
    0.06 harsher on the same system (the anchor cancels it: no issue); a real drop (one issue, with the window table);
    the system back (the issue closed). The history branch keeps the four windows."""

    for i, w in enumerate(of_kind(workflows, "traces")):
        _traces_scenario(act, w, action_tree, tmp_path / f"t{i}")


def _traces_scenario(act: str, w: DocWorkflow, action_tree: Path, where: Path) -> None:
    from tests.support.judge_server import JudgeServer
    from tests.support.markup import render

    where.mkdir()
    store = where / "store"
    store.mkdir()
    repo = make_traces_repo(where, w)
    event = {"schedule": "17 6 * * 1", "repository": {"full_name": "owner/repo", "default_branch": "main"}}
    with GitHubServer(repos=("owner/repo",)) as gh, JudgeServer() as judge:
        def week(n: int, offset: float) -> Run:
            judge.offset = offset
            return run_workflow(act, repo, w, action_tree, store, gh, event_name="schedule", event=event, run_id=next(RUN_IDS),
                                env={"WEEK": str(n), "JUDGE_BASE_URL": judge.url}, secrets={"OPENAI_API_KEY": "sk-test-0123456789abcdef"})

        run = week(1, 0.0)
        assert run.code == 0 and "rag-gate: passed: no open watch issue" in run.log, run.tail()
        run = week(2, -0.06)
        assert run.code == 0 and _bot_issues(gh) == [], run.tail()  # the harsher judge, cancelled by the anchor
        run = week(3, -0.06)
        assert run.code != 0, run.tail()
        (issue,) = _bot_issues(gh)
        html = render(issue["body"])
        assert "This window vs the previous window" in issue["body"] and "Judge drift" in issue["body"]
        assert "<script" not in html and "rag-gate failed" in html
        run = week(4, -0.06)
        assert run.code == 0, run.tail()
        (issue,) = _bot_issues(gh)
        assert issue["state"] == "closed" and issue["comments_list"][-1]["body"].startswith("Recovered")
        entries = [json.loads(ln) for ln in (gh.file("rag-gate/history.jsonl", "rag-gate-history", "owner/repo") or "").splitlines()]
        assert [e["verdict"] for e in entries] == ["pass", "pass", "fail", "pass"]
        assert all("window_deltas" in e["stages"]["generation"] for e in entries[1:])
