"""End a GRPO completion where its answer ends: right after the fenced code block closes.

Every family asks for one fenced block (``transforms/samplers/prompts.py``), and the solution
extractor reads nothing after it. A small chat model writes prose after the closing fence
until the token budget runs out, so without a stop most of a CPU step is spent on text that
cannot change the reward, and completions cut off by the budget often lose the fence itself.

``end_at_fence(model, tokenizer)`` wraps ``model.generate`` (the one instance, not the
class) so each call gets ``FenceEnd``: a logits processor that, once a row's completion holds
two fences (opened and closed), allows that row only the end-of-sequence token. The row then
ends the way a finished answer ends, so TRL's completion mask, ``completions/clipped_ratio``
and the loss see a terminated completion (a stopping criterion would leave the last row to
finish without an EOS, counted as clipped). The curation sampler stops at the same place
(``transforms/samplers/hf.py``), so the pass rates curate measured are those of this policy.

What this does NOT do: apply to vLLM generation (``--use-vllm``: pass a stop string to vLLM
instead), or end an answer that never opens a fence (it runs to ``--max-completion-length``).
"""

from __future__ import annotations

import functools
from typing import Any

FENCE = "```"


class FenceEnd:
    """Logits processor: after a row's second fence, only the EOS token may follow."""

    def __init__(self, tokenizer: Any, prompt_len: int, eos_id: int) -> None:
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.eos_id = eos_id

    def closed(self, input_ids: Any) -> list[bool]:
        """Per row: has its completion so far opened and closed a fence?"""
        texts = self.tokenizer.batch_decode(
            input_ids[:, self.prompt_len :], skip_special_tokens=True
        )
        return [t.count(FENCE) >= 2 for t in texts]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        done = self.closed(input_ids)
        if not any(done):
            return scores
        import torch

        rows = torch.tensor(done, dtype=torch.bool, device=scores.device)
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.eos_id] = 0.0
        return torch.where(rows.unsqueeze(-1), forced, scores)


def end_at_fence(model: Any, tokenizer: Any) -> None:
    """Make every ``model.generate`` call end each row right after its closing fence."""
    eos_id = tokenizer.eos_token_id
    if eos_id is None:
        raise ValueError("the tokenizer has no EOS token: cannot end completions at the fence")
    plain = model.generate

    @functools.wraps(plain)
    def generate(*args: Any, **kwargs: Any) -> Any:
        from transformers import LogitsProcessorList

        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:  # nothing to measure the prompt by: generate as asked
            return plain(*args, **kwargs)
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(FenceEnd(tokenizer, int(ids.shape[1]), int(eos_id)))
        return plain(*args, logits_processor=processors, **kwargs)

    model.generate = generate
