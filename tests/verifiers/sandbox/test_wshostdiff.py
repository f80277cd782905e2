"""The host's half of a workspace diff (``wshostdiff``) over the guest's report (``wsdiff``),
without a sandbox: a snapshot tree, and a second tree standing for what a session holds (the
whole workspace, or an overlay upper layer with whiteouts and an opaque directory, made here
as the kernel makes them)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.guest.wsdiff import changes
from tasksieve.verifiers.sandbox.workspace import WorkspaceError
from tasksieve.verifiers.sandbox.wshostdiff import workspace_diff


def _snapshot(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text("SECRET = 1\n")
    (root / "tests" / "test_b.py").write_text("B = 2\n")
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# docs\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "outside").symlink_to("/etc")  # a link of the snapshot leading out of it
    return root


def _fetcher(tree: Path) -> Callable[[str], bytes | None]:
    def fetch(path: str) -> bytes | None:
        p = tree / path
        return p.read_bytes() if p.is_file() and not p.is_symlink() else None

    return fetch


def test_a_whole_tree_report_gives_edits_additions_and_deletions(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path / "snap")
    ws = _snapshot(tmp_path / "ws")
    (ws / "pkg" / "mod.py").write_text("def f():\n    return 2\n")
    (ws / "gone.txt").unlink()
    (ws / "new.bin").write_bytes(b"\0\1binary")
    (ws / "outside").unlink()
    (ws / "outside").symlink_to("pkg")
    report = changes(str(ws), None)
    assert report["complete"] and report["entries"]["new.bin"]["txt"] is False
    diff = workspace_diff(str(snap), report, _fetcher(ws))
    assert "-    return 1\n+    return 2\n" in diff
    assert "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n" in diff
    assert "Binary files /dev/null and b/new.bin differ\n" in diff
    assert "-/etc\n\\ No newline at end of file\n+pkg\n" in diff
    assert "tests/" not in diff and "docs/" not in diff  # unchanged files stay out


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts and trusted.* xattrs need root")
def test_an_upper_layer_report_expands_whiteouts_and_opaque_directories(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path / "snap")
    upper = tmp_path / "upper"
    (upper / "pkg").mkdir(parents=True)
    (upper / "pkg" / "mod.py").write_text("def f():\n    return 1\n")  # copied up, unchanged
    os.mknod(upper / "tests", stat.S_IFCHR | 0o600, 0)  # rm -r tests
    (upper / "docs").mkdir()  # rm -r docs; mkdir docs; a new file in it
    os.setxattr(upper / "docs", "trusted.overlay.opaque", b"y")
    (upper / "docs" / "new.md").write_text("new\n")
    (upper / "gone.txt").mkdir()  # a directory where a file was (opaque as well)
    os.setxattr(upper / "gone.txt", "trusted.overlay.opaque", b"y")
    merged = tmp_path / "merged"  # what the session's view holds, for the fetches
    (merged / "docs").mkdir(parents=True)
    (merged / "docs" / "new.md").write_text("new\n")
    fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY)
    try:
        report = changes("/nonexistent", fd)
    finally:
        os.close(fd)
    assert not report["complete"] and report["opaque"] == ["docs", "gone.txt"]
    diff = workspace_diff(str(snap), report, _fetcher(merged))
    for deleted in ("tests/test_a.py", "tests/test_b.py", "docs/index.md", "gone.txt"):
        assert f"diff --git a/{deleted} b/{deleted}\ndeleted file mode 100644\n" in diff, diff
    assert "+++ b/docs/new.md\n@@ -0,0 +1 @@\n+new\n" in diff
    assert "pkg/mod.py" not in diff


def test_the_host_never_follows_a_snapshot_link_nor_a_bad_path(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path / "snap")
    forged = {"complete": False, "entries": {"outside/passwd": {"k": "w"}}, "opaque": []}
    assert workspace_diff(str(snap), forged, lambda p: None) == ""  # /etc/passwd is not read
    for bad in ("../x", "/etc/passwd", "a//b", "a/./b"):
        with pytest.raises(WorkspaceError, match="bad path"):
            workspace_diff(str(snap), {"entries": {bad: {"k": "w"}}}, lambda p: None)
