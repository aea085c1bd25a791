"""The GitHub Action: GitHub's INPUT_* / GITHUB_* environment -> the same application function as the CLI -> the PR.

Modes:
    gate    (pull requests) run, write the reports, job summary, annotations and outputs, and
            post or edit the one PR comment; trend gates read the repository history and the
            baseline is the history entry of the PR's base commit when there is one.
    record  (default branch) run, then append the run to the repository history.
    report  (workflow_run, the fork-safe follow-up) read a report artifact, check it, and post
            the comment with a token that can write.
    merge   (after a matrix of shards) merge the parts in the ``parts`` folder into one report, then
            do what gate does on a pull request and what record does on the default branch.
With the ``shard`` input ("2/3"), gate and record run one shard and write its part at report-path:
no gate, no comment, no history (the merge job does those once).
The exit code is the verdict's, so the check can be required.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gate.core.errors import EXIT_ERROR, EXIT_INPUT, InputError, RagGateError
from gate.core.report import Report
from gate.github.commands import Cancellation, action_input, append_file, commands_stopped, emit, fail, group, mask, mask_secrets, set_outputs
from gate.github.comment import (
    _comment,
    headline,
    run_page_url,
    summary_text,
)
from gate.render import WHEN

MODES = ("gate", "record", "report", "merge", "watch")
WATCH_EVENTS = ("schedule", "deployment", "deployment_status", "repository_dispatch")  # default mode watch
COMMENT_POLICIES = WHEN  # the comment input: always, on-failure, never (the GitLab note's --when too)
MAX_ANNOTATIONS = 10


def gate_annotations(report: Report) -> list[tuple[str, str]]:
    """(title, message) of one ::error:: per failed or errored gate (at most 10), and one per run error."""
    out = [("rag-gate: run could not complete", e) for e in report["errors"]]
    for name, stage in report["stages"].items():
        for g in stage["gates"]:
            if g["status"] in ("fail", "error"):
                out.append((f"rag-gate: {g['metric']} gate failed", f"{name} {g['metric']}: {g['reason']}"))
    if len(out) > MAX_ANNOTATIONS:
        out = out[: MAX_ANNOTATIONS - 1] + [("", f"{len(out) - MAX_ANNOTATIONS + 1} more failures in the job summary")]
    return out


def event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def default_mode(env: Mapping[str, str], ev: Mapping[str, Any]) -> str:
    name = env.get("GITHUB_EVENT_NAME", "")
    if name in ("pull_request", "pull_request_target"):
        return "gate"
    if name == "workflow_run":
        return "report"
    if name in WATCH_EVENTS:
        return "watch"
    default_branch = (ev.get("repository") or {}).get("default_branch")
    if name == "push" and default_branch and env.get("GITHUB_REF_NAME") == default_branch:
        return "record"
    return "gate"


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """The action. It ends with the verdict's exit code, or with an error's (2: an input, 3: the run or a bug, 130, 143:
    SIGINT, SIGTERM) after an ``::error::`` and a job summary saying what happened. ``env`` None: the process's
    own environment, as the entry point runs it (a cancelled run then ends the process at once, see Cancellation)."""
    environment = dict(os.environ if env is None else env)
    with Cancellation(environment, own_process=env is None) as cancellation:
        try:
            return _ended(environment)
        except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (Cancelled), wherever it came
            return cancellation.finish(getattr(exc, "signum", None))


def _ended(env: dict[str, str]) -> int:
    try:
        return _main(env)
    except RagGateError as exc:
        return fail(env, "rag-gate", exc.message, hint=exc.hint, code=exc.exit_code)
    except ValueError as exc:
        return fail(env, "rag-gate: invalid input", str(exc), code=EXIT_INPUT)
    except Exception as exc:  # a bug: say what and where, briefly; the traceback only on request
        if env.get("RAG_GATE_DEBUG"):
            raise
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return fail(env, "rag-gate: internal error", f"internal error: {type(exc).__name__}: {str(exc)[:500]} (at {Path(frame.filename).name}:"
                    f"{frame.lineno}, in {frame.name})", hint="set RAG_GATE_DEBUG=1 for the traceback, and please report it",
                    code=EXIT_ERROR)


def _main(env: dict[str, str]) -> int:
    token = action_input(env, "github-token")
    if env.get("GITHUB_WORKSPACE"):
        os.chdir(env["GITHUB_WORKSPACE"])
    config = action_input(env, "config", "rag-eval.yml")
    masked = mask_secrets(env, token, config)  # first: nothing printed before it can show the token
    ev = event(env)
    policy = action_input(env, "comment", "always")
    mode = action_input(env, "mode") or default_mode(env, ev)
    report_path = action_input(env, "report-path", "rag-gate-report.json")
    if policy not in COMMENT_POLICIES:
        raise InputError(f"must be one of {', '.join(COMMENT_POLICIES)}, got {policy!r}", key="input comment")
    if mode not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}, got {mode!r}", key="input mode")
    shard = action_input(env, "shard")
    if shard and mode not in ("gate", "record"):
        raise InputError(f"a shard runs in mode gate or record; mode {mode} takes no shard", key="input shard")
    client = _client(env, token)
    if mode == "report":
        from gate.github.report_mode import report_mode

        return report_mode(env, ev, client, policy, report_path)

    from gate.config.loader import load_spec

    mask(load_spec(config).secrets, masked)  # the values the loaded spec reads, however it names them
    job = Job(env, ev, client, token, mode)
    if shard:
        return _shard(env, config, shard, report_path, job.options())
    try:
        report, mode = job.run(config, report_path)
    except RagGateError as exc:
        if mode == "watch" and client is not None and exc.exit_code == EXIT_ERROR:  # the service is down: what a watch is for
            from gate.github.watch import alert_unfinished

            alert_unfinished(job, config, exc)
        raise
    return job.finish(report, mode, report_path, policy)


class Job:
    """One run of the action in mode gate, record or merge: its options, the run (or merge), then what the mode does
    with the report (the job summary, annotations and outputs; the PR comment, or the history)."""

    def __init__(self, env: dict[str, str], ev: Mapping[str, Any], client: Any, token: str, mode: str) -> None:
        self.env, self.ev, self.client, self.token, self.mode = env, ev, client, token, mode
        self.pull = ev.get("pull_request") or {}
        self.store: Any = None

    def options(self) -> Any:
        from gate.run.options import RunOptions

        env, pull = self.env, self.pull
        head_sha = (pull.get("head") or {}).get("sha") or (None if pull else env.get("GITHUB_SHA"))
        from gate.github.watch import run_kind

        options = RunOptions(commit=env.get("GITHUB_SHA"), pull_request=(pull.get("number"), head_sha),
                             secrets=[self.token] if self.token else [], max_duration_s=_seconds(action_input(env, "max-duration-s")),
                             run_url=run_page_url(env), kind=run_kind(self.mode, env.get("GITHUB_EVENT_NAME", "")))
        if self.mode == "watch":  # compared with the approved baseline; what changed, since the last passing scheduled run
            from gate.core.records import last_passing

            options = replace(options, changes_from=last_passing("schedule"))
        if self.client is None:
            return options
        from gate.github.history import ReadTolerant, RepoHistoryStore, baseline_chooser

        self.store = RepoHistoryStore(self.client, path=action_input(env, "history-path", "rag-gate/history.jsonl"),
                                      branch=action_input(env, "history-branch", "rag-gate-history"))
        tolerant = self.mode == "gate" or (self.mode == "merge" and pull.get("number"))  # a PR's run never fails on the history
        chooser = None if self.mode == "watch" else baseline_chooser(self.client, (pull.get("base") or {}).get("sha"))
        return replace(options, history_store=ReadTolerant(self.store) if tolerant else self.store, choose_baseline=chooser)

    def run(self, config: str, report_path: str) -> tuple[Report, str]:
        """The report, and the mode to finish in (a merge finishes as one job would: gate on a PR, record on the default
        branch)."""
        from gate.app import Destinations, run_and_write

        options = self.options()
        to = Destinations(report_path, *(str(Path(report_path).with_suffix(x)) for x in (".md", ".xml", ".html")))
        if self.mode != "merge":
            with group("rag-gate: run"), commands_stopped():  # the run prints answers, ids and error bodies: never a command
                return run_and_write(config, to, options), self.mode  # progress lines on stderr: counts and times only
        from gate.app import merge_and_write

        with group("rag-gate: merge"), commands_stopped():
            caches = action_input(self.env, "caches")
            if caches:  # first: a file that is not a cache stops the job before anything is written
                _fold_caches(config, Path(caches))
            report = merge_and_write(config, [action_input(self.env, "parts", "rag-gate-parts")], to, options)
        return report, "gate" if self.pull.get("number") else default_mode(self.env, self.ev)

    def finish(self, report: Report, mode: str, report_path: str, policy: str) -> int:
        env, client, pr = self.env, self.client, self.pull.get("number")
        code = report["exit_code"]
        append_file(env, "GITHUB_STEP_SUMMARY", summary_text(report))
        for title, message in gate_annotations(report):
            if title:
                emit("error", message, title=title)
            else:
                emit("error", message)
        set_outputs(env, {"verdict": report["verdict"], "report": report_path, "metrics": headline(report)})
        if mode in ("record", "watch") and self.store is not None:
            with group("rag-gate: history"):
                recorded = _record(env, self.store, report)
            from gate.github.watch import after_recording

            return after_recording(self, report, mode, code if recorded else max(code, EXIT_ERROR))
        if mode in ("record", "watch"):
            return max(code, fail(env, "rag-gate: history not recorded", f"mode {mode} needs a github-token (and GITHUB_REPOSITORY) "
                                  "to write the history branch", code=EXIT_ERROR))
        if mode == "gate" and pr and client is not None:
            with group("rag-gate: PR comment"):
                _comment(client, int(pr), report, policy)
        elif mode == "gate" and pr:
            emit("notice", "no github-token: the PR comment was skipped")
        return code


def _shard(env: Mapping[str, str], config: str, shard: str, part_path: str, options: Any) -> int:
    """One shard of a matrix: its part at ``part_path`` (upload it as an artifact for the merge job); no comment."""
    from gate.app import run_shard_and_write
    from gate.run.shards import parse_shard

    index, of = parse_shard(shard)
    with group(f"rag-gate: shard {index} of {of}"), commands_stopped():
        part = run_shard_and_write(config, (index, of), part_path, options)
    errors = sum(1 for o in part["outputs"] if o["error"] is not None)
    append_file(env, "GITHUB_STEP_SUMMARY", f"rag-gate: shard {index} of {of}: {len(part['outputs'])} cases asked, {errors} "
                                            "errored; the merge job gates the parts together.\n")
    set_outputs(env, {"report": part_path, "verdict": ""})
    for e in part["errors"]:
        emit("error", e, title=f"rag-gate: shard {index} of {of} incomplete")
    return EXIT_ERROR if part["errors"] else 0


def _fold_caches(config: str, folder: Path) -> None:
    """Mode merge: fold the shards' judge caches (every file under ``folder``) into the spec's cache file, for the
    workflow to save for the next run."""
    from gate.config.loader import load_spec
    from gate.judges.cache_merge import merge_caches

    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(("-wal", "-shm", "-journal"))) \
        if folder.is_dir() else []  # SQLite's side files belong to their database
    if not files:
        emit("warning", f"{folder}: no judge cache to fold in (input caches)")
        return
    spec = load_spec(config)
    into = spec.resolve(spec.data["cache"]["path"])
    folded = merge_caches(into, files)
    print(f"rag-gate: folded {len(files)} judge cache(s) into {into}: {folded.scores} scores added, {folded.total_scores} in all")


def _seconds(value: str) -> float | None:
    """The max-duration-s input: empty (the spec decides) or a positive number of seconds."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise InputError(f"must be a positive number of seconds, got {value!r}", key="input max-duration-s")
    return seconds


