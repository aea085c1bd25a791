"""The GitHub Action: GitHub's INPUT_* / GITHUB_* environment -> the CLI's code path -> the PR.

Modes:
    gate    (pull requests) run, write the reports, job summary, annotations and outputs, and
            post or edit the one PR comment; trend gates read the repository history and the
            baseline is the history entry of the PR's base commit when there is one.
    record  (default branch) run, then append the run to the repository history.
    report  (workflow_run, the fork-safe follow-up) read a report artifact, check it, and post
            the comment with a token that can write.
The exit code is the verdict's, so the check can be required.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MODES = ("gate", "record", "report")
COMMENT_POLICIES = ("always", "on-failure", "never")
SUMMARY_LIMIT = 1024 * 1024  # GitHub's limit for one step's job summary
MAX_ANNOTATIONS = 10
REPORT_ARTIFACT_LIMIT = 20 * 1024 * 1024
COMMENT_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # the spec schema's pattern for report.comment_id


def action_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """An input as GitHub passes it: INPUT_<NAME upper-cased, hyphens kept>."""
    return env.get(f"INPUT_{name.upper()}", "").strip() or default


def command_escape(text: str) -> str:
    """Escape a workflow command's message (GitHub's rules for %, CR and LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_command(name: str, message: str, **props: str) -> str:
    params = ",".join(f"{k}={command_escape(v).replace(':', '%3A').replace(',', '%2C')}" for k, v in props.items())
    return f"::{name}{' ' + params if params else ''}::{command_escape(message)}"


@contextmanager
def group(title: str) -> Iterator[None]:
    print(f"::group::{title}", flush=True)
    try:
        yield
    finally:
        print("::endgroup::", flush=True)


def append_file(env: Mapping[str, str], var: str, text: str) -> None:
    path = env.get(var)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


