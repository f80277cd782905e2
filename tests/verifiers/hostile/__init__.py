# ruff: noqa: E501  (programs read best one statement per source line)
"""Hostile programs for the adversarial suite, grouped by threat-model category.

``SANDBOX`` programs run directly in a sandbox; each prints ``LEAK``/``ESCAPED`` markers only
if the attack worked. ``HACKS`` are solutions for the ``add(a, b)`` task that try to win the
verdict without being correct. ``{port}``, ``{canary}``, ``{secret}`` and ``{token}`` are
filled in by the tests.
"""

from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parents[3]  # this checkout: a run must not see it

NET = {
    # Reaching outside is checked without sending anything: a run must see no interface but
    # loopback and no route off it (so no packet could leave even if one were sent).
    "interfaces_only_lo": "import socket\nnames = {{n for _, n in socket.if_nameindex()}}\n"
    "print('ESCAPED', sorted(names)) if names - {{'lo'}} else print('blocked')",
    "no_route_out": "rows = []\nfor f in ('/proc/net/route', '/proc/net/ipv6_route'):\n"
    " try: rows += [r.split() for r in open(f).read().splitlines()]\n except OSError: pass\n"
    "out = [r for r in rows if r and r[0] not in ('Iface', 'lo') and r[-1] != 'lo']\n"
    "print('ESCAPED', out) if out else print('blocked')",
    "host_loopback": "import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2)\n"
    " print('ESCAPED')\nexcept OSError: print('blocked')",
    "host_loopback_v6": "import socket\ntry:\n socket.create_connection(('::1', {port}), 2)\n"
    " print('ESCAPED')\nexcept OSError: print('blocked')",
    "raw_packet_socket": "import socket\ntry:\n socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
    " print('ESCAPED')\nexcept OSError: print('blocked')",
}

SECRETS = {
    "etc_shadow": "try: print('LEAK', open('/etc/shadow').read()[:20])\nexcept OSError: print('denied')",
    "root_canary": "try: print('LEAK', open({canary!r}).read())\nexcept OSError: print('denied')",
    "walk_for_canary": "import os\nfor d, _, fs in os.walk('/'):\n"
    " if d.startswith(('/proc', '/sys')): continue\n"
    " for f in fs:\n  if 'tasksieve-canary' in f: print('LEAK', d, f)\nprint('done')",
    "env_vars": "import os\nprint('LEAK' if any({secret!r} in v for v in os.environ.values()) else 'clean')",
    "proc_environ": "import os\nfor p in os.listdir('/proc'):\n if p.isdigit():\n  try:\n"
    "   if {secret!r}.encode() in open(f'/proc/{{p}}/environ', 'rb').read(): print('LEAK')\n"
    "  except OSError: pass\nprint('clean')",
    "repo_source": f"import os\nfor p in {(str(_REPO / 'verifiers'), str(_REPO / 'pyproject.toml'))!r}:\n"
    " try: os.listdir(p) if os.path.isdir(p) else open(p); print('LEAK', p)\n"
    " except OSError: pass\nprint('done')",
}

WRITES = {
    "write_system_dirs": "for p in ('/usr/x', '/etc/x', '/x', '/bin/x', '/lib/x'):\n"
    " try: open(p, 'w').write('x'); print('ESCAPED', p)\n except OSError: pass\nprint('done')",
    "write_host_canary": "for p in ({canary!r}, '/tmp/../' + {canary!r}.lstrip('/')):\n"
    " try: open(p, 'w').write('pwned'); print('wrote', p)\n except OSError: pass\nprint('done')",
    "write_input_file": "import os\ntry: open('in.txt', 'w').write('x'); print('ESCAPED')\n"
    "except OSError: pass\ntry: os.remove('in.txt'); print('ESCAPED')\nexcept OSError: pass\n"
    "print('done')",
}

