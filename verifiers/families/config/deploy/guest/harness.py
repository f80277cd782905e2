"""Sandbox side of a trial deployment: check the candidate config with the server itself, start
it with the task's stub upstreams, send the probes, report what happened.

Run as ``python -I -S deploy_harness.py`` in the run's scratch directory with the candidate's
config in ``candidate.conf``; the first stdin line is a nonce, the second the trial's settings
as JSON (so nothing hidden, such as the probes, is ever a file the server could be told to
read). Steps, each reported in one nonce-tagged JSON line at the end:

1. ``refused``: every token of the config naming a path outside the run directory that
   exists in this view of the filesystem or lies below a system directory (``/etc/passwd``,
   ``../../etc``, ``/usr/share/x``; glob patterns by their fixed prefix; any ``..`` that
   climbs out; ``root /`` and ``alias /``) stops the trial before the server starts;
   ``/dev/null``, ``/dev/stdout`` and ``/dev/stderr`` are allowed (writes reach nothing);
2. ``syntax``: ``nginx -t`` / ``haproxy -c`` / ``promtool check rules`` and their output;
3. nginx/haproxy: the stubs start, then the server in its own session; ``ready`` says whether
   it listened on 127.0.0.1:listen_port in time; each probe is sent in order, recording the
   response and the requests the stubs received meanwhile; then ``binds`` (listening
   addresses the server's processes hold), ``spawned`` (processes besides the server's own
   binary) and whether the server was still running;
4. prometheus_rules: ``promtool test rules`` once per test group, its exit status and output.

At the end the server's session is killed, and in a pid namespace of its own every process
this one can signal. This program only reports; the verifier judges.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from tasksieve.verifiers.families.config.deploy.guest.stubs import (
    bound,
    exe,
    send_probe,
    start_stubs,
    tree,
    wait_ready,
)

RUN = os.getcwd()
CANDIDATE = os.path.join(RUN, "candidate.conf")
HARMLESS = ("/dev/null", "/dev/stdout", "/dev/stderr")
ROOTS = {"root", "alias"}  # nginx: a bare "/" after these serves the whole filesystem
SYSTEM = {  # top-level directories of a Linux host: a path below one is a host file
    *("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt"),
    *("opt", "proc", "root", "run", "sbin", "snap", "srv", "sys", "tmp", "usr", "var"),
}
TAIL = 4000
_SEPARATORS = str.maketrans({c: " " for c in ";{}()\t\r\n,"})


def _strip_comment(line: str) -> str:
    quote = ""
    for i, c in enumerate(line):
        if c in "\"'" and not quote:
            quote = c
        elif c == quote:
            quote = ""
        elif c == "#" and not quote:
            return line[:i]
    return line


def _paths(token: str) -> list[str]:
    token = token.strip("\"'")
    found = [token]
    for sep in ("=", "@"):
        found += [part for part in token.split(sep)[1:] if part]
    return [p for p in found if p.startswith("/") or ".." in p]


def refused(text: str) -> list[str]:
    """Tokens naming a path outside the run directory (see the module docstring)."""
    out: list[str] = []
    for line in text.splitlines():
        tokens = _strip_comment(line).translate(_SEPARATORS).split()
        for i, token in enumerate(tokens):
            if token.strip("\"'") == "/" and i and tokens[i - 1] in ROOTS:
                out.append(f"{tokens[i - 1]} /")  # the filesystem root as a document root
            for p in _paths(token):
                if _outside(p):
                    out.append(p)
    return list(dict.fromkeys(out))[:20]


def _outside(p: str) -> bool:
    fixed = p.split("*")[0].split("?")[0].split("[")[0]
    full = os.path.normpath(os.path.join(RUN, fixed))
    if full in HARMLESS or full == RUN or full.startswith(RUN + os.sep):
        return False
    if ".." in p:
        return True  # climbs out of the run directory
    parts = full.strip("/").split("/")
    system = len(parts) > 1 and parts[0] in SYSTEM
    return full != "/" and (system or os.path.lexists(full) or bool(glob.glob(full + "*")))


def _tail(data: bytes) -> str:
    return data.decode("utf-8", "replace")[-TAIL:]


def nginx_main(cfg: dict[str, Any]) -> str:
    """The main file around the candidate's http-block contents: paths inside the run."""
    tmp = os.path.join(RUN, "tmp")
    os.makedirs(tmp, exist_ok=True)
    temps = "".join(
        f"    {kind}_temp_path {tmp}/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        "daemon off;\nmaster_process on;\nworker_processes 1;\n"
        f"pid {RUN}/nginx.pid;\nerror_log stderr notice;\n"
        "events { worker_connections 256; }\n"
        f"http {{\n    access_log off;\n    default_type text/plain;\n{temps}"
        f"    include {CANDIDATE};\n}}\n"
    )


