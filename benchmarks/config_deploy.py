"""Trial-deployed nginx verifications per second: the sandboxed verifier against a plain script.

``python -m benchmarks.config_deploy --n 40 --rounds 3`` verifies the reference of
``config_deploy.nginx_api_split`` (examples/tasks/config_deploy.jsonl: 5 probes, 2 stub
upstreams) ``--n`` times per setup per round:

- baseline: what a user would write without a sandbox: a bash script per verification that
  writes the same main file around the config, runs ``nginx -t``, starts nginx in the
  foreground, waits for the port with curl, sends the probes with curl (status, and the
  upstream and path read from the stub's reply), compares, and kills nginx. Its stub
  upstreams are started once by this process (the verifier starts its own per verification);
- ours: ``ConfigVerifier.verify`` on the ``process`` sandbox (a fresh namespace per
  verification, the stubs, readiness, host-path refusal, bind and process checks, /proc scans,
  the judge).

Rounds alternate the order; every verdict must pass. Prints the machine and load before and
after, rates per round and the ratio ours / baseline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.timing import command_line, machine_line, timed_pass
from tasksieve.schemas import ConfigSpec, TaskRecord
from tasksieve.verifiers.families.config.verifier import ConfigVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

ROOT = Path(__file__).resolve().parents[1]
TASK_ID = "config_deploy.nginx_api_split"

SCRIPT = r"""#!/usr/bin/env bash
# usage: verify.sh CONFIG PORT PROBES  (PROBES: lines "path status upstream upstream_path")
set -u
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
mkdir -p "$dir/tmp"
cp "$1" "$dir/site.conf"
temps=""
for k in client_body proxy fastcgi uwsgi scgi; do temps+="${k}_temp_path $dir/tmp/$k; "; done
cat >"$dir/main.conf" <<EOF
daemon off; master_process on; worker_processes 1; pid $dir/nginx.pid; error_log stderr notice;
events { worker_connections 256; }
http { access_log off; default_type text/plain; $temps include $dir/site.conf; }
EOF
nginx -p "$dir/" -e stderr -c "$dir/main.conf" -t -q || exit 2
nginx -p "$dir/" -e stderr -c "$dir/main.conf" 2>"$dir/log" &
pid=$!
for _ in $(seq 250); do curl -s -o /dev/null "http://127.0.0.1:$2/" && break; sleep 0.02; done
fail=0
while read -r path status upstream upath; do
  out=$(curl -s -w '\n%{http_code}' "http://127.0.0.1:$2$path")
  code=${out##*$'\n'}
  body=${out%$'\n'*}
  [ "$code" = "$status" ] || fail=1
  [ "$body" = "upstream=$upstream path=$upath" ] || fail=1
done <"$3"
exit $fail
"""


class _Stub(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        name = self.server.name  # type: ignore[attr-defined]
        out = f"upstream={name} path={self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _stubs(spec: ConfigSpec) -> list[ThreadingHTTPServer]:
    assert spec.http is not None
    servers = []
    for up in spec.http.upstreams:
        srv = ThreadingHTTPServer(("127.0.0.1", up.port), _Stub)
        srv.name = up.name  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    return servers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.config_deploy")
    parser.add_argument("--n", type=int, default=40, help="verifications per setup per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if shutil.which("nginx", path="/usr/sbin:/usr/bin") is None or shutil.which("curl") is None:
        print("needs nginx and curl: apt-get install -y nginx curl", file=sys.stderr)
        return 2
    os.environ["PATH"] += ":/usr/sbin"
    lines = (ROOT / "examples/tasks/config_deploy.jsonl").read_text().splitlines()
    task = next(t for t in map(TaskRecord.model_validate_json, lines) if t.id == TASK_ID)
    spec = task.verifier
    assert isinstance(spec, ConfigSpec) and spec.http is not None
    print(command_line("benchmarks.config_deploy"))
    print("before:", machine_line())
    work = Path(tempfile.mkdtemp(prefix="deploy-bench-"))
    (work / "verify.sh").write_text(SCRIPT)
    (work / "site.conf").write_text(task.reference_solution)
    (work / "probes").write_text(
        "".join(
            f"{p.path} {p.expect.status} {p.expect.upstream} {p.expect.upstream_path}\n"
            for p in spec.http.probes
        )
    )
    port = str(spec.http.listen_port)
    script = ["bash", str(work / "verify.sh"), str(work / "site.conf"), port, str(work / "probes")]
    sandbox = ProcessSandbox()
    verifier = ConfigVerifier(sandbox)

    def baseline(_: int) -> bool:
        return subprocess.run(script, capture_output=True, check=False).returncode == 0

    def ours(_: int) -> bool:
        return verifier.verify(task, task.reference_solution).status == "pass"

    try:
        for r in range(args.rounds):
            order = ["baseline", "ours"] if r % 2 == 0 else ["ours", "baseline"]
            rates = {}
            for name in order:
                if name == "baseline":
                    servers = _stubs(spec)  # on the host's loopback: only while it runs
                    try:
                        got = timed_pass(baseline, args.n, 1)
                    finally:
                        for s in servers:
                            s.shutdown()
                            s.server_close()
                else:
                    got = timed_pass(ours, args.n, 1)
                if not all(got.verdicts):
                    print(f"{name}: a verification did not pass", file=sys.stderr)
                    return 1
                rates[name] = got.rate
                print(f"round {r + 1} {name}: {got.rate:.2f}/s ({got.cpu_ms:.0f} CPU ms each)")
            print(f"round {r + 1} ours/baseline: {rates['ours'] / rates['baseline']:.2f}")
    finally:
        verifier.close()
        sandbox.close()
        shutil.rmtree(work, ignore_errors=True)
    print("after:", machine_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
