"""Guest: set rlimits (and drop to a uid), then exec the command (no prlimit/setpriv here).

Run as ``python -I -S -c <this source> CONFIG_JSON -- command...``; standard library only.
Not a security boundary: it runs before the command with the same privileges.
"""

import json
import os
import resource
import sys

config = json.loads(sys.argv[1])
for name, value in config["rl"].items():
    resource.setrlimit(getattr(resource, name), tuple(value))
if config.get("uid") is not None:
    os.setgroups([])
    os.setgid(config["uid"])
    os.setuid(config["uid"])
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as e:
    os.write(2, f"launcher: cannot run {sys.argv[3]!r}: {e}\n".encode())
    os._exit(127)
