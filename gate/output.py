"""Writing report files: one helper owns it (folders created, '-' is stdout, atomic replace)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from gate.errors import InputError


def write_text(path: str | os.PathLike[str], text: str, *, what: str = "file") -> None:
    """Write ``text`` to ``path`` atomically; '-' writes to stdout. Never leaves a half-written file."""
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError(f"cannot write the {what}: {exc.strerror}", file=str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write the {what}: {exc.strerror}", file=str(target)) from None
        raise
