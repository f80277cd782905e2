"""The vllm sampler's settings, flags, request arguments and Beam handler choice.

Requests to a real server (a CPU stand-in for vLLM) are tested end to end in
tests/pipeline/test_curate_vllm.py; the resource hint in tests/pipeline/test_vllm_hints.py.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tasksieve.pipeline.cli import build_parser
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, make_model_handler
from tasksieve.transforms.samplers.prompts import prompt_hash, render_messages
from tasksieve.transforms.samplers.vllm_args import parse_server_arg, server_kwargs

VLLM = {"backend": "vllm", "model": "org/model"}
ACCEL = "type:nvidia-l4;count:1;install-nvidia-driver"


@pytest.mark.parametrize(
    ("arg", "parsed"),
    [
        ("--max-model-len=4096", ("max-model-len", "4096")),
        ("--enforce-eager", ("enforce-eager", None)),
        ("--gpu_memory_utilization=0.8", ("gpu_memory_utilization", "0.8")),
        ('--override-generation-config={"a": 1}', ("override-generation-config", '{"a": 1}')),
        ("--chat-template=a=b.jinja", ("chat-template", "a=b.jinja")),
    ],
)
def test_server_flag_is_parsed(arg: str, parsed: tuple[str, str | None]) -> None:
    assert parse_server_arg(arg) == parsed


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("max-model-len=4096", "must start with --"),
        ("-x", "must start with --"),
        ("--", "not a flag name"),
        ("--=4", "not a flag name"),
        ("--bad name=1", "not a flag name"),
        ("--max-model-len=", "empty value"),
        ("--model=other", "--model"),
        ("--port=1", "free port"),
        ("--served-model-name=x", "model name of every request"),
        ("--served_model_name=x", "model name of every request"),
        ("--api-key=s", "no API key"),
    ],
)
def test_bad_server_flag_is_refused(arg: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_server_arg(arg)


def test_server_kwargs_keep_order_and_refuse_a_flag_given_twice() -> None:
    assert list(server_kwargs(("--b=1", "--a"))) == ["b", "a"]
    with pytest.raises(ValueError, match="given twice"):
        server_kwargs(("--max-model-len=1", "--max_model_len=2"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"backend": "vllm"}, "needs model"),
        ({**VLLM, "vllm_api": "responses"}, "vllm_api"),
        ({**VLLM, "vllm_args": ["--x"]}, "tuple of strings"),
        ({**VLLM, "vllm_args": ("--port=3",)}, "free port"),
        ({**VLLM, "accelerator": "nvidia-l4"}, "type:nvidia-l4"),
        ({**VLLM, "accelerator": "type:nvidia-l4;;count:1"}, "type:nvidia-l4"),
        ({"vllm_args": ("--x",)}, "only used by backend 'vllm'"),
        ({"accelerator": ACCEL}, "only used by backend 'vllm'"),
        ({**VLLM, "endpoint": "http://h/v1"}, "only used by backend 'openai'"),
    ],
)
def test_config_rejects(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplerConfig(**fields)


def test_sampling_arguments_are_passed_through() -> None:
    from tasksieve.transforms.samplers.vllm_sampler import sampling_args

    cfg = SamplerConfig(
        **VLLM,
        temperature=0.3,
        top_p=0.5,
        max_new_tokens=17,
        stop=("```\n",),
        extra_body='{"top_k": 5}',
        request_timeout_s=9.0,
    )
    assert sampling_args(cfg, 4, 99) == {
        "n": 4,
        "temperature": 0.3,
        "top_p": 0.5,
        "max_tokens": 17,
        "seed": 99,
        "timeout": 9.0,
        "stop": ["```\n"],
        "extra_body": {"top_k": 5},
    }


@pytest.mark.parametrize(
    ("api", "beam_class"),
    [("chat", "VLLMChatModelHandler"), ("completions", "VLLMCompletionsModelHandler")],
)
def test_the_handler_wraps_beams_own_vllm_handler(api: str, beam_class: str) -> None:
    cfg = SamplerConfig(**VLLM, vllm_api=api, vllm_args=("--max-model-len=4096", "--enforce-eager"))
    handler = make_model_handler(cfg)
    inner = handler._beam  # type: ignore[attr-defined]
    assert type(inner).__name__ == beam_class
    assert type(inner).__module__ == "apache_beam.ml.inference.vllm_inference"
    assert inner._vllm_server_kwargs == {"max-model-len": "4096", "enforce-eager": None}
    assert handler.share_model_across_processes()  # one server per worker machine, as Beam's
    restored = pickle.loads(pickle.dumps(handler))
    assert restored.model_id() == "org/model"


@pytest.mark.parametrize(("accelerator", "hints"), [(None, {}), (ACCEL, {"accelerator": ACCEL})])
def test_the_handler_carries_the_accelerator_hint(
    accelerator: str | None, hints: dict[str, str]
) -> None:
    handler = make_model_handler(SamplerConfig(**VLLM, accelerator=accelerator))
    assert handler.get_resource_hints() == hints


def test_chat_and_completions_prompts_hash_differently() -> None:
    from tasksieve.transforms.samplers.vllm_sampler import render_text, request_hash

    req = SampleRequest("t", "code", "Write f.", "f")
    assert request_hash("chat", req) == prompt_hash(render_messages(req))
    assert request_hash("completions", req) != request_hash("chat", req)
    assert render_text(req).endswith("Write f.\n") and "`f`" in render_text(req)


def test_a_server_that_does_not_start_is_reported_with_its_command_line() -> None:
    from tasksieve.transforms.samplers.vllm_sampler import server_error

    cfg = SamplerConfig(**VLLM, vllm_args=("--max-model-len=4096", "--enforce-eager"))
    err = server_error(cfg, Exception("Failed to start vLLM server. exit code: 2"))
    text = str(err)
    assert "--model org/model --port P --max-model-len 4096 --enforce-eager" in text
    assert "exit code: 2" in text and "--vllm-arg" in text


def _curate(*extra: str) -> list[str]:
    return ["curate", "--input", "x.jsonl", "--output", "out", *extra]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sampler", "vllm"], "--model"),
        (["--sampler", "vllm", "--model", "m", "--endpoint", "http://h/v1"], "--endpoint"),
        (["--sampler", "vllm", "--model", "m", "--api-key-env", "K"], "--api-key-env"),
        (["--sampler", "vllm", "--model", "m", "--vllm-arg=--port=9"], "free port"),
        (["--sampler", "vllm", "--model", "m", "--gpu-accelerator", "l4"], "type:"),
        (["--sampler", "replay", "--vllm-arg=--enforce-eager"], "need --sampler vllm"),
        (["--gpu-accelerator", ACCEL], "need --sampler vllm"),
    ],
)
def test_curate_flags_fail_early(argv: list[str], message: str) -> None:
    from tasksieve.pipeline.flags.vllm import check_vllm_args

    args = build_parser().parse_args(_curate(*argv))
    with pytest.raises(ValueError, match=message):
        check_vllm_args(args)


def test_curate_flags_make_the_config() -> None:
    from tasksieve.pipeline.commands.curate import curate_config

    argv = ["--sampler", "vllm", "--model", "org/m", "--vllm-api", "completions"]
    argv += ["--vllm-arg=--max-model-len=4096", "--vllm-arg=--enforce-eager"]
    argv += ["--gpu-accelerator", ACCEL, "--samples", "8"]
    cfg = curate_config(build_parser().parse_args(_curate(*argv)), [])
    s = cfg.sampler
    assert (s.backend, s.model, s.vllm_api, s.accelerator, s.samples) == (
        "vllm",
        "org/m",
        "completions",
        ACCEL,
        8,
    )
    assert s.vllm_args == ("--max-model-len=4096", "--enforce-eager")
