"""Check the system programs the ``process`` sandbox needs, install bubblewrap where allowed.

``python -m tasksieve.verifiers.sandbox.process.doctor [--install]`` lists bubblewrap and the
util-linux programs (``unshare``, ``setpriv``, ``prlimit``), then starts a real sandbox run
and reports the isolation it got (never a probe remembered from earlier: see ``probecache``).
With ``--install`` and bubblewrap missing it installs it with ``apt-get`` when that needs no
prompt (run as root, or ``sudo -n`` allowed), otherwise it prints the one command to run. It
does the same for the engines of the trial-deployed config kinds (``ENGINES``: nginx,
haproxy, promtool from the ``prometheus`` package); without one, tasks of that kind verify
as ``infra_error`` naming the install command. Bubblewrap is not required: without it the
``unshare`` fallback gives the same isolation (per-run, without the warm fork server). Exit
status 0 when a namespace method works, 1 when none does (the message says why and how to
fix it). Unprivileged it also says whether the warm fork server can start in a user namespace
(``userns``: the ``uidmap`` helpers and a subordinate range for the user), and if not, what to
install or grant; with ``--install`` it installs ``uidmap`` as it does bubblewrap (as root too,
for the machine's other users).

It does NOT change kernel settings (user namespaces switched off, an AppArmor rule against
them): it names the failure and leaves the decision to the machine's owner.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from tasksieve.verifiers.sandbox.base import SandboxUnavailable
from tasksieve.verifiers.sandbox.process.cgroups import describe as cgroup_describe
from tasksieve.verifiers.sandbox.process.probecache import forget
from tasksieve.verifiers.sandbox.process.tools import HostTools

PACKAGES = {  # program -> the Debian/Ubuntu package that ships it
    "bwrap": "bubblewrap",
    "unshare": "util-linux",
    "setpriv": "util-linux",
    "prlimit": "util-linux",
}
ENGINES = {  # engine program -> its Debian/Ubuntu package (config tasks deployed on trial)
    "nginx": "nginx",
    "haproxy": "haproxy",
    "promtool": "prometheus",
}
_SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"  # engines live in sbin, often off a user's PATH
_MANAGERS = (  # package manager -> the install command for bubblewrap
    ("apt-get", "apt-get install -y bubblewrap"),
    ("dnf", "dnf install -y bubblewrap"),
    ("yum", "yum install -y bubblewrap"),
    ("zypper", "zypper --non-interactive install bubblewrap"),
    ("pacman", "pacman -S --noconfirm bubblewrap"),
    ("apk", "apk add bubblewrap"),
)


def missing_programs(tools: HostTools) -> list[str]:
    """The programs not found, by the name a user types (``setpriv`` once)."""
    found = {
        "bwrap": tools.bwrap,
        "unshare": tools.unshare,
        "setpriv": tools.pdeathsig,
        "prlimit": tools.prlimit,
    }
    return [name for name, path in found.items() if path is None]


def missing_engines() -> list[str]:
    """The config engines (``ENGINES``) found neither on PATH nor in the system bin dirs."""
    return [n for n in ENGINES if not (shutil.which(n) or shutil.which(n, path=_SBIN))]


def manual_command(root: bool) -> str:
    """The one command a user runs to install bubblewrap with this machine's package manager."""
    for manager, command in _MANAGERS:
        if shutil.which(manager):
            return command if root else f"sudo {command}"
    return "install bubblewrap with your system's package manager"


def install_argv(
    root: bool, sudo_without_prompt: bool, packages: tuple[str, ...] = ("bubblewrap",)
) -> list[list[str]] | None:
    """The commands that install ``packages`` with no prompt, or ``None`` when none can.

    Only ``apt-get`` is run (Debian and Ubuntu); other systems get ``manual_command``.
    """
    if shutil.which("apt-get") is None:
        return None
    if root:
        prefix: list[str] = []
    elif sudo_without_prompt:
        prefix = ["sudo", "-n"]
    else:
        return None
    return [
        [*prefix, "apt-get", "update", "-qq"],
        [*prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
    ]


def _sudo_without_prompt() -> bool:
    if shutil.which("sudo") is None:
        return False
    done = subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False, timeout=10)
    return done.returncode == 0


