"""The registry builds sandboxes and verifiers by name and rejects unknown ones clearly."""

from __future__ import annotations

import pytest

from verifiers import UnsupportedFamily, get_verifier, make_sandbox
from verifiers.python_code import PythonVerifier


def test_make_default_sandbox():
    assert make_sandbox().describe()["backend"] == "process"


def test_unknown_sandbox_lists_choices():
    with pytest.raises(ValueError, match="process"):
        make_sandbox("podman")


def test_code_family_gets_python_verifier(sandbox):
    assert isinstance(get_verifier("code", sandbox), PythonVerifier)


@pytest.mark.parametrize("family", ["sql", "api", "config", "nope"])
def test_other_families_unsupported(sandbox, family):
    with pytest.raises(UnsupportedFamily, match=family):
        get_verifier(family, sandbox)
