"""``rag-gate gitlab note``: a run's report posted as one merge request note, edited in place on the next run.

Where: GitLab CI's predefined variables (``CI_API_V4_URL``; ``CI_MERGE_REQUEST_PROJECT_ID``, the merge request's
project, else ``CI_PROJECT_ID``, the pipeline's, which for a merge request from a fork is the fork; ``CI_MERGE_REQUEST_IID``,
set only in a merge request pipeline), each of which an option can give instead (another CI posting to GitLab). The token:
the environment variable the caller names (``GITLAB_TOKEN`` by default), never an argument (it would show in the
process list and the job log). The body: the report's PR comment made safe for GitLab (gate.render.gitlab), found
again by its hidden marker; only a note of the token's own user is ever edited.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import InputError
from gate.gitlab import TOKEN_HINT

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PROTECTED_HINT = ("a variable with 'Protect variable' checked reaches only pipelines of protected branches, so not a merge "
                  "request from a feature branch: uncheck it (keep 'Mask variable'); a merge request from a fork runs in the "
                  "fork, which has none of the project's variables")


@dataclass(frozen=True)
class NoteTarget:
    """Where the note goes, and with what token: api_url, project, iid (None: not a merge request pipeline)."""

    api_url: str
    project: str
    iid: int | None
    token: str
    auth: str


def note_target(env: Mapping[str, str], *, token_env: str, auth: str, api_url: str | None = None, project: str | None = None,
                iid: str | None = None) -> NoteTarget:
    """The note's target from the options, else the environment; InputError naming the variable that is missing or
    malformed. No merge request (iid None) is no error: the caller says so and posts nothing."""
    raw_iid = (iid if iid is not None else env.get("CI_MERGE_REQUEST_IID", "")).strip()
    if raw_iid and not raw_iid.isdigit():
        raise InputError(f"must be a merge request's number (IID), got {raw_iid[:40]!r}", key="--merge-request" if iid else "CI_MERGE_REQUEST_IID")
    if not raw_iid:
        return NoteTarget("", "", None, "", auth)
    if not NAME.fullmatch(token_env):
        raise InputError(f"must be an environment variable's name, got {token_env[:60]!r}", key="--token-env")
    if token_env == "CI_JOB_TOKEN":
        raise InputError(f"names the job token, which GitLab does not let write merge request notes: {TOKEN_HINT}",
                         key="--token-env", hint="create a project access token and pass its variable's name, or leave "
                         "--token-env out for GITLAB_TOKEN")
    url = (api_url or env.get("CI_API_V4_URL", "")).strip()
    proj = (project or env.get("CI_MERGE_REQUEST_PROJECT_ID", "").strip() or env.get("CI_PROJECT_ID", "")).strip()
    if not url:
        raise InputError("is not set: the GitLab API's root URL (GitLab CI sets it; elsewhere pass --api-url)", key="CI_API_V4_URL")
    if not proj:
        raise InputError("is not set: the project's id or path (GitLab CI sets it; elsewhere pass --project)", key="CI_PROJECT_ID")
    token = env.get(token_env, "")
    if not token.strip():
        raise InputError(f"is not set or empty: the token rag-gate posts the note with ({TOKEN_HINT})", key=token_env,
                         hint=f"add {token_env} as a masked CI/CD variable, or name another with --token-env; {PROTECTED_HINT}")
    return NoteTarget(url, proj, int(raw_iid), token.strip(), auth)


def post_note(report_path: Path, target: NoteTarget, job_url: str | None = None, when: str = "always",
              missing: str = "error") -> str:
    """Create or edit the merge request note from the report at ``report_path``; what happened, in words. ``when``, as
    the action's ``comment`` input: always; on-failure (a passing run posts nothing, and neutralises the note an
    earlier failing run left); never. ``missing`` "note": no report at ``report_path`` (the run ended before it wrote
    one: exit 2 or 3) is said in the note, so the result an earlier run posted is not left standing."""
    from gate.gitlab.client import GitLabClient
    from gate.io.reports import read_report
    from gate.render import NEUTRAL_BODY
    from gate.render.gitlab import NO_REPORT_BODY, render_note
    from gate.render.markdown import marker

    if target.iid is None:
        return "not a merge request pipeline (no CI_MERGE_REQUEST_IID): no note posted"
    if when == "never":
        return "note: never (--when never)"
    if missing == "note" and not report_path.exists():
        mark = marker("default")
        with GitLabClient(target.api_url, target.token, target.project, auth=target.auth) as client:
            note_id, what = client.upsert_note(target.iid, f"{mark}\n{NO_REPORT_BODY}", mark)
        return f"no report at {report_path} (the run ended before it wrote one): note {what} on merge request !{target.iid} (note {note_id})"
    report = read_report(report_path, allow_error=True)  # a run that could not complete is worth a note too
    mark = marker(report["run"].get("comment_id") or "default")
    with GitLabClient(target.api_url, target.token, target.project, auth=target.auth) as client:
        if when == "on-failure" and report["verdict"] == "pass":
            if client.find_note(target.iid, mark) is None:
                return "passed: no note needed (--when on-failure)"
            _, what = client.upsert_note(target.iid, f"{mark}\n{NEUTRAL_BODY}", mark)
            return "passed: the earlier failure note was neutralised" if what == "updated" else f"passed: the passed note is {what}"
        note_id, what = client.upsert_note(target.iid, render_note(report, job_url), mark)
    return f"note {what} on merge request !{target.iid} (note {note_id})"
