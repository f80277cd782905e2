"""Shared fixtures for the verifier tests: one sandbox and one Python verifier per session."""

from __future__ import annotations

import pytest

from verifiers.process import ProcessSandbox
from verifiers.python_code import PythonVerifier


@pytest.fixture(scope="session")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="session")
def verifier(sandbox: ProcessSandbox) -> PythonVerifier:
    return PythonVerifier(sandbox)