def _install(root: bool, packages: tuple[str, ...] = ("bubblewrap",)) -> bool:
    steps = install_argv(root, not root and _sudo_without_prompt(), packages)
    if steps is None:
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in steps:
        print("doctor: running", " ".join(argv), flush=True)
        if subprocess.run(argv, env=env, check=False, stdout=subprocess.DEVNULL).returncode:
            return False
    return True


def probe() -> tuple[dict[str, str | bool] | None, str]:
    """Start one real run; what ``describe()`` says, or ``None`` and why no method works.

    The probes remembered for this boot (``probecache``) are dropped first, so the next
    sandbox start probes afresh too.
    """
    from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox  # starts runs

    forget()

    try:
        sb = ProcessSandbox(warm=False, probe_cache=False)
    except SandboxUnavailable as e:
        return None, str(e)
    try:
        return sb.describe(), ""
    finally:
        sb.close()


def server_status(install: bool) -> str:
    """Unprivileged: whether the fork server can start in a user namespace, else how to fix it."""
    from tasksieve.verifiers.sandbox.process.userns import server_prefix

    tools = HostTools.find(False)
    prefix, why = server_prefix(False, tools.unshare)
    if prefix is None and "uidmap" in why and install and _install(False, ("uidmap",)):
        prefix, why = server_prefix(False, tools.unshare)
    if prefix is not None:
        return "in a user namespace with subordinate uids (per-run uids)"
    user = os.environ.get("USER") or str(os.geteuid())
    fix = (
        f"{manual_command(False).split(' install')[0]} install -y uidmap"
        if "uidmap" in why
        else f"sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}"
    )
    return f"not available ({why}); runs start cold, one bubblewrap each; to add it: {fix}"


def main(argv: list[str] | None = None) -> int:
    """Report, optionally install bubblewrap, probe; 0 when namespace isolation works."""
    parser = argparse.ArgumentParser(prog="python -m tasksieve.verifiers.sandbox.process.doctor")
    parser.add_argument("--install", action="store_true", help="install bubblewrap if missing")
    args = parser.parse_args(argv)
    root = os.geteuid() == 0
    missing = missing_programs(HostTools.find(root))
    for name in missing:
        print(f"doctor: {name} not found (package {PACKAGES[name]})")
    if "bwrap" in missing and args.install and _install(root) and shutil.which("bwrap"):
        print("doctor: bubblewrap installed")
        missing.remove("bwrap")
    if root and args.install and not shutil.which("newuidmap") and _install(root, ("uidmap",)):
        print("doctor: uidmap installed (the fork server for users with subordinate uids)")
    engines = missing_engines()
    if engines and args.install and _install(root, tuple(ENGINES[n] for n in engines)):
        engines = missing_engines()
    for name in engines:
        print(
            f"doctor: {name} not found (package {ENGINES[name]}): config tasks deployed on it "
            f"verify as infra_error; to add it: {manual_command(root).split(' install')[0]} "
            f"install -y {ENGINES[name]}"
        )
    got, why = probe()
    if got is None:
        print(f"doctor: the process sandbox cannot isolate runs here: {why}", file=sys.stderr)
        return 1
    print(f"doctor: process sandbox isolation {got['isolation']} (weak: {got['weak']})")
    if not root:
        print(f"doctor: warm fork server: {server_status(args.install)}")
    print(f"doctor: workspace sessions open {got.get('workspace_open', 'cold')}")
    cg = cgroup_describe() if root else "none: unprivileged"
    print(f"doctor: the fork server's memory cgroup (all its runs together): {cg}")
    if "bwrap" in missing:
        print(
            "doctor: full isolation without bubblewrap (unshare fallback, no warm fork "
            f"server); to add it: {manual_command(root)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
