"""Guest programs shared by the backends, and ``bundle``: one self-contained guest source.

A guest program runs inside the sandbox as ``python -I -S -c SOURCE`` (or as a file written
into the scratch dir), so it can import only the standard library. To share code between
guests without copies, a guest may import from another guest module
(``verifiers.<...>.guest.<module>``) with one ``from ... import ...`` statement; ``bundle``
replaces that line by the module's code (minus its docstring and ``from __future__`` line;
one level, no nesting). Nothing else from the project may be imported by a guest;
``tests/verifiers/test_layout.py`` checks every ``guest/`` module and every bundle.
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


@cache
def bundle(path: str) -> str:
    """The source of the guest program at ``path`` with its guest-module imports inlined."""
    text = Path(path).read_text(encoding="utf-8")
    return _SHARED.sub(lambda m: f"# --- inlined: {m.group(2)}\n" + _body(*m.groups()), text)
