"""SWE-bench-shaped records to repo tasks and back.

A record has ``instance_id``, ``repo`` (``owner/name``), ``base_commit``, ``patch`` (the fix),
``test_patch`` (the tests that judge it), ``problem_statement``, ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` (JSON text of a list, as SWE-bench stores them, or real lists); the other
SWE-bench fields (``hints_text``, ``version``, ``created_at``, ``environment_setup_commit``)
are kept in the task's ``metadata.swebench``. The repository must be a local git repository
under ``repos``: ``<repos>/<owner>__<name>`` (SWE-bench's own naming), ``<repos>/<owner>/<name>``
or ``<repos>/<name>``. The snapshot is the tree of ``base_commit`` with ``test_patch``
applied; the reference solution is ``patch``; the test patch's files join ``test_files``.

An exported record carries every field back, and ``snapshot`` besides (a tasksieve field): a
record with ``snapshot`` and no ``base_commit`` (a task that never came from a repository,
e.g. a synthesized one) imports from the snapshot store alone.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from tasksieve.schemas import RepoSpec, SourceInfo, TaskRecord
from tasksieve.schemas.repo import DEFAULT_TEST_FILES
from tasksieve.transforms.synth.records import (
    RecordError,
    apply_patch,
    id_list,
    store_with,
    text_field,
)
from tasksieve.verifiers.families.repo.snapshots import SnapshotError, SnapshotStore

KEPT_FIELDS = ("hints_text", "version", "created_at", "environment_setup_commit")
_DIFF_PATH = re.compile(r"^\+\+\+ b/(\S+)", re.MULTILINE)
_ID = re.compile(r"^[A-Za-z0-9_.:/\-]+$")


def find_repo(repos: Path, name: str) -> Path:
    """The local git repository for ``owner/name`` under ``repos`` (raises ``RecordError``)."""
    owner, _, short = name.partition("/")
    tried = [repos / f"{owner}__{short}", repos / owner / short, repos / (short or owner)]
    for path in tried:
        if path.is_dir() and ((path / ".git").exists() or (path / "HEAD").is_file()):
            return path
    shown = ", ".join(str(p) for p in tried)
    raise RecordError("repo", f"no local git repository for {name!r} (looked at {shown})")


def checkout(repo: Path, commit: str, dest: Path) -> None:
    """Write the tree of ``commit`` in ``repo`` into ``dest`` (``git archive``)."""
    if not re.fullmatch(r"[0-9a-fA-F]{7,64}|[A-Za-z0-9._/\-]{1,200}", commit) or commit[0] == "-":
        raise RecordError("base_commit", f"not a commit: {commit!r}")
    proc = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", commit],
        capture_output=True,
        timeout=300,
    )
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RecordError("base_commit", f"not in {repo}: {why[0] if why else commit}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")


def patched_paths(patch: str) -> list[str]:
    """The files a unified diff writes (its ``+++ b/`` paths), in order, once each."""
    return list(dict.fromkeys(_DIFF_PATH.findall(patch)))


def import_record(
    data: dict[str, Any],
    repos: Path | None,
    store: SnapshotStore,
    dataset: str = "swebench",
    max_bytes: int | None = None,
) -> TaskRecord:
    """The repo task of one SWE-bench record (raises ``RecordError`` naming the bad field)."""
    iid = text_field(data, "instance_id")
    if not _ID.match(iid) or len(iid) > 256:
        raise RecordError("instance_id", f"{iid!r} is not usable as a task id ([A-Za-z0-9_.:/-])")
    prompt = text_field(data, "problem_statement")
    patch = text_field(data, "patch")
    test_patch = text_field(data, "test_patch", required=False)
    f2p = id_list(data, "FAIL_TO_PASS")
    p2p = id_list(data, "PASS_TO_PASS", required=False)
    repo_name = text_field(data, "repo", required=False)
    commit = text_field(data, "base_commit", required=False)
    snapshot = text_field(data, "snapshot", required=False)
    if commit:
        if not repo_name:
            raise RecordError("repo", "missing (needed with base_commit)")
        if repos is None:
            raise RecordError("repo", "no --repos directory to find the repository in")
        repo = find_repo(repos, repo_name)

        def fill(root: Path) -> None:
            checkout(repo, commit, root)
            apply_patch(root, test_patch, "test_patch")

        try:
            snapshot = store_with(store, fill, max_bytes)
        except SnapshotError as e:
            raise RecordError("base_commit", str(e)) from None
    elif snapshot:
        if snapshot not in store:
            raise RecordError("snapshot", f"{snapshot} is not in the snapshot store {store.root}")
    else:
        raise RecordError("base_commit", "missing (or a snapshot reference)")
    extra_tests = [p for p in patched_paths(test_patch) if p not in DEFAULT_TEST_FILES]
    try:
        spec = RepoSpec(
            snapshot=snapshot,
            fail_to_pass=f2p,
            pass_to_pass=p2p,
            test_files=[*DEFAULT_TEST_FILES, *extra_tests],
        )
    except ValueError as e:
        raise RecordError("FAIL_TO_PASS", _first_error(e)) from None
    meta: dict[str, Any] = {"repo": repo_name, "base_commit": commit, "test_patch": test_patch}
    meta |= {k: data[k] for k in KEPT_FIELDS if isinstance(data.get(k), str)}
    url = f"https://github.com/{repo_name}" if repo_name.count("/") == 1 else None
    return TaskRecord(
        id=iid,
        family="repo",
        prompt=prompt,
        verifier=spec,
        reference_solution=patch,
        source=SourceInfo(dataset=dataset, license="unknown", url=url),
        tags=["repo", "swebench"],
        metadata={"swebench": meta},
    )


def _first_error(e: ValueError) -> str:
    return str(e).splitlines()[-1].strip() if str(e) else type(e).__name__


def export_record(task: TaskRecord) -> dict[str, Any]:
    """The SWE-bench-shaped record of a repo task (lists as JSON text, as SWE-bench has them)."""
    spec = task.verifier
    if not isinstance(spec, RepoSpec):
        raise RecordError("family", f"not a repo task: {task.family}")
    meta = task.metadata.get("swebench")
    meta = meta if isinstance(meta, dict) else {}
    out: dict[str, Any] = {
        "instance_id": task.id,
        "repo": meta.get("repo", ""),
        "base_commit": meta.get("base_commit", ""),
        "patch": task.reference_solution,
        "test_patch": meta.get("test_patch", ""),
        "problem_statement": task.prompt,
        "FAIL_TO_PASS": json.dumps(spec.fail_to_pass),
        "PASS_TO_PASS": json.dumps(spec.pass_to_pass),
        "snapshot": spec.snapshot,
    }
    out |= {k: meta[k] for k in KEPT_FIELDS if k in meta}
    return out
