"""Writing files: one helper owns it (folders created, '-' is stdout, atomic replace, ordinary file modes).

A file is written to a hidden temporary beside it (``.<name>.<pid>.<random>.tmp``) and renamed over it, so a
reader, or a run killed half-way, never sees it half-written. A temporary left by a killed run (its process is
gone) is removed the next time the same file is written. A disk that is full or a folder that cannot be written
is not a mistake in the input: exit 3, naming the path.

An input that exists but is not a regular file (a FIFO would block its reader until a writer comes, /dev/zero never
ends, a directory or a socket holds no lines) is refused before it is read: ``special_kind`` says what it is.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
from pathlib import Path

from gate.core.errors import InputError, RunError

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def special_kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file ("a FIFO", "a character device", ...); None
    for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (symbolic links followed); None for a regular file
    or a path that does not exist (yet)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return special_kind(mode)


@functools.cache
def _file_mode() -> int:
    """0666 minus the process umask (0644 under the usual 022): what open() would give a new file. A temporary
    file is created 0600, which a later step running as another user could not read."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporaries of ``target`` that a process which no longer runs left behind; the ones removed."""
    removed = []
    for tmp in target.parent.glob(f".{target.name}.*.tmp"):
        parts = tmp.name[len(target.name) + 2:].split(".")
        if len(parts) >= 2 and parts[0].isdigit() and int(parts[0]) != os.getpid() and not _alive(int(parts[0])):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _unwritable(what: str, target: Path, exc: OSError) -> RunError:
    reason = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
              errno.EDQUOT: "the disk quota is exceeded"}.get(exc.errno or 0, exc.strerror or str(exc))
    return RunError(f"{target}: cannot write the {what}: {reason}", hint="write it to another folder, or free some space")


# as tempfile.mkstemp opens its file (whose module, and shutil's, a run would import for this alone)
_NEW_FILE = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def _new_temporary(folder: Path, prefix: str) -> tuple[int, str]:
    """A file ``<prefix><12 random hex digits>.tmp`` made in ``folder`` by this call and no other (created with
    O_EXCL, mode 0600, a symbolic link not followed): its descriptor and path. OSError as os.open raises it."""
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}.tmp")
        try:
            return os.open(path, _NEW_FILE, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused name for a temporary file", str(folder))


def write_text(path: str | os.PathLike[str], text: str | bytes, *, what: str = "file") -> None:
    """Write ``text`` (str, written as UTF-8; or its bytes, written as they are) to ``path`` atomically; '-' writes
    to stdout. Never leaves a half-written file. A symbolic link is written through (the file it names is replaced,
    the link kept); a path that is a device, a FIFO or a directory is refused (InputError), never replaced by a file."""
    if str(path) == "-":
        _to_stdout(text)
        return
    target, fd, tmp = _temporary_for(path, what)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text if isinstance(text, bytes) else text.encode("utf-8"))  # what a UTF-8 text file writes
            os.fchmod(handle.fileno(), _file_mode())
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _unwritable(what, target, exc) from None
        raise


def _temporary_for(path: str | os.PathLike[str], what: str) -> tuple[Path, int, str]:
    """The file ``path`` names (links followed; InputError if it is not a regular file), and a new temporary beside
    it (its descriptor and path), the stale ones of a process that is gone removed; RunError (exit 3) if the folder
    cannot be written."""
    target = Path(os.path.realpath(path))
    kind = not_regular(target)
    if kind is not None:
        raise InputError(f"{path}: is {kind}, not a regular file: the {what} is written as a new file put in its place",
                         hint="give a file's path (or - for standard output)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target)
        fd, tmp = _new_temporary(target.parent, f".{target.name}.{os.getpid()}.")
    except OSError as exc:
        raise _unwritable(what, target, exc) from None
    return target, fd, tmp


class Restart:
    """PiecesWriter.write(RESTART): what was written so far is dropped (the pieces that follow are the file)."""


RESTART = Restart()


class PiecesWriter:
    """A file written atomically, as ``write_text`` writes it, from pieces given one at a time: a thread writes each
    (a write does not hold the GIL) while the caller makes the next, and after ``finish`` puts the file in place while
    the caller goes on. ``close`` waits for it and raises what writing raised (exit 3, naming the path), the file at
    the path then left as it was; ``abort`` drops what was written. Not for '-' (standard output)."""

    def __init__(self, path: str | os.PathLike[str], *, what: str = "file") -> None:
        import queue
        import threading

        self.what = what
        self.target, self._fd, self._tmp = _temporary_for(path, what)
        self._pieces: queue.SimpleQueue[bytes | memoryview | Restart | None] = queue.SimpleQueue()
        self._failed: list[BaseException] = []
        self._finished = self._dropped = False
        self._thread = threading.Thread(target=self._work, name=f"rag-gate: write {self.target.name}", daemon=True)
        self._thread.start()

    def write(self, piece: bytes | memoryview | Restart) -> None:
        """Add ``piece`` to the file (``RESTART``: drop what was added so far)."""
        self._pieces.put(piece)

    def finish(self) -> None:
        """No more pieces: the thread writes the last ones and puts the file in place."""
        if not self._finished:
            self._finished = True
            self._pieces.put(None)

    def _work(self) -> None:
        while (piece := self._pieces.get()) is not None:
            if self._failed:
                continue  # what is left is taken, not written: close says why
            try:
                if isinstance(piece, Restart):
                    os.ftruncate(self._fd, 0)
                    os.lseek(self._fd, 0, os.SEEK_SET)
                    continue
                view = memoryview(piece)
                while view:
                    view = view[os.write(self._fd, view):]
            except BaseException as exc:  # raised by close
                self._failed.append(exc)
        if self._failed or self._dropped:
            return
        try:
            os.fchmod(self._fd, _file_mode())
            os.close(self._fd)
            self._fd = -1
            os.replace(self._tmp, self.target)
        except BaseException as exc:
            self._failed.append(exc)

    def close(self) -> None:
        """Wait for the file to be in place (``finish`` first, if it was not called); what writing it raised."""
        self.finish()
        self._thread.join()
        if self._failed:
            exc = self._failed[0]
            self._drop()
            if isinstance(exc, OSError):
                raise _unwritable(self.what, self.target, exc) from None
            raise exc

    def abort(self) -> None:
        """Drop what was written (the file at the path is left as it was)."""
        self._dropped = True
        self.finish()
        self._thread.join()
        self._drop()

    def _drop(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        Path(self._tmp).unlink(missing_ok=True)


def _to_stdout(text: str | bytes) -> None:
    """``text`` on stdout, after what was written there before; bytes as they are when stdout has a binary buffer."""
    buffer = getattr(sys.stdout, "buffer", None) if isinstance(text, bytes) else None
    if buffer is None:
        sys.stdout.write(text.decode("utf-8") if isinstance(text, bytes) else text)
        sys.stdout.flush()
        return
    sys.stdout.flush()
    buffer.write(text)
    buffer.flush()
