"""The transformers sampler's own decode loop: one prefill per prompt, finished rows dropped.

``model.generate`` runs every row of a batch until the last one ends, and computes each
task's prompt K times (one row per sample). On the bundled model's demo tasks most rows end
at their closed code fence well before the longest, so most of a batch's decode work went to
rows that were already done, and prefill of the K copies of a prompt was the largest single
cost for the repository tasks' long prompts. This loop:

- prefills each prompt once, on its own (no padding), then lays the prompts' key/value
  caches side by side, left-padded to the longest, and repeats each K times: the same
  cache a left-padded batch of K copies would hold, at 1/K of the work and no padding;
- decodes all rows together, one token per row per step, with positions counted from each
  row's first real token (as ``generate`` does for left padding);
- drops a row from the batch (its cache rows, mask and generator) the step it ends: at an
  end token, at the closed fence (``stop_after_code``), or at ``max_new_tokens``.

Each row keeps its own seeded generator and draws one number per step while it is alive, so a
row's tokens do not depend on the other rows: the same as ``generate`` with the same logits
processor, up to float rounding of a different batch shape (a near-tie can flip, rarely).
It needs a causal LM whose forward takes ``past_key_values``, ``attention_mask``,
``position_ids`` and ``cache_position`` with a ``DynamicCache``, which every decoder-only
model in transformers does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

FENCE = "```"


@dataclass
class Row:
    """One sample being generated: its tokens so far and whether (and why) it ended."""

    tokens: list[int]
    done: bool = False


def backtick_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of the tokens whose text holds a backtick: only they can close a fence."""
    return frozenset(
        i
        for piece, i in tokenizer.get_vocab().items()
        if "`" in tokenizer.convert_tokens_to_string([piece])
    )


def fence_closed(tokenizer: Any, tokens: list[int]) -> bool:
    """The row's text has opened and closed a fenced block (two fences)."""
    return tokenizer.decode(tokens, skip_special_tokens=True).count(FENCE) >= 2


