"""The tree the project relies on: one ``tasksieve`` namespace, rooms by kind, one-way imports.

The rules are written in ``docs/design.md`` ("Layout"); this test is what keeps them true:
every project import goes through ``tasksieve.*``; each source folder holds only the rooms
declared below; imports point one way (pipeline -> transforms -> verifiers -> schemas); the
plain algorithms and the flag modules stay free of heavy imports; no import cycle between
modules; no module over ``MAX_LINES`` lines; guests stay self-contained.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.guest import bundle

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("schemas", "verifiers", "transforms", "pipeline")
LAYERS = {"schemas": 0, "verifiers": 1, "transforms": 2, "pipeline": 3}
MAX_LINES = 400

# The rooms of each source folder: sub-packages and top-level modules. A new room is a
# decision: add it here and in docs/design.md together.
ROOMS: dict[str, set[str]] = {
    "schemas": {
        *("arrow", "config_deploy", "export", "records", "repo"),
        *("reward", "strict", "task", "validation"),
    },
    "verifiers": {
        "families",
        "sandbox",
        "service",
        "feedback",
        "http_retry",
        "registry",
        "reliability",
        "remote",
        "retry",
        "rewards",
    },
    "transforms": {
        "algorithms",
        "runtime",
        "ingest",
        "dedup",
        "decontam",
        "reliability",
        "rollouts",
        "samplers",
        "agent",
        "filter",
        "write",
        "reasons",
        "synth",
    },
    "pipeline": {"cli", "flags", "commands", "curate", "eval", "outputs", "train"},
}
# Rooms that must import neither Beam nor anything heavy at their top level.
LIGHT = {
    "transforms/algorithms": {"apache_beam", "torch", "transformers", "pyarrow"},
    "pipeline/flags": {"apache_beam", "torch", "transformers", "pyarrow", "numpy", "pydantic"},
}
# Everything Python in the repository that may import the project.
CODE_DIRS = (*SOURCES, "tests", "benchmarks", "airflow_dags", "tasksieve")

GUESTS = sorted(p for p in (ROOT / "verifiers").rglob("guest/*.py") if p.name != "__init__.py")


def _imports(tree: ast.AST) -> list[tuple[str, int, list[str]]]:
    """(module, level, imported names) of every import statement, nested ones included."""
    found: list[tuple[str, int, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, 0, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level, [a.name for a in node.names]))
    return found


def _source_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return "tasksieve." + ".".join(rel.parts).removesuffix(".__init__")


def _is_module(dotted: str) -> bool:
    """Whether ``tasksieve.a.b`` names a module or package of the checkout."""
    parts = dotted.split(".")[1:]
    if not parts:
        return True
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _project_deps(path: Path) -> set[str]:
    """The project modules ``path`` imports (``from pkg import module`` resolved to the module)."""
    deps: set[str] = set()
    for module, level, names in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if level or not module.startswith("tasksieve."):
            continue
        deps.add(module)
        deps |= {f"{module}.{n}" for n in names if _is_module(f"{module}.{n}")}
    return deps


@pytest.mark.parametrize("folder", CODE_DIRS)
def test_project_imports_go_through_the_tasksieve_namespace(folder: str) -> None:
    top_names = set(SOURCES)
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if folder != "tasksieve" and path.is_relative_to(ROOT / "tasksieve"):
            continue
        for module, level, _ in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if not level and module.split(".")[0] in top_names:
                bad.append(f"{path.relative_to(ROOT)}: import {module}")
    assert not bad, "import the project as tasksieve.<folder>...:\n" + "\n".join(bad)


def test_the_namespace_links_each_source_folder() -> None:
    for name in SOURCES:
        link = ROOT / "tasksieve" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link


@pytest.mark.parametrize("folder", SOURCES)
def test_each_source_folder_holds_only_its_declared_rooms(folder: str) -> None:
    present = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / folder).iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    }
    assert present == ROOMS[folder], (
        f"{folder}/ rooms differ from the declared tree: new {sorted(present - ROOMS[folder])},"
        f" missing {sorted(ROOMS[folder] - present)} (update docs/design.md and ROOMS together)"
    )


@pytest.mark.parametrize("folder", SOURCES)
def test_imports_point_one_way(folder: str) -> None:
    mine = LAYERS[folder]
    for path in _source_files(folder):
        for dep in _project_deps(path):
            top = dep.split(".")[1]
            assert LAYERS.get(top, 0) <= mine, f"{path.relative_to(ROOT)} imports {dep} (upward)"


@pytest.mark.parametrize("folder", ["schemas", "verifiers"])
def test_lower_layers_never_import_beam(folder: str) -> None:
    for path in _source_files(folder):
        tops = {m.split(".")[0] for m, lv, _ in _imports(ast.parse(path.read_text())) if not lv}
        assert "apache_beam" not in tops, f"{path.relative_to(ROOT)} imports apache_beam"


@pytest.mark.parametrize("room", sorted(LIGHT))
def test_light_rooms_import_nothing_heavy_at_top_level(room: str) -> None:
    for path in _source_files(room):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        tops = {m.split(".")[0] for m, lv, _ in _imports(ast.Module(top_level, [])) if not lv}
        heavy = tops & LIGHT[room]
        assert not heavy, f"{path.relative_to(ROOT)} imports {sorted(heavy)} at its top level"


BEAM_ML = "tasksieve.transforms.runtime.beam_ml"


@pytest.mark.parametrize("folder", CODE_DIRS)
def test_beam_inference_is_imported_through_beam_ml(folder: str) -> None:
    """Beam's ``apache_beam.ml`` loads torch unless ``beam_ml`` loads it first (see there)."""
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path.name == "beam_ml.py" or (
            folder != "tasksieve" and path.is_relative_to(ROOT / "tasksieve")
        ):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {m for m, lv, _ in _imports(ast.Module(tree.body, [])) if not lv}
        ml = [
            m for m, lv, _ in _imports(tree) if not lv and (m + ".").startswith("apache_beam.ml.")
        ]
        if ml and BEAM_ML not in top:
            bad.append(f"{path.relative_to(ROOT)}: import {ml[0]}")
    assert not bad, f"import Beam's inference API from {BEAM_ML}:\n" + "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    graph = {_module_name(p): _project_deps(p) for f in SOURCES for p in _source_files(f)}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if dep not in graph:
                continue
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*path, node, dep])
            if dep not in state:
                visit(dep, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_no_import_cycles_between_benchmark_modules() -> None:
    files = sorted((ROOT / "benchmarks").glob("*.py"))
    names = {p.stem for p in files}
    graph: dict[str, set[str]] = {}
    for p in files:
        deps: set[str] = set()
        for module, level, imported in _imports(ast.parse(p.read_text(encoding="utf-8"))):
            if module.startswith("benchmarks."):
                deps.add(module.split(".")[1])
            elif module == "benchmarks" and not level:
                deps |= {n for n in imported if n in names}
        graph[p.stem] = deps - {p.stem}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*path, node, dep])
            if dep not in state and dep in graph:
                visit(dep, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


@pytest.mark.parametrize("folder", SOURCES)
def test_modules_stay_readable_in_one_sitting(folder: str) -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _source_files(folder)
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_families_reach_backends_only_through_the_interface() -> None:
    internals = ("tasksieve.verifiers.sandbox.process", "tasksieve.verifiers.sandbox.docker")
    for path in _source_files("verifiers/families"):
        inner = [m for m in _project_deps(path) if m.startswith(internals)]
        assert not inner, f"{path.relative_to(ROOT)} imports backend internals {inner}"


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
        for module, level, _ in _imports(tree)
        if level or module.split(".")[0] not in allowed
    ]


