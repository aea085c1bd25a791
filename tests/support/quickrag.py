"""The quickstart RAG as a real HTTP service for tests: `python -m quickrag serve --port 0`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def serve_quickrag(*flags: str, env: dict[str, str] | None = None, port: int = 0, cwd: Path = QUICKSTART) -> Iterator[str]:
    """Start the service (flags such as --gullible, --never-refuse; ``env`` such as QUICKRAG_MODEL or QUICKRAG_CORPUS,
    which replace the caller's QUICKRAG_* variables; ``cwd``: a copy of the quickstart), yield its URL, stop it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("QUICKRAG_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "quickrag", "serve", "--host", "127.0.0.1", "--port", str(port), *flags],
        cwd=cwd, stdout=subprocess.PIPE, text=True, env={**base, **(env or {})},
    )
    try:
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert line.startswith("quickrag listening on http://"), line
        yield line.rsplit(" ", 1)[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
