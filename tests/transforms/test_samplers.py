"""Tests for transforms.samplers: extraction, config, replay, model cache, real model, Beam."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tasksieve.transforms.samplers import (
    SamplerConfig,
    SampleRequest,
    Samples,
    extract_solution,
    make_model_handler,
    model_cache,
    model_id,
    render_messages,
)
from tasksieve.transforms.samplers.precision import native_bf16
from tasksieve.transforms.samplers.replay import ReplayFileError, read_replay

HAVE_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))

# ------------------------------------------------------------------ extraction
FENCED = "Here you go:\n```python\ndef f(x):\n    return x + 1\n```\nThis adds one."
MULTI = "```bash\npip install foo\n```\nthen\n```python\nimport foo\nprint(foo.x)\n```\n"
ENTRY = (
    "```python\ndef helper(y):\n    return y\n```\nAnd the answer:\n"
    "```python\ndef solve(a):\n    return helper(a)\n```\n"
)
UNTERMINATED = "Sure!\n```python\ndef g():\n    return 2\n"
BARE = "Sure, here it is.\ndef h(n):\n    return n * 2\n\nThis doubles n."
BARE_SCRIPT = "n = int(input())\nprint(n * 2)\n"
SQL_FENCED = "The query:\n```sql\nSELECT a, SUM(b) FROM t GROUP BY a;\n```\nDone."
SQL_BARE = "You can use:\nSELECT name\nFROM users\nWHERE age > 3; This returns names."
SQL_CTE = "with x as (select 1 as a)\nselect a from x\n\nThis uses a CTE."
YAML = "Here is the file:\n```yaml\napiVersion: v1\nkind: Pod\n```\n"
YAML_BARE = "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n"
JSON_CFG = '```json\n{"a": 1}\n```'
GLUED = "```python\ndef k():\n    return 3```\nok"
TILDE = "~~~py\nx = 1\n~~~\n"
UNTERMINATED_PROSE = "```python\ndef g():\n    return 2\nThis returns two."
STRAY_CLOSER = "def s():\n    return 5\n```\nThat is all."
INDENTED = "1. Code:\n   ```python\n   def m():\n       return 4\n   ```\n"


@pytest.mark.parametrize(
    ("completion", "family", "entry_point", "expected"),
    [
        (FENCED, "code", "f", "def f(x):\n    return x + 1\n"),
        (MULTI, "code", None, "import foo\nprint(foo.x)\n"),
        (ENTRY, "code", "solve", "def solve(a):\n    return helper(a)\n"),
        (ENTRY, "code", None, "def helper(y):\n    return y\n"),
        (ENTRY, "code", "missing", "def helper(y):\n    return y\n"),
        (UNTERMINATED, "code", "g", "def g():\n    return 2\n"),
        (UNTERMINATED_PROSE, "code", "g", "def g():\n    return 2\n"),
        (STRAY_CLOSER, "code", "s", "def s():\n    return 5\n"),
        (BARE, "code", "h", "def h(n):\n    return n * 2\n"),
        (BARE_SCRIPT, "code", None, "n = int(input())\nprint(n * 2)\n"),
        ("I am not sure how to solve this, sorry.", "code", "f", ""),
        ("Sure", "code", None, ""),
        ("", "code", None, ""),
        ("```python\n\n```", "code", None, ""),
        (GLUED, "code", "k", "def k():\n    return 3\n"),
        (TILDE, "api", None, "x = 1\n"),
        (INDENTED, "code", "m", "def m():\n    return 4\n"),
        (SQL_FENCED, "sql", None, "SELECT a, SUM(b) FROM t GROUP BY a;\n"),
        (SQL_BARE, "sql", None, "SELECT name\nFROM users\nWHERE age > 3;\n"),
        (SQL_CTE, "sql", None, "with x as (select 1 as a)\nselect a from x\n"),
        ("No idea.", "sql", None, ""),
        (YAML, "config", None, "apiVersion: v1\nkind: Pod\n"),
        (YAML_BARE, "config", None, YAML_BARE),
        (JSON_CFG, "config", None, '{"a": 1}\n'),
        ("I cannot write that file", "config", None, ""),
    ],
    ids=[
        "fenced-python",
        "multiple-blocks-language-wins",
        "entry-point-preferred",
        "no-entry-point-first-block",
        "entry-point-absent-first-block",
        "unterminated-fence",
        "unterminated-fence-trailing-prose",
        "stray-closing-fence",
        "bare-code-trailing-prose",
        "bare-script",
        "prose-only",
        "single-word",
        "empty",
        "blank-block",
        "glued-closing-fence",
        "tilde-fence",
        "indented-fence",
        "sql-fenced",
        "sql-bare-semicolon",
        "sql-bare-cte-paragraph",
        "sql-prose-only",
        "yaml-fenced",
        "yaml-bare",
        "json-fenced",
        "config-prose-only",
    ],
)
def test_extract_solution(
    completion: str, family: str, entry_point: str | None, expected: str
) -> None:
    assert extract_solution(completion, family, entry_point) == expected


def test_extract_prefers_family_language_over_untagged() -> None:
    text = "```\nSELECT 1\n```\n```python\nx = 2\n```"
    assert extract_solution(text, "sql") == "SELECT 1\n"
    assert extract_solution(text, "code") == "x = 2\n"


# ------------------------------------------------------------------ config and prompts
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"samples": 0}, "samples must be >= 1, got 0"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"temperature": -0.1}, "temperature must be >= 0"),
        ({"temperature": float("nan")}, "temperature must be >= 0"),
        ({"top_p": 0.0}, "top_p must be in (0, 1]"),
        ({"top_p": 1.5}, "top_p must be in (0, 1]"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"dtype": "float16"}, "dtype must be one of auto, float32, bfloat16, got 'float16'"),
        ({"backend": "sglang"}, "backend must be one of transformers, replay"),
        ({"backend": "replay"}, "backend 'replay' needs replay_path"),
        ({"replay_path": "x.jsonl"}, "replay_path is only used by backend 'replay'"),
    ],
)
def test_config_rejects(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("]", r"\]")):
        SamplerConfig(**kwargs)  # type: ignore[arg-type]


def test_model_id() -> None:
    assert model_id(SamplerConfig()).startswith("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert model_id(SamplerConfig(model="/models/x", dtype="float32")) == "/models/x"
    assert model_id(SamplerConfig(model="/models/x", dtype="bfloat16")) == "/models/x @bfloat16"
    auto = model_id(SamplerConfig(model="/models/x"))
    assert auto == ("/models/x @bfloat16" if native_bf16() else "/models/x")
    assert model_id(SamplerConfig(backend="replay", replay_path="r.jsonl")) == "r.jsonl"


@pytest.mark.parametrize(
    ("family", "fence"),
    [("code", "```python"), ("api", "```python"), ("sql", "```sql"), ("config", "```yaml")],
)
def test_render_messages_asks_for_family_fence(family: str, fence: str) -> None:
    msgs = render_messages(SampleRequest("t", family, "Do the thing.", None))
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert fence in msgs[0]["content"]
    assert msgs[1]["content"] == "Do the thing."


def test_render_messages_names_entry_point() -> None:
    msgs = render_messages(SampleRequest("t", "code", "Add.", "add"))
    assert "`add`" in msgs[0]["content"]


def test_import_does_not_load_torch() -> None:
    code = (
        "import sys, tasksieve.transforms.samplers\n"
        "bad = [m for m in ('torch', 'transformers', 'apache_beam.ml') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


# ------------------------------------------------------------------ replay
ROWS = [
    {"task_id": "a", "completion": "a0", "model_id": "m-rec"},
    {"task_id": "b", "completion": "b0"},
    {"task_id": "a", "completion": "a1"},
    {"task_id": "a", "completion": "a2"},
]


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _parquet(path: Path, rows: list[dict[str, str]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(params=["jsonl", "jsonl.gz", "parquet"])
def replay_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / f"rec.{request.param}"
    return _parquet(path, ROWS) if request.param == "parquet" else _jsonl(path, ROWS)


def _replay(path: Path, k: int) -> list[Samples]:
    cfg = SamplerConfig(backend="replay", replay_path=str(path), samples=k)
    handler = make_model_handler(cfg)
    reqs = [SampleRequest(t, "code", "p") for t in ("a", "b", "zzz")]
    return list(handler.run_inference(reqs, handler.load_model()))


def test_replay_caps_at_k_in_file_order(replay_file: Path) -> None:
    out = _replay(replay_file, k=2)
    assert [s.completions for s in out] == [["a0", "a1"], ["b0"], []]
    assert {s.sampler for s in out} == {"replay"}


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_replay_short_of_k_says_how_many_were_asked(replay_file: Path, k: int) -> None:
    out = _replay(replay_file, k=k)
    recorded = {"a": 3, "b": 1, "zzz": 0}
    assert [s.requested for s in out] == [k, k, k]
    assert [s.shortfall for s in out] == [max(0, k - recorded[s.task_id]) for s in out]


def test_transformers_handler_says_how_many_were_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the model returns, each Samples carries K, so a short answer is visible."""
    from tasksieve.transforms.samplers.hf import LoadedModel, TransformersModelHandler

    handler = TransformersModelHandler(SamplerConfig(samples=4))
    # stands in for the model only: the test is about what run_inference reports
    monkeypatch.setattr(handler, "draw", lambda reqs, model: [(["one"], []) for _ in reqs])
    reqs = [SampleRequest(t, "code", "p") for t in ("a", "b")]
    out = list(handler.run_inference(reqs, LoadedModel(None, None, 0.0)))
    assert [(s.requested, s.shortfall) for s in out] == [(4, 3), (4, 3)]


