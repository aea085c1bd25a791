"""The DevTools client in tests/support/cdp.py against the real headless Chromium: it must see what the page requests, what
the browser refuses, and what the page says, or the tests built on it prove nothing."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cdp import Browser, chromium

pytestmark = pytest.mark.skipif(chromium() is None, reason="needs Chromium (apt-get install chromium); .ci/run installs it")

FETCH_URL = "http://127.0.0.1:9/x"  # the discard port: nothing listens, the requests fail fast
IMG_URL = "http://127.0.0.1:9/y.png"


@pytest.fixture(scope="module")
def shared_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium")) as browser:
        yield browser


@pytest.fixture
def browser(shared_browser: Browser) -> Browser:
    """The module's browser on a blank page, with no events from earlier tests."""
    shared_browser.open("about:blank")
    shared_browser.events.clear()
    return shared_browser


def page(tmp_path: Path, body: str, head: str = "", name: str = "page.html") -> str:
    path = tmp_path / name
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'>{head}</head><body>{body}</body></html>", encoding="utf-8")
    return path.as_uri()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_requests_lists_what_the_page_asked_for(browser: Browser, tmp_path: Path) -> None:
    # the control for every "the page sent no request" assertion: a page that does ask is seen asking
    quiet = page(tmp_path, "<p>nothing to fetch</p>", name="quiet.html")
    browser.open(quiet)
    assert quiet in browser.requests()
    assert FETCH_URL not in browser.requests() and IMG_URL not in browser.requests()

    loud = page(tmp_path, f"<script>fetch({FETCH_URL!r}).catch(() => {{}});</script><img src={IMG_URL!r}>", name="loud.html")
    browser.open(loud)
    urls = browser.requests()
    assert FETCH_URL in urls, urls
    assert IMG_URL in urls, urls


def test_csp_blocks_an_inline_script_and_says_so(browser: Browser, tmp_path: Path) -> None:
    script = "<script>window.marker = 'ran';</script>"
    # control: without the policy the same script runs and nothing complains
    browser.open(page(tmp_path, script, name="open.html"))
    assert browser.evaluate("window.marker") == "ran"
    assert browser.console_errors() == []

    browser.events.clear()
    browser.open(page(tmp_path, script, head="<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'\">", name="csp.html"))
    assert browser.evaluate("typeof window.marker") == "undefined"
    errors = browser.console_errors()
    assert errors, "the CSP violation reached no console"
    assert any("Content Security Policy" in e for e in errors), errors


def test_console_errors_sees_exceptions_and_console_error(browser: Browser, tmp_path: Path) -> None:
    browser.open(page(tmp_path, "<script>console.error('told', 42);</script><script>throw new Error('boom');</script>"))
    errors = browser.console_errors()
    assert "told 42" in errors, errors
    assert any("boom" in e for e in errors), errors


def test_alert_is_recorded_and_dismissed(browser: Browser, tmp_path: Path) -> None:
    browser.open(page(tmp_path, "<script>alert('x'); window.after = 'yes';</script>"))
    assert browser.dialogs() == ["x"]
    assert browser.evaluate("window.after") == "yes"  # the script went on once the dialog was dismissed
    assert browser.evaluate("1 + 1") == 2
    # a dialog opened by a command does not hang that command; confirm() is dismissed, so it answers false
    assert browser.evaluate("confirm('y')") is False
    assert browser.dialogs() == ["x", "y"]


def test_evaluate_and_screenshot(browser: Browser, tmp_path: Path) -> None:
    browser.open(page(tmp_path, "<div style='height: 3000px; background: linear-gradient(red, blue)'>tall</div>", head="<title>Hello CDP</title>"))
    assert browser.evaluate("document.title") == "Hello CDP"
    assert browser.evaluate("Promise.resolve(6 * 7)") == 42
    with pytest.raises(RuntimeError, match="kaput"):
        browser.evaluate("(() => { throw new Error('kaput'); })()")
    with pytest.raises(RuntimeError, match="nope"):
        browser.evaluate("Promise.reject(new Error('nope'))")
    assert browser.evaluate("document.title") == "Hello CDP"  # still usable after the errors

    full = browser.screenshot(tmp_path / "full.png")
    assert full == tmp_path / "full.png"
    data = full.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 1000
    width, height = png_size(full)
    assert height >= 3000, (width, height)

    viewport = browser.screenshot(tmp_path / "viewport.png", full_page=False)
    assert viewport.read_bytes().startswith(b"\x89PNG")
    assert png_size(viewport)[1] < 3000


def test_send_raises_on_an_error_reply(browser: Browser) -> None:
    with pytest.raises(RuntimeError, match="No.such.method|wasn't found|not found"):
        browser.send("No.such.method")
    assert browser.evaluate("'alive'") == "alive"


def test_close_ends_the_browser(tmp_path: Path) -> None:
    with Browser(tmp_path / "own") as own:
        proc = own._proc
        assert proc is not None and proc.poll() is None
        own.open(page(tmp_path, "<p>hi</p>"))
    assert proc.poll() is not None


def test_reload_loads_the_page_anew_and_it_finds_its_storage(browser: Browser, tmp_path: Path) -> None:
    browser.open(page(tmp_path, "<script>window.fresh = true;</script>", name="reload.html"))
    browser.evaluate("window.fresh = false; localStorage.setItem('kept', 'yes')")
    assert browser.reload() == 1
    assert browser.evaluate("window.fresh") is True  # a new document ran the script again
    assert browser.reload(until="localStorage.getItem('kept') === 'yes'") in (1, 2, 3)
    # a condition that never holds: every try is made, and the caller sees it did not hold
    assert browser.reload(until="localStorage.getItem('never') !== null", tries=2) == 2
    assert browser.evaluate("localStorage.getItem('never')") is None
