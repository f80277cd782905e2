"""Errors of the samplers that are not a single task's fault."""

from __future__ import annotations


class SamplerUnavailable(RuntimeError):
    """The sampler cannot sample at all (its model did not load, its server did not start).

    Not a per-task failure: every later task would meet the same fault, so the run stops
    with this error instead of rejecting each task as ``rollouts.sampler_error``.
    """
