"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.quickrag_service import serve_quickrag


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
