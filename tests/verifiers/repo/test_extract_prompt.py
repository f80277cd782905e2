"""A repo task's prompt (statement + file listing) and the diff pulled out of a completion."""

from __future__ import annotations

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.transforms.samplers.prompts import system_instruction
from tasksieve.verifiers.families.repo.prompt import LISTING_KEY, render_prompt
from tasksieve.verifiers.families.repo.verifier import RepoVerifier
from tests.verifiers.repo.repo_fixture import REFERENCE


def test_a_diff_block_is_kept_byte_for_byte() -> None:
    assert REFERENCE.endswith("\n \n def mul(a, b):\n")  # a lone-space context line inside
    for tag in ("diff", "patch", ""):
        text = f"Here is the fix.\n\n```{tag}\n{REFERENCE}```\n\nIt subtracts."
        assert extract_solution(text, "repo") == REFERENCE


def test_the_diff_block_wins_over_other_blocks() -> None:
    text = f"```python\nprint('hi')\n```\n\n```diff\n{REFERENCE}```"
    assert extract_solution(text, "repo") == REFERENCE


def test_a_bare_diff_starts_at_its_header() -> None:
    assert extract_solution(f"Sure, apply this:\n{REFERENCE}", "repo") == REFERENCE
    assert extract_solution("I could not find the bug.", "repo") == ""


def test_prompt_lists_the_files_after_the_gates(
    repo_verifier: RepoVerifier, repo_task: TaskRecord
) -> None:
    assert render_prompt(repo_task) == repo_task.prompt  # no listing before the gates
    listed = repo_verifier.with_listing(repo_task)
    assert listed.metadata[LISTING_KEY] == [
        "README.md",
        "mathlib/__init__.py",
        "mathlib/ops.py",
        "tests/test_ops.py",
    ]
    text = render_prompt(listed)
    assert text.startswith(repo_task.prompt) and "mathlib/ops.py\n" in text
    assert "unified diff" in text and "```diff" in system_instruction("repo")
