"""The registry builds sandboxes and verifiers by name and rejects unknown ones clearly."""

from __future__ import annotations

import pytest

from tasksieve.verifiers import UnsupportedFamily, get_verifier, make_sandbox
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.registry import VerifierCache


def test_make_default_sandbox():
    assert make_sandbox().describe()["backend"] == "process"


def test_unknown_sandbox_lists_choices():
    with pytest.raises(ValueError, match="process"):
        make_sandbox("podman")


def test_code_family_gets_python_verifier(sandbox):
    assert isinstance(get_verifier("code", sandbox), PythonVerifier)


@pytest.mark.parametrize(
    "family,cls",
    [("sql", "SqlVerifier"), ("api", "ApiVerifier"), ("config", "ConfigVerifier")],
)
def test_every_family_has_its_verifier(sandbox, family, cls):
    verifier = get_verifier(family, sandbox)
    try:
        assert type(verifier).__name__ == cls
        assert verifier.family == family
    finally:
        verifier.close()


@pytest.mark.parametrize("family", ["shell", "nope"])
def test_unknown_family_is_unsupported(sandbox, family):
    with pytest.raises(UnsupportedFamily, match=family):
        get_verifier(family, sandbox)


def test_verifier_cache_reuses_one_per_family(sandbox):
    cache = VerifierCache(sandbox)
    try:
        assert cache.get("config") is cache.get("config")
        assert cache.get("code") is not cache.get("config")
    finally:
        cache.close()