def commands(cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(syntax check, server start) for the engine; nginx's main file written here."""
    binary = cfg["binary"]
    if cfg["engine"] == "nginx":
        main = os.path.join(RUN, "main.conf")
        with open(main, "w") as f:
            f.write(nginx_main(cfg))
        base = [binary, "-p", RUN + "/", "-e", "stderr", "-c", main]
        return [*base, "-t", "-q"], base
    return [binary, "-c", "-f", CANDIDATE], [binary, "-db", "-f", CANDIDATE]


def run_checked(argv: list[str], timeout_s: float) -> dict[str, Any]:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        out = (e.stderr or b"") + (e.stdout or b"")
        return {"ok": False, "timeout": True, "output": _tail(out)}
    return {"ok": done.returncode == 0, "output": _tail(done.stderr + done.stdout)}


def http_trial(cfg: dict[str, Any], report: dict[str, Any]) -> None:
    check, start = commands(cfg)
    report["syntax"] = run_checked(check, cfg["step_timeout_s"])
    if not report["syntax"]["ok"]:
        return
    try:
        start_stubs(cfg["upstreams"])
    except OSError as e:
        report["infra_error"] = f"stub upstreams could not start: {e}"
        return
    log = open(os.path.join(RUN, "server.log"), "w+b")  # noqa: SIM115 (read back below)
    server = subprocess.Popen(start, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    skip = {1, os.getpid(), *_ancestors()}
    try:
        port = int(cfg["listen_port"])
        session = None if cfg.get("kill_all") else server.pid

        def listening() -> list[str]:
            return bound(tree(session, skip))

        def settled() -> bool:  # nginx forks its workers once every socket is bound
            return cfg["engine"] == "nginx" and len(tree(session, skip)) >= 2

        alive = lambda: server.poll() is None  # noqa: E731
        state = wait_ready(port, alive, listening, settled, cfg["ready_timeout_s"])
        report["ready"] = state
        if state == "ready":
            report["probes"] = [send_probe(port, p, cfg["probe_timeout_s"]) for p in cfg["probes"]]
            time.sleep(0.05)  # anything the server starts late is still seen below
        pids = tree(session, skip)
        report["binds"] = bound(pids)
        own = os.path.realpath(cfg["binary"])
        report["spawned"] = sorted({exe(p) for p in pids if exe(p) != own} - {"?"})
        report["running"] = server.poll() is None
        report["exit_code"] = server.returncode
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, signal.SIGKILL)
        if cfg.get("kill_all"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
        server.wait()
        log.seek(0)
        report["server_log"] = _tail(log.read())
        log.close()


def _ancestors() -> list[int]:
    out, pid = [], os.getppid()
    while pid > 1:
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def rules_trial(cfg: dict[str, Any], report: dict[str, Any]) -> None:
    binary = cfg["binary"]
    report["syntax"] = run_checked([binary, "check", "rules", CANDIDATE], cfg["step_timeout_s"])
    if not report["syntax"]["ok"]:
        return
    report["rule_tests"] = []
    for test in cfg["rule_tests"]:
        path = os.path.join(RUN, f"test_{test['name']}.yml")
        with open(path, "w") as f:
            json.dump({**test["file"], "rule_files": [CANDIDATE]}, f)
        got = run_checked([binary, "test", "rules", path], cfg["step_timeout_s"])
        os.unlink(path)
        report["rule_tests"].append({"name": test["name"], **got})


def main() -> int:
    nonce = sys.stdin.readline().strip()
    cfg = json.loads(sys.stdin.readline())
    report: dict[str, Any] = {"nonce": nonce, "event": "result", "run": RUN}
    os.environ.update({"GOMAXPROCS": "1", "HOME": RUN, "TMPDIR": RUN})
    found = shutil.which(cfg["binary"], path="/usr/sbin:/usr/bin:/sbin:/bin")
    if found is None:
        report["missing"] = cfg["binary"]
        print(json.dumps(report), flush=True)
        return 0
    cfg["binary"] = found
    try:
        with open(CANDIDATE, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if cfg["engine"] != "prometheus_rules":
            report["refused"] = refused(text)
        if not report.get("refused"):
            if cfg["engine"] == "prometheus_rules":
                rules_trial(cfg, report)
            else:
                http_trial(cfg, report)
    except Exception as e:  # reported, not raised: the verifier names it
        report["infra_error"] = f"harness: {type(e).__name__}: {e}"[:500]
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
