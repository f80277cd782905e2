"""The ``repo`` family's spec: a repository snapshot, an issue, and the tests that judge it.

A repo task names a snapshot of a code base by content hash (stored once in a snapshot store and
shared by every task built on it), the environment its tests need, the test command, and two
lists of test ids: ``fail_to_pass`` (must fail on the snapshot and pass after a correct change)
and ``pass_to_pass`` (pass before and must still pass after). The task's ``prompt`` is the
problem statement; its ``reference_solution`` is a unified diff against the snapshot. A solution
is a unified diff too (an agent's final workspace is turned into one).

The snapshot hash is ``sha256:`` followed by the hex digest computed by
``tasksieve.verifiers.families.repo.snapshots.tree_digest`` over the tree's regular files and
symlinks (paths, executable bits, contents), which is exactly what a git checkout preserves.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tasksieve.schemas.strict import STRICT, JsonInt

SNAPSHOT_PATTERN = r"^sha256:[0-9a-f]{64}$"

DEFAULT_TEST_FILES: tuple[str, ...] = (
    "tests/**",
    "test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
)
"""Paths (glob patterns, relative to the repository root) that a solution may not change: they
are restored from the snapshot before the tests run, and a file a solution adds under them is
removed. They cover the tests and every file pytest reads its configuration or plugins from."""


class _Strict(BaseModel):
    model_config = ConfigDict(**STRICT, frozen=True)


class RepoEnvironment(_Strict):
    """What the tests need besides the snapshot, built once per distinct value and read-only.

    ``requirements`` are pip requirement specifiers installed into the environment tree
    (``pytest`` is always there). The environment's identity is the hash of this object.
    """

    python: str = Field(default="3.11", pattern=r"^3\.\d+$")
    requirements: list[str] = Field(default_factory=list, max_length=200)


def _test_id(value: str) -> str:
    if not value or "\n" in value or "\x00" in value or len(value) > 1000:
        raise ValueError(f"not a test id: {value!r}")
    if value.startswith("/") or value.split("::", 1)[0].startswith(".."):
        raise ValueError(f"test id must be relative to the repository root: {value!r}")
    return value


class RepoSpec(_Strict):
    """A code base at a snapshot, judged by the selected tests after the solution's patch."""

    family: Literal["repo"] = "repo"
    snapshot: str = Field(pattern=SNAPSHOT_PATTERN, description="content hash of the tree")
    environment: RepoEnvironment = Field(default_factory=RepoEnvironment)
    test_framework: Literal["pytest"] = "pytest"
    test_args: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="extra arguments to pytest (the verifier adds its own and the test ids)",
    )
    fail_to_pass: list[str] = Field(min_length=1, max_length=5000)
    pass_to_pass: list[str] = Field(default_factory=list, max_length=20000)
    test_files: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TEST_FILES),
        max_length=200,
        description="glob patterns of paths a solution may not change (restored before tests)",
    )
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    memory_mb: JsonInt = Field(default=2048, ge=64, le=65536)
    disk_mb: JsonInt = Field(default=512, ge=8, le=65536)

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _ids(cls, values: list[str]) -> list[str]:
        for v in values:
            _test_id(v)
        if len(set(values)) != len(values):
            raise ValueError("test ids repeat")
        return values

    def test_count(self) -> int:
        return len(self.fail_to_pass) + len(self.pass_to_pass)
