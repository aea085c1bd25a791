"""The HTTP service: rag-gate's default HTTP target protocol over ``ThreadingHTTPServer``.

``POST /`` with ``{"question": str, "k": int}`` answers with :func:`quickrag.answer`;
with ``{"question": str, "contexts": [str, ...]}`` it answers with
:func:`quickrag.answer_from_contexts`. Any path is accepted. ``GET /`` is a health check.
The server's ``mode`` (``normal``, ``gullible``, ``never_refuse``; see ``quickrag.rag.MODES``)
is passed to both functions.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from .rag import answer, answer_from_contexts, check_mode, default_index

__all__ = ["QuickragServer", "handle_payload", "serve"]

MAX_BODY_BYTES = 1_000_000


class BadRequestError(ValueError):
    """The request body is not a valid quickrag request; the message says why."""


def handle_payload(payload: Any, mode: str = "normal") -> dict[str, Any]:
    """Dispatch one decoded request body to the right function; raise ``BadRequestError``."""
    if not isinstance(payload, dict):
        raise BadRequestError("the body must be a JSON object")
    question = payload.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BadRequestError("'question' is required and must be a non-empty string")
    if "contexts" in payload:
        contexts = payload["contexts"]
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise BadRequestError("'contexts' must be a list of strings")
        return answer_from_contexts(question, contexts, mode=mode)
    k = payload.get("k", 5)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise BadRequestError("'k' must be a positive integer")
    return answer(question, k, mode=mode)


class _Handler(BaseHTTPRequestHandler):
    server: QuickragServer
    server_version = "quickrag/1.0"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._send(HTTPStatus.OK, {"status": "ok"})

    def do_POST(self) -> None:  # noqa: N802
        if self.server.latency_s > 0:
            time.sleep(self.server.latency_s)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send(HTTPStatus.BAD_REQUEST, {"error": "invalid Content-Length header"})
            return
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"body over {MAX_BODY_BYTES} bytes"})
            return
        body = self.rfile.read(length)
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._send(HTTPStatus.BAD_REQUEST, {"error": f"the body is not valid JSON: {exc}"})
            return
        try:
            self._send(HTTPStatus.OK, handle_payload(payload, self.server.mode))
        except BadRequestError as exc:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except Exception as exc:  # the service must answer, not drop the connection
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"})

    def _send(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silence per-request logging."""


class QuickragServer(ThreadingHTTPServer):
    """A threading HTTP server carrying the per-request artificial latency and the answerer's mode."""

    def __init__(self, host: str, port: int, latency_ms: float = 0.0, mode: str = "normal") -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.latency_s = max(latency_ms, 0.0) / 1000.0
        self.mode = check_mode(mode)
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` with the port actually bound."""
        host, port = self.socket.getsockname()[:2]
        shown = f"[{host}]" if self.address_family == socket.AF_INET6 else host
        return f"http://{shown}:{port}"


def serve(host: str, port: int, latency_ms: float = 0.0, mode: str = "normal") -> None:
    """Bind, print ``quickrag listening on http://HOST:PORT``, serve until SIGTERM/SIGINT."""
    server = QuickragServer(host, port, latency_ms, mode)
    default_index()  # build the index before announcing readiness

    def stop(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever() to return, so it must not run on this thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"quickrag listening on {server.url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
