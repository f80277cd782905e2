"""Harbor-format task directories to repo tasks and back.

A Harbor task is a directory: ``task.toml`` (configuration, free-form ``[metadata]``),
``instruction.md`` (what the agent reads), ``environment/`` (the container the agent works in),
``tests/`` (the verifier, ``test.sh``, uploaded after the agent finishes) and optionally
``solution/`` (format described at harborframework.com/docs/tasks). A repo task maps onto it:

- ``instruction.md``: the statement; ``solution/fix.patch`` (and ``solve.sh`` applying it): the
  reference patch;
- ``environment/repo/``: the snapshot's tree, copied into ``/workspace`` by
  ``environment/Dockerfile`` (Python, pytest and the task's requirements installed);
- ``tests/config.json``: ``fail_to_pass``, ``pass_to_pass``, ``test_files``, ``test_args``
  (and SWE-bench's ``FAIL_TO_PASS``/``PASS_TO_PASS`` spellings, which are read too);
  ``tests/test.sh`` runs them and writes 1 or 0 to ``/logs/verifier/reward.txt``;
- ``task.toml``: ``[verifier] timeout_sec``, ``[environment] memory_mb``/``storage_mb``, and
  ``[metadata.tasksieve]`` with what Harbor has no place for (id, source, tags, metadata, reward,
  environment, as JSON text where TOML cannot hold it).

A directory without ``environment/repo/`` imports when its ``tests/config.json`` is a
SWE-bench record (``repo``, ``base_commit``, ``test_patch``, ``patch``), the shape Harbor's
SWE-bench adapter writes, and the repository is under ``repos`` (see ``swebench``).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tomllib
from pathlib import Path
from typing import Any

from tasksieve.schemas import RepoEnvironment, RepoSpec, RewardSpec, SourceInfo, TaskRecord
from tasksieve.transforms.synth.records import RecordError, id_list
from tasksieve.transforms.synth.swebench import import_record as import_swebench
from tasksieve.verifiers.families.repo.snapshots import SnapshotError, SnapshotStore

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def task_dirs(paths: list[Path]) -> list[Path]:
    """Every task directory (one holding ``task.toml``) at or below ``paths``, sorted."""
    found: list[Path] = []
    for p in paths:
        if (p / "task.toml").is_file():
            found.append(p)
        elif p.is_dir():
            found += sorted(
                t.parent
                for t in p.rglob("task.toml")
                if "environment" not in t.relative_to(p).parts
            )
    return sorted(dict.fromkeys(found))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML for {type(v).__name__}")


def _key(k: str) -> str:
    return k if _BARE_KEY.match(k) else json.dumps(k, ensure_ascii=False)


def _plain(v: Any) -> bool:
    if isinstance(v, list):
        return all(isinstance(x, str | int | float | bool) for x in v)
    return isinstance(v, str | int | float | bool)


def task_toml(task: TaskRecord, spec: RepoSpec) -> str:
    """The ``task.toml`` text of a repo task."""
    harbor = task.metadata.get("harbor")
    plain = {k: v for k, v in harbor.items() if _plain(v)} if isinstance(harbor, dict) else {}
    own = {
        "id": task.id,
        "source": task.source.model_dump_json(),
        "tags": task.tags,
        "metadata": json.dumps(task.metadata, ensure_ascii=False),
        "reward": task.reward.model_dump_json(),
        "environment": spec.environment.model_dump_json(),
    }
    if task.feedback is not None:
        own["feedback"] = task.feedback
    lines = ['version = "1.0"', "", "[metadata]"]
    lines += [f"{_key(k)} = {_toml_value(v)}" for k, v in plain.items() if k != "tasksieve"]
    lines += ["", "[metadata.tasksieve]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in own.items()]
    lines += ["", "[verifier]", f"timeout_sec = {float(spec.timeout_s)!r}"]
    lines += ["", "[agent]", f"timeout_sec = {max(600.0, float(spec.timeout_s))!r}"]
    lines += ["", "[environment]", f"memory_mb = {spec.memory_mb}", f"storage_mb = {spec.disk_mb}"]
    return "\n".join(lines) + "\n"


def _test_sh(spec: RepoSpec) -> str:
    ids = " ".join(shlex.quote(t) for t in [*spec.fail_to_pass, *spec.pass_to_pass])
    args = " ".join(shlex.quote(a) for a in spec.test_args)
    return (
        "#!/bin/bash\n"
        "# Runs the task's fail_to_pass and pass_to_pass tests; reward 1 when all pass.\n"
        "mkdir -p /logs/verifier\ncd /workspace || exit 1\n"
        f"if python -m pytest -p no:cacheprovider -q {args} -- {ids}; then\n"
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    )


def _dockerfile(spec: RepoSpec) -> str:
    reqs = " ".join(shlex.quote(r) for r in ["pytest", *spec.environment.requirements])
    return (
        f"FROM python:{spec.environment.python}-slim\n"
        f"RUN pip install --no-cache-dir {reqs}\n"
        "WORKDIR /workspace\nCOPY repo/ /workspace/\n"
    )


def dir_name(task_id: str) -> str:
    """A directory name for a task id (``/`` and ``:`` become ``_``)."""
    return re.sub(r"[/:]", "_", task_id)


def export_task(task: TaskRecord, store: SnapshotStore, out: Path) -> Path:
    """Write ``task`` as a Harbor task directory under ``out``; return the directory."""
    spec = task.verifier
    if not isinstance(spec, RepoSpec):
        raise RecordError("family", f"not a repo task: {task.family}")
    try:
        tree = store.path(spec.snapshot)
    except SnapshotError as e:
        raise RecordError("verifier.snapshot", str(e)) from None
    d = out / dir_name(task.id)
    if d.exists():
        raise RecordError("id", f"{d} exists already")
    shutil.copytree(tree, d / "environment" / "repo")
    for p in [d / "environment" / "repo", *(d / "environment" / "repo").rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
        elif p.is_file() and not p.is_symlink():
            p.chmod(0o755 if p.stat().st_mode & 0o111 else 0o644)
    (d / "environment" / "Dockerfile").write_text(_dockerfile(spec), encoding="utf-8")
    (d / "task.toml").write_text(task_toml(task, spec), encoding="utf-8")
    (d / "instruction.md").write_text(task.prompt, encoding="utf-8")
    (d / "tests").mkdir()
    config = {
        "fail_to_pass": spec.fail_to_pass,
        "pass_to_pass": spec.pass_to_pass,
        "test_files": spec.test_files,
        "test_args": spec.test_args,
        "FAIL_TO_PASS": spec.fail_to_pass,
        "PASS_TO_PASS": spec.pass_to_pass,
    }
    (d / "tests" / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (d / "tests" / "test.sh").write_text(_test_sh(spec), encoding="utf-8")
    (d / "tests" / "test.sh").chmod(0o755)
    (d / "solution").mkdir()
    (d / "solution" / "fix.patch").write_text(task.reference_solution, encoding="utf-8")
    solve = "#!/bin/bash\ncd /workspace && git apply /solution/fix.patch\n"
    (d / "solution" / "solve.sh").write_text(solve, encoding="utf-8")
    (d / "solution" / "solve.sh").chmod(0o755)
    return d


def _read(d: Path, rel: str, field: str) -> str:
    p = d / rel
    if not p.is_file():
        raise RecordError(field, f"{rel} is missing")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RecordError(field, f"{rel} is not UTF-8 text") from None


def import_task(
    d: Path, repos: Path | None, store: SnapshotStore, max_bytes: int | None = None
) -> TaskRecord:
    """The repo task of the Harbor task directory ``d`` (raises ``RecordError``)."""
    try:
        conf = tomllib.loads(_read(d, "task.toml", "task.toml"))
    except tomllib.TOMLDecodeError as e:
        raise RecordError("task.toml", f"not TOML: {e}") from None
    raw_meta = conf.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    raw_own = meta.get("tasksieve")
    own: dict[str, Any] = raw_own if isinstance(raw_own, dict) else {}
    try:
        tests = json.loads(_read(d, "tests/config.json", "tests/config.json"))
    except ValueError as e:
        raise RecordError("tests/config.json", f"not JSON: {e}") from None
    if not isinstance(tests, dict):
        raise RecordError("tests/config.json", "must be a JSON object")
    prompt = _read(d, "instruction.md", "instruction.md")
    if not (d / "environment" / "repo").is_dir():
        if "base_commit" not in tests:
            raise RecordError("environment/repo", "missing (and no SWE-bench record in tests)")
        record = {"problem_statement": prompt, **tests}
        task = import_swebench(record, repos, store, "harbor", max_bytes)
        return task.model_copy(update={"id": str(own.get("id", task.id))})
    f2p = id_list(tests, "fail_to_pass" if "fail_to_pass" in tests else "FAIL_TO_PASS")
    p2p = id_list(tests, "pass_to_pass" if "pass_to_pass" in tests else "PASS_TO_PASS", False)
    fix = d / "solution" / "fix.patch"
    reference = _read(d, "solution/fix.patch", "solution") if fix.exists() else ""
    if not reference.strip():
        raise RecordError("solution", "solution/fix.patch is missing or empty")
    try:
        snapshot = store.put(d / "environment" / "repo", max_bytes=max_bytes)
    except SnapshotError as e:
        raise RecordError("environment/repo", str(e)) from None
    try:
        verifier, agent = conf.get("verifier", {}), conf.get("environment", {})
        extra: dict[str, Any] = {}
        if isinstance(tests.get("test_files"), list):
            extra["test_files"] = tests["test_files"]
        if isinstance(tests.get("test_args"), list):
            extra["test_args"] = tests["test_args"]
        if "environment" in own:
            extra["environment"] = RepoEnvironment.model_validate_json(own["environment"])
        for src, key, dst in (
            (verifier, "timeout_sec", "timeout_s"),
            (agent, "memory_mb", "memory_mb"),
            (agent, "storage_mb", "disk_mb"),
        ):
            if key in src:
                extra[dst] = float(src[key]) if dst == "timeout_s" else src[key]
        spec = RepoSpec(snapshot=snapshot, fail_to_pass=f2p, pass_to_pass=p2p, **extra)
        fields: dict[str, Any] = {}
        if own:
            fields["source"] = SourceInfo.model_validate_json(own["source"])
            fields["tags"] = own["tags"]
            fields["metadata"] = json.loads(own["metadata"])
            fields["reward"] = RewardSpec.model_validate_json(own["reward"])
            fields["feedback"] = own.get("feedback")
        else:
            fields["source"] = SourceInfo(dataset="harbor")
            fields["tags"] = ["repo", "harbor"]
            fields["metadata"] = {"harbor": {k: v for k, v in meta.items() if k != "tasksieve"}}
        return TaskRecord(
            id=str(own.get("id", d.name)),
            family="repo",
            prompt=prompt,
            verifier=spec,
            reference_solution=reference,
            **fields,
        )
    except (ValueError, KeyError, TypeError, SnapshotError) as e:
        raise RecordError("task.toml", _short(e)) from None


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]
