"""HTTP details the target and the GitHub client share: Retry-After, a response body read within a size cap and a
deadline, the origin of a URL.

A body is read as a stream (``requests`` with ``stream=True``), decoded as it arrives (gzip included, a chunk at a
time), so that the cap holds on what it inflates to, not on what crossed the wire. The deadline is checked between
chunks and bounds every read (the socket's timeout is the time left, if shorter); a read blocked in the middle of a
chunk (a service sending a byte a second, each within the timeout) is ended by ``Watchdog``, which shuts down the
sockets still being read when the deadline comes. A body not read to its end is closed with its connection.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.utils import guess_json_utf
from urllib3.exceptions import ReadTimeoutError

from gate.deadline import Deadline

CHUNK = 64 * 1024  # decoded bytes asked for at a time
DEFAULT_PORTS = {"http": 80, "https": 443}


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP-date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port made explicit: what must stay the same for a header to be sent on."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is no number: no origin equals it
        port = -1
    return scheme, (parts.hostname or "").lower(), port if port is not None else DEFAULT_PORTS.get(scheme)


class DeadlineReached(Exception):
    """The deadline came while a response was being read."""


class TooLarge(Exception):
    """The body, decoded, holds more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than {limit} bytes")
        self.limit = limit


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class Watchdog:
    """Shuts down, when the deadline comes, the sockets of the responses still being read (``reading``): a read
    blocked there returns at once. One timer for all of them, started with the first read; ``close`` stops it."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._timer: threading.Timer | None = None
        self._fired = False

    @contextlib.contextmanager
    def reading(self, sock: socket.socket | None) -> Iterator[None]:
        if sock is None or self.deadline.seconds is None:
            yield
            return
        with self._lock:
            if self._fired:
                _shut(sock)
            else:
                self._socks.add(sock)
                if self._timer is None:
                    self._start(self.deadline.left() or 0.0)
        try:
            yield
        finally:
            with self._lock:
                self._socks.discard(sock)

    def _start(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._timer is None:  # closed
                return
            left = self.deadline.left()
            if left:  # the deadline's clock is not the timer's: not yet
                self._start(left)
                return
            self._fired = True
            socks, self._socks = self._socks, set()
        for sock in socks:
            _shut(sock)

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


def _socket(resp: requests.Response) -> socket.socket | None:
    """The socket a streamed response is read from (urllib3 keeps the connection on the response), if there is one."""
    sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def read_body(resp: requests.Response, limit: int, deadline: Deadline, timeout: float, *,
              watchdog: Watchdog | None = None, truncate: bool = False) -> bytes:
    """The body of a streamed response, decoded (gzip, deflate), read ``CHUNK`` bytes at a time. Past ``limit``
    decoded bytes: TooLarge (or, with ``truncate``, the first ``limit`` bytes). DeadlineReached when the deadline comes
    first. A read that stalls ``timeout`` seconds raises requests.ReadTimeout. A body not read to its end is closed,
    with its connection; one read to its end leaves the connection to the pool."""
    sock = _socket(resp)
    chunks: list[bytes] = []
    size = 0
    done = False
    try:
        with (watchdog.reading(sock) if watchdog else contextlib.nullcontext()):
            for chunk in _chunks(resp, sock, deadline, timeout):
                size += len(chunk)
                if size > limit:
                    if not truncate:
                        raise TooLarge(limit)
                    chunks.append(chunk[: len(chunk) - (size - limit)])
                    return b"".join(chunks)
                chunks.append(chunk)
        done = True
        return b"".join(chunks)
    finally:
        if not done:
            resp.close()


def _chunks(resp: requests.Response, sock: socket.socket | None, deadline: Deadline, timeout: float) -> Iterator[bytes]:
    """The decoded chunks of the body, each read bounded by the time left; a failure at the deadline is DeadlineReached."""
    stream = resp.iter_content(CHUNK)
    while True:
        if deadline.reached():
            raise DeadlineReached()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(max(deadline.cap(timeout), 0.001))  # 0 would make the socket non-blocking
        try:
            chunk = next(stream)
        except StopIteration:
            return
        except Exception as exc:
            if deadline.reached():  # the watchdog shut the socket, or the last read timed out at the deadline
                raise DeadlineReached() from None
            if isinstance(exc, requests.ConnectionError) and exc.args and isinstance(exc.args[0], ReadTimeoutError):
                raise requests.ReadTimeout(exc.args[0]) from None  # requests calls a stalled body a ConnectionError
            raise
        yield chunk


def text_of(content: bytes, encoding: str | None) -> str:
    """A body as text, in its declared encoding (else UTF-8), undecodable bytes replaced."""
    try:
        return content.decode(encoding or "utf-8", errors="replace")
    except LookupError:  # an encoding Python does not know
        return content.decode("utf-8", errors="replace")


def json_of(content: bytes, encoding: str | None) -> Any:
    """A body's JSON value, as requests' ``Response.json`` reads it (the declared encoding, else UTF-8/16/32 guessed
    from the first bytes); ValueError when it is not JSON."""
    return json.loads(text_of(content, encoding or guess_json_utf(content)))


def innermost(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 error, without the long wrapper chain ("[Errno 111] Connection
    refused", not urllib3's repr of its pool and connection objects); not redacted."""
    inner: BaseException = exc
    seen = {id(inner)}
    while inner.__context__ is not None and id(inner.__context__) not in seen:
        inner = inner.__context__
        seen.add(id(inner))
    text = str(inner) or type(inner).__name__
    if ">: " in text and text.startswith("<"):  # "<urllib3.connection.HTTPConnection object at 0x...>: Failed to ..."
        text = text.split(">: ", 1)[1]
    return text
