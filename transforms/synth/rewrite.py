"""Optional: a sampler rewrites each synthesized statement as the issue a user would file.

The model sees only the evidence-based statement (failing tests, messages, test-side
tracebacks), never the patch, and is asked for the issue text in one fenced block. A rewrite
is used when it is at least ``min_chars`` long, shows no diff, and repeats none of the lines
the reference patch removes (the injected bug); otherwise the task keeps its evidence-based
statement. Either way ``metadata.synth.statement`` says which (``evidence`` or ``rewritten by
<model>``, or why a rewrite was refused), and a rewritten task keeps the original statement in
``metadata.synth.evidence_statement``.

It does NOT check that the rewrite is faithful to the evidence (a model can describe the
wrong behaviour); the repo family's gates still judge the task by its tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.samplers.config import SamplerConfig, SampleRequest
from tasksieve.transforms.samplers.extract import fenced_blocks

PROMPT = """\
Below is a report of tests of the Python package {package} that fail after a recent change.
Rewrite it as the issue a user of the package would file: say which behaviour is wrong and
show one failing example taken from the report. Do not guess at the cause or at a fix.
Reply with the issue text only, in one fenced code block.

{statement}"""
BATCH = 8


def _removed_lines(patch: str) -> list[str]:
    """The lines a reference patch removes from the snapshot (the injected bug's lines)."""
    return [
        ln[1:].strip()
        for ln in patch.splitlines()
        if ln.startswith("-") and not ln.startswith("---") and len(ln[1:].strip()) > 3
    ]


def refusal(task: TaskRecord, text: str, min_chars: int = 40) -> str:
    """Why ``text`` may not replace ``task``'s statement ("" when it may)."""
    if len(text.strip()) < min_chars:
        return "too short"
    if "\n@@ " in text or "\n--- a/" in text or "\n+++ b/" in text:
        return "shows a diff"
    shown = {ln.strip() for ln in text.splitlines()}
    if any(line in shown for line in _removed_lines(task.reference_solution)):
        return "repeats the injected bug"
    return ""


def _body(completion: str) -> str:
    blocks = fenced_blocks(completion)
    return (blocks[0].text if blocks else completion).strip()


def rewrite_statements(
    tasks: Sequence[TaskRecord], cfg: SamplerConfig, min_chars: int = 40
) -> tuple[list[TaskRecord], int]:
    """``tasks`` with statements rewritten where the sampler's answer passes ``refusal``;
    also the number rewritten."""
    from tasksieve.transforms.samplers import make_model_handler, model_id

    handler = make_model_handler(cfg)
    model = handler.load_model()
    name = model_id(cfg)
    out: list[TaskRecord] = []
    done = 0
    for start in range(0, len(tasks), BATCH):
        chunk = list(tasks[start : start + BATCH])
        requests = [
            SampleRequest(t.id, "rewrite", PROMPT.format(package=_package(t), statement=t.prompt))
            for t in chunk
        ]
        answers = {s.task_id: s for s in handler.run_inference(requests, model)}
        for t in chunk:
            got = answers.get(t.id)
            text = _body(got.completions[0]) if got and got.completions and not got.error else ""
            why = refusal(t, text, min_chars) if text else "no answer"
            raw = t.metadata.get("synth")
            synth: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
            if why:
                synth["statement"] = f"evidence (rewrite by {name} refused: {why})"
                out.append(t.model_copy(update={"metadata": {**t.metadata, "synth": synth}}))
                continue
            synth |= {"statement": f"rewritten by {name}", "evidence_statement": t.prompt}
            meta: dict[str, Any] = {**t.metadata, "synth": synth}
            out.append(t.model_copy(update={"prompt": text + "\n", "metadata": meta}))
            done += 1
    return out, done


def _package(t: TaskRecord) -> str:
    pkg = t.metadata.get("package")
    return str(pkg.get("name", "?")) if isinstance(pkg, dict) else "?"
