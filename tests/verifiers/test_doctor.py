"""The system check behind ``make setup``: what it reports, installs and prints.

The probe is a real sandbox run; missing programs are simulated through PATH (the sandbox
and the check look them up there). Installing is tested as the decision of what to run, not
by running apt-get.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tasksieve.verifiers.sandbox.process import doctor
from tasksieve.verifiers.sandbox.process.tools import HostTools


@pytest.fixture
def only_tools(tmp_path, monkeypatch):
    """Put only the named programs (symlinked from the real PATH) on PATH."""

    def keep(*tools: str) -> None:
        for tool in tools:
            real = shutil.which(tool)
            if real is None:
                pytest.skip(f"{tool} is not installed here")
            os.symlink(real, tmp_path / tool)
        monkeypatch.setenv("PATH", str(tmp_path))

    return keep


def test_without_bubblewrap_it_passes_on_the_fallback_and_names_the_command(only_tools, capsys):
    only_tools("unshare", "setpriv")
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert "bwrap not found (package bubblewrap)" in out
    assert "isolation unshare-mount (weak: False)" in out
    assert "install" in out.splitlines()[-1] and "bubblewrap" in out.splitlines()[-1]


def test_with_no_namespace_tool_it_fails_and_says_why(only_tools, capsys):
    only_tools()
    assert doctor.main([]) == 1
    err = capsys.readouterr().err
    assert "cannot isolate runs here" in err and "Install bubblewrap" in err


def test_with_bubblewrap_it_reports_bwrap(capsys):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed here")
    assert doctor.main([]) == 0
    assert "isolation bwrap (weak: False)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("root", "sudo_ok", "prefix"),
    [(True, False, []), (False, True, ["sudo", "-n"]), (True, True, [])],
)
def test_install_runs_apt_get_without_a_prompt(monkeypatch, root, sudo_ok, prefix):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: f"/usr/bin/{name}")
    steps = doctor.install_argv(root, sudo_ok)
    assert steps is not None
    assert steps[0] == [*prefix, "apt-get", "update", "-qq"]
    assert steps[1][: len(prefix) + 3] == [*prefix, "apt-get", "install", "-y"]
    assert steps[1][-1] == "bubblewrap"


@pytest.mark.parametrize("apt", [True, False])
def test_install_gives_up_when_it_would_prompt_or_has_no_apt(monkeypatch, apt):
    monkeypatch.setattr(doctor.shutil, "which", lambda n: f"/usr/bin/{n}" if apt else None)
    assert doctor.install_argv(root=apt is False, sudo_without_prompt=False) is None


@pytest.mark.parametrize(("root", "start"), [(True, "apt-get install"), (False, "sudo apt-get")])
def test_manual_command_is_one_line_for_this_machine(monkeypatch, root, start):
    apt_only = {"apt-get": "/usr/bin/apt-get"}
    monkeypatch.setattr(doctor.shutil, "which", apt_only.get)
    assert doctor.manual_command(root).startswith(start)


def test_missing_programs_names_setpriv_once():
    tools = HostTools(bwrap=None, unshare="/u", pdeathsig=None, prlimit="/p", setpriv=None)
    assert doctor.missing_programs(tools) == ["bwrap", "setpriv"]


@pytest.mark.parametrize(
    ("why", "fix"),
    [
        ("needs newuidmap and newgidmap (Debian package uidmap)", "install -y uidmap"),
        ("needs subordinate uids and gids for uid 7 in /etc/subuid", "usermod --add-subuids"),
    ],
)
def test_unprivileged_server_status_names_the_fix(monkeypatch, why, fix):
    from tasksieve.verifiers.sandbox.process import userns

    monkeypatch.setattr(userns, "server_prefix", lambda root, unshare: (None, why))
    monkeypatch.setattr(doctor, "_install", lambda root, packages=(): False)
    said = doctor.server_status(install=True)
    assert said.startswith("not available (" + why) and fix in said


def test_unprivileged_server_status_when_it_can_start(monkeypatch):
    from tasksieve.verifiers.sandbox.process import userns

    monkeypatch.setattr(userns, "server_prefix", lambda root, unshare: (["unshare", "--"], ""))
    assert "user namespace with subordinate uids" in doctor.server_status(install=False)


def test_install_as_root_adds_uidmap_for_other_users(monkeypatch, capsys):
    if os.geteuid() != 0:
        pytest.skip("the root branch")
    real = shutil.which
    monkeypatch.setattr(
        doctor.shutil, "which", lambda n, **kw: None if n == "newuidmap" else real(n, **kw)
    )
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(
        doctor, "_install", lambda root, packages=("bubblewrap",): asked.append(packages) or True
    )
    monkeypatch.setattr(doctor, "missing_engines", lambda: [])
    monkeypatch.setattr(doctor, "probe", lambda: ({"isolation": "bwrap", "weak": False}, ""))
    assert doctor.main(["--install"]) == 0
    assert ("uidmap",) in asked and "uidmap installed" in capsys.readouterr().out
