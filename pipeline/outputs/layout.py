"""The one reader of a curate output's layout and manifest.

An output directory is either one run (``manifest.json``, ``tasks/``, ``rejected/``,
``rollouts/``, ...) or a publish root (``runs/<name>/`` and a ``current`` link to the live
run, ``tasksieve.pipeline.outputs.publish``). ``RunLayout.find(OUT)`` tells which, names the
run to read, and reads its ``manifest.json`` once; every reader of outputs (catalog, report,
checks, publish, train, query) goes through it, so a directory that is not an output fails
the same way everywhere: ``NotAnOutput`` with ``<path>: not a tasksieve output: <why>``.

What this does NOT check: that the manifest's schema version is one this tasksieve writes
(``manifest`` validates the fields; a caller that needs the version checks ``raw``), that the
shards agree with the manifest (``tasksieve check`` does), or remote outputs (their pointer is
``current.json``, ``tasksieve.pipeline.outputs.remote``, which copies the run locally first).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasksieve.schemas import Manifest

MANIFEST = "manifest.json"
CURRENT = "current"
RUNS = "runs"


class NotAnOutput(ValueError):
    """The directory is not a finished tasksieve output; the message says what is missing."""

    def __init__(self, where: Path | str, why: str) -> None:
        super().__init__(f"{where}: not a tasksieve output: {why}")


class UnreadableShard(NotAnOutput):
    """A shard of a finished output cannot be read (corrupt, truncated, not Parquet)."""

    def __init__(self, where: Path | str, why: str) -> None:
        ValueError.__init__(self, f"{where}: not a readable Parquet shard ({why})")


@dataclass(frozen=True)
class RunLayout:
    """Where a curate output's run lives and what its manifest says.

    ``out_dir`` is the directory given; ``run_dir`` the run read (``out_dir`` itself, or what
    ``out_dir/current`` leads to); ``run_prefix`` the run's path relative to ``out_dir`` ('' or
    'current/'); ``raw`` the manifest as parsed JSON.
    """

    out_dir: Path
    run_dir: Path
    run_prefix: str
    raw: dict[str, Any]

    @classmethod
    def find(cls, out_dir: Path | str) -> RunLayout:
        """The layout of ``out_dir``; raises ``NotAnOutput`` saying why it is not one."""
        out_dir = Path(out_dir)
        if not out_dir.is_dir():
            raise NotAnOutput(out_dir, "no such directory")
        if (out_dir / MANIFEST).is_file():
            prefix = ""
        elif (out_dir / RUNS).is_dir() and (out_dir / CURRENT / MANIFEST).is_file():
            prefix = f"{CURRENT}/"
        else:
            raise NotAnOutput(
                out_dir, f"no {MANIFEST} (a finished run), nor {RUNS}/ with {CURRENT}/{MANIFEST}"
            )
        run_dir = out_dir / prefix if prefix else out_dir
        return cls(out_dir, run_dir, prefix, _read(run_dir / MANIFEST))

    @property
    def is_root(self) -> bool:
        """Whether ``out_dir`` is a publish root of runs (else it is one run)."""
        return bool(self.run_prefix)

    @property
    def manifest_path(self) -> Path:
        return self.run_dir / MANIFEST

    @property
    def manifests_glob(self) -> str:
        """Every run's manifest, relative to ``out_dir``."""
        return f"{RUNS}/*/{MANIFEST}" if self.is_root else MANIFEST

    @functools.cached_property
    def manifest(self) -> Manifest:
        """The manifest validated; ``NotAnOutput`` naming the first bad field."""
        try:
            return Manifest.model_validate(self.raw)
        except ValueError as e:
            first = str(e).splitlines()[1:3] or [str(e)]
            why = " ".join(line.strip() for line in first)
            raise NotAnOutput(self.manifest_path, f"not a tasksieve manifest ({why})") from None

    def shards(self, kind: str) -> list[Path]:
        """The run's Parquet shards of ``kind`` (``tasks``, ``rejected``, ``rollouts``...)."""
        return sorted((self.run_dir / kind).rglob("*.parquet"))

    def refuse(self, why: str) -> NotAnOutput:
        """The error for a manifest a caller finds unusable (``why``: what is wrong)."""
        return NotAnOutput(self.manifest_path, why)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as e:
        raise NotAnOutput(path, f"{MANIFEST} is not JSON ({e})") from None
    except OSError as e:
        raise NotAnOutput(path, f"cannot read {MANIFEST} ({e.strerror or e})") from None
    if not isinstance(data, dict):
        raise NotAnOutput(path, f"{MANIFEST} is not a JSON object")
    return data
