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
    """Step outputs through GITHUB_OUTPUT (heredoc form: values may hold newlines)."""
    text = ""
    for key, value in outputs.items():
        text += f"{key}<<RAG_GATE_EOF\n{value}\nRAG_GATE_EOF\n"
    append_file(env, "GITHUB_OUTPUT", text)


def mask_secrets(env: Mapping[str, str], token: str, spec_path: str) -> None:
    """::add-mask:: for the token and for the judge's key, so no log line can show them."""
    values = [token] if token else []
    try:
        import yaml

        data = yaml.safe_load(Path(spec_path).read_text(encoding="utf-8")) or {}
        key_env = (data.get("judge") or {}).get("api_key_env")
        if key_env and env.get(key_env):
            values.append(env[key_env])
    except Exception:  # the spec is validated later, with a proper message
        pass
    for v in values:
        print(f"::add-mask::{v}", flush=True)


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


def summary_text(body: str) -> str:
    if len(body.encode("utf-8")) <= SUMMARY_LIMIT:
        return body
    from gate.render.markdown import render_comment  # noqa: F401  (the comment renderer already cuts details)

    return body.encode("utf-8")[: SUMMARY_LIMIT - 200].decode("utf-8", "ignore") + "\n\n_Cut to fit the job summary limit._\n"


def post_comment(client: Any, pr: int, report: Mapping[str, Any], policy: str) -> str:
    """Create, edit, neutralise or skip the PR comment; returns what happened, in words."""
    from gate.render.markdown import marker, render_comment

    mark = marker(report.get("run", {}).get("comment_id", "default"))
    if policy == "never":
        return "comment: never"
    if policy == "on-failure" and report.get("verdict") == "pass":
        existing = client.find_comment(pr, mark)
        if existing is None:
            return "passed: no comment needed"
        client.upsert_comment(pr, f"{mark}\n## ✅ rag-gate passed\n\nEvery gate passes now; the earlier failure report was replaced.\n", mark)
        return "passed: the earlier failure comment was neutralised"
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
    from gate.errors import InputError

    if env.get("GITHUB_WORKSPACE"):
        os.chdir(env["GITHUB_WORKSPACE"])
    ev = event(env)
    config = action_input(env, "config", "rag-eval.yml")
    token = action_input(env, "github-token")
    policy = action_input(env, "comment", "always")
    mode = action_input(env, "mode") or default_mode(env, ev)
    report_path = action_input(env, "report-path", "rag-gate-report.json")
    if policy not in COMMENT_POLICIES:
        raise InputError(f"must be one of {', '.join(COMMENT_POLICIES)}, got {policy!r}", key="input comment")
    if mode not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}, got {mode!r}", key="input mode")
    mask_secrets(env, token, config)
    client = _client(env, token)
    if mode == "report":
        return _report_mode(env, ev, client, policy, report_path)

    pr = (ev.get("pull_request") or {}).get("number")
    base_sha = ((ev.get("pull_request") or {}).get("base") or {}).get("sha")
    store = _history_store(env, client)
    options: dict[str, Any] = {}
    if store is not None:
        options["history_store"] = store
        from gate.github import baseline_entry

        options["choose_baseline"] = lambda entries: baseline_entry(entries, base_sha, None) if base_sha else None
    args = argparse.Namespace(config=config, report=report_path, markdown=str(Path(report_path).with_suffix(".md")),
                              junit=str(Path(report_path).with_suffix(".xml")), no_progress=True, quiet=False, no_cache=False)
    from gate.cli import cmd_run

    with group("rag-gate: run"):
        code, report = cmd_run(args, **options)
    report.setdefault("run", {}).update({"pr": pr, "head_sha": ((ev.get("pull_request") or {}).get("head") or {}).get("sha")})
    Path(report_path).write_text(json.dumps(report, ensure_ascii=False) + "\n", encoding="utf-8")
    body = Path(args.markdown).read_text(encoding="utf-8")
    append_file(env, "GITHUB_STEP_SUMMARY", summary_text(body))
    for line in gate_annotations(report):
        print(line, flush=True)
    set_outputs(env, {"verdict": report["verdict"], "report": report_path, "metrics": headline(report)})
    if mode == "record" and store is not None:
        _record(env, store, report)
    elif mode == "gate" and pr and client is not None:
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


def _record(env: Mapping[str, str], store: Any, report: Mapping[str, Any]) -> None:
    from gate.github import PermissionDenied
    from gate.history import entry_from_report

    if report.get("verdict") == "error":
        print(workflow_command("warning", "the run did not complete: it is not recorded in the history"), flush=True)
        return
    try:
        store.append(entry_from_report(dict(report), branch=env.get("GITHUB_REF_NAME"), commit=env.get("GITHUB_SHA")))
        print(f"rag-gate: recorded in the history ({store.branch}:{store.path})", flush=True)
    except PermissionDenied:
        print(workflow_command("error", "the token cannot write the history branch: give the job `permissions: contents: write`"),
              flush=True)


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
    run = report.get("run") or {}
    head = (ev.get("workflow_run") or {}).get("head_sha")
    pr = run.get("pr")
    if not isinstance(pr, int) or not head or run.get("head_sha") != head:
        raise InputError("the report's pull request and head commit do not match the workflow run that produced it",
                         file=report_path, key="run.head_sha")
    if client is None:
        raise InputError("mode report needs a github-token that can write pull-request comments", key="input github-token")
    if client.pull_head_sha(pr) != head:
        raise InputError(f"pull request #{pr}'s head is not {head[:7]}: refusing to comment on it", file=report_path, key="run.pr")
    _comment(client, pr, report, policy)
    set_outputs(env, {"verdict": report["verdict"], "report": report_path, "metrics": headline(report)})
    return 0  # the pull_request job's check carries the verdict; this job only comments


if __name__ == "__main__":
    sys.exit(main())
