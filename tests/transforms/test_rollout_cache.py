"""The rollout cache's keys and storage: what misses, what survives corruption, compaction."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.rollouts.cache import CacheConfig, store
from tasksieve.transforms.rollouts.cache.keys import sample_key, sampling_params, verdict_key
from tasksieve.transforms.rollouts.cache.sampler import CachedModelHandler
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest
from tasksieve.transforms.samplers.replay import ReplayModelHandler
from tests.transforms.add_task import add_task

REQ = SampleRequest("t.add", "code", "Write add(a, b).", "add")
BASE = SamplerConfig(backend="openai", endpoint="http://h/v1", model="m", samples=4)


def key_of(cfg: SamplerConfig, req: SampleRequest = REQ, index: int = 0) -> str:
    return sample_key(req, sampling_params(cfg, {"id": cfg.model}), index)


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.2},
        {"top_p": 0.5},
        {"max_new_tokens": 7},
        {"seed": 3},
        {"model": "other"},
        {"stop": ("###",)},
        {"extra_body": '{"min_p": 0.1}'},
        {"endpoint": "http://elsewhere/v1"},
        {"stop_after_code": False},
    ],
)
def test_a_changed_sampling_parameter_misses(change: dict[str, Any]) -> None:
    assert key_of(dataclasses.replace(BASE, **change)) != key_of(BASE)


@pytest.mark.parametrize(
    "change",
    [
        {"samples": 8},
        {"batch_size": 16},
        {"max_concurrency": 2},
        {"request_timeout_s": 5.0},
        {"max_attempts": 1},
        {"api_key_env": "KEY"},
        {"first_sample": 4},  # the index says which sample it is
    ],
)
def test_how_the_sampler_is_driven_does_not_change_the_key(change: dict[str, Any]) -> None:
    assert key_of(dataclasses.replace(BASE, **change)) == key_of(BASE)


def _other(value: Any) -> Any:
    """A different value of the same kind (a field left None gets its first real value)."""
    if value is None:
        return 0
    if isinstance(value, tuple):
        return (*value, ("user", "x"))
    if isinstance(value, int):
        return value + 1
    return value + "x"


@pytest.mark.parametrize(
    "field", [f.name for f in dataclasses.fields(SampleRequest) if f.name != "entry_point"]
)
def test_every_request_field_is_part_of_the_key(field: str) -> None:
    changed = dataclasses.replace(REQ, **{field: _other(getattr(REQ, field))})
    assert key_of(BASE, changed) != key_of(BASE)


def test_entry_point_and_sample_index_are_part_of_the_key() -> None:
    assert key_of(BASE, dataclasses.replace(REQ, entry_point=None)) != key_of(BASE)
    assert key_of(BASE, index=1) != key_of(BASE, index=0)


def test_an_adaptive_round_keys_its_samples_as_a_fixed_k_run_does() -> None:
    """Round samples 4..7 have the keys of samples 4..7 of a fixed K=8 request."""
    fixed = SamplerConfig(backend="replay", replay_path="r.jsonl", samples=8)
    round2 = dataclasses.replace(fixed, first_sample=4, samples=4)
    keys = [
        CachedModelHandler(ReplayModelHandler(c), c, "cache").keys(REQ) for c in (fixed, round2)
    ]
    assert keys[1] == keys[0][4:]


def test_a_resolved_model_change_misses() -> None:
    replay = SamplerConfig(backend="replay", replay_path="r.jsonl")
    old = sample_key(REQ, sampling_params(replay, {"id": "r.jsonl", "size": 10}), 0)
    new = sample_key(REQ, sampling_params(replay, {"id": "r.jsonl", "size": 11}), 0)
    assert old != new


SB = {"backend": "process", "allow_weak_isolation": False}


@pytest.mark.parametrize(
    ("task", "solution", "sandbox"),
    [
        (add_task("def add(a, b): return a + b"), "def add(a, b): return b + a", SB),
        (add_task("x", asserts=["assert add(1, 1) == 2"]), "def add(a, b): return a + b", SB),
        (add_task("x"), "def add(a, b): return a + b", {**SB, "backend": "docker"}),
        (add_task("x"), "def add(a, b): return a + b", {**SB, "allow_weak_isolation": True}),
    ],
)
def test_verdict_key_covers_solution_tests_and_sandbox(
    task: TaskRecord, solution: str, sandbox: dict[str, Any]
) -> None:
    base = verdict_key(add_task("x"), "def add(a, b): return a + b", SB)
    assert verdict_key(task, solution, sandbox) != base


def test_verdict_key_ignores_tags_and_metadata() -> None:
    task = add_task("x")
    tagged = task.model_copy(update={"tags": ["easy"], "metadata": {"origin": "x"}})
    assert verdict_key(tagged, "s", SB) == verdict_key(task, "s", SB)


def test_entries_round_trip(tmp_path: Path) -> None:
    root = str(tmp_path / "c")
    store.write_part(root, store.SAMPLES, {"a": {"completion": "x"}, "b": [1, "é"]})
    assert store.load(root, store.SAMPLES) == ({"a": {"completion": "x"}, "b": [1, "é"]}, 0)


def test_a_new_cache_directory_loads_empty(tmp_path: Path) -> None:
    assert store.load(str(tmp_path / "nowhere"), store.VERDICTS) == ({}, 0)


GOOD = store.encode([("good", {"v": 1})])


@pytest.mark.parametrize(
    "bad",
    [
        b"not json\n",
        b'{"k": "x", "v": 1, "c": "0000000000000000"}\n',  # checksum does not match
        b'{"v": 1, "c": "x"}\n',  # no key
        b'["k", "v"]\n',  # not an object
        b"\xff\xfe\n",  # not UTF-8
        store.encode([("cut", {"v": "a long value"})])[:30] + b"\n",  # truncated line
    ],
)
def test_a_corrupt_line_is_skipped_and_counted(tmp_path: Path, bad: bytes) -> None:
    part = tmp_path / store.SAMPLES / "part-x.jsonl.gz"
    part.parent.mkdir()
    part.write_bytes(gzip.compress(bad + GOOD))
    assert store.load(str(tmp_path), store.SAMPLES) == ({"good": {"v": 1}}, 1)


def test_a_truncated_part_keeps_the_entries_before_the_cut(tmp_path: Path) -> None:
    entries = {f"k{i}": "v" * 50 for i in range(200)}
    path = Path(store.write_part(str(tmp_path), store.VERDICTS, entries))
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    loaded, corrupt = store.load(str(tmp_path), store.VERDICTS)
    assert 0 < len(loaded) < len(entries) and corrupt >= 1
    assert all(entries[k] == v for k, v in loaded.items())


def test_a_part_that_is_not_gzip_is_skipped(tmp_path: Path) -> None:
    (tmp_path / store.SAMPLES).mkdir()
    (tmp_path / store.SAMPLES / "part-bad.jsonl.gz").write_bytes(b"\x00garbage")
    store.write_part(str(tmp_path), store.SAMPLES, {"a": 1})
    assert store.load(str(tmp_path), store.SAMPLES)[0] == {"a": 1}


def test_compaction_merges_parts_into_one_keeping_every_entry(tmp_path: Path) -> None:
    root = str(tmp_path)
    for i in range(5):
        store.write_part(root, store.SAMPLES, {f"k{i}": i, "shared": "same"})
    before = store.load(root, store.SAMPLES)[0]
    assert store.compact(root, store.SAMPLES, compact_after=4) == 5
    assert len(store.part_files(root, store.SAMPLES)) == 1
    assert store.load(root, store.SAMPLES)[0] == before


def test_compaction_leaves_few_parts_alone(tmp_path: Path) -> None:
    root = str(tmp_path)
    for i in range(3):
        store.write_part(root, store.VERDICTS, {f"k{i}": i})
    assert store.compact(root, store.VERDICTS, compact_after=3) == 0
    assert len(store.part_files(root, store.VERDICTS)) == 3


def test_compaction_drops_corrupt_lines(tmp_path: Path) -> None:
    root = str(tmp_path)
    store.write_part(root, store.SAMPLES, {"a": 1})
    (tmp_path / store.SAMPLES / "part-bad.jsonl.gz").write_bytes(gzip.compress(b"junk\n" + GOOD))
    store.write_part(root, store.SAMPLES, {"b": 2})
    store.compact(root, store.SAMPLES, compact_after=2)
    assert store.load(root, store.SAMPLES) == ({"a": 1, "b": 2, "good": {"v": 1}}, 0)


@pytest.mark.parametrize(
    ("cfg", "want"),
    [
        (CacheConfig(), "out/run.rollout-cache"),
        (CacheConfig(path="gs://b/cache"), "gs://b/cache"),
        (CacheConfig(path="gs://b/cache", enabled=False), None),
    ],
)
def test_cache_directory(cfg: CacheConfig, want: str | None) -> None:
    assert cfg.directory("out/run/") == want


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"compact_after": 1}, ">= 2"), ({"path": " "}, "empty")]
)
def test_cache_config_rejects(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CacheConfig(**kwargs)


def test_a_changed_system_instruction_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasksieve.transforms.samplers import prompts

    before = key_of(BASE)
    monkeypatch.setitem(prompts._SYSTEM, "code", "Answer in one ```python block, tersely.")
    assert key_of(BASE) != before


def healthz_stub(version: str, backend: str) -> Any:
    """A loopback server whose /healthz says it runs ``version`` on ``backend``."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = json.dumps({"status": "ok", "version": version, "backend": backend}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.mark.parametrize(
    ("version", "backend"), [("0.2.0", "process"), ("0.1.0", "docker")], ids=["version", "backend"]
)
def test_a_remote_verdict_key_holds_the_servers_version_and_backend(
    version: str, backend: str
) -> None:
    from tasksieve.transforms.rollouts.cache.verdicts import sandbox_settings
    from tasksieve.verifiers import SandboxConfig

    servers = [healthz_stub("0.1.0", "process"), healthz_stub(version, backend)]
    try:
        settings = [
            sandbox_settings(
                SandboxConfig(backend="remote", urls=(f"http://127.0.0.1:{s.server_port}",))
            )
            for s in servers
        ]
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
    task, solution = add_task("x"), "def add(a, b): return a + b"
    assert verdict_key(task, solution, settings[0]) != verdict_key(task, solution, settings[1])