def test_replay_model_id_recorded_or_path(replay_file: Path) -> None:
    a, b, _ = _replay(replay_file, k=4)
    assert a.model_id == "m-rec"
    assert b.model_id == str(replay_file)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"task_id": "", "completion": "x"}', "'task_id' must be a non-empty string"),
        ('{"task_id": "a"}', "'completion' must be a string"),
        ('["a", "b"]', "expected an object"),
    ],
)
def test_replay_malformed_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"task_id": "a", "completion": "ok"}\n\n' + line + "\n")
    with pytest.raises(ReplayFileError, match=f"{path}:3: .*{message}"):
        read_replay(str(path))


def test_replay_parquet_missing_column(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "bad.parquet", [{"task_id": "a", "text": "x"}])
    with pytest.raises(ReplayFileError, match=r"missing column.*completion"):
        read_replay(str(path))


def test_replay_bad_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"task_id": "a", "completion": "ok"}\n{"task_id": "\xff"}\n')
    with pytest.raises(ReplayFileError, match=f"{path}:2: not UTF-8"):
        read_replay(str(path))


def test_replay_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="replay file not found"):
        read_replay(str(tmp_path / "nope.jsonl"))


def test_replay_in_beam_pipeline(tmp_path: Path) -> None:
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from tasksieve.transforms.runtime.beam_ml import RunInference

    path = _jsonl(tmp_path / "rec.jsonl", ROWS)
    cfg = SamplerConfig(backend="replay", replay_path=str(path), samples=2)
    reqs = [SampleRequest(t, "code", "p") for t in ("a", "b", "zzz")]
    with TestPipeline() as p:
        got = (
            p
            | beam.Create(reqs)
            | RunInference(make_model_handler(cfg))
            | beam.Map(lambda s: (s.task_id, tuple(s.completions), s.sampler))
        )
        assert_that(
            got,
            equal_to(
                [("a", ("a0", "a1"), "replay"), ("b", ("b0",), "replay"), ("zzz", (), "replay")]
            ),
        )


