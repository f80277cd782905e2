"""Mutants of Python references: every operator, valid and distinct, capped deterministically."""

from __future__ import annotations

import ast

import pytest

from tasksieve.verifiers.families.python.mutation import all_mutants, select

REF = '''"""Module docstring: 1 < 2 stays."""
LIMIT = 10


def score(xs, k):
    """Docstring with 3 > 2 is never mutated."""
    total = 0
    for x in xs:
        if x < k and not x == 0:
            total += x * 2 - 1
    return total > LIMIT
'''


def test_every_operator_applies() -> None:
    ops = {m.operator for m in all_mutants(REF)}
    assert ops == {
        "py.compare_boundary",
        "py.compare_negate",
        "py.arith_swap",
        "py.const_off_by_one",
        "py.return_value",
        "py.drop_statement",
        "py.bool_swap",
    }


def test_mutants_parse_differ_and_change_one_place() -> None:
    ref_tree = ast.dump(ast.parse(REF))
    made = all_mutants(REF)
    assert len({m.solution for m in made}) == len(made)
    for m in made:
        assert ast.dump(ast.parse(m.solution)) != ref_tree
        lines = m.diff(REF).splitlines()
        added = [ln for ln in lines if ln.startswith("+")]
        removed = [ln for ln in lines if ln.startswith("-")]
        assert len(added) == 1 and 1 <= len(removed) <= 3, m.diff(REF)  # the loop is 3 lines


def test_docstrings_and_module_level_code_are_left_alone() -> None:
    for m in all_mutants(REF):
        assert m.solution.splitlines()[:2] == REF.splitlines()[:2]
        assert "3 > 2 is never mutated" in m.solution


def test_non_ascii_text_before_a_node_keeps_offsets_right() -> None:
    ref = "def f(s):\n    t = 'héllo wörld'; return len(s) + 1\n"
    sols = {m.solution for m in all_mutants(ref)}
    assert "def f(s):\n    t = 'héllo wörld'; return len(s) - 1\n" in sols


@pytest.mark.parametrize("ref", ["", "def broken(:\n", "x = 1\n", "print('hi')\n"])
def test_nothing_to_mutate_gives_no_mutant(ref: str) -> None:
    assert all_mutants(ref) == []


def test_selection_is_capped_spread_and_repeatable() -> None:
    made = all_mutants(REF)
    picked = select(made, 7, seed=3)
    assert len(picked) == 7 and len({m.operator for m in picked}) == 7
    assert picked == select(made, 7, seed=3)
    assert select(made, len(made) + 5, seed=0) == made


def test_a_program_is_mutated_at_module_level_only_when_asked() -> None:
    prog = "import sys\n\nn = int(sys.stdin.readline())\nprint(n * 2 + 1)\n"
    assert all_mutants(prog) == []
    made = all_mutants(prog, module_level=True)
    assert {m.operator for m in made} >= {"py.arith_swap", "py.const_off_by_one"}
    assert all(m.solution.startswith("import sys\n") for m in made)


def test_stdin_probes_keep_length_headers() -> None:
    import random

    from tasksieve.verifiers.families.python.probing import derive_stdin, mutate_stdin

    rng = random.Random(0)
    for _ in range(50):
        assert mutate_stdin("3\n5 1 9\n", rng).startswith("3\n")
    made = derive_stdin(["3\n5 1 9\n"], 10, 0)
    assert made and "3\n5 1 9\n" not in made
