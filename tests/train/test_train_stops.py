"""Ending GRPO completions at the closing fence: the bundled model's tokenizer and model."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tasksieve.pipeline.train.stops import FenceEnd, end_at_fence  # noqa: E402


@pytest.fixture(scope="module")
def bundled() -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasksieve.transforms.samplers.model_cache import bundled_gguf, ensure_default_model

    try:
        bundled_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    path = ensure_default_model()
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)


def _ids(tokenizer: Any, prompt: str, completions: list[str]) -> Any:
    """Rows of prompt + completion tokens, the completions padded on the right to one length."""
    head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    rows = [head + tokenizer(c, add_special_tokens=False)["input_ids"] for c in completions]
    width = max(len(r) for r in rows)
    pad = tokenizer.eos_token_id
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows]), len(head)


def test_only_rows_whose_fence_closed_are_forced_to_end(bundled: tuple[Any, Any]) -> None:
    tokenizer, _ = bundled
    ids, head = _ids(
        tokenizer,
        "Reply in ```python fences.\n",  # a fence in the prompt does not count
        ["```python\ndef f():\n    return 1\n```", "```python\ndef f():\n", "Sure, here"],
    )
    scores = torch.zeros(3, len(tokenizer))
    out = FenceEnd(tokenizer, head, tokenizer.eos_token_id)(ids, scores)
    eos = tokenizer.eos_token_id
    assert out[0].argmax().item() == eos and torch.isinf(out[0]).sum() == len(tokenizer) - 1
    assert torch.equal(out[1], scores[1]) and torch.equal(out[2], scores[2])


@pytest.mark.slow
def test_generation_ends_right_after_the_closing_fence(bundled: tuple[Any, Any]) -> None:
    """Greedy answers to one prompt with and without the stop: without it the model goes on
    with prose after the fence; with it the answer is the same up to the fence, then EOS."""
    tokenizer, model = bundled
    enc = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "Reply with the code in one ```python code block."},
            {"role": "user", "content": "Write a Python function add(a, b) returning a + b."},
        ],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    n = enc["input_ids"].shape[1]

    def answer() -> str:
        out = model.generate(**enc, max_new_tokens=96, do_sample=False)
        return str(tokenizer.decode(out[0, n:], skip_special_tokens=False))

    plain = answer()
    first, fence, rest = plain.partition("```")
    code, close, after = rest.partition("```")
    assert fence and close, f"the greedy answer has no closed fence: {plain!r}"
    assert after.strip(), "nothing after the fence: this prompt cannot show the stop"
    end_at_fence(model, tokenizer)
    try:
        stopped = answer()
    finally:
        del model.generate  # back to the class's method
    assert stopped == first + fence + code + close + tokenizer.eos_token
