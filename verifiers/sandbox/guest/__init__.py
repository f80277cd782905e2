"""Guest programs shared by the backends, and ``bundle``: one self-contained guest source.

A guest program runs inside the sandbox as ``python -I -S -c SOURCE`` (or as a file written
into the scratch dir), so it can import only the standard library. To share code between
guests without copies, a guest may import from another guest module
(``verifiers.<...>.guest.<module>``) with one ``from ... import ...`` statement; ``bundle``
replaces that line by the module's code (minus its docstring and ``from __future__`` line).
Inlining nests: an inlined module's own guest imports are inlined in turn, each module once,
at its first import, so a shared module may build on another. Every inlined module lands in
one namespace, so two modules of one bundle must not define the same top-level name.
Nothing else from the project may be imported by a guest; ``tests/test_layout.py`` checks
every ``guest/`` module and every bundle.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

_SHARED = re.compile(
    r"^from tasksieve\.(verifiers(?:\.\w+)*\.guest)\.(\w+) import (?:\([\w,\s]+\)|[\w, ]+)\n", re.M
)
_ROOT = Path(__file__).resolve().parents[3]  # the directory that holds the verifiers folder
_FUTURE = "from __future__ import annotations\n"


def _body(package: str, module: str) -> str:
    """The code of guest module ``package.module`` without its docstring and future import."""
    text = (_ROOT.joinpath(*package.split(".")) / f"{module}.py").read_text(encoding="utf-8")
    first = ast.parse(text).body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        text = "\n".join(text.splitlines()[first.end_lineno or 0 :]) + "\n"
    return text.replace(_FUTURE, "", 1)


def _inline(text: str, done: set[tuple[str, str]]) -> str:
    """``text`` with each guest import replaced by that module's (inlined) code, once."""

    def one(m: re.Match[str]) -> str:
        key = (m.group(1), m.group(2))
        if key in done:
            return f"# --- inlined above: {key[1]}\n"
        done.add(key)
        return f"# --- inlined: {key[1]}\n" + _inline(_body(*key), done)

    return _SHARED.sub(one, text)


@cache
def bundle(path: str) -> str:
    """The source of the guest program at ``path`` with its guest-module imports inlined."""
    return _inline(Path(path).read_text(encoding="utf-8"), set())
