"""Transformers-on-CPU sampler as a Beam ModelHandler.

Sampling is seeded per (cfg.seed, task_id, sample index): each generated row has its own
``torch.Generator``, so in float32 a task's samples do not depend on which other tasks share
its batch or on K (sample j is the same for K=2 and K=8). Temperature and top-p are applied by
our own logits processor, which picks the token and hands greedy decoding a one-token choice.
What it does NOT guarantee: bit-identical samples across different torch builds, thread
counts or batch shapes. In float32 a shape's float rounding flips a near-tie token rarely; in
bfloat16 (``cfg.dtype`` ``auto`` on a CPU with bfloat16 units, ``samplers.precision``) the
matrix kernels round one row differently with other rows beside it often enough that a task's
samples change with its batch. The same batch still draws the same samples.

Threads: torch gets ``cpu_threads()`` (the CPUs this process may use, cgroup quota included),
OpenMP threads sleep rather than spin while they wait (``transforms.runtime.omp_env``), and one
``generate`` runs at a time per process (Beam may call the handler from several threads;
each call already uses every thread). Beside other busy processes the sampler then slows
down about in proportion to its CPU share instead of collapsing (benchmarks/cpu_share.py).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.runtime.omp_env import passive_waits
from tasksieve.transforms.samplers.config import (
    CompletionMeta,
    SamplerConfig,
    SampleRequest,
    Samples,
)
from tasksieve.transforms.samplers.decode import backtick_ids, decode, fence_closed
from tasksieve.transforms.samplers.model_cache import DEFAULT_MODEL_ID, ensure_default_model
from tasksieve.transforms.samplers.precision import resolved_dtype, with_dtype
from tasksieve.transforms.samplers.prompts import prompt_hash, render_messages
from tasksieve.transforms.samplers.seeds import request_seed

_EXTRA = "pip install 'tasksieve[cpu]'"
_LOG = logging.getLogger(__name__)
_NUCLEUS_PREFILTER = 512
_GENERATE = threading.Lock()  # one generate per process: each already uses every thread


def _need_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise ImportError(f"the transformers sampler needs torch and transformers: {_EXTRA}") from e
    return torch


def cpu_threads() -> int:
    """Threads for torch: $OMP_NUM_THREADS if set, else the CPUs this process may use.

    The CPUs it may use: its affinity mask, capped by a cgroup CPU quota (``cpu.max``) where
    there is one, so a container limited to 2 CPUs on a 64-core host runs 2 threads.
    """
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        cpus = max(1, os.cpu_count() or 1)
    quota = cgroup_cpu_quota()
    return max(1, min(cpus, math.ceil(quota))) if quota else cpus


def cgroup_cpu_quota(path: str = "/sys/fs/cgroup/cpu.max") -> float | None:
    """CPUs allowed by a cgroup v2 quota ("max 100000": none, None) or None where unreadable."""
    try:
        with open(path, encoding="ascii") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period) if int(period) > 0 else None
    except ValueError:
        return None


@dataclass
class LoadedModel:
    """Tokenizer and model loaded once per worker."""

    tokenizer: Any
    model: Any
    load_s: float
    backticks: frozenset[int] | None = None  # token ids holding a backtick, found at first use


class _FenceClosed:
    """Stop a row once its answer has opened and closed a fenced code block.

    What a chat model writes after the closing fence is prose the extractor drops anyway;
    on a small CPU model it is most of the generation time. Rows that never open a fence run
    to ``max_new_tokens`` as before.
    """

    def __init__(self, tokenizer: Any, prompt_len: int) -> None:
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        torch = _need_torch()
        texts = self.tokenizer.batch_decode(
            input_ids[:, self.prompt_len :], skip_special_tokens=True
        )
        done = [t.count("```") >= 2 for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class _RowSampler:
    """Logits processor: temperature + top-p sampling, one seeded generator per row."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float) -> None:
        torch = _need_torch()
        self._torch = torch
        self._gens = [torch.Generator().manual_seed(s) for s in seeds]
        self._temperature = temperature
        self._top_p = top_p

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """As a logits processor: -inf everywhere but the chosen token of each row."""
        choice = self.choose(scores)
        out = self._torch.full_like(scores, float("-inf"))
        out.scatter_(-1, choice.unsqueeze(-1), 0.0)
        return out

    def choose(self, scores: Any) -> Any:
        """One token per row: the argmax at temperature 0, else a seeded nucleus draw."""
        scores = scores.float()
        if self._temperature == 0:
            return scores.argmax(dim=-1)
        return self._sample(self._torch.softmax(scores / self._temperature, dim=-1))

    def select(self, kept: list[int]) -> None:
        """Keep only these rows' generators (the decode loop dropped the others' rows)."""
        self._gens = [self._gens[i] for i in kept]

    def _sample(self, probs: Any) -> Any:
        """One token per row from ``probs`` restricted to its top-p nucleus."""
        torch = self._torch
        if self._top_p >= 1:
            cand_p, cand_i = probs, None
        else:
            # The nucleus almost always lies in the top few hundred tokens: topk is much
            # cheaper than sorting the vocabulary; fall back to a full sort when it does not.
            cand_p, cand_i = probs.topk(min(_NUCLEUS_PREFILTER, probs.shape[-1]), dim=-1)
            if bool((cand_p.sum(dim=-1) < self._top_p).any()):
                cand_p, cand_i = probs.sort(dim=-1, descending=True)
            before = cand_p.cumsum(dim=-1) - cand_p  # mass of strictly more likely tokens
            cand_p = cand_p.masked_fill(before >= self._top_p, 0.0)
        cdf = cand_p.cumsum(dim=-1)
        u = torch.stack([torch.rand((), generator=g) for g in self._gens])
        pos = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1)).clamp(max=cdf.shape[-1] - 1)
        return pos.squeeze(-1) if cand_i is None else cand_i.gather(-1, pos).squeeze(-1)


