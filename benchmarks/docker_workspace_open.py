"""A docker workspace session: open (container start, the tree copied into its tmpfs, agent
ready) and ``diff`` (the guest's listing compared on the host), p50 over ``--rounds``.

A generated repository of ``--files`` Python files (40 lines each) is made into its image
once (not timed); each round opens a session, appends a line to one file, takes the diff and
closes the session. The load average is printed before and after.

    python -m benchmarks.docker_workspace_open --files 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.timing import machine_line
from tasksieve.verifiers.sandbox.docker.workspace import open_docker_workspace, snapshot_image
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec


def make_tree(root: Path, files: int) -> int:
    """``files`` modules under ``root`` in 40 packages; their total size in bytes."""
    total = 0
    for i in range(files):
        pkg = root / f"pkg{i % 40}"
        pkg.mkdir(exist_ok=True)
        text = f"def f{i}():\n    return {i}\n" * 20
        (pkg / f"m{i}.py").write_text(text)
        total += len(text)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="docker-ws-bench-"))
    size = make_tree(root, args.files)
    snapshot_image(str(root))
    print("before:", machine_line())
    opens, diffs = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        ws = open_docker_workspace(WorkspaceSpec(str(root)))
        opens.append(time.perf_counter() - t0)
        try:
            ws.exec("echo '# edited' >> pkg1/m1.py")
            t0 = time.perf_counter()
            assert "+# edited" in ws.diff()
            diffs.append(time.perf_counter() - t0)
        finally:
            ws.close()
    print(
        f"{args.files} files, {size // 1024} KiB: open p50 {statistics.median(opens):.3f} s, "
        f"diff p50 {statistics.median(diffs):.3f} s ({args.rounds} rounds)"
    )
    print("after:", machine_line())


if __name__ == "__main__":
    main()