def set_outputs(env: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Step outputs through GITHUB_OUTPUT (heredoc form: values may hold newlines). The delimiter is random, as
    GitHub advises, so that no value (metric names come from the spec, or from a fork's report) can end it early."""
    text = ""
    for key, value in outputs.items():
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        text += f"{key}<<{delimiter}\n{value}\n{delimiter}\n"
    append_file(env, "GITHUB_OUTPUT", text)


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")


def mask_secrets(env: Mapping[str, str], token: str, spec_path: str) -> None:
    """::add-mask:: for the token, the judge's key and the value of every ${NAME} the spec reads from the environment
    (header tokens, URLs with credentials: the reports redact the same values), so no log line can show them."""
    if token:
        print(f"::add-mask::{token}", flush=True)
    values: list[str] = []
    try:
        import yaml

        text = Path(spec_path).read_text(encoding="utf-8")
        values += [env[name] for name in _REFERENCE.findall(text) if env.get(name)]
        data = yaml.safe_load(text) or {}
        key_env = (data.get("judge") or {}).get("api_key_env")
        if key_env and env.get(key_env):
            values.append(env[key_env])
    except Exception:  # the spec is validated later, with a proper message
        pass
    for v in dict.fromkeys(v for v in values if len(v) >= 4 and v != token):  # as gate.redact: shorter values are not secrets worth masking
        for line in v.splitlines() or [v]:
            print(f"::add-mask::{line}", flush=True)


def headline(report: Mapping[str, Any]) -> str:
    return json.dumps({name: stage.get("metrics", {}) for name, stage in report.get("stages", {}).items()}, separators=(",", ":"))


def gate_annotations(report: Mapping[str, Any]) -> list[str]:
    """One ::error:: per failed or errored gate (at most 10), and one per run error."""
    out = [workflow_command("error", e, title="rag-gate: run could not complete") for e in report.get("errors", [])]
    for name, stage in report.get("stages", {}).items():
        for g in stage.get("gates", []):
            if g["status"] in ("fail", "error"):
                out.append(workflow_command("error", f"{name} {g['metric']}: {g['reason']}", title=f"rag-gate: {g['metric']} gate failed"))
    if len(out) > MAX_ANNOTATIONS:
        out = out[: MAX_ANNOTATIONS - 1] + [workflow_command("error", f"{len(out) - MAX_ANNOTATIONS + 1} more failures in the job summary")]
    return out


def event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def default_mode(env: Mapping[str, str], ev: Mapping[str, Any]) -> str:
    name = env.get("GITHUB_EVENT_NAME", "")
    if name in ("pull_request", "pull_request_target"):
        return "gate"
    if name == "workflow_run":
        return "report"
    default_branch = (ev.get("repository") or {}).get("default_branch")
    if name == "push" and default_branch and env.get("GITHUB_REF_NAME") == default_branch:
        return "record"
    return "gate"


def summary_text(report: Mapping[str, Any]) -> str:
    """The job summary: the comment's report with more per-case rows, under GitHub's 1 MiB for a step."""
    from gate.render.markdown import render_summary

    body = render_summary(dict(report))
    if len(body.encode("utf-8")) <= SUMMARY_LIMIT:
        return body
    return body.encode("utf-8")[: SUMMARY_LIMIT - 200].decode("utf-8", "ignore") + "\n\n_Cut to fit the job summary limit._\n"


NEUTRAL_BODY = "## ✅ rag-gate passed\n\nEvery gate passes now; the earlier failure report was replaced.\n"


def post_comment(client: Any, pr: int, report: Mapping[str, Any], policy: str) -> str:
    """Create, edit, neutralise or skip the PR comment; returns what happened, in words."""
    from gate.render.markdown import marker, render_comment

    mark = marker(report.get("run", {}).get("comment_id") or "default")
    if policy == "never":
        return "comment: never"
    if policy == "on-failure" and report.get("verdict") == "pass":
        if client.find_comment(pr, mark) is None:
            return "passed: no comment needed"
        _, what = client.upsert_comment(pr, f"{mark}\n{NEUTRAL_BODY}", mark)
        return "passed: the earlier failure comment was neutralised" if what == "updated" else f"passed: the passed comment is {what}"
    _, what = client.upsert_comment(pr, render_comment(dict(report)), mark)
    return f"comment {what}"


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    from gate.errors import EXIT_INPUT, RagGateError

    try:
        return _main(env)
    except RagGateError as exc:
        print(workflow_command("error", exc.message + (f" (hint: {exc.hint})" if exc.hint else ""), title="rag-gate"), flush=True)
        return exc.exit_code
    except ValueError as exc:
        print(workflow_command("error", str(exc), title="rag-gate: invalid input"), flush=True)
        return EXIT_INPUT


def _main(env: dict[str, str]) -> int:
    from gate.errors import EXIT_ERROR, InputError

    token = action_input(env, "github-token")
    if env.get("GITHUB_WORKSPACE"):
        os.chdir(env["GITHUB_WORKSPACE"])
    config = action_input(env, "config", "rag-eval.yml")
    mask_secrets(env, token, config)  # first: nothing printed before it can show the token
    ev = event(env)
    policy = action_input(env, "comment", "always")
    mode = action_input(env, "mode") or default_mode(env, ev)
    report_path = action_input(env, "report-path", "rag-gate-report.json")
    if policy not in COMMENT_POLICIES:
        raise InputError(f"must be one of {', '.join(COMMENT_POLICIES)}, got {policy!r}", key="input comment")
    if mode not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}, got {mode!r}", key="input mode")
    client = _client(env, token)
    if mode == "report":
        return _report_mode(env, ev, client, policy, report_path)

    pull = ev.get("pull_request") or {}
    pr = pull.get("number")
    base_sha = (pull.get("base") or {}).get("sha")
    head_sha = (pull.get("head") or {}).get("sha") or (None if pull else env.get("GITHUB_SHA"))
    store = _history_store(env, client)
    options: dict[str, Any] = {}
    if store is not None:
        options["history_store"] = _ReadTolerant(store) if mode == "gate" else store
        options["choose_baseline"] = _baseline_chooser(client, base_sha)
    args = argparse.Namespace(config=config, report=report_path, markdown=str(Path(report_path).with_suffix(".md")),
                              junit=str(Path(report_path).with_suffix(".xml")), no_progress=True, quiet=False, no_cache=False)
    from gate.cli import cmd_run

    with group("rag-gate: run"):
        code, report = cmd_run(args, **options)
    report.setdefault("run", {}).update({"pr": pr, "head_sha": head_sha})
    Path(report_path).write_text(json.dumps(report, ensure_ascii=False) + "\n", encoding="utf-8")
    append_file(env, "GITHUB_STEP_SUMMARY", summary_text(report))
    for line in gate_annotations(report):
        print(line, flush=True)
    set_outputs(env, {"verdict": report["verdict"], "report": report_path, "metrics": headline(report)})
    if mode == "record" and store is not None:
        with group("rag-gate: history"):
            recorded = _record(env, store, report)
        if not recorded:
            return max(code, EXIT_ERROR)
    elif mode == "record":
        print(workflow_command("error", "mode record needs a github-token (and GITHUB_REPOSITORY) to write the history branch"), flush=True)
        return max(code, EXIT_ERROR)
    elif mode == "gate" and pr and client is not None:
        with group("rag-gate: PR comment"):
            _comment(client, int(pr), report, policy)
    elif mode == "gate" and pr:
        print(workflow_command("notice", "no github-token: the PR comment was skipped"), flush=True)
    return code


def _client(env: Mapping[str, str], token: str) -> Any:
    if not token or not env.get("GITHUB_REPOSITORY"):
        return None
    from gate.github import GitHubClient

    return GitHubClient(env.get("GITHUB_API_URL", "https://api.github.com"), token, env["GITHUB_REPOSITORY"])


def _history_store(env: Mapping[str, str], client: Any) -> Any:
    if client is None:
        return None
    from gate.github import RepoHistoryStore

    return RepoHistoryStore(client, path=action_input(env, "history-path", "rag-gate/history.jsonl"),
                            branch=action_input(env, "history-branch", "rag-gate-history"))


class _ReadTolerant:
    """The repository history for a gate run: when it cannot be read (a token without `contents: read`, GitHub
    down), the gate still runs, against the committed baseline, and says so in the report's warnings."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.warnings: list[str] = store.warnings

    def read(self) -> list[dict[str, Any]]:
        from gate.github import GitHubError

        try:
            return list(self.store.read())
        except GitHubError as exc:
            self.warnings.append(f"the history {self.store.where} could not be read, so trend gates have no history and the "
                                 f"baseline is the committed file: {exc.message}")
            return []

    def append(self, entry: dict[str, Any]) -> None:  # pragma: no cover - a gate run never records
        self.store.append(entry)


def _baseline_chooser(client: Any, base_sha: str | None) -> Any:
    """choose_baseline for gate.run.run: the history entry of the PR's base commit, else of its newest ancestor
    that has one. The base commit's ancestors cost one API call, made only when the base commit has no entry."""
    from gate.github import GitHubError, baseline_entry

    def choose(entries: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
        found = baseline_entry(entries, base_sha, None)
        if found[0] is not None or not base_sha or not entries:
            return found
        try:
            ancestors: list[str] | None = client.recent_commits(base_sha, 100)
        except GitHubError as exc:
            print(workflow_command("warning", f"the base commit's ancestors could not be listed, so only its own history entry "
                                              f"could be the baseline: {exc.message}"), flush=True)
            ancestors = None
        return baseline_entry(entries, base_sha, ancestors)

    return choose


def _record(env: Mapping[str, str], store: Any, report: Mapping[str, Any]) -> bool:
    """Append the run to the history; False (after an ::error::) if it could not be written."""
    from gate.github import GitHubError, PermissionDenied
    from gate.history import entry_from_report

    if report.get("verdict") == "error":
        print(workflow_command("warning", "the run did not complete: it is not recorded in the history"), flush=True)
        return True
    try:
        store.append(entry_from_report(dict(report), branch=env.get("GITHUB_REF_NAME"), commit=env.get("GITHUB_SHA")))
    except PermissionDenied:
        print(workflow_command("error", f"the token cannot write the history branch {store.branch}: give the job "
                                        "`permissions: contents: write`", title="rag-gate: history not recorded"), flush=True)
        return False
    except GitHubError as exc:
        print(workflow_command("error", f"{exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""),
                               title="rag-gate: history not recorded"), flush=True)
        return False
    print(f"rag-gate: recorded in the history ({store.branch}:{store.path})", flush=True)
    return True


def _comment(client: Any, pr: int, report: Mapping[str, Any], policy: str) -> None:
    from gate.github import GitHubError, PermissionDenied

    try:
        print(f"rag-gate: {post_comment(client, pr, report, policy)}", flush=True)
    except PermissionDenied:
        print(workflow_command("notice", "the token cannot comment (a fork's pull request has a read-only token): the comment "
                                         "was skipped. Use the workflow_run pattern in the README to comment on fork PRs."), flush=True)
    except GitHubError as exc:
        print(workflow_command("warning", f"the PR comment failed: {exc}"), flush=True)


def _report_mode(env: Mapping[str, str], ev: Mapping[str, Any], client: Any, policy: str, report_path: str) -> int:
    """Fork-safe follow-up: check the artifact's report and post the comment for the PR it belongs to."""
    from gate.errors import InputError

    path = Path(report_path)
    if not path.is_file():
        raise InputError("report artifact not found (download it with actions/download-artifact first)", file=report_path)
    if path.stat().st_size > REPORT_ARTIFACT_LIMIT:
        raise InputError(f"report is larger than {REPORT_ARTIFACT_LIMIT // (1024 * 1024)} MiB: refusing it", file=report_path)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}", file=report_path) from None
    if not isinstance(report, dict) or report.get("schema_version") != 1 or report.get("verdict") not in ("pass", "fail", "error") \
            or not isinstance(report.get("stages"), dict):
        raise InputError("not a rag-gate report (schema_version 1, verdict, stages)", file=report_path)
    run = report.get("run")
    if not isinstance(run, dict):
        raise InputError("not a rag-gate report of a pull request (no run object)", file=report_path, key="run")
    head = (ev.get("workflow_run") or {}).get("head_sha")
    pr = run.get("pr")
    if not isinstance(head, str) or not head:
        raise InputError("the event has no workflow_run.head_sha: mode report runs in a workflow_run job", key="GITHUB_EVENT_PATH")
    if not isinstance(pr, int) or isinstance(pr, bool) or pr <= 0:
        raise InputError("the report names no pull request (it was not made by a pull_request run)", file=report_path, key="run.pr")
    if run.get("head_sha") != head:
        raise InputError(f"the report's head commit {str(run.get('head_sha'))[:12]!r} is not the head commit {head[:12]} of the "
                         "workflow run that produced it: refusing to comment", file=report_path, key="run.head_sha")
    if not COMMENT_ID.fullmatch(str(run.get("comment_id") or "default")):
        raise InputError("run.comment_id must match [A-Za-z0-9_.-]+", file=report_path, key="run.comment_id")
    try:
        from gate.render.markdown import render_comment

        render_comment(report)  # what _comment posts, and the summary (more rows): a forged report fails here, not later
        summary = summary_text(report)
        metrics = headline(report)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"not a well-formed rag-gate report ({type(exc).__name__}: {str(exc)[:100]})", file=report_path) from None
    if client is None:
        raise InputError("mode report needs a github-token that can write pull-request comments", key="input github-token")
    current = client.pull_head_sha(pr)
    if current != head:
        now = "does not exist" if current is None else f"is now {current[:12]}"
        raise InputError(f"pull request #{pr}'s head {now}, not {head[:12]}: refusing to comment on it", file=report_path, key="run.pr")
    append_file(env, "GITHUB_STEP_SUMMARY", summary)
    _comment(client, pr, report, policy)
    set_outputs(env, {"verdict": report["verdict"], "report": report_path, "metrics": metrics})
    return 0  # the pull_request job's check carries the verdict; this job only comments


if __name__ == "__main__":
    sys.exit(main())
