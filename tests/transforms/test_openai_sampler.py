"""The openai sampler's configuration, request shape and per-completion metadata.

Requests to a real server are tested end to end in tests/pipeline/test_curate_openai.py.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from tasksieve.schemas import Rollout, Verdict
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, Samples, make_model_handler
from tasksieve.transforms.samplers.config import CompletionMeta
from tasksieve.transforms.samplers.hf import completion_length
from tasksieve.transforms.samplers.prompts import prompt_hash, render_messages

SERVER = {"backend": "openai", "endpoint": "http://127.0.0.1:1/v1", "model": "m"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"backend": "openai"}, "needs endpoint"),
        ({"backend": "openai", "endpoint": "http://x/v1"}, "needs endpoint"),
        ({"endpoint": "http://x/v1"}, "only used by backend 'openai'"),
        ({**SERVER, "max_concurrency": 0}, "max_concurrency"),
        ({**SERVER, "request_timeout_s": 0.0}, "request_timeout_s"),
        ({**SERVER, "request_timeout_s": float("nan")}, "request_timeout_s"),
        ({**SERVER, "max_attempts": 0}, "max_attempts"),
        ({**SERVER, "extra_body": "{"}, "not valid JSON"),
        ({**SERVER, "extra_body": "[1]"}, "JSON object"),
        ({**SERVER, "stop": ("",)}, "stop"),
        ({**SERVER, "stop": ["x"]}, "stop"),
    ],
)
def test_config_rejects(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplerConfig(**fields)


def test_request_passes_sampling_parameters_through() -> None:
    from tasksieve.transforms.samplers.openai_sampler import request_kwargs

    cfg = SamplerConfig(
        **SERVER,
        temperature=0.3,
        top_p=0.5,
        max_new_tokens=17,
        stop=("```\n",),
        extra_body='{"top_k": 5}',
    )
    req = SampleRequest("t", "sql", "Return 1.")
    kw = request_kwargs(cfg, req, 4, 99)
    assert kw == {
        "model": "m",
        "messages": render_messages(req),
        "n": 4,
        "temperature": 0.3,
        "top_p": 0.5,
        "max_tokens": 17,
        "seed": 99,
        "stop": ["```\n"],
        "extra_body": {"top_k": 5},
    }


def test_handler_loads_without_contacting_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    handler = make_model_handler(SamplerConfig(**SERVER, max_concurrency=3, batch_size=4))
    conn = handler.load_model()  # port 1: nothing listens; load must not send a request
    try:
        assert handler.batch_elements_kwargs()["max_batch_size"] == 4
    finally:
        conn.pool.shutdown()


def test_api_key_env_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasksieve.transforms.samplers.openai_sampler import api_key

    monkeypatch.delenv("TS_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="TS_TEST_KEY"):
        api_key("TS_TEST_KEY")
    monkeypatch.setenv("TS_TEST_KEY", "sk-1")
    assert api_key("TS_TEST_KEY") == "sk-1"


def test_unreachable_server_fails_the_task_with_the_error() -> None:
    """Nothing listens on the port: every attempt is refused, the task carries the error."""
    pytest.importorskip("openai")
    from tasksieve.transforms.samplers.openai_sampler import sample_tasks

    cfg = SamplerConfig(**SERVER, samples=3, max_attempts=2, request_timeout_s=5.0)
    handler = make_model_handler(cfg)
    conn = handler.load_model()
    conn.policy = type(conn.policy)(max_attempts=2, base_s=0.0, cap_s=0.0)
    try:
        out, tally = sample_tasks(conn, cfg, [SampleRequest("a", "code", "p")])
    finally:
        conn.pool.shutdown()
    (samples,) = out
    assert samples.completions == [] and samples.error is not None
    assert "connection error" in samples.error and "2 attempt(s)" in samples.error
    assert (tally.requests, tally.retries, tally.failed_requests) == (1, 1, 1)
    assert tally.failed_tasks == 1


def test_prompt_hash_is_canonical() -> None:
    a = [{"role": "user", "content": "x"}]
    b = [{"content": "x", "role": "user"}]
    assert prompt_hash(a) == prompt_hash(b) != prompt_hash([{"role": "user", "content": "y"}])


@pytest.mark.parametrize(
    ("ids", "used", "why"),
    [
        ([5, 6, 2, 0, 0], 3, "stop"),  # end token, then padding
        ([5, 6, 7, 8], 4, "length"),  # ran to the limit
        ([5, 0, 0, 0], 1, "stop"),  # a stopping criterion ended it; padding after
        ([], 0, "stop"),
    ],
)
def test_completion_length(ids: list[int], used: int, why: str) -> None:
    assert completion_length(ids, {2}, 0, 4) == (used, why)


def test_samples_columns_fill_a_rollout() -> None:
    meta = CompletionMeta(prompt_hash="h", seed=3, prompt_tokens=10, finish_reason="length")
    samples = Samples("t", ["c"], "m", "openai", 2, meta=[meta])
    row = Rollout(
        task_id="t",
        family="code",
        sample_index=0,
        model_id="m",
        sampler="openai",
        completion="c",
        solution="c",
        verdict=Verdict(status="pass"),
        run_id="r",
        **samples.columns(0),
    )
    assert (row.prompt_hash, row.seed, row.finish_reason, row.turn) == ("h", 3, "length", 1)
    assert samples.columns(1) == {}  # a completion without metadata keeps the defaults


def _args(**over: Any) -> argparse.Namespace:
    base = {
        "endpoint": "http://h/v1",
        "model": "m",
        "api_key_env": None,
        "extra_body": "",
    }
    return argparse.Namespace(**{**base, **over})


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"endpoint": None}, "--endpoint"),
        ({"model": None}, "--model"),
        ({"api_key_env": "TS_SURELY_UNSET_VAR"}, "TS_SURELY_UNSET_VAR"),
        ({"extra_body": "nope"}, "--extra-body"),
        ({"extra_body": json.dumps([1])}, "JSON object"),
    ],
)
def test_curate_flags_fail_early(over: dict[str, Any], message: str) -> None:
    from tasksieve.pipeline.flags.sampler import check_server_args

    with pytest.raises(ValueError, match=message):
        check_server_args(_args(**over))
