"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gate.io.reports import SELF_CHECK
from tests.support.quickrag import serve_quickrag


@pytest.fixture(autouse=True, scope="session")
def check_every_document_written() -> Iterator[None]:
    """Every report.json, baseline and history entry rag-gate writes during the tests, in this process or in a
    subprocess that inherits the environment, is read back through report.schema.json before it is written
    (gate.io.reports.document_json): a document the schema refuses fails the test that wrote it."""
    before = os.environ.get(SELF_CHECK)
    os.environ[SELF_CHECK] = "1"
    yield
    if before is None:
        os.environ.pop(SELF_CHECK, None)
    else:
        os.environ[SELF_CHECK] = before


E2E = Path(__file__).parent / "e2e"
BROWSER_MODULES = {"test_html_report", "test_cdp"}
DOCKER_MODULES = {"test_e2e_act", "test_slim_image"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by place: everything under tests/e2e is ``e2e``; the browser and Docker modules say so (a browser test
    elsewhere carries its own ``browser`` mark)."""
    for item in items:
        path = Path(str(item.fspath))
        if E2E in path.parents:
            item.add_marker(pytest.mark.e2e)
        if path.stem in BROWSER_MODULES:
            item.add_marker(pytest.mark.browser)
        if path.stem in DOCKER_MODULES:
            item.add_marker(pytest.mark.docker)


def _threads_left() -> list[threading.Thread]:
    """The threads a test left running that the interpreter's exit would wait for (not daemons), after a grace."""
    left = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    for t in left:
        t.join(5)
    return [t for t in left if t.is_alive()]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A test that leaves a thread waiting forever made pytest print its summary and then never exit (a CI job ran
    out of time on it): name the threads and end with exit status 1 instead."""
    left = _threads_left()
    if left:
        names = ", ".join(sorted(t.name for t in left))
        sys.stderr.write(f"\nthe tests left {len(left)} thread(s) running that the exit would wait for: {names}\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)


JUNIT_XSD = Path(__file__).parent / "data" / "junit-10.xsd"  # Jenkins' JUnit schema (xunit plugin)
JUNIT_ROOTS = ("testsuites", "testsuite")


@pytest.fixture(scope="session")
def junit_schema() -> Any:
    """Jenkins' junit-10.xsd as an lxml XMLSchema, parsed once per session (per xdist worker)."""
    from lxml import etree

    return etree.XMLSchema(etree.parse(str(JUNIT_XSD)))


def junit_problem(path: Path, schema: Any) -> str | None:
    """Why the file at `path` is not valid JUnit XML against `schema`; None if it is valid or is no JUnit XML at all
    (its root element is neither <testsuites> nor <testsuite>). A file that starts as JUnit XML and is then ill-formed
    is a problem too."""
    from lxml import etree

    if _root_name(path) not in JUNIT_ROOTS:
        return None  # no root element (ill-formed before it, or empty), or not JUnit XML
    try:
        doc = etree.parse(str(path))
    except etree.XMLSyntaxError as exc:
        return f"not well-formed XML: {exc}"
    if not schema.validate(doc):
        return "; ".join(f"line {e.line}: {e.message}" for e in schema.error_log)
    return None


def _root_name(path: Path) -> str | None:
    """The local name of the root element of the XML file at `path`, even when the file is ill-formed further on, or
    within the root's own start tag (then read from the text: ``<testsuites`` after an optional XML declaration);
    None if it has none. (A pull parser keeps the events it made before an error; iterparse, from lxml 6.2, raises
    the error of a small file before giving its first event.)"""
    from lxml import etree

    parser = etree.XMLPullParser(events=("start",))
    with path.open("rb") as handle:
        head = chunk = handle.read(1 << 16)
        while chunk:
            try:
                parser.feed(chunk)
                chunk = handle.read(1 << 16)
            except etree.XMLSyntaxError:
                chunk = b""
            for _, element in parser.read_events():
                return str(etree.QName(element).localname)
    start = _START_TAG.match(head)
    return start.group(1).decode("ascii") if start else None


_START_TAG = re.compile(rb"\s*(?:<\?xml[^>]*\?>\s*)?<(testsuites|testsuite)[\s/>]")


@pytest.fixture(autouse=True)
def check_every_junit_file_written(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that uses tmp_path, every *.xml file under its tmp_path whose root element is <testsuites>
    or <testsuite> (rag-gate's --junit output, the Action's rag-gate-report.xml) must be well-formed and valid
    against Jenkins' JUnit schema, tests/data/junit-10.xsd: an invalid one fails the test with its path and the
    schema's error. Tests that do not use tmp_path are left alone (no tmp_path is made for them)."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    # both taken before the test: tmp_path is then torn down after this check
    tmp_path: Path = request.getfixturevalue("tmp_path")
    schema = request.getfixturevalue("junit_schema")
    yield
    files = sorted(p for p in tmp_path.rglob("*.xml") if p.is_file())
    problems = [f"{p}: {why}" for p in files if (why := junit_problem(p, schema))]
    if problems:
        pytest.fail("JUnit XML invalid against tests/data/junit-10.xsd:\n" + "\n".join(problems), pytrace=False)


# The quickstart RAG served over HTTP (one service per test module), in its three modes.
@pytest.fixture(scope="module")
def normal() -> Iterator[str]:
    yield from serve_quickrag()


@pytest.fixture(scope="module")
def gullible() -> Iterator[str]:
    yield from serve_quickrag("--gullible")


@pytest.fixture(scope="module")
def never_refuse() -> Iterator[str]:
    yield from serve_quickrag("--never-refuse")