# ------------------------------------------------------------------ model cache
@pytest.fixture
def fake_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A fake GGUF file and a fake converter that records each conversion."""
    gguf = tmp_path / "pkg" / model_cache.GGUF_FILE
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake weights")
    calls: list[Path] = []

    def convert(src: Path, out: Path) -> None:
        calls.append(out)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"w")

    monkeypatch.setattr(model_cache, "bundled_gguf", lambda: gguf)
    monkeypatch.setattr(model_cache, "convert_gguf", convert)
    return calls


def test_cache_converts_once(tmp_path: Path, fake_gguf: list[Path]) -> None:
    first = model_cache.ensure_default_model(str(tmp_path / "cache"))
    second = model_cache.ensure_default_model(str(tmp_path / "cache"))
    assert first == second and len(fake_gguf) == 1
    assert sorted(p.name for p in first.iterdir()) == ["config.json", "model.safetensors"]


def test_cache_concurrent_callers_convert_once(tmp_path: Path, fake_gguf: list[Path]) -> None:
    results: list[Path] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(model_cache.ensure_default_model(str(tmp_path)))
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and len(results) == 8 and len(fake_gguf) == 1


def test_cache_crash_leaves_no_entry(
    tmp_path: Path, fake_gguf: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(src: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise RuntimeError("killed mid-conversion")

    monkeypatch.setattr(model_cache, "convert_gguf", crash)
    with pytest.raises(RuntimeError, match="killed"):
        model_cache.ensure_default_model(str(tmp_path / "cache"))
    left = [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")]
    assert left == []


def test_cache_keyed_by_gguf_content(tmp_path: Path, fake_gguf: list[Path]) -> None:
    first = model_cache.ensure_default_model(str(tmp_path))
    model_cache.bundled_gguf().write_bytes(b"GGUF a newer release")
    second = model_cache.ensure_default_model(str(tmp_path))
    assert first != second and len(fake_gguf) == 2


def test_cache_root_respects_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TASKSIEVE_CACHE", str(tmp_path))
    assert model_cache.default_cache_root() == tmp_path / "models"
    assert model_cache.default_cache_root("/x/y") == Path("/x/y")


# ------------------------------------------------------------------ real model
def test_sample_seed_is_stable_and_distinct() -> None:
    from tasksieve.transforms.samplers.seeds import sample_seed

    assert sample_seed(0, "t", 0) == sample_seed(0, "t", 0)
    assert (
        len(
            {
                sample_seed(0, "t", 0),
                sample_seed(1, "t", 0),
                sample_seed(0, "u", 0),
                sample_seed(0, "t", 1),
            }
        )
        == 4
    )


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.skipif(
    not HAVE_TORCH, reason="needs torch and transformers: pip install 'tasksieve[cpu]'"
)
def test_default_model_generates() -> None:
    cfg = SamplerConfig(samples=2, max_new_tokens=24, seed=7)
    handler = make_model_handler(cfg)
    loaded = handler.load_model()
    reqs = [
        SampleRequest("add", "code", "Write a function add(a, b) returning a + b.", "add"),
        SampleRequest("q", "sql", "Table t(x INT). Return the largest x."),
    ]
    out = list(handler.run_inference(reqs, loaded))
    assert [s.task_id for s in out] == ["add", "q"]
    for s in out:
        assert len(s.completions) == 2
        assert all(isinstance(c, str) and c.strip() for c in s.completions)
        assert s.sampler == "transformers" and s.model_id == model_id(cfg)
        assert (s.requested, s.shortfall) == (2, 0)
    again = list(handler.run_inference(reqs[::-1], loaded))
    assert again[1].completions == out[0].completions  # seeded per task, not per batch


def test_transformers_backend_without_torch_names_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    handler = make_model_handler(SamplerConfig())
    with pytest.raises(ImportError, match=r"pip install 'tasksieve\[cpu\]'"):
        handler.load_model()


@pytest.mark.torch
@pytest.mark.skipif(
    not HAVE_TORCH, reason="needs torch and transformers: pip install 'tasksieve[cpu]'"
)
@pytest.mark.parametrize(("temperature", "top_p"), [(0.0, 0.95), (0.8, 1e-6)])
def test_row_sampler_greedy_limits(temperature: float, top_p: float) -> None:
    import torch

    from tasksieve.transforms.samplers.hf import _RowSampler

    scores = torch.randn(6, 1000, generator=torch.Generator().manual_seed(1))
    out = _RowSampler(list(range(6)), temperature, top_p)(None, scores)
    assert torch.equal(out.argmax(-1), scores.argmax(-1))
    assert torch.isinf(out).sum().item() == 6 * 999


@pytest.mark.torch
@pytest.mark.skipif(
    not HAVE_TORCH, reason="needs torch and transformers: pip install 'tasksieve[cpu]'"
)
def test_row_sampler_seeded_per_row() -> None:
    import torch

    from tasksieve.transforms.samplers.hf import _RowSampler

    scores = torch.zeros(4, 5000)  # uniform: every row's draw comes from its own seed
    a = _RowSampler([1, 2, 3, 1], 1.0, 1.0)(None, scores).argmax(-1)
    b = _RowSampler([1, 2, 3, 1], 1.0, 1.0)(None, scores).argmax(-1)
    assert torch.equal(a, b) and a[0] == a[3] and len(set(a.tolist())) == 3
