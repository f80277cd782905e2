"""The repo family's flag: where repository snapshots are stored (standard library only)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

STORE_ENV = "TASKSIEVE_SNAPSHOT_STORE"
STORE_DIR = "snapshots"


def add_snapshot_store_flag(p: argparse.ArgumentParser) -> None:
    """``--snapshot-store DIR``."""
    p.add_argument(
        "--snapshot-store",
        metavar="DIR",
        help="where repo tasks' snapshots are (content-addressed; environments are built under "
        f"DIR/envs). Default: ${STORE_ENV}, else a '{STORE_DIR}' folder in or beside the "
        "input's folder; no other location is assumed",
    )


def _local(path: str) -> Path | None:
    if "://" in path and not path.startswith("file://"):
        return None
    return Path(path.removeprefix("file://"))


def snapshot_store(args: argparse.Namespace, inputs: Sequence[str]) -> str | None:
    """The store directory: the flag, the variable, or a ``snapshots/`` folder found from the
    inputs (the input folder's own, or its parent's; for a file, its folder's or the parent's).

    Raises ``ValueError`` when a store was named but is not a directory.
    """
    named = getattr(args, "snapshot_store", None) or os.environ.get(STORE_ENV)
    if named:
        if not Path(named).is_dir():
            raise ValueError(f"snapshot store {named!r} is not a directory")
        return str(Path(named).resolve())
    for raw in inputs:
        path = _local(raw)
        if path is None:
            continue
        here = path if path.is_dir() else path.parent
        for d in (here, here.parent):
            if (d / STORE_DIR).is_dir():
                return str((d / STORE_DIR).resolve())
    return None
