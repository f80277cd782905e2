"""Real wheels rebuilt from this interpreter's installed distributions, for offline pip runs.

``wheelhouse(names, dest)`` writes a ``py3-none-any`` wheel for each named distribution and
everything it requires (markers evaluated, extras left out), so ``pip install --no-index
--find-links dest`` works with no network. Only for pure-Python distributions.
"""

from __future__ import annotations

import importlib.metadata as md
import zipfile
from pathlib import Path

from packaging.requirements import Requirement


def _wheel(dist: md.Distribution, dest: Path) -> None:
    name = str(dist.metadata["Name"]).replace("-", "_")
    base = Path(str(dist.locate_file("")))
    with zipfile.ZipFile(dest / f"{name}-{dist.version}-py3-none-any.whl", "w") as z:
        for f in dist.files or []:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel:
                continue
            if (base / rel).is_file():
                z.write(base / rel, rel)


def wheelhouse(names: list[str], dest: Path) -> Path:
    """Wheels of ``names`` and their dependency closure in ``dest``; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    todo, done = list(names), set()
    while todo:
        name = todo.pop().lower()
        if name in done:
            continue
        done.add(name)
        dist = md.distribution(name)
        _wheel(dist, dest)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return dest
