"""Fixtures of the workspace tests: a small snapshot, one process sandbox per method."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox


def our_mounts(snapshot: Path) -> list[str]:
    """Lines of the host's mount table that a workspace made (its layer, its overlay, its
    snapshot binds): there must be none, during a session or after it."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [
        ln
        for ln in lines
        if str(snapshot) in ln or " workspace " in ln or "upperdir=/workspace" in ln
    ]


@pytest.fixture(scope="session")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("snapshot")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (root / "README").write_text("a small repository\n")
    (root / "old").mkdir()
    (root / "old" / "gone.txt").write_text("bye\n")
    (root / "data.bin").write_bytes(b"\0\1\2binary")
    return root


@pytest.fixture(scope="module", params=["bwrap", "unshare", "zygote"])
def box(request: pytest.FixtureRequest, snapshot: Path) -> Iterator[ProcessSandbox]:
    """A process sandbox opening sessions cold with bubblewrap, cold with the util-linux
    fallback, then forked from the workspace zygote; no mount of theirs may show in the
    host's mount table."""
    if request.param == "zygote":
        sb = ProcessSandbox(warm=False, workspace_open="zygote")
        if not str(sb.describe()["workspace_open"]).startswith("zygote"):
            sb.close()
            pytest.skip(f"no workspace zygote here: {sb.describe()['workspace_open']}")
    else:
        sb = ProcessSandbox(isolation=request.param, warm=False, workspace_open="cold")
    try:
        yield sb
    finally:
        sb.close()
    assert our_mounts(snapshot) == []