DECODERS = ("loop", "generate")
"""``loop``: ``samplers.decode`` (the default); ``generate``: transformers' ``generate``."""


class TransformersModelHandler(ModelHandler[SampleRequest, Samples, LoadedModel]):
    """Draw K completions per task with a local transformers causal LM on CPU."""

    def __init__(self, cfg: SamplerConfig, *, batched: bool = True, decode: str = "loop") -> None:
        super().__init__(min_batch_size=cfg.batch_size, max_batch_size=cfg.batch_size)
        if decode not in DECODERS:
            raise ValueError(f"decode must be one of {', '.join(DECODERS)}, got {decode!r}")
        self._cfg = cfg
        self._batched = batched
        self._decode = decode
        self.dtype = resolved_dtype(cfg.dtype)  # where the handler is built: see load_model

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        """``cfg.batch_size`` tasks per inference call (fewer only at a bundle's end).

        Fixed, not Beam's adaptive sizes: ``BatchElements`` grows a batch only while it stays
        under 10 s, and one task's generation on the CPU takes seconds, so it held batches at
        one or two tasks, where each step's matrix products use the cores worst.
        """
        size = self._cfg.batch_size
        return {"min_batch_size": size, "max_batch_size": size}

    def model_id(self) -> str:
        """The model identifier recorded with every sample."""
        return with_dtype(self._cfg.model or DEFAULT_MODEL_ID, self.dtype)

    def load_model(self) -> LoadedModel:
        """Load tokenizer and model on CPU in eval mode (converting the default once).

        The model computes in ``self.dtype``: bfloat16 where this CPU multiplies it natively
        and ``cfg.dtype`` is ``auto`` (``samplers.precision``). ``auto`` is resolved again here,
        on the worker: a handler built on one machine and run on another takes the worker's
        format, and its samples record it.
        """
        torch = _need_torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the run has its own progress output
        start = time.monotonic()
        torch.set_num_threads(cpu_threads())
        if not passive_waits():
            _LOG.warning(
                "OMP_WAIT_POLICY is not PASSIVE: sampling beside other busy processes can "
                "slow down many times over (set OMP_WAIT_POLICY=PASSIVE before torch loads)"
            )
        path = (
            Path(self._cfg.model) if self._cfg.model else ensure_default_model(self._cfg.cache_dir)
        )
        tokenizer = AutoTokenizer.from_pretrained(path)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        auto: Any = AutoModelForCausalLM  # its from_pretrained is mis-typed for mypy
        self.dtype = resolved_dtype(self._cfg.dtype)
        model = auto.from_pretrained(path, dtype=getattr(torch, self.dtype))
        model.to("cpu")
        model.eval()
        load_s = time.monotonic() - start
        _LOG.info(
            "loaded %s in %.1fs (%s, %d threads)", path, load_s, self.dtype, torch.get_num_threads()
        )
        return LoadedModel(tokenizer, model, load_s)

    def run_inference(
        self,
        batch: Sequence[SampleRequest],
        model: LoadedModel,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[Samples]:
        """One ``Samples`` with K completions per request, in request order."""
        groups = [list(batch)] if self._batched else [[req] for req in batch]
        out: list[Samples] = []
        for group in groups:
            for req, (comps, meta) in zip(group, self.draw(group, model), strict=True):
                out.append(
                    Samples(
                        req.task_id,
                        comps,
                        self.model_id(),
                        "transformers",
                        self._cfg.samples,
                        meta=meta,
                    )
                )
        return out

    def generate(self, requests: Sequence[SampleRequest], model: LoadedModel) -> list[list[str]]:
        """K completions for each request, generated together with left padding."""
        return [texts for texts, _ in self.draw(requests, model)]

    def draw(
        self, requests: Sequence[SampleRequest], model: LoadedModel
    ) -> list[tuple[list[str], list[CompletionMeta]]]:
        """K completions for each request, with how each was drawn (see ``generate``)."""
        if not requests:
            return []
        torch = _need_torch()
        cfg, tok = self._cfg, model.tokenizer
        k = cfg.samples
        texts = [
            tok.apply_chat_template(render_messages(r), add_generation_prompt=True, tokenize=False)
            for r in requests
        ]
        first = cfg.first_sample  # sample j of a task has the same seed in any round layout
        seeds = [request_seed(cfg.seed, r, first + j) for r in requests for j in range(k)]
        eos = model.model.generation_config.eos_token_id
        if eos is None:
            eos = tok.eos_token_id
        eos_ids = {eos} if isinstance(eos, int) else set(eos)
        sampler = _RowSampler(seeds, cfg.temperature, cfg.top_p)
        with _GENERATE, torch.inference_mode():
            start = time.monotonic()
            if self._decode == "loop":
                rows, prompt_tokens = self._loop(texts, model, sampler, eos_ids)
            else:
                rows, prompt_tokens = self._generate(texts, model, sampler, eos)
        latency = round(time.monotonic() - start, 4)
        decoded = tok.batch_decode(rows, skip_special_tokens=True)
        if len(decoded) != k * len(requests):  # slicing would silently hand a task fewer
            raise RuntimeError(
                f"generate returned {len(decoded)} sequences for {len(requests)} tasks x {k}"
            )
        hashes = [prompt_hash(render_messages(r)) for r in requests]
        metas = []
        for row in range(len(decoded)):
            used, finish = completion_length(
                rows[row], eos_ids, tok.pad_token_id, cfg.max_new_tokens
            )
            metas.append(
                CompletionMeta(
                    prompt_hash=hashes[row // k],
                    turn=requests[row // k].turn,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    seed=seeds[row],
                    max_tokens=cfg.max_new_tokens,
                    prompt_tokens=prompt_tokens[row // k],
                    completion_tokens=used,
                    finish_reason=finish,
                    latency_s=latency,
                )
            )
        return [
            (decoded[i * k : (i + 1) * k], metas[i * k : (i + 1) * k]) for i in range(len(requests))
        ]

    def _loop(
        self, texts: list[str], model: LoadedModel, sampler: _RowSampler, eos_ids: set[int]
    ) -> tuple[list[list[int]], list[int]]:
        """The rows' tokens from the sampler's own decode loop (``samplers.decode``)."""
        cfg, tok = self._cfg, model.tokenizer
        prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        ends = None
        if cfg.stop_after_code:
            if model.backticks is None:
                model.backticks = backtick_ids(tok)
            ticks = model.backticks

            def ends(tokens: list[int], last: int) -> bool:
                return last in ticks and fence_closed(tok, tokens)

        rows = decode(
            model.model,
            prompts,
            cfg.samples,
            sampler.choose,
            sampler.select,
            max_new_tokens=cfg.max_new_tokens,
            eos_ids=eos_ids,
            ends=ends,
        )
        return rows, [len(p) for p in prompts]

    def _generate(
        self, texts: list[str], model: LoadedModel, sampler: _RowSampler, eos: Any
    ) -> tuple[list[list[int]], list[int]]:
        """The rows' tokens from transformers' ``generate`` over K copies of each prompt (left
        padding; every row runs until the last one ends): the baseline the loop replaced."""
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        cfg, tok = self._cfg, model.tokenizer
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids = enc["input_ids"].repeat_interleave(cfg.samples, dim=0)
        attention = enc["attention_mask"].repeat_interleave(cfg.samples, dim=0)
        gen_cfg = GenerationConfig(
            do_sample=False,
            max_new_tokens=cfg.max_new_tokens,
            eos_token_id=eos,
            pad_token_id=tok.pad_token_id,
        )
        generated = model.model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            generation_config=gen_cfg,
            logits_processor=LogitsProcessorList([sampler]),
            stopping_criteria=StoppingCriteriaList(
                [_FenceClosed(tok, input_ids.shape[1])] if cfg.stop_after_code else []
            ),
        )
        new = generated[:, input_ids.shape[1] :]
        return [r.tolist() for r in new], [int(n) for n in enc["attention_mask"].sum(dim=-1)]


def completion_length(
    ids: list[int], eos_ids: set[int], pad_id: int | None, max_new_tokens: int
) -> tuple[int, str]:
    """Tokens a row really generated (up to and including its end token), and why it stopped.

    ``stop``: it wrote an end token, or a stopping criterion (the closed code fence) ended it
    and the rest of the row is padding; ``length``: it ran to ``max_new_tokens``.
    """
    for i, tok in enumerate(ids):
        if tok in eos_ids:
            return i + 1, "stop"
    used = len(ids)
    while used and pad_id is not None and ids[used - 1] == pad_id:
        used -= 1
    return used, "length" if used >= max_new_tokens else "stop"
