"""A real HTTP server on 127.0.0.1 in a thread; a stand-in for a service the tests cannot reach (stdlib only).

The plumbing the stand-ins of this package share (rag_server, judge_server, github_server): a subclass
of ``StandIn`` overrides ``handle(h)``, which gets every GET, POST, PUT, PATCH and DELETE and answers it
through the ``StandInHandler`` ``h``: ``h.body()`` (the request body), ``h.reply(code, payload, headers)``,
``h.drop()`` (a TCP reset instead of any answer), with ``h.command``, ``h.path`` and ``h.headers`` as in
``http.server``.

    with MyService() as srv:   # srv.port, srv.base_url ("http://127.0.0.1:PORT"), srv.max_in_flight
        ...

Connections are HTTP/1.1 keep-alive (an idle one is closed after 30 s), a client that goes away while it
is answered is no error, and ``stop()`` wakes every handler sleeping in ``pause(seconds)``. ``busy()``
counts the requests in flight under ``_lock``; ``max_in_flight`` is the largest number seen at once.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["StandIn", "StandInHandler", "StandInServer", "free_port"]


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening on it (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # listen backlog: many clients connecting at once must not see dropped SYNs
    owner: StandIn

    def handle_error(self, request: Any, client_address: Any) -> None:  # no traceback for what the owner calls quiet
        if not isinstance(sys.exc_info()[1], self.owner.quiet):
            super().handle_error(request, client_address)


class StandInHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real service would
    server: StandInServer
    timeout = 30  # an idle keep-alive connection is closed after this
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between them

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.server.owner.handle(self)

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # noqa: N815

    def body(self) -> bytes:
        """The request body (Content-Length bytes of it)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, code: int, payload: bytes, headers: Mapping[str, str] | None = None,
              content_type: str | None = "application/json", length: int | None = None) -> None:
        """Answer ``payload`` (no Content-Type if ``content_type`` is None; Content-Length ``length`` if given)."""
        try:
            self.send_response(code)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload) if length is None else length))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:  # the client gave up (e.g. its timeout): nothing to answer
            self.close_connection = True

    def drop(self) -> None:
        """Close the TCP connection without a byte of response (RST, not a graceful FIN)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.connection.close()


class StandIn:
    """A service on 127.0.0.1:<free port> in a background thread. Use as a context manager."""

    quiet: tuple[type[BaseException], ...] = (Exception,)  # errors of a handler that print no traceback

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._in_flight = 0
        self.max_in_flight = 0
        self._stopped = threading.Event()
        self._server: StandInServer | None = None
        self._thread: threading.Thread | None = None

    def handle(self, h: StandInHandler) -> None:
        """Answer one request (every method); a subclass overrides it."""
        h.reply(404, b'{"error": "not found"}')

    def on_stop(self) -> None:
        """Called by ``stop()`` before the server shuts down (e.g. to release handlers waiting on something)."""

    def start(self) -> Self:
        if self._server is None:
            self._stopped.clear()
            self._server = StandInServer(("127.0.0.1", 0), StandInHandler)
            self._server.owner = self
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=type(self).__name__, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopped.set()  # wakes every handler in pause()
        self.on_stop()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the server is stopped meanwhile."""
        self._stopped.wait(seconds)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """One request in flight for the duration (counted in ``max_in_flight``)."""
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