def _client(env: Mapping[str, str], token: str) -> Any:
    if not token or not env.get("GITHUB_REPOSITORY"):
        return None
    from gate.github.client import GitHubClient

    return GitHubClient(env.get("GITHUB_API_URL", "https://api.github.com"), token, env["GITHUB_REPOSITORY"],
                        author=action_input(env, "comment-author") or None)


def _record(env: Mapping[str, str], store: Any, report: Report) -> bool:
    """Append the run to the history; False (after an ::error::) if it could not be written."""
    from gate.core.records import entry_from_report
    from gate.github.client import GitHubError, PermissionDenied

    if report["verdict"] == "error":
        emit("warning", "the run did not complete: it is not recorded in the history")
        return True
    try:
        store.append(entry_from_report(report, branch=env.get("GITHUB_REF_NAME"), commit=env.get("GITHUB_SHA")))
    except PermissionDenied:
        fail(env, "rag-gate: history not recorded", f"the token cannot write the history branch {store.branch}: give the job "
             "`permissions: contents: write`", code=EXIT_ERROR)
        return False
    except GitHubError as exc:
        fail(env, "rag-gate: history not recorded", exc.message, hint=exc.hint, code=EXIT_ERROR)
        return False
    print(f"rag-gate: recorded in the history ({store.branch}:{store.path})", flush=True)
    return True


if __name__ == "__main__":
    sys.exit(main())
