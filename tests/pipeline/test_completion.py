"""``tasksieve --version`` and ``tasksieve completion bash|zsh|fish``."""

from __future__ import annotations

import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main

SUBCOMMANDS = {"curate", "validate", "verify", "decontaminate", "benchmarks", "dedup-index"}


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def test_version_comes_from_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"tasksieve {version('tasksieve')}\n"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_script_is_valid_bash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tasksieve.bash"
    path.write_text(script("bash", capsys))
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def complete(tmp_path: Path, capsys: pytest.CaptureFixture[str], *words: str) -> set[str]:
    """What bash offers for ``tasksieve WORDS`` (the last word is the one being typed)."""
    path = tmp_path / "tasksieve.bash"
    path.write_text(script("bash", capsys))
    line = " ".join(["tasksieve", *words])
    quoted = " ".join(f"'{w}'" for w in ["tasksieve", *words])
    driver = f"""
source '{path}'
fn=$(complete -p tasksieve | sed -E 's/.*-F ([^ ]+).*/\\1/')
COMP_WORDS=({quoted})
COMP_CWORD={len(words)}
COMP_LINE='{line}'
COMP_POINT=${{#COMP_LINE}}
"$fn" tasksieve '{words[-1]}' '{words[-2] if len(words) > 1 else "tasksieve"}'
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return {w.strip() for w in proc.stdout.splitlines() if w.strip()}


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_subcommands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert complete(tmp_path, capsys, "") >= SUBCOMMANDS
    assert complete(tmp_path, capsys, "ver") == {"verify"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_flags_and_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert complete(tmp_path, capsys, "verify", "--sol") == {"--solution", "--solutions"}
    assert complete(tmp_path, capsys, "validate", "--format", "") == {"text", "json"}


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_name_every_subcommand(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = script(shell, capsys)
    assert all(name in text for name in SUBCOMMANDS)


@pytest.mark.parametrize("shell,check", [("zsh", ["zsh", "-n"]), ("fish", ["fish", "-n"])])
def test_other_shells_parse_when_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shell: str, check: list[str]
) -> None:
    if shutil.which(check[0]) is None:
        pytest.skip(f"{shell} is not installed")
    path = tmp_path / f"tasksieve.{shell}"
    path.write_text(script(shell, capsys))
    proc = subprocess.run([*check, str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_unknown_shell_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["completion", "powershell"])
    assert exc.value.code == 2
