"""Tiny programs the ``process`` sandbox runs inside the sandbox around the user's command.

Both are passed to the sandboxed interpreter with ``-c`` and use only the standard library.
``RLIMIT_LAUNCHER`` is the fallback when the ``prlimit``/``setpriv`` tools are missing;
``COLLECTOR`` runs the command as a child, then streams the requested scratch files to a
pipe. Neither is a security boundary: they run with the candidate's uid.
"""

from __future__ import annotations

# argv: -c CODE CONFIG_JSON -- command...
RLIMIT_LAUNCHER = r"""
import json, os, resource, sys
c = json.loads(sys.argv[1])
for name, v in c["rl"].items():
    resource.setrlimit(getattr(resource, name), tuple(v))
if c.get("uid") is not None:
    os.setgroups([]); os.setgid(c["uid"]); os.setuid(c["uid"])
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as e:
    os.write(2, ("launcher: cannot run %r: %s\n" % (sys.argv[3], e)).encode()); os._exit(127)
"""

# argv: -c CODE FD NAMES_JSON CAP -- command...
# Frames on FD: one JSON header line {"name", "size"} (size -1: missing or not a regular
# file, -2: over CAP) followed by ``size`` raw bytes.
COLLECTOR = r"""
import json, os, signal, stat, sys
fd = int(sys.argv[1]); names = json.loads(sys.argv[2]); cap = int(sys.argv[3])
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(sys.argv[5], sys.argv[5:])
    except OSError as e:
        os.write(2, ("collector: cannot run %r: %s\n" % (sys.argv[5], e)).encode())
        os._exit(127)
while True:
    try:
        _, st = os.waitpid(pid, 0)
        break
    except InterruptedError:
        pass
for n in names:
    data = None
    try:
        f = os.open(n, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if stat.S_ISREG(os.fstat(f).st_mode):
                data = os.read(f, cap + 1)
        finally:
            os.close(f)
    except OSError:
        pass
    size = -1 if data is None else (-2 if len(data) > cap else len(data))
    frame = (json.dumps({"name": n, "size": size}) + "\n").encode()
    if size >= 0:
        frame += data
    while frame:
        frame = frame[os.write(fd, frame):]
os.close(fd)
if os.WIFSIGNALED(st):
    sig = os.WTERMSIG(st)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 1)
"""
