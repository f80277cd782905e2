"""A local Python project as synthesis sees it: its files, its source and test files, its package.

``load_project`` reads a directory (an unpacked source distribution, a checkout) into memory,
leaving out caches, VCS data, build outputs and whatever ``exclude`` globs name, and sorts its
Python files into test files (the ``test_files`` globs of the repo family, so what a solution
may not change) and source files (everything else a mutant may change, ``setup.py`` and
documentation configuration excepted). ``package_info`` reads the name, version and license
from ``PKG-INFO`` or ``pyproject.toml``.

Globs: ``*`` and ``?`` stay inside one path segment, ``**`` spans segments (``tests/**`` is
everything under ``tests/``; ``**/test_*.py`` matches at any depth, the root included).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.parser import HeaderParser
from functools import lru_cache
from pathlib import Path

from tasksieve.schemas.repo import DEFAULT_TEST_FILES

ALWAYS_EXCLUDED: tuple[str, ...] = (
    ".git/**",
    ".hg/**",
    ".github/**",
    ".tox/**",
    ".nox/**",
    "build/**",
    "dist/**",
    "**/__pycache__/**",
    "**/*.pyc",
    "**/*.egg-info/**",
    ".pytest_cache/**",
)
NOT_MUTATED: tuple[str, ...] = ("setup.py", "conftest.py", "**/conftest.py", "docs/**", "doc/**")
LICENSE_NAMES = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE)(\.\w+)?$", re.IGNORECASE)


class ProjectError(Exception):
    """The directory is not a usable Python project; says what is missing."""


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether the relative POSIX ``path`` matches any of the globs (see the module docstring)."""
    return any(_glob_regex(p).match(path) for p in patterns)


@dataclass(frozen=True)
class PackageInfo:
    """Where a project came from, for the tasks' source fields."""

    name: str
    version: str
    license: str
    url: str | None = None


@dataclass
class Project:
    """A project's files in memory, and which Python files are tests and which are source."""

    root: Path
    files: dict[str, bytes]
    test_files: tuple[str, ...] = DEFAULT_TEST_FILES
    info: PackageInfo = field(default_factory=lambda: PackageInfo("unknown", "unknown", "unknown"))

    def python_files(self) -> list[str]:
        return sorted(p for p in self.files if p.endswith(".py"))

    def tests(self) -> list[str]:
        """The Python files the ``test_files`` globs cover."""
        return [p for p in self.python_files() if matches(p, self.test_files)]

    def sources(self) -> list[str]:
        """The Python files a mutant may change (not tests, not packaging or docs)."""
        return [
            p
            for p in self.python_files()
            if not matches(p, self.test_files) and not matches(p, NOT_MUTATED)
        ]

    def size(self) -> int:
        return sum(len(v) for v in self.files.values())


def load_project(
    root: str | Path,
    exclude: Iterable[str] = (),
    test_files: tuple[str, ...] = DEFAULT_TEST_FILES,
    max_bytes: int = 32 * 1024 * 1024,
) -> Project:
    """Read the project at ``root``; raise ``ProjectError`` when it cannot be synthesized from."""
    base = Path(root)
    if not base.is_dir():
        raise ProjectError(f"{base}: not a directory")
    excluded = (*ALWAYS_EXCLUDED, *exclude)
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(base).as_posix()
            if p.is_symlink() or not p.is_file() or matches(rel, excluded):
                continue
            data = p.read_bytes()
            total += len(data)
            if total > max_bytes:
                raise ProjectError(f"{base}: more than {max_bytes} bytes of files (--exclude some)")
            files[rel] = data
    project = Project(base, files, test_files, package_info(base))
    if not project.python_files():
        raise ProjectError(f"{base}: no Python files (is it a Python project?)")
    if not project.tests():
        raise ProjectError(
            f"{base}: no test files (none matches {', '.join(test_files)}); "
            "synthesis needs the project's own test suite"
        )
    if not project.sources():
        raise ProjectError(f"{base}: no Python source files outside the tests to inject bugs in")
    return project


def package_info(root: Path) -> PackageInfo:
    """Name, version and license from ``PKG-INFO`` or ``pyproject.toml`` (``unknown`` if none)."""
    name = version = lic = "unknown"
    url: str | None = None
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        msg = HeaderParser().parsestr(pkg_info.read_text(encoding="utf-8", errors="replace"))
        name = msg.get("Name", name)
        version = msg.get("Version", version)
        lic = _license(msg.get("License-Expression"), msg.get("License"), msg.get_all("Classifier"))
    elif (root / "pyproject.toml").is_file():
        try:
            meta = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            meta = {}
        proj = meta.get("project", {}) if isinstance(meta.get("project"), dict) else {}
        name = str(proj.get("name", name))
        version = str(proj.get("version", version))
        raw = proj.get("license")
        text = raw if isinstance(raw, str) else (raw or {}).get("text")
        lic = _license(text, None, proj.get("classifiers"))
    if name != "unknown" and version != "unknown":
        url = f"https://pypi.org/project/{name}/{version}/"
    return PackageInfo(name, version, lic, url)


def _license(expr: str | None, text: str | None, classifiers: list[str] | None) -> str:
    if expr and expr.strip():
        return expr.strip()
    for c in classifiers or []:
        if c.startswith("License :: OSI Approved :: "):
            return c.rsplit(" :: ", 1)[1].removesuffix(" License").strip() or c
    if text and text.strip() and "\n" not in text.strip() and len(text.strip()) <= 60:
        return text.strip()
    return "unknown"


def license_files(project: Project) -> list[str]:
    """The project's license files at its root (kept in every snapshot)."""
    return sorted(p for p in project.files if "/" not in p and LICENSE_NAMES.match(p))