def test_there_are_guest_programs_in_every_backend_and_family() -> None:
    places = {p.parent.parent.name for p in GUESTS}
    assert {"process", "docker", "sandbox", "python", "sql", "api"} <= places


@pytest.mark.parametrize("path", GUESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_guest_imports_only_stdlib_or_other_guests(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [
        m for m in _foreign(tree) if ".guest." not in m or not m.startswith("tasksieve.verifiers.")
    ]
    assert not bad, f"{path.name} imports {bad}: guests run inside the sandbox, stdlib only"


@pytest.mark.parametrize("path", GUESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_guest_is_self_contained(path: Path) -> None:
    source = bundle(str(path))
    tree = ast.parse(source)
    assert not _foreign(tree), f"bundled {path.name} still imports {_foreign(tree)}"


def _top_level_names(tree: ast.Module) -> list[str]:
    """Names bound at the top level by definitions and assignments (imports left out)."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


@pytest.mark.parametrize("path", GUESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_guest_defines_each_top_level_name_once(path: Path) -> None:
    names = _top_level_names(ast.parse(bundle(str(path))))
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"bundled {path.name} defines {twice} more than once (one namespace)"


@pytest.mark.parametrize("path", GUESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_bundle_inlines_each_guest_module_once(path: Path) -> None:
    marks = [ln for ln in bundle(str(path)).splitlines() if ln.startswith("# --- inlined: ")]
    assert len(marks) == len(set(marks)), f"bundled {path.name} inlines a module twice: {marks}"
