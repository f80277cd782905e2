"""The fork server for unprivileged callers: bubblewrap started inside a user namespace.

As root the fork server gives every run its own host uid (``uids.py``). Unprivileged, the
server is started by util-linux ``unshare`` in a new user namespace where the caller's uid is
mapped to 0 and a block of its subordinate ids (``/etc/subuid``, ``/etc/subgid``, written by
``useradd`` or ``usermod --add-subuids``) to ``uids.INNER_BASE`` and up; the setuid helpers
``newuidmap`` and ``newgidmap`` (Debian package ``uidmap``) write those maps. Inside, the
server holds the same capabilities as root's, but only over namespaces that user namespace
owns, and each run drops to one of the mapped uids: a host uid of the subordinate block that
no other run of this machine holds while it lives (blocks are claimed per process).

So an unprivileged run is isolated as a root one is (own uid, pid, mount, net, ipc and uts
namespaces, rlimits, seccomp), and a run that escapes its uid lands as the namespace's root,
which is the caller's own uid on the host, not host root: less exposure than the root server.

It does NOT work without the ``uidmap`` helpers, a subordinate range for the caller, or a
kernel that lets unprivileged users create user namespaces; the sandbox then keeps the
per-run bubblewrap path and ``warm_unavailable`` says which of these was missing.
"""

from __future__ import annotations

import os
import shutil

from tasksieve.verifiers.sandbox.process.uids import INNER_BASE, UIDS


def server_prefix(root: bool, unshare: str | None) -> tuple[list[str] | None, str]:
    """The argv that starts the server's bwrap: ``[]`` as root, the user-namespace wrapper
    unprivileged, or ``None`` with the reason the fork server cannot start unprivileged."""
    if root:
        return [], ""
    if not unshare:
        return None, "needs util-linux unshare (to map subordinate uids)"
    missing = [p for p in ("newuidmap", "newgidmap") if not shutil.which(p)]
    if missing:
        return None, f"needs {' and '.join(missing)} (Debian package uidmap)"
    sub = UIDS.subrange()
    if sub is None:
        return None, (
            f"needs subordinate uids and gids for uid {os.geteuid()} in /etc/subuid and "
            "/etc/subgid (usermod --add-subuids and --add-subgids)"
        )
    return [
        unshare, "--map-root-user",
        f"--map-users={sub.uid},{INNER_BASE},{sub.count}",
        f"--map-groups={sub.gid},{INNER_BASE},{sub.count}",
        "--",
    ], ""  # fmt: skip


def uid_kind(isolated: bool, root: bool, server: bool) -> str:
    """What ``describe()`` says of the uid runs get."""
    if not isolated:
        return "caller uid (no namespaces)"
    if root:
        return "per-run unprivileged uid"
    if server:
        return "per-run subordinate uid in a user namespace"
    return "caller uid in a user namespace"
