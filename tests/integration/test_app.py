"""gate.app: one application function for the CLI and the action writes every output once, atomically, with
ordinary file modes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_outputs_get_the_mode_open_would_give_them(tmp_path, umask, mode):
    """Written through a temporary file (0600) and renamed, yet readable by a later step as any new file would be."""
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--report", "out/report.json",
                           "--markdown", "out/comment.md", "--junit", "out/junit.xml", "--no-progress"],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=120, preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr
    for name in ("report.json", "comment.md", "junit.xml"):
        assert stat.S_IMODE((ws / "out" / name).stat().st_mode) == mode, name
    assert sorted(p.name for p in (ws / "out").iterdir()) == ["comment.md", "junit.xml", "report.json"]  # no temporary left


def test_the_action_writes_report_json_once_in_the_clis_format(tmp_path, capsys):
    """The action calls the same application function: report.json is written once, atomically, indented like the
    CLI's, with the pull request in run (no rewrite in place afterwards)."""
    from gate.github.action import main

    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5, "head": {"sha": "cd" * 20}, "base": {"sha": "ef" * 20}}}))
    env = {"GITHUB_WORKSPACE": str(ws), "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
           "INPUT_CONFIG": "rag-eval.yml", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(tmp_path / "out")}
    cwd = os.getcwd()
    try:
        assert main(env=env) == 0
    finally:
        os.chdir(cwd)
    text = (ws / "rag-gate-report.json").read_text(encoding="utf-8")
    report = json.loads(text)
    assert text.startswith('{\n  "schema_version": 1,')  # the CLI's format
    assert report["run"]["pr"] == 5 and report["run"]["head_sha"] == "cd" * 20
    assert (ws / "rag-gate-report.md").read_text(encoding="utf-8").startswith("<!-- rag-gate:comment")
    assert "::notice::no github-token: the PR comment was skipped" in capsys.readouterr().out