def cache_kwarg(model: Any) -> str:
    """The forward's name for the cache: ``cache`` (transformers 5.24 on; ``past_key_values``
    is deprecated there) or ``past_key_values`` (models that have not been renamed)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _growing_layer() -> type:
    """A layer cache that writes each step in place into a buffer with room to spare.

    transformers' ``DynamicLayer`` concatenates every step, copying the layer's whole cache:
    with long prompts and many rows that copy was a quarter of the decode time. This one
    keeps ``keys``/``values`` as views of the written part of a larger buffer, grown by
    doubling when full; dropping rows indexes the buffer once.
    """
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def __init__(self, room: int) -> None:
            super().__init__()
            self.room = room
            self.size = 0
            self.buf_k: Any = None
            self.buf_v: Any = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            n = key_states.shape[-2]
            if self.buf_k is None:
                self.device = key_states.device
                self.is_initialized = True
                self._alloc(key_states, n + self.room)
            elif self.size + n > self.buf_k.shape[-2]:
                self._alloc(key_states, 2 * (self.size + n))
            self.buf_k[:, :, self.size : self.size + n] = key_states
            self.buf_v[:, :, self.size : self.size + n] = value_states
            self.size += n
            self._views()
            return self.keys, self.values

        def _alloc(self, like: Any, capacity: int) -> None:
            shape = (like.shape[0], like.shape[1], capacity, like.shape[3])
            k, v = like.new_empty(shape), like.new_empty(shape)
            if self.buf_k is not None:
                k[:, :, : self.size] = self.buf_k[:, :, : self.size]
                v[:, :, : self.size] = self.buf_v[:, :, : self.size]
            self.buf_k, self.buf_v = k, v

        def _views(self) -> None:
            self.keys = self.buf_k[:, :, : self.size]
            self.values = self.buf_v[:, :, : self.size]

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.buf_k is not None:
                self.buf_k = self.buf_k.repeat_interleave(repeats, dim=0)
                self.buf_v = self.buf_v.repeat_interleave(repeats, dim=0)
                self._views()

        def batch_select_indices(self, indices: Any) -> None:
            if self.buf_k is not None:
                self.buf_k = self.buf_k[indices]
                self.buf_v = self.buf_v[indices]
                self._views()

    return GrowingLayer


def _prefill(
    model: Any, prompts: Sequence[list[int]], room: int, name: str
) -> tuple[Any, Any, Any]:
    """Each prompt run once on its own; their caches side by side, left-padded to the longest.

    Returns (cache, attention mask, last-position logits), one row per prompt.
    """
    import torch
    from transformers import DynamicCache
    from transformers.cache_utils import Cache

    longest = max(len(p) for p in prompts)
    kv: list[list[tuple[Any, Any]]] = []  # per prompt, per layer: (keys, values)
    logits = []
    for ids in prompts:
        cache = DynamicCache(config=model.config)
        out = model(
            input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1, **{name: cache}
        )
        layer_caches: list[Any] = list(cache.layers)
        kv.append([(c.keys, c.values) for c in layer_caches])
        logits.append(out.logits[:, -1, :])
    growing = _growing_layer()
    merged = Cache(layers=[growing(room) for _ in kv[0]])
    for layer, (k0, v0) in enumerate(kv[0]):
        shape = (len(prompts), k0.shape[1], longest, k0.shape[3])
        keys, values = k0.new_zeros(shape), v0.new_zeros(shape)
        for row, per_layer in enumerate(kv):
            k, v = per_layer[layer]
            keys[row, :, longest - k.shape[2] :] = k[0]
            values[row, :, longest - v.shape[2] :] = v[0]
        merged.update(keys, values, layer)
    mask = torch.zeros((len(prompts), longest), dtype=torch.long)
    for row, ids in enumerate(prompts):
        mask[row, longest - len(ids) :] = 1
    return merged, mask, torch.cat(logits, dim=0)


def decode(
    model: Any,
    prompts: Sequence[list[int]],
    k: int,
    choose: Callable[[Any], Any],
    select: Callable[[list[int]], None],
    *,
    max_new_tokens: int,
    eos_ids: set[int],
    ends: Callable[[list[int], int], bool] | None = None,
) -> list[list[int]]:
    """K continuations of each prompt, rows in prompt order then sample order.

    ``choose(logits)`` picks one token per live row; ``select(kept)`` tells the chooser which
    of its rows are still alive (indices into the rows it saw last). ``ends(tokens, last)``
    says whether a row that just produced ``last`` has ended (the closed fence); end tokens
    and ``max_new_tokens`` end a row without it. A row's list ends with its end token when it
    wrote one.
    """
    import torch

    name = cache_kwarg(model)
    cache, mask, logits = _prefill(model, prompts, max_new_tokens, name)
    cache.batch_repeat_interleave(k)
    mask = mask.repeat_interleave(k, dim=0)
    logits = logits.repeat_interleave(k, dim=0)
    rows = [Row([]) for _ in range(len(prompts) * k)]
    alive = list(range(len(rows)))
    while True:
        picked = choose(logits).tolist()
        for slot, token in zip(alive, picked, strict=True):
            row = rows[slot]
            row.tokens.append(token)
            row.done = (
                token in eos_ids
                or len(row.tokens) >= max_new_tokens
                or (ends is not None and ends(row.tokens, token))
            )
        kept = [i for i, slot in enumerate(alive) if not rows[slot].done]
        if not kept:
            return [row.tokens for row in rows]
        if len(kept) < len(alive):
            index = torch.tensor(kept)
            cache.batch_select_indices(index)
            mask = mask[index]
            select(kept)
            alive = [alive[i] for i in kept]
            picked = [picked[i] for i in kept]
        mask = torch.cat([mask, mask.new_ones((len(alive), 1))], dim=1)
        out = model(
            input_ids=torch.tensor(picked).unsqueeze(-1),
            attention_mask=mask,
            position_ids=(mask.sum(dim=-1, keepdim=True) - 1),
            cache_position=torch.tensor([mask.shape[1] - 1]),
            use_cache=True,
            **{name: cache},
        )
        logits = out.logits[:, -1, :]
