"""Subordinate ranges for the unprivileged fork server: parsing, blocks, and the reasons."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.process import uids, userns
from tasksieve.verifiers.sandbox.process.uids import MIN_BLOCK, subordinate


def test_first_usable_range_by_name_or_number(tmp_path: Path) -> None:
    me = os.geteuid()
    name = pwd.getpwuid(me).pw_name
    f = tmp_path / "subuid"
    f.write_text(
        f"other:100000:65536\n# comment\n{name}:5:{MIN_BLOCK - 1}\nbroken line\n"
        f"{me}:x:10\n{name}:200000:{MIN_BLOCK}\n{me}:300000:65536\n"
    )
    assert subordinate(str(f), me) == (200000, MIN_BLOCK)  # too small and unparsable skipped
    f.write_text(f"{me}:300000:65536\n")
    assert subordinate(str(f), me) == (300000, 65536)
    f.write_text("other:100000:65536\n")
    assert subordinate(str(f), me) is None
    assert subordinate(str(tmp_path / "absent"), me) is None


def test_blocks_of_one_range_are_disjoint_per_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = {"/etc/subuid": (100000, 65536), "/etc/subgid": (200000, 10000)}
    monkeypatch.setattr(uids, "subordinate", lambda path, uid: ranges[path])
    taken = []
    for slot in range(3):
        monkeypatch.setattr(uids, "claim_slot", lambda slots, s=slot: (s, None))
        sub, _ = uids._claim_subordinate()
        assert sub is not None and sub.count == uids.USERNS_BLOCK
        taken.append(sub)
    starts = [s.uid for s in taken]
    assert starts == [100000, 100000 + 4096, 100000 + 8192]
    assert [s.gid for s in taken] == [200000, 200000 + 4096, 200000 + 8192]
    monkeypatch.setattr(uids, "claim_slot", lambda slots: (slots - 1, None))
    last, _ = uids._claim_subordinate()  # the gid range (10,000) allows 2 blocks only
    assert last is not None and last.gid + last.count <= 210000


def test_reasons_name_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert userns.server_prefix(True, None) == ([], "")
    assert userns.server_prefix(False, None)[0] is None
    monkeypatch.setattr(userns.shutil, "which", lambda p: None)
    prefix, why = userns.server_prefix(False, "/usr/bin/unshare")
    assert prefix is None and "uidmap" in why
    monkeypatch.setattr(userns.shutil, "which", lambda p: f"/usr/bin/{p}")
    monkeypatch.setattr(userns.UIDS, "subrange", lambda: None)
    prefix, why = userns.server_prefix(False, "/usr/bin/unshare")
    assert prefix is None and "/etc/subuid" in why
    monkeypatch.setattr(userns.UIDS, "subrange", lambda: uids.SubRange(700000, 800000, 64))
    prefix, _ = userns.server_prefix(False, "/usr/bin/unshare")
    assert prefix is not None and "--map-users=700000,1000,64" in prefix
    assert "--map-groups=800000,1000,64" in prefix and "--map-root-user" in prefix
