"""Readers of a remote curate output: find the published run and copy it to a local directory.

``tasksieve query`` and ``tasksieve train`` read shards with DuckDB and pyarrow from local
paths; given a remote output (``gs://``, ``s3://``, ...) they read the run that
``OUT/current.json`` points at (or ``OUT`` itself when it holds a ``manifest.json``, i.e. a
run directory named directly) after :func:`localize` copied it into a temporary directory,
removed when the process exits. Credentials and endpoints come from the environment the
filesystem's client reads (for S3: boto3's ``AWS_*`` variables and config files).

Not guarded against: a run larger than the local disk (the copy is whole), and the pointer
moving while the copy is made (the copy is of the run it pointed at when resolved; a run
deleted meanwhile by a newer publish fails the copy with the filesystem's error).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from tasksieve.pipeline.outputs.layout import MANIFEST, NotAnOutput
from tasksieve.pipeline.outputs.staging import POINTER, published_run
from tasksieve.transforms.runtime import fsio


def remote_run_dir(output: str) -> str:
    """The run directory to read for the remote ``output`` (``NotAnOutput`` if none)."""
    run = published_run(output)
    if run is not None:
        return run
    if fsio.exists(fsio.join(output, MANIFEST)):
        return output.rstrip("/")
    raise NotAnOutput(output, f"no {POINTER} (a published root) and no {MANIFEST} (a run)")


def localize(path: str) -> Path:
    """A local directory holding the curate output at ``path`` (copied when remote)."""
    if not fsio.is_remote(path):
        return Path(path)
    run = remote_run_dir(path)
    local = Path(tempfile.mkdtemp(prefix="tasksieve-run-"))
    atexit.register(shutil.rmtree, local, True)
    for f in fsio.list_files(run):
        target = local.joinpath(*fsio.relative(f, run).split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(fsio.read_bytes(f))
    return local
