"""Shared fixtures for the verifier tests: one sandbox and one Python verifier per session."""

from __future__ import annotations

import pytest

from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox


@pytest.fixture(scope="session")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="session")
def verifier(sandbox: ProcessSandbox) -> PythonVerifier:
    return PythonVerifier(sandbox)
