"""A small client for the distribution's headless Chromium, driven over the Chrome DevTools Protocol (CDP).

Only the standard library and `websockets` (its synchronous client). One socket, one reader: every message is read
by `Browser._read`, which files events in `Browser.events` and dismisses JavaScript dialogs as they open, so an
alert() on the page never blocks a command. Events are kept for the whole life of the browser ("seen so far");
a test that wants only its own can clear `browser.events` first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

COMMAND_TIMEOUT = 60.0  # seconds for one command's reply
LOAD_TIMEOUT = 60.0  # seconds for Page.loadEventFired after Page.navigate
START_TIMEOUT = 30.0  # seconds for the browser to write DevToolsActivePort
DRAIN_SECONDS = 0.2  # how long requests() & co. wait for events still on their way


def chromium() -> str | None:
    """The path of a Chromium (or Chrome) on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """A headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, tmp_dir: Path, width: int = 1280, height: int = 900) -> None:
        exe = chromium()
        if exe is None:
            raise RuntimeError("no Chromium found (chromium, chromium-browser or google-chrome on PATH)")
        self.tmp_dir = Path(tmp_dir)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.profile = self.tmp_dir / "profile"
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._ws: ClientConnection | None = None
        self._exit = contextlib.ExitStack()
        self._stderr_path = self.tmp_dir / "chromium-stderr.txt"
        self._stderr = self._stderr_path.open("wb")
        args = [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        # its own session (process group), so close() can also reap the renderers should the browser leave any
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr, start_new_session=True
            )
        except BaseException:
            self._stderr.close()
            raise
        try:
            port = self._wait_for_port()
            ws_url = self._page_websocket_url(port)
            # entered as a context manager, as websockets >= 17.1 wants; close() leaves it
            self._ws = self._exit.enter_context(connect(ws_url, max_size=None, proxy=None, ping_interval=None, open_timeout=COMMAND_TIMEOUT))
            for domain in ("Network", "Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    # -- life cycle -------------------------------------------------------------------------------------------

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the websocket and end the browser (SIGTERM, SIGKILL after 5 s). Files are left where they are."""
        self._ws = None
        try:
            self._exit.close()  # closes the websocket
        except Exception:
            pass
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            try:  # anything left in the browser's own process group (zygote, renderers)
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not self._stderr.closed:
            self._stderr.close()

    def stderr_tail(self, lines: int = 30) -> str:
        """The last lines the browser wrote to its stderr."""
        try:
            text = self._stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_for_port(self) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"Chromium exited with {self._proc.returncode} before it listened:\n{self.stderr_tail()}")
            try:
                first = marker.read_text().splitlines()
            except OSError:
                first = []
            if len(first) >= 2 and first[0].strip().isdigit():  # port, then the browser's websocket path
                return int(first[0])
            time.sleep(0.05)
        raise RuntimeError(f"Chromium wrote no {marker} in {START_TIMEOUT:.0f} s:\n{self.stderr_tail()}")

    @staticmethod
    def _page_websocket_url(port: int) -> str:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy from the env
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with opener.open(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
                targets = json.load(response)
            pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
            if time.monotonic() > deadline:
                raise RuntimeError(f"no page target on port {port}: {targets}")
            time.sleep(0.05)

    # -- the one reader -----------------------------------------------------------------------------------------

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """Read one message (None when none came within `timeout` seconds). An event is appended to self.events,
        and a JavaScript dialog is dismissed as soon as it opens."""
        if self._ws is None:
            raise RuntimeError("the browser is closed")
        try:
            raw = self._ws.recv(timeout=max(0.0, timeout))
        except TimeoutError:
            return None
        except ConnectionClosed as exc:
            raise RuntimeError(f"the DevTools connection closed: {exc}\n{self.stderr_tail()}") from exc
        message: dict[str, Any] = json.loads(raw)
        if "method" in message and "id" not in message:
            self.events.append(message)
            if message["method"] == "Page.javascriptDialogOpening":
                # fire and forget: its reply, when it comes, matches no waiting command and is dropped
                self._post("Page.handleJavaScriptDialog", accept=False)
        return message

    def _post(self, method: str, **params: Any) -> int:
        if self._ws is None:
            raise RuntimeError("the browser is closed")
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        return self._next_id

    def _drain(self, seconds: float = DRAIN_SECONDS) -> None:
        """Read whatever arrives in the next `seconds` seconds (and no longer)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._read(left)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events read meanwhile go to self.events."""
        command_id = self._post(method, **params)
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            message = self._read(left)
            if message is None or message.get("id") != command_id:
                continue
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result
        raise TimeoutError(f"{method}: no reply in {COMMAND_TIMEOUT:.0f} s")

    # -- the page -----------------------------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Navigate the page to `url` (file:// included) and wait for its load event."""
        since = len(self.events)
        result = self.send("Page.navigate", url=url)
        if result.get("errorText"):
            raise RuntimeError(f"Page.navigate {url}: {result['errorText']}")
        self._wait_for_load(since, url)

    def reload(self, until: str | None = None, tries: int = 3) -> int:
        """Reload the page, as its reload button does, and wait for its load event; with ``until`` (a JavaScript
        expression), reload again, up to ``tries`` loads in all, while it is falsy in the new document. Returns the
        number of loads. Chromium now and then gives a reloaded file:// page an empty localStorage for that one
        document (the next load sees the stored values again): a test of what a page keeps across a reload waits for
        it with ``until``, and still fails if the page never finds what it stored."""
        for attempt in range(1, tries + 1):
            since = len(self.events)
            self.send("Page.reload")
            self._wait_for_load(since, "the reload")
            if until is None or self.evaluate(until):
                return attempt
        return tries

    def _wait_for_load(self, since: int, url: str) -> None:
        deadline = time.monotonic() + LOAD_TIMEOUT
        checked = since
        while True:
            for event in self.events[checked:]:
                if event["method"] == "Page.loadEventFired":
                    return
            checked = len(self.events)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{url}: no Page.loadEventFired in {LOAD_TIMEOUT:.0f} s")
            self._read(left)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited); RuntimeError if it throws."""
        reply = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        details = reply.get("exceptionDetails")
        if details:
            raise RuntimeError(f"{expression!r} threw: {_exception_text(details)}")
        return reply["result"].get("value")

    def _params(self, method: str) -> list[dict[str, Any]]:
        self._drain()
        return [e.get("params", {}) for e in self.events if e["method"] == method]

    def requests(self) -> list[str]:
        """The URL of every request the page sent so far (Network.requestWillBeSent)."""
        return [p["request"]["url"] for p in self._params("Network.requestWillBeSent")]

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error() calls and error log entries (CSP violations among them) so far."""
        self._drain()
        errors: list[str] = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(_exception_text(params.get("exceptionDetails", {})))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                errors.append(" ".join(_remote_text(arg) for arg in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(str(params["entry"].get("text", "")))
        return errors

    def dialogs(self) -> list[str]:
        """The message of every JavaScript dialog (alert, confirm, prompt, beforeunload) opened so far."""
        return [str(p.get("message", "")) for p in self._params("Page.javascriptDialogOpening")]

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the viewport, or of the whole page when `full_page`, written to `path`."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {"x": 0, "y": 0, "width": max(1, size["width"]), "height": max(1, size["height"]), "scale": 1}
        data = self.send("Page.captureScreenshot", **params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path


def _remote_text(obj: dict[str, Any]) -> str:
    """A Runtime.RemoteObject as text: its value when it has one, else its description."""
    if "value" in obj:
        return str(obj["value"])
    return str(obj.get("description") or obj.get("unserializableValue") or obj.get("type", ""))


def _exception_text(details: dict[str, Any]) -> str:
    """Runtime.ExceptionDetails as text: the exception's description (message and stack) or the details' text."""
    exception = details.get("exception") or {}
    return str(exception.get("description") or exception.get("value") or details.get("text") or "exception")
