"""The strict patch applier on the host: what it applies and what it refuses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasksieve.verifiers.families.repo.guest.patchapply import PatchError, apply_patch
from tests.verifiers.repo.repo_fixture import file_diff


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("one\ntwo\nthree\n")
    (tmp_path / "old.txt").write_text("bye\n")
    return tmp_path


def test_modifies_creates_and_deletes(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    patch = (
        file_diff("pkg/a.py", "one\ntwo\nthree\n", "one\n2\nthree\n")
        + file_diff("pkg/new/b.py", None, "x = 1\n")
        + file_diff("old.txt", "bye\n", None)
    )
    assert sorted(apply_patch(str(root), patch)) == ["old.txt", "pkg/a.py", "pkg/new/b.py"]
    assert (root / "pkg" / "a.py").read_text() == "one\n2\nthree\n"
    assert (root / "pkg" / "new" / "b.py").read_text() == "x = 1\n"
    assert not (root / "old.txt").exists()


def test_no_newline_at_end_of_file(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    patch = file_diff("pkg/a.py", "one\ntwo\nthree\n", "one\ntwo\nthree")
    patch = patch.replace("+three", "+three\n\\ No newline at end of file")
    apply_patch(str(root), patch)
    assert (root / "pkg" / "a.py").read_text() == "one\ntwo\nthree"


def test_all_or_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    patch = file_diff("pkg/new.py", None, "x\n") + file_diff("pkg/a.py", "zero\n", "0\n")
    with pytest.raises(PatchError, match=r"pkg/a\.py: hunk 1"):
        apply_patch(str(root), patch)
    assert not (root / "pkg" / "new.py").exists()


BAD = {
    "dotdot": (file_diff("../x.py", None, "x\n"), "leaves the repository"),
    "absolute": (file_diff("pkg/a.py", None, "x\n").replace("b/pkg/a.py", "/etc/x"), "absolute"),
    "through a symlink": (file_diff("link/evil.py", None, "x\n"), "symlink"),
    "the symlink itself": (file_diff("link", None, "x\n"), "already exists|symlink"),
    "binary": ("diff --git a/x b/x\nGIT binary patch\nliteral 1\n", "binary"),
    "rename": ("diff --git a/x b/y\nrename from x\nrename to y\n", "rename"),
    "not a diff": ("hello\n", "no file diffs"),
    "creates an existing file": (file_diff("old.txt", None, "x\n"), "already exists"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_refuses(name: str, tmp_path: Path) -> None:
    root = _tree(tmp_path)
    os.symlink("/tmp", root / "link")
    patch, why = BAD[name]
    with pytest.raises(PatchError, match=why):
        apply_patch(str(root), patch)


def test_form_feeds_and_crlf_stay_inside_their_lines(tmp_path: Path) -> None:
    old = "a = 1\r\n\x0c# section\r\nb = 2\r\n"
    (tmp_path / "m.py").write_bytes(old.encode())
    new = old.replace("b = 2", "b = 3")
    apply_patch(str(tmp_path), file_diff("m.py", old, new))
    assert (tmp_path / "m.py").read_bytes() == new.encode()


def test_workspace_diffs_lose_their_cache_sections() -> None:
    from tasksieve.verifiers.families.repo.verifier import drop_caches

    keep = "diff --git a/m.py b/m.py\n" + file_diff("m.py", "a\n", "b\n")
    name = "pkg/__pycache__/m.cpython-311.pyc"
    pyc = f"diff --git a/{name} b/{name}\nBinary files differ\n"
    cache = "diff --git a/.pytest_cache/v/x b/.pytest_cache/v/x\n" + file_diff(
        ".pytest_cache/v/x", None, "1\n"
    )
    assert drop_caches(pyc + keep + cache) == keep
