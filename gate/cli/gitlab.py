"""``rag-gate gitlab note``: the run's report as one merge request note on GitLab, edited in place on the next run
(gate.gitlab.note). Outside a merge request pipeline it says so and exits 0."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from gate.gitlab import AUTH_SCHEMES, MISSING
from gate.render import WHEN


def add_parser(sub: Any) -> None:
    gitlab = sub.add_parser("gitlab", help="GitLab: the merge request note")
    gitlab_sub = gitlab.add_subparsers(dest="action", required=True, metavar="ACTION")
    note = gitlab_sub.add_parser("note", help="post the report as the merge request's note, or edit the note an earlier "
                                 "run posted (GitLab CI's CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID)")
    note.add_argument("--report", default="rag-gate-report.json", metavar="PATH",
                      help="report.json of the run (rag-gate run --report PATH; default rag-gate-report.json)")
    note.add_argument("--token-env", default="GITLAB_TOKEN", metavar="NAME", help="the environment variable holding the "
                      "token (default GITLAB_TOKEN): a project or personal access token with scope api; CI_JOB_TOKEN cannot "
                      "write notes")
    note.add_argument("--auth", default="private-token", choices=AUTH_SCHEMES, help="how the token is sent: the "
                      "PRIVATE-TOKEN header (access tokens, the default) or Authorization: Bearer (an OAuth token)")
    note.add_argument("--api-url", metavar="URL", help="the API's root (default: CI_API_V4_URL)")
    note.add_argument("--project", metavar="ID", help="the project's id or path (default: CI_PROJECT_ID)")
    note.add_argument("--merge-request", metavar="IID", help="the merge request's number (default: CI_MERGE_REQUEST_IID)")
    note.add_argument("--when", default="always", choices=WHEN, help="when to post: always (the default); on-failure (a "
                      "passing run posts nothing, and turns the note an earlier failing run left into a short 'passed'); never")
    note.add_argument("--missing-report", default="error", choices=MISSING, help="when the report is not there (the run "
                      "ended before it wrote one, exit 2 or 3): error (exit 2, the default) or note (the note says so, and "
                      "the result an earlier run posted is not left standing)")


def cmd_gitlab(args: argparse.Namespace) -> int:
    from gate.gitlab.note import note_target, post_note

    target = note_target(os.environ, token_env=args.token_env, auth=args.auth, api_url=args.api_url, project=args.project,
                         iid=args.merge_request)
    print(f"rag-gate: {post_note(Path(args.report), target, os.environ.get('CI_JOB_URL'), args.when, args.missing_report)}",
          flush=True)
    return 0
