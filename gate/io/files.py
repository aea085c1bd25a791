"""Writing files: one helper owns it (folders created, '-' is stdout, atomic replace, ordinary file modes)."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

from gate.core.errors import InputError


@functools.cache
def _file_mode() -> int:
    """0666 minus the process umask (0644 under the usual 022): what open() would give a new file. A temporary
    file is created 0600, which a later step running as another user could not read."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


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
            os.fchmod(handle.fileno(), _file_mode())
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write the {what}: {exc.strerror}", file=str(target)) from None
        raise
