"""The quickstart RAG as a real HTTP service for tests: `python -m quickrag serve --port 0`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def serve_quickrag(*flags: str) -> Iterator[str]:
    """Start the service (flags such as --gullible, --never-refuse), yield its URL, stop it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "quickrag", "serve", "--host", "127.0.0.1", "--port", "0", *flags],
        cwd=QUICKSTART, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert line.startswith("quickrag listening on http://"), line
        yield line.rsplit(" ", 1)[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
