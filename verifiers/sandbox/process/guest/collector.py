"""Guest: run the command as a child, then stream the requested scratch files to a pipe.

Run as ``python -I -S -c <this source> FD NAMES_JSON CAP -- command...``; standard library
only. Frames on FD: one JSON header line ``{"name", "size"}`` (size -1: missing or not a
regular file, -2: over CAP) followed by ``size`` raw bytes. Files are opened without
following a symlink. Not a security boundary: it runs with the candidate's uid, so the
command can forge frames (the host caps and parses them as untrusted data).
"""

import json
import os
import signal
import stat
import sys

fd = int(sys.argv[1])
names = json.loads(sys.argv[2])
cap = int(sys.argv[3])
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(sys.argv[5], sys.argv[5:])
    except OSError as e:
        os.write(2, f"collector: cannot run {sys.argv[5]!r}: {e}\n".encode())
        os._exit(127)
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        pass
for name in names:
    data = None
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if stat.S_ISREG(os.fstat(f).st_mode):
                data = os.read(f, cap + 1)
        finally:
            os.close(f)
    except OSError:
        pass
    size = -1 if data is None else (-2 if len(data) > cap else len(data))
    frame = (json.dumps({"name": name, "size": size}) + "\n").encode()
    if data is not None and size >= 0:
        frame += data
    while frame:
        frame = frame[os.write(fd, frame) :]
os.close(fd)
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
