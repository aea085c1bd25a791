"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gate.io.reports import SELF_CHECK
from tests.quickrag_service import serve_quickrag


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
