"""Point the actions at the published images: `python release/use_image.py docker://ghcr.io/org/rag-gate:v1.2.0`.

GitHub builds a Dockerfile action's image on every workflow run (minutes with ragas and deepeval);
the release commit's action.yml instead runs the image the release workflow pushed, and its
slim/action.yml the slim image (by default the same reference with `-slim` after the tag; a second
argument names it). Both texts are made before either file is written: on a bad reference neither
file changes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"^docker://[a-z0-9.\-]+(:[0-9]+)?/[a-z0-9._\-/]+:[A-Za-z0-9._\-]+$")
ACTIONS = {ROOT / "action.yml": "Dockerfile", ROOT / "slim" / "action.yml": "../Dockerfile.slim"}


def use_image(text: str, image: str, dockerfile: str = "Dockerfile") -> str:
    """An action.yml's text with `image: <dockerfile>` replaced by the published image reference."""
    if not REFERENCE.match(image):
        raise ValueError(f"not a docker://registry/name:tag reference: {image!r}")
    line = re.compile(rf"^([ \t]*image:[ \t]*)[\"']?{re.escape(dockerfile)}[\"']?[ \t]*$", re.M)
    new, count = line.subn(lambda m: f'{m.group(1)}"{image}"', text)
    if count != 1:
        raise ValueError(f"the action must have exactly one `image: {dockerfile}` line")
    return new


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python release/use_image.py docker://REGISTRY/NAME:TAG [docker://REGISTRY/NAME:TAG-slim]", file=sys.stderr)
        return 2
    images = [argv[1], argv[2] if len(argv) == 3 else argv[1] + "-slim"]
    new = {}
    try:
        for (path, dockerfile), image in zip(ACTIONS.items(), images, strict=True):
            new[path] = use_image(path.read_text(encoding="utf-8"), image, dockerfile)
    except ValueError as exc:
        print(f"use_image: {path.relative_to(ROOT)}: {exc}", file=sys.stderr)
        return 2
    for (path, text), image in zip(new.items(), images, strict=True):
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(ROOT)} now runs {image}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
