"""How the ``process`` sandbox picks its isolation method: probe each in order, cache successes.

``select`` tries the methods an ``isolation`` option allows (``METHODS``) and returns the
first whose probe works. ``probe`` runs one real run of a method (through the fork server when
one is up, else cold, skipped when ``probecache`` remembers a success this boot) and says why
it failed (``sbx``: the ``ProcessSandbox`` being set up). It does NOT prove more than that
one run worked: every later run applies its method's namespaces itself and fails loudly if
it cannot.
"""

from __future__ import annotations

from typing import Any

from tasksieve.verifiers.sandbox.base import Limits, SandboxUnavailable
from tasksieve.verifiers.sandbox.process.binds import under
from tasksieve.verifiers.sandbox.process.probecache import known_good, probe_key, remember
from tasksieve.verifiers.sandbox.process.runs import WORKDIR

METHODS = {  # the isolation option -> the methods tried, in order
    "auto": ["bwrap", "unshare-mount"],
    "bwrap": ["bwrap"],
    "unshare": ["unshare-mount"],
    "none": ["none"],
}
NAMESPACED = ("bwrap", "unshare-mount")


def select(sbx: Any, isolation: str) -> str:
    """The first method of ``isolation`` whose probe works (``none`` only when weak isolation is
    allowed); raises ``SandboxUnavailable`` saying why each failed."""
    reasons: list[str] = []
    for method in METHODS[isolation]:
        why = sbx._probe(method)
        if why is None:
            return method
        reasons.append(f"{method}: {why}")
    if isolation == "auto" and sbx.allow_weak_isolation:
        return "none"
    raise SandboxUnavailable(
        "no namespace isolation works here (" + "; ".join(reasons) + "). Install bubblewrap "
        "(or util-linux unshare and setpriv) and allow user namespaces, or accept rlimits "
        "only, on the host's filesystem, with --allow-weak-isolation "
        "(allow_weak_isolation=True)."
    )


def probe(sbx: Any, method: str) -> str | None:
    """None when ``method`` runs a probe here (or a record says it did this boot), else why
    not; sets ``sbx.method`` to it."""
    if method == "bwrap" and not sbx.tools.bwrap:
        return "bwrap not installed"
    if method == "unshare-mount" and not (sbx.tools.unshare and sbx.tools.pdeathsig):
        return "unshare or setpriv not installed"
    hidden = under(sbx._plan, WORKDIR)
    if method in NAMESPACED and hidden:
        return (
            f"{hidden[0]} lies under {WORKDIR}, which every run replaces by its private "
            "scratch: use an interpreter installed elsewhere (python=...)"
        )
    sbx.method = method
    key = None
    if sbx._server is None and sbx._probe_cache and method in NAMESPACED:
        t = sbx.tools
        programs = [t.bwrap] if method == "bwrap" else [t.unshare, t.pdeathsig, t.prlimit]
        key = probe_key(method, [*programs, t.setpriv], sbx.python, sbx._binds, sbx._seccomp)
        if known_good(key):
            return None
    ex = sbx.run(
        {"probe.txt": "ok"},
        [sbx.python, "-I", "-S", "-c", "print(open('probe.txt').read())"],
        Limits(wall_s=20, cpu_s=10),
    )
    if ex.stdout.strip() == b"ok" and ex.exit_code == 0:
        remember(key, method)
        return None
    return (ex.infra_error or ex.stderr.decode(errors="replace").strip() or "failed")[:300]
