"""The repo family's guest: apply a solution's patch, restore the tests, run pytest, report.

It reads one JSON job (from stdin, or from the file named by ``argv[1]``, which it deletes at
once) and works in ``job["work"]``: in the packed mode it first copies the snapshot from
``job["snap"]`` (read-only input files plus ``job["links"]``) into a writable ``work``; in the
workspace mode ``work`` is already a fresh copy-on-write view of the snapshot (which no session
can reach by any other path), so before the patch it keeps a copy of the protected paths
(``stash``, in its private scratch directory) and restores from that.

Then: the patch is applied with the strict applier (``patchapply``); every path matching a
``test_files`` pattern, and every harness file (``conftest.py``, ``pytest.ini``, ``tox.ini``,
``setup.cfg``, ``pyproject.toml``, ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``)
anywhere in the tree, is put back as the snapshot has it (removed when the snapshot has none);
pytest runs the asked ids in a child process with ``-S`` (no site hooks), plugin autoload off,
the outcomes plugin loaded by name, no cache and no bytecode writes, under a time and address
space limit, in its own process group. The last stdout line is ``<nonce> <json>``: the raw
outcome lines of the asked ids, pytest's exit code, whether it timed out, and its output tail.

The child holds no descriptor of this process's stdout, and this process marks itself
non-dumpable so a same-uid child cannot open ``/proc/<ppid>/fd`` or ``mem``. What it does NOT
guard against: code under test rewriting pytest or the plugin in its own interpreter (the host
counts an asked id that never reports as not passed, and distrusts an all-pass report with a
non-zero exit).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tasksieve.verifiers.families.repo.guest.patchapply import PatchError, apply_patch

HARNESS_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "sitecustomize.py",
        "usercustomize.py",
        "tasksieve_outcomes.py",
        "tasksieve_launch.py",
    }
)
_SKIP = frozenset({".git", "__pycache__", ".pytest_cache"})


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: ``**`` spans directories (also none), ``*``/``?`` stay in one."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _walk(root: str) -> dict[str, str]:
    """Relative path -> ``f`` (file) or ``l`` (symlink) under ``root``, not following links."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        kept = []
        for d in dirnames:
            if d in _SKIP:
                continue
            if os.path.islink(os.path.join(dirpath, d)):
                filenames.append(d)
            else:
                kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            full = os.path.join(dirpath, name)
            found[os.path.relpath(full, root)] = "l" if os.path.islink(full) else "f"
    return found


def _protected(rel: str, patterns: list[re.Pattern[str]]) -> bool:
    base = rel.rsplit("/", 1)[-1]
    if base in HARNESS_NAMES or base.endswith(".pth"):
        return True
    return any(p.match(rel) for p in patterns)


def _real_dirs(work: str, rel: str) -> None:
    """Make every parent of ``rel`` under ``work`` a real directory (links, files removed)."""
    cur = work
    for part in rel.split("/")[:-1]:
        cur = os.path.join(cur, part)
        if os.path.islink(cur) or (os.path.exists(cur) and not os.path.isdir(cur)):
            os.unlink(cur)
        if not os.path.isdir(cur):
            os.mkdir(cur)


def _remove(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def restore(work: str, snap: str, links: dict[str, str], patterns: list[str]) -> list[str]:
    """Put every protected path back as the snapshot has it; returns what had to change."""
    regs = [glob_regex(p) for p in patterns]
    snap_entries = _walk(snap)
    snap_entries.update({rel: "l" for rel in links})
    changed = []
    for rel in sorted(_walk(work)):
        if _protected(rel, regs) and rel not in snap_entries:
            _remove(os.path.join(work, rel))
            changed.append(rel)
    for rel, kind in sorted(snap_entries.items()):
        if not _protected(rel, regs):
            continue
        src, dst = os.path.join(snap, rel), os.path.join(work, rel)
        target = links.get(rel) if rel in links else None
        if kind == "l" and target is None:
            target = os.readlink(src)
        if target is not None:
            if os.path.islink(dst) and os.readlink(dst) == target:
                continue
            _real_dirs(work, rel)
            _remove(dst)
            os.symlink(target, dst)
            changed.append(rel)
            continue
        with open(src, "rb") as fh:
            want = fh.read()
        same = False
        if os.path.isfile(dst) and not os.path.islink(dst):
            with open(dst, "rb") as fh:
                same = fh.read() == want
        if same:
            continue
        _real_dirs(work, rel)
        _remove(dst)
        with open(dst, "wb") as fh:
            fh.write(want)
        os.chmod(dst, os.stat(src).st_mode & 0o755 | 0o600)
        changed.append(rel)
    return changed


def stash(work: str, dest: str, patterns: list[str]) -> str:
    """Copy every protected path of the untouched ``work`` tree into ``dest`` (links as
    links); ``dest`` then stands for the snapshot in ``restore``."""
    regs = [glob_regex(p) for p in patterns]
    os.makedirs(dest, exist_ok=True)
    for rel, kind in _walk(work).items():
        if not _protected(rel, regs):
            continue
        src, dst = os.path.join(work, rel), os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if kind == "l":
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copyfile(src, dst, follow_symlinks=False)
            os.chmod(dst, os.stat(src).st_mode & 0o777)
    return dest


def _copy_tree(snap: str, work: str, links: dict[str, str]) -> None:
    shutil.copytree(snap, work, symlinks=True, dirs_exist_ok=True)
    for dirpath, _dirnames, filenames in os.walk(work):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, os.stat(full).st_mode | 0o600)
    for rel, target in links.items():
        _real_dirs(work, rel)
        os.symlink(target, os.path.join(work, rel))


