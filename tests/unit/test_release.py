"""release/use_image.py: the release commit's action.yml runs the published image."""

from __future__ import annotations

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