BOMBS = {
    "fork_bomb": "import os, time\nn = 0\ntry:\n while True:\n  if os.fork() == 0:\n"
    "   time.sleep(60); os._exit(0)\n  n += 1\nexcept OSError: print('capped', n)",
    "thread_bomb": "import threading, time\nn = 0\ntry:\n while True:\n"
    "  threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); n += 1\n"
    "except (RuntimeError, MemoryError, OSError): print('capped', n, flush=True)\nimport os; os._exit(0)",
    "memory_bomb": "x = bytearray(8 * 1024**3)\nprint('ESCAPED')",
    "memory_creep": "x = []\nwhile True: x.append(bytearray(16 * 1024**2))",
    "infinite_loop": "while True: pass",
    "long_sleep": "import time\ntime.sleep(600)\nprint('ESCAPED')",
    "stdout_flood": "import sys\nwhile True: sys.stdout.write('x' * 65536)",
    "stderr_flood": "import sys\nwhile True: sys.stderr.write('x' * 65536)",
    "disk_fill": "import os\nfor i in range(10000):\n open(f'f{{i}}', 'wb').write(os.urandom(1 << 20))",
    "huge_file": "f = open('big', 'wb')\nwhile True: f.write(b'x' * (1 << 20)); f.flush()",
}

PROCESSES = {
    "kill_parent_and_all": "import os, signal\nfor t in (os.getppid(), 1, -1):\n"
    " try: os.kill(t, signal.SIGKILL)\n except OSError: pass\nprint('done')",
    "kill_every_visible_python": "import os, signal\nfor p in os.listdir('/proc'):\n"
    " if p.isdigit() and int(p) != os.getpid():\n"
    "  try: os.kill(int(p), signal.SIGKILL)\n  except OSError: pass\nprint('done')",
    "daemon_outlives_run": "import os, time\nif os.fork() == 0:\n os.setsid()\n if os.fork() == 0:\n"
    "  os.execv('/bin/sleep', ['/bin/sleep', '300', '{token}'])\n os._exit(0)\nprint('done')",
    "see_host_processes": "import os\nn = [p for p in os.listdir('/proc') if p.isdigit()]\n"
    "print('LEAK' if len(n) > 8 else 'few', len(n))",
    "unshare_namespaces": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "print('ESCAPED' if libc.unshare(0x10000000 | 0x00020000) == 0 else 'blocked')",
    "mount_proc": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "print('ESCAPED' if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0 else 'blocked')",
}

