"""Fixtures shared by the transform tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tasksieve.verifiers import Sandbox
from tasksieve.verifiers.registry import make_sandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """One process sandbox per test module."""
    sb = make_sandbox("process")
    yield sb
    sb.close()
