"""The layout rules the tree relies on: guests stay self-contained, imports point one way."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from verifiers.sandbox.guest import bundle

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "verifiers", "transforms", "pipeline")
GUESTS = sorted(p for p in (ROOT / "verifiers").rglob("guest/*.py") if p.name != "__init__.py")
MAX_LINES = 500


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    """(module, level) of every import statement in ``tree``, nested ones included."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
    return found


def _declared(tree: ast.Module) -> set[str]:
    """The third-party modules a guest declares in ``GUEST_REQUIRES`` (the sandbox has them)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "GUEST_REQUIRES" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def _foreign(tree: ast.Module) -> list[str]:
    """Imports that are neither the standard library, ``__future__`` nor declared."""
    allowed = set(sys.stdlib_module_names) | {"__future__"} | _declared(tree)
    return [
        "." * level + module
        for module, level in _imports(tree)
        if level or module.split(".")[0] not in allowed
    ]


def _py_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_there_are_guest_programs_in_every_backend_and_family() -> None:
    places = {p.parent.parent.name for p in GUESTS}
    assert {"process", "docker", "sandbox", "python", "sql", "api"} <= places


@pytest.mark.parametrize("path", GUESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_guest_imports_only_stdlib_or_other_guests(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [m for m in _foreign(tree) if ".guest." not in m or not m.startswith("verifiers.")]
    assert not bad, f"{path.name} imports {bad}: guests run inside the sandbox, stdlib only"


@pytest.mark.parametrize("path", GUESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_guest_is_self_contained(path: Path) -> None:
    source = bundle(str(path))
    tree = ast.parse(source)
    assert not _foreign(tree), f"bundled {path.name} still imports {_foreign(tree)}"


@pytest.mark.parametrize("package", ["verifiers", "schemas"])
def test_lower_layers_never_import_beam_or_upper_layers(package: str) -> None:
    banned = {"apache_beam", "transforms", "pipeline"} | (
        {"verifiers"} if package == "schemas" else set()
    )
    for path in _py_files(package):
        tops = {m.split(".")[0] for m, level in _imports(ast.parse(path.read_text())) if not level}
        assert not tops & banned, f"{path.relative_to(ROOT)} imports {sorted(tops & banned)}"


def test_transforms_never_import_pipeline() -> None:
    for path in _py_files("transforms"):
        tops = {m.split(".")[0] for m, level in _imports(ast.parse(path.read_text())) if not level}
        assert "pipeline" not in tops, f"{path.relative_to(ROOT)} imports pipeline"


def test_families_reach_backends_only_through_the_interface() -> None:
    for path in _py_files("verifiers/families"):
        mods = [m for m, _ in _imports(ast.parse(path.read_text()))]
        inner = [
            m
            for m in mods
            if m.startswith(("verifiers.sandbox.process", "verifiers.sandbox.docker"))
        ]
        assert not inner, f"{path.relative_to(ROOT)} imports backend internals {inner}"


def _module_graph(package: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _py_files(package):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps = set()
        for module, level in _imports(ast.parse(path.read_text())):
            if not level and module.startswith(package + "."):
                deps.add(module)
        graph[name] = deps
    return graph


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_between_modules(package: str) -> None:
    graph = _module_graph(package)
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in graph.get(node, ()):
            if dep not in graph:
                continue
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*path, node, dep])
            if dep not in state:
                visit(dep, [*path, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


@pytest.mark.parametrize("package", PACKAGES)
def test_modules_stay_readable_in_one_sitting(package: str) -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _py_files(package)
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"
