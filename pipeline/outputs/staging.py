"""Where a curate run is staged and how it is published, on a local or a remote filesystem.

Local output ``OUT`` (unchanged layout): shards are staged in ``.NAME.staging-RUNID`` beside
``OUT`` and the finished directory is renamed into place (the old run aside first, then
deleted), so ``OUT`` holds a whole run or none.

Remote output ``OUT`` (``gs://``, ``s3://``, ... where rename is a copy and not atomic)::

    OUT/runs/RUNID/        one run: tasks/, rejected/, rollouts/, manifest.json, catalog, report
    OUT/current.json       {"run_id": ..., "run": "runs/RUNID"}: the published run

Workers write the shards straight into ``OUT/runs/RUNID/``; the driver writes the run's
manifest there and ``current.json`` last, in one upload, so a reader that follows
``current.json`` (:func:`published_run`) sees the previous run or the new one whole, never
half. After the pointer moved, the run it pointed at before is deleted.

A failed run is kept for inspection: a ``FAILED`` file holding the error is written into its
staging directory (local) or run directory (remote) and its location is logged. A later
successful run into the same output deletes the staging of failed runs (only those with a
``FAILED`` file, so a run still going on beside it is left alone). A run killed outright
writes no ``FAILED`` file; its staging is not cleaned automatically and holds no manifest
(local) or is never pointed at (remote), so it is safe to delete by hand.

Not guarded against: two runs publishing into the same output at once (the last pointer
wins; the loser's run directory stays), and a reader that resolved the pointer just before
the old run was deleted (it then fails to read the shards and must resolve again).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tasksieve.transforms.runtime import fsio

log = logging.getLogger("tasksieve")

FAILED = "FAILED"
POINTER = "current.json"
RUNS = "runs"


class OutputExists(Exception):
    """The output directory holds an earlier run and overwrite was not asked for."""


def _failure_text(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip() + "\n"


def published_run(out: str) -> str | None:
    """The run directory a remote ``OUT/current.json`` points at, or None when unpublished."""
    pointer = fsio.join(out, POINTER)
    if not fsio.exists(pointer):
        return None
    data = json.loads(fsio.read_text(pointer))
    run = str(data["run"])
    if run.startswith("/") or ".." in run.split("/"):
        raise ValueError(f"{pointer}: run {run!r} is not a path below the output")
    return fsio.join(out, *run.split("/"))


@dataclass
class LocalTarget:
    """A local output directory, published by rename."""

    out: Path
    run_id: str
    published: bool = False

    @property
    def staging(self) -> Path:
        return self.out.parent / f".{self.out.name}.staging-{self.run_id}"

    @property
    def shards_root(self) -> str:
        """Where the pipeline writes the run's shards."""
        return str(self.staging)

    @property
    def location(self) -> str:
        """Where the run can be found once published."""
        return str(self.out)

    def check(self, overwrite: bool) -> None:
        out = self.out
        if out.exists() and not out.is_dir():
            raise OutputExists(f"{out} exists and is not a directory")
        if out.exists() and any(out.iterdir()) and not overwrite:
            raise OutputExists(f"{out} is not empty; pass --overwrite to replace it")

    def begin(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir()

    def local_dir(self) -> Path:
        """A local directory holding the run, for the driver's summary, catalog and report."""
        return self.staging

    def publish(self) -> Path:
        """Move the finished staging directory into place, replacing an earlier run."""
        old = self.out.parent / f".{self.out.name}.old-{self.run_id}"
        if self.out.exists():
            os.rename(self.out, old)
        os.rename(self.staging, self.out)
        self.published = True
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
        return self.out

    def discard(self) -> None:
        """Remove the staging directory (nothing was run, so nothing to inspect)."""
        shutil.rmtree(self.staging, ignore_errors=True)

    def keep_failed(self, exc: BaseException) -> str | None:
        """Mark the staging directory as a failed run and return it (None when gone).

        A run that failed after it was published (e.g. adding to the dedup index) is whole
        and stays published: nothing is marked.
        """
        if self.published or not self.staging.is_dir():
            return None
        (self.staging / FAILED).write_text(_failure_text(exc), encoding="utf-8")
        return str(self.staging)

    def clean_failed(self) -> list[str]:
        """Delete the staging directories of earlier failed runs into this output."""
        gone = []
        for d in sorted(self.out.parent.glob(f".{self.out.name}.staging-*")):
            if d != self.staging and (d / FAILED).is_file():
                shutil.rmtree(d, ignore_errors=True)
                gone.append(str(d))
        return gone


@dataclass
class RemoteTarget:
    """An output on an object store, published by writing ``current.json`` last."""

    out: str
    run_id: str
    published: bool = False
    _local: Path | None = field(default=None, repr=False)
    _downloaded: frozenset[str] = frozenset()

    @property
    def run_dir(self) -> str:
        return fsio.join(self.out, RUNS, self.run_id)

    @property
    def shards_root(self) -> str:
        return self.run_dir

    @property
    def location(self) -> str:
        return self.run_dir

    def check(self, overwrite: bool) -> None:
        if published_run(self.out) is not None and not overwrite:
            raise OutputExists(
                f"{self.out} holds a published run ({POINTER}); pass --overwrite to replace it"
            )

    def begin(self) -> None:
        """Nothing to create: object stores have no directories."""

    def local_dir(self) -> Path:
        """Download the run's files into a temporary directory (once) and return it."""
        if self._local is None:
            self._local = Path(tempfile.mkdtemp(prefix="tasksieve-run-"))
            names = []
            for f in fsio.list_files(self.run_dir):
                rel = fsio.relative(f, self.run_dir)
                target = self._local / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(fsio.read_bytes(f))
                names.append(rel)
            self._downloaded = frozenset(names)
        return self._local

    def _upload_new(self) -> None:
        """Upload what the driver wrote into the local copy (manifest, catalog, report)."""
        if self._local is None:
            return
        for f in sorted(p for p in self._local.rglob("*") if p.is_file()):
            rel = f.relative_to(self._local).as_posix()
            if rel not in self._downloaded and rel != "manifest.json":
                fsio.write_bytes(fsio.join(self.run_dir, *rel.split("/")), f.read_bytes())
        manifest = self._local / "manifest.json"  # last of the run's own files
        fsio.write_bytes(fsio.join(self.run_dir, "manifest.json"), manifest.read_bytes())

    def publish(self) -> str:
        """Upload the driver's files, then point ``current.json`` at this run; delete the old."""
        self._upload_new()
        previous = published_run(self.out)
        pointer = {"run_id": self.run_id, "run": f"{RUNS}/{self.run_id}"}
        fsio.write_text(fsio.join(self.out, POINTER), json.dumps(pointer, indent=2) + "\n")
        self.published = True
        if previous is not None and previous.rstrip("/") != self.run_dir:
            fsio.delete_tree(previous)
        self._drop_local()
        return self.run_dir

    def discard(self) -> None:
        fsio.delete_tree(self.run_dir)
        self._drop_local()

    def keep_failed(self, exc: BaseException) -> str | None:
        self._drop_local()
        if self.published:
            return None
        fsio.write_text(fsio.join(self.run_dir, FAILED), _failure_text(exc))
        return self.run_dir

    def clean_failed(self) -> list[str]:
        runs = fsio.join(self.out, RUNS)
        gone = []
        for marker in fsio.list_matching(runs, FAILED):
            run = marker[: -len(FAILED)].rstrip("/")
            if run != self.run_dir and fsio.relative(marker, runs).count("/") == 1:
                fsio.delete_tree(run)
                gone.append(run)
        return gone

    def _drop_local(self) -> None:
        if self._local is not None:
            shutil.rmtree(self._local, ignore_errors=True)
            self._local = None


Target = LocalTarget | RemoteTarget


def target_for(output: str, run_id: str) -> Target:
    """The staging and publishing of ``output`` (local path or remote URL)."""
    if fsio.is_remote(output):
        return RemoteTarget(output.rstrip("/"), run_id)
    return LocalTarget(Path(output).resolve(), run_id)