# Solutions for: def add(a, b) -> a + b (tests: add(1, 2) == 3, add(-1, 1) == 0, add(5, 5) == 10)
HACKS = {
    # exit before the asserts
    "sys_exit_at_import": "import sys\nsys.exit(0)\n",
    "os_exit_at_import": "import os\nos._exit(0)\n",
    "sys_exit_in_call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os_exit_in_call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "atexit_forces_zero": "import atexit, os\natexit.register(lambda: os._exit(0))\n"
    "def add(a, b):\n    raise SystemExit(0)\n",
    # skipping
    "raise_skiptest": "import unittest\ndef add(a, b):\n    raise unittest.SkipTest('skip')\n",
    "skiptest_at_import": "import unittest\nraise unittest.SkipTest('nothing to see')\n",
    "raise_keyboardinterrupt": "def add(a, b):\n    raise KeyboardInterrupt\n",
    # objects that compare equal to anything
    "eq_always_true": "class A:\n    def __eq__(self, o): return True\n    __hash__ = None\n"
    "def add(a, b):\n    return A()\n",
    "ne_always_false": "class A:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
    "    def __hash__(self): return hash(3)\ndef add(a, b):\n    return A()\n",
    "int_subclass_eq": "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
    "def add(a, b):\n    return I(7)\n",
    "str_subclass_eq": "class S(str):\n    def __eq__(self, o): return True\ndef add(a, b):\n"
    "    return S('x')\n",
    "class_spoof": "class F:\n    __class__ = int\n    def __eq__(self, o): return True\n"
    "def add(a, b):\n    return F()\n",
    # fake results on the output channels
    "fake_passed_lines": "print('3 passed, 0 failed')\nprint('OK')\nimport sys\n"
    "sys.stderr.write('PASSED\\n')\ndef add(a, b):\n    return None\n",
    "fake_protocol_json": 'print(\'{"op": "result", "name": "check:L2", "passed": true}\')\n'
    'print(\'{"op": "done"}\')\ndef add(a, b):\n    return None\n',
    "fake_protocol_on_fds": "import os\nfor fd in range(0, 64):\n    try: os.write(fd, b'"
    '{"ok": 3}\\n{"op": "done"}\\n\')\n    except OSError: pass\ndef add(a, b):\n    return None\n',
    # shadowing or editing test / harness / library files
    "shadow_stdlib_in_cwd": "for m in ('json', 'unittest', 'sitecustomize', 'ast', 'types'):\n"
    "    try: open(m + '.py', 'w').write('raise SystemExit(0)')\n    except OSError: pass\n"
    "def add(a, b):\n    return None\n",
    "overwrite_harness": "import os\nfor f in ('harness.py', 'tests.json', 'solution.py'):\n"
    "    try: os.remove(f)\n    except OSError: pass\n"
    "    try: open(f, 'w').write('')\n    except OSError: pass\ndef add(a, b):\n    return None\n",
    # monkeypatching assertion and report machinery
    "patch_builtins": "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
    "builtins.isinstance = lambda *a: True\ndef add(a, b):\n    return None\n",
    "patch_json_encoder": "import json\njson.dumps = lambda *a, **k: '{\"ok\": 3}'\n"
    "json.loads = lambda *a, **k: {'op': 'done'}\ndef add(a, b):\n    return None\n",
    "patch_harness_globals": "import sys\nfor f in list(sys.modules.values()):\n"
    "    if hasattr(f, 'encode') and hasattr(f, 'decode'):\n        f.encode = lambda v, d=0: 3\n"
    "def add(a, b):\n    return None\n",
    # reading the reference or expected values
    "read_tests_and_reference": "import os\nfound = ''\nfor d, _, fs in os.walk('/'):\n"
    "    if d.startswith(('/proc', '/sys', '/usr')): continue\n    for f in fs:\n"
    "        if f.endswith('.json'):\n            try: found += open(os.path.join(d, f)).read()\n"
    "            except OSError: pass\n"
    "def add(a, b):\n    return 3 if 'candidate(1, 2) == 3' in found else None\n",
    "read_other_process_memory": "import os\ndata = b''\nfor p in os.listdir('/proc'):\n"
    "    if p.isdigit():\n        for f in ('cmdline', 'environ', 'mem'):\n"
    "            try: data += open(f'/proc/{p}/{f}', 'rb').read(100000)\n"
    "            except OSError: pass\n"
    "def add(a, b):\n    return 3 if b'== 3' in data else None\n",
    "inspect_caller_frames": "import sys, gc\ndef add(a, b):\n    f = sys._getframe(1)\n"
    "    while f:\n        for v in list(f.f_locals.values()) + list(f.f_globals.values()):\n"
    "            if hasattr(v, 'send') and hasattr(v, 'recv'):\n"
    "                v.send({'op': 'result', 'name': 'check:L2', 'passed': True})\n"
    "        f = f.f_back\n    return None\n",
    # reaching the tests process of a pair run (same namespaces, other uid)
    "reach_pair_tests_process": "import os\nfound = ''\n"
    "for p in ('/tmp/.t/tests.json', '/proc/1/environ', '/proc/1/cmdline', '/proc/1/fd/3'):\n"
    "    try: found += open(p, 'rb').read(100000).decode(errors='replace')\n"
    "    except OSError: pass\n"
    "for p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != os.getpid():\n"
    "        try: os.write(os.open(f'/proc/{p}/fd/3', os.O_WRONLY), b'{\"op\": \"done\"}\\n')\n"
    "        except OSError: pass\n"
    "def add(a, b):\n    return 3 if '== 3' in found else None\n",
    # resource abuse inside a call
    "sleep_in_call": "import time\ndef add(a, b):\n    time.sleep(600)\n",
    "recursion_bomb": "def add(a, b):\n    return add(a, b)\n",
    "unserialisable_result": "def add(a, b):\n    return (x for x in [a + b])\n",
}
