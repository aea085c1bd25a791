"""The action's dashboard (inputs dashboard, dashboard-branch): the history drawn as one HTML page after a run is
recorded, written beside the report for the workflow to upload as an artifact, and committed to a branch (gh-pages)
as index.html through the contents API, retried on a conflict as the history is."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from gate.core.report import HistoryEntry
from gate.github.client import Conflict, GitHubClient


def dashboard_page(entries: list[HistoryEntry], config: str) -> str:
    from gate.cli.dashboard import charts_from_spec, page_assets
    from gate.render.dashboard import dashboard_data, render_page

    gated, baseline, notes = charts_from_spec(config)
    return render_page(dashboard_data(entries, gated, baseline, title="rag-gate dashboard", notes=notes), page_assets())


def write_dashboard(entries: list[HistoryEntry], config: str, path: Path) -> Path:
    from gate.io.files import write_text

    write_text(path, dashboard_page(entries, config), what="dashboard")
    return path


def publish_dashboard(client: GitHubClient, branch: str, page: str, *, attempts: int = 10, sleep: Any = None) -> None:
    """Commit ``page`` as index.html on ``branch`` (created when missing); a run that wrote it meanwhile: read again."""
    pause = sleep or client.sleep
    client.ensure_branch(branch)
    for attempt in range(1, attempts + 1):
        got = client.read_file("index.html", branch)
        if got is not None and got[0] == page:
            return
        try:
            client.write_file("index.html", branch, page, got[1] if got else None, "rag-gate: dashboard [skip ci]")
            return
        except Conflict:
            if attempt == attempts:
                raise
            pause(random.uniform(0.05, min(1.0, 0.05 * 2**attempt)))