def _no_dump() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _limit(memory_mb: int) -> None:
    import resource

    os.setsid()
    cap = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


LAUNCHER = """import sys
root = sys.argv[1]
try:
    import pytest
    import tasksieve_outcomes
except ImportError as exc:
    sys.stderr.write("tasksieve: pytest is not importable: %s\\n" % exc)
    sys.exit(NO_PYTEST)
sys.path.insert(0, root)
sys.exit(pytest.main(sys.argv[2:]))
"""
NO_PYTEST = 97


def _sink(scratch: str) -> tuple[int, str]:
    """The outcomes file, opened here and unlinked when ``/proc`` can reopen it by descriptor
    (so code under test finds no path to it); returns (fd, what the plugin opens)."""
    path = os.path.join(scratch, "outcomes.jsonl")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    if os.path.exists(f"/proc/self/fd/{fd}"):
        os.unlink(path)
        return fd, f"/proc/self/fd/{fd}"
    return fd, path


def run_pytest(job: dict, work: str, scratch: str) -> dict:
    """Run pytest on the asked ids; the outcome lines of those ids and how the run ended.

    pytest and the outcome plugin are imported by a launcher before the work tree is put on
    ``sys.path``, so a file of the solution cannot shadow them (a ``pytest.py`` at the root)."""
    plugin_dir = os.path.join(scratch, "plugin")
    os.makedirs(plugin_dir, exist_ok=True)
    with open(os.path.join(plugin_dir, "tasksieve_outcomes.py"), "w") as fh:
        fh.write(job["plugin"])
    launcher = os.path.join(plugin_dir, "tasksieve_launch.py")
    with open(launcher, "w") as fh:
        fh.write(LAUNCHER.replace("NO_PYTEST", str(NO_PYTEST)))
    fd, sink = _sink(scratch)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(job["pythonpath"]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "TASKSIEVE_OUTCOMES": sink,
    }
    argv = [job["python"], "-S", launcher, work, "-p", "tasksieve_outcomes"]
    argv += ["-p", "no:cacheprovider", "-q", "--rootdir", work, *job["test_args"], *job["ids"]]
    log = os.path.join(scratch, "pytest.log")
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            close_fds=True,
            pass_fds=(fd,),
            preexec_fn=lambda: _limit(job["memory_mb"]),  # the guest runs no threads
        )
        try:
            code: int | None = proc.wait(timeout=job["timeout_s"])
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    asked = set(job["ids"])
    asked_files = {i.split("::", 1)[0] for i in asked}
    kept = []
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as fh:
        fh.seek(0)
        for line in fh:
            try:
                rec = json.loads(line)
                tid = rec["id"]
            except (ValueError, KeyError, TypeError):
                continue
            if (
                tid in asked
                or tid.split("::", 1)[0] in asked  # a whole file was asked for
                or (rec.get("phase") == "collect" and tid in asked_files | {""})
            ):
                kept.append(line.rstrip("\n"))
    with open(log, "rb") as fh:
        fh.seek(max(0, os.path.getsize(log) - 3000))
        tail = fh.read().decode("utf-8", "replace")
    if code == NO_PYTEST and not kept:
        raise RuntimeError(f"pytest did not start in the environment: {tail[-500:]}")
    return {"exit": code, "timed_out": timed_out, "lines": kept, "tail": tail}


def main() -> None:
    _no_dump()
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as fh:
            job = json.load(fh)
        os.unlink(sys.argv[1])
    else:
        job = json.loads(sys.stdin.read())
    nonce = job["nonce"]
    t0 = time.monotonic()
    here = os.getcwd()
    scratch = tempfile.mkdtemp(prefix="repo-guest-", dir=here if job["mode"] == "packed" else None)
    work = os.path.join(here, job["work"])
    snap = os.path.join(here, job["snap"] or os.path.join(scratch, "snap"))
    job["pythonpath"] = [os.path.join(here, p) for p in job["pythonpath"]]
    if not os.path.isabs(job.get("python") or ""):  # e.g. "python3": this interpreter
        job["python"] = sys.executable
    links = dict(job.get("links") or {})
    result: dict = {}
    try:
        if job["mode"] == "packed":
            _copy_tree(snap, work, links)
        else:
            stash(work, snap, job["test_files"])
        try:
            applied = apply_patch(work, job["patch"])
        except PatchError as exc:
            result = {"status": "patch_failed", "detail": str(exc)[:2000]}
        except (OSError, UnicodeError) as exc:
            result = {"status": "patch_failed", "detail": f"{type(exc).__name__}: {exc}"[:2000]}
        else:
            restored = restore(work, snap, links, job["test_files"])
            result = {"status": "ran", "applied": applied, "restored": restored}
            result.update(run_pytest(job, work, scratch))
    except Exception as exc:  # the harness broke: never the solution's verdict
        result = {"status": "harness_error", "detail": f"{type(exc).__name__}: {exc}"[:2000]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - t0, 3)
    if job["mode"] == "workspace":  # this process and the children it reaped (pytest's tree)
        result["cpu_s"] = round(sum(os.times()[:4]), 3)
    sys.stdout.write("\n" + nonce + " " + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
