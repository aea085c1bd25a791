"""Write slim/action.yml from action.yml: `python release/slim_action.py` (tests/unit/test_release.py checks it is current).

The slim action (`uses: OWNER/rag-gate/slim@VERSION`) is action.yml with another name, description and image: the
same inputs, outputs and defaults, running the image of Dockerfile.slim (rag-gate without the judge engines). A
Docker action cannot choose its image from an input, hence a second action. Its `image: ../Dockerfile.slim` is
resolved from the action's folder; GitHub's runner and act both build with the Dockerfile's own folder as the
context, here the repository's root, so the image holds the same code as the full one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
SLIM = ROOT / "slim" / "action.yml"
SLIM_DOCKERFILE = "../Dockerfile.slim"
HEADER = "# Generated from ../action.yml by release/slim_action.py: edit action.yml, then run `python release/slim_action.py`.\n"
NAME = '"rag-gate: RAG quality gate (slim image, no LLM judge)"'
DESCRIPTION = ('"Gate pull requests on RAG quality without an LLM judge: retrieval, offline text and answer-check metrics, '
               'robustness with offline correctness, against a baseline and recent history, in one PR comment. '
               'A small image; specs with judge metrics need the full action."')


def _replace_line(text: str, key: str, value: str) -> str:
    pattern = re.compile(rf"^({re.escape(key)}:[ \t]*).*$", re.M)
    new, count = pattern.subn(lambda m: m.group(1) + value, text, count=1)
    if count != 1:
        raise ValueError(f"action.yml has no top-level `{key}:` line")
    return new


def slim_action(text: str) -> str:
    """The slim action's text: action.yml's, with the slim name, description and image."""
    image = re.compile(r"^([ \t]+image:[ \t]*)[\"']?Dockerfile[\"']?[ \t]*$", re.M)
    text, count = image.subn(lambda m: f'{m.group(1)}"{SLIM_DOCKERFILE}"', text)
    if count != 1:
        raise ValueError("action.yml must have exactly one `image: Dockerfile` line")
    return HEADER + _replace_line(_replace_line(text, "name", NAME), "description", DESCRIPTION)


def main() -> int:
    try:
        text = slim_action(ACTION.read_text(encoding="utf-8"))
    except ValueError as exc:
        print(f"slim_action: {ACTION}: {exc}", file=sys.stderr)
        return 2
    SLIM.parent.mkdir(exist_ok=True)
    SLIM.write_text(text, encoding="utf-8")
    print(f"wrote {SLIM.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
