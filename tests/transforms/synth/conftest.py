"""A tiny Python project with its own tests, written into a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

CALC = '''\
"""Two small functions."""


def clamp(x, low, high):
    if x < low:
        return low
    if x > high:
        return high
    return x


def mean(values):
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / len(values)
'''

TESTS = """\
import pytest

from mini.calc import clamp, mean


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_low():
    assert clamp(-3, 0, 10) == 0


def test_clamp_high():
    assert clamp(12, 0, 10) == 10


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])
"""


def write_project(root: Path, tests: str = TESTS) -> Path:
    (root / "mini").mkdir(parents=True)
    (root / "mini" / "__init__.py").write_text("")
    (root / "mini" / "calc.py").write_text(CALC)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(tests)
    (root / "LICENSE").write_text("MIT License\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "mini"\nversion = "0.1"\nlicense = {text = "MIT"}\n'
    )
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "mini-0.1")
