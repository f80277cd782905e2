"""The built wheel installs one package, ``tasksieve``, and lives beside PyPI's ``verifiers``.

The wheel is built from this checkout and installed into a fresh virtualenv together with the
PyPI project ``verifiers`` (an RL-environment library whose top-level name the source folder
``verifiers/`` would have taken). The new environment reuses the test environment's installed
dependencies through a path file, so only ``verifiers`` and its own dependencies are downloaded.
Then a fresh interpreter, started outside the checkout, imports both and the installed
``tasksieve`` command verifies a solution in the sandbox (which reads its guest programs from the
installed package, not from the checkout).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    # no PYTHONPATH: the new environment must find tasksieve in its own site-packages only
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    done = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), "."], ROOT
    )
    assert done.returncode == 0, done.stderr
    (found,) = dist.glob("tasksieve-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = tmp_path_factory.mktemp("venv")
    assert _run([sys.executable, "-m", "venv", str(env)], env).returncode == 0
    python = env / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env
    )
    deps = sysconfig.get_paths()[
        "purelib"
    ]  # this environment's packages, appended after the venv's
    Path(purelib.stdout.strip(), "test-deps.pth").write_text(deps + "\n")
    # forced: the checkout's own editable install is visible through the path file
    argv = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall"]
    done = _run([*argv, str(wheel)], env)
    assert done.returncode == 0, done.stderr
    done = _run([str(python), "-m", "pip", "install", "-q", "verifiers"], env, timeout=900)
    if done.returncode != 0:
        pytest.skip(f"PyPI's verifiers could not be installed here: {done.stderr.strip()[-300:]}")
    return env


def test_wheel_holds_only_the_tasksieve_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        tops = {
            n.split("/")[0] for n in zf.namelist() if not n.split("/")[0].endswith(".dist-info")
        }
        top_level = next(n for n in zf.namelist() if n.endswith("top_level.txt"))
        declared = zf.read(top_level).decode().split()
        names = zf.namelist()
    assert tops == {"tasksieve"}
    assert declared == ["tasksieve"]
    assert "tasksieve/schemas/task.schema.json" in names
    assert "tasksieve/verifiers/sandbox/process/guest/forkserver.py" in names


def test_both_packages_import_side_by_side(venv: Path, tmp_path: Path) -> None:
    code = (
        "import verifiers, tasksieve.verifiers.registry as r, tasksieve.pipeline.cli\n"
        "print(verifiers.__file__); print(r.__file__)\n"
    )
    done = _run([str(venv / "bin" / "python"), "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    pypi, ours = done.stdout.split()
    assert Path(pypi).parent.name == "verifiers" and "tasksieve" not in Path(pypi).parts
    assert Path(ours).parts[-3:] == ("tasksieve", "verifiers", "registry.py")
    assert str(ROOT) not in ours


def test_installed_command_verifies_in_the_sandbox(venv: Path, tmp_path: Path) -> None:
    solutions = ROOT / "examples" / "solutions"
    done = _run(
        [
            str(venv / "bin" / "tasksieve"),
            "verify",
            "--task",
            str(solutions / "add.task.json"),
            "--solution",
            str(solutions / "add_good.py"),
            "--format",
            "text",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": code.add: pass " in done.stdout, done.stdout
