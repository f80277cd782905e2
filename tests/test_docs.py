"""The docs stay whole: a short README, links that resolve, reference pages that cover the code.

The strict site build itself (``mkdocs build --strict``: every nav entry, link and anchor of the
site) runs in ``make test`` through the ``docs`` target; these tests need no build. They check
what the build does not see: README.md (outside the site), links from any page to files
outside ``docs/``, that the generated reference pages cover every subcommand and reason, and
that the design page lists exactly the rooms ``tests/test_layout.py`` declares. They do NOT
check that the prose is true.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest

from tasksieve.pipeline.cli import build_parser
from tasksieve.transforms import reasons
from tests.test_layout import ROOMS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 250
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\]\n]|\n(?!\n))*?\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative_links(markdown: str) -> list[str]:
    """Link targets in ``markdown`` that point into the repository (not in code, not URLs)."""
    text = _CODE.sub("", _FENCE.sub("", markdown))
    targets = [m.group(1) for m in _LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


def slugify(title: str) -> str:
    """A heading's id as Python-Markdown's ``toc`` extension (MkDocs' default) makes it."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(markdown: str) -> set[str]:
    """The heading ids MkDocs gives a page (Python-Markdown's toc slugs, code marks removed)."""
    text = _FENCE.sub("", markdown)
    titles = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M)
    return {slugify(re.sub(r"[`*]", "", t)) for t in titles}


def _resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return ((page.parent / path).resolve() if path else page), anchor


def _generated() -> set[Path]:
    return {(DOCS / p).resolve() for p in _hooks().GENERATED}


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("see [a](a.md) and [b](sub/b.md#x)", ["a.md", "sub/b.md#x"]),
        ("![pic](report.png)", ["report.png"]),
        ("[web](https://example.com) [mail](mailto:x@example.com)", []),
        ("`[not](a-link.md)` in code", []),
        ("```\n[not](in-a-fence.md)\n```\n[yes](y.md)", ["y.md"]),
        ("[spans\ntwo lines](two.md)", ["two.md"]),
        ("[anchor only](#here)", ["#here"]),
        ('[titled](t.md "a title")', ["t.md"]),
    ],
)
def test_relative_links_are_found_outside_code_only(markdown: str, expected: list[str]) -> None:
    assert relative_links(markdown) == expected


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        (
            "## Remote inputs and outputs (`gs://`, `s3://`, `hdfs://`)",
            "remote-inputs-and-outputs-gs-s3-hdfs",
        ),
        ("## Multi-turn episodes (`--turns T`)", "multi-turn-episodes-turns-t"),
        ("# Outputs", "outputs"),
    ],
)
def test_anchors_follow_the_toc_slugs(heading: str, slug: str) -> None:
    assert slug in anchors(heading + "\n")


def test_readme_is_a_short_front_page() -> None:
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    generated = _generated()
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path, anchor = _resolve(page, target)
        if path in generated:
            continue
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif (
            anchor
            and path.suffix == ".md"
            and anchor not in anchors(path.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(" ".join(("tasksieve", *path, name)))
                found += _commands(sub, (*path, name))
    return found


def test_cli_reference_lists_every_subcommand() -> None:
    page = _hooks().cli_reference()
    commands = _commands(build_parser())
    assert {"tasksieve curate", "tasksieve dedup-index compact"} <= set(commands)
    missing = [c for c in commands if f"\n## {c}\n" not in page]
    assert not missing, f"the CLI reference lacks {missing}"


def test_cli_reference_holds_each_commands_own_help() -> None:
    page = _hooks().cli_reference()
    assert "--dedup-index-lookup {worker,shuffle}" in page
    assert "--solutions" in page


def test_reasons_reference_lists_every_registered_code() -> None:
    page = _hooks().reasons_reference()
    missing = [code for code in sorted(reasons.REASONS) if f"`{code}`" not in page]
    assert not missing, f"the reasons page lacks {missing}"


def test_every_fixed_reason_has_a_stage_and_meaning() -> None:
    hooks = _hooks()
    fixed = reasons.REASONS - reasons.ERRORS
    assert set(hooks.REASON_DOCS) == fixed, "docs/hooks.py REASON_DOCS and REASONS differ"
    assert {stage for stage, _ in hooks.REASON_DOCS.values()} <= set(reasons.STAGES)
    assert set(hooks.FAMILY_DOCS) == set(reasons.FAMILIES)


def _design_rooms(folder: str) -> set[str]:
    """The rooms the design page's table for ``folder`` lists (``| `name` |`` or ``name/``)."""
    text = (DOCS / "design.md").read_text(encoding="utf-8")
    head = f"### `{folder}/`"
    assert head in text, f"docs/design.md has no section {head}"
    section = text.split(head, 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)/?` \|", section, re.M))


@pytest.mark.parametrize("folder", sorted(ROOMS))
def test_design_describes_exactly_the_declared_rooms(folder: str) -> None:
    listed = _design_rooms(folder)
    assert listed == ROOMS[folder], (
        f"docs/design.md lists {sorted(listed - ROOMS[folder])} that ROOMS lacks and lacks"
        f" {sorted(ROOMS[folder] - listed)} (tests/test_layout.py ROOMS and the page go together)"
    )
