"""Point action.yml at a published image: `python release/use_image.py docker://ghcr.io/org/rag-gate:v1.2.0`.

GitHub builds a Dockerfile action's image on every workflow run (minutes with ragas and deepeval);
the release commit's action.yml instead runs the image the release workflow pushed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

IMAGE_LINE = re.compile(r"^([ \t]*image:[ \t]*)[\"']?Dockerfile[\"']?[ \t]*$", re.M)
REFERENCE = re.compile(r"^docker://[a-z0-9.\-]+(:[0-9]+)?/[a-z0-9._\-/]+:[A-Za-z0-9._\-]+$")


def use_image(text: str, image: str) -> str:
    """action.yml's text with `image: Dockerfile` replaced by the published image reference."""
    if not REFERENCE.match(image):
        raise ValueError(f"not a docker://registry/name:tag reference: {image!r}")
    new, count = IMAGE_LINE.subn(lambda m: f'{m.group(1)}"{image}"', text)
    if count != 1:
        raise ValueError("action.yml must have exactly one `image: Dockerfile` line")
    return new


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python release/use_image.py docker://REGISTRY/NAME:TAG", file=sys.stderr)
        return 2
    path = Path(__file__).resolve().parents[1] / "action.yml"
    try:
        path.write_text(use_image(path.read_text(encoding="utf-8"), argv[1]), encoding="utf-8")
    except ValueError as exc:
        print(f"use_image: {exc}", file=sys.stderr)
        return 2
    print(f"action.yml now runs {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
