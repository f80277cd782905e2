"""Sandbox side of the API verifier: moto server, seeding, the candidate, final-state dump.

Run inside the sandbox as ``python -I -S api_harness.py`` with ``api_config.json`` and
``solution.py`` beside it and a nonce line on stdin. It makes itself non-dumpable (so the
candidate, same uid, can neither ptrace it nor open its ``/proc/<pid>/fd`` or ``mem``),
serves S3/SQS/Logs with moto on 127.0.0.1 behind a gate that only lets signed s3/sqs/logs
requests through (``/moto-api`` and everything else gets 403) and records the candidate's
calls, seeds the initial state through boto3, runs the candidate in its own session with
fake credentials, kills it (and, in a pid namespace, every other process it can signal),
then reads the final state back through the API and prints one JSON line tagged with the
nonce. It only reports data; the parent compares with the expected state. The gate
(``gate``) and the read-back (``state``) are guest modules of their own, inlined here by
``tasksieve.verifiers.sandbox.guest.bundle``: the verifier sends ``bundle()`` of this file.

Warm start (``preload``): the family's own fork server runs ``preload`` once at boot, so every
run forked from it starts with moto, boto3 and the modules of S3, SQS and Logs imported,
botocore's models and endpoint rules for them parsed (``WARM["loader"]``) and moto's
per-service apps built (``WARM["app"]``); each run still starts its own moto server on its own
loopback with empty backends, and its own clients. The family's runs stay off the common fork
server: forking every code run from a heap this size would cost those runs more than the API
runs save. A run is a copy-on-write copy of that heap, so nothing one run changes reaches the
next. Nothing it loads comes from where a candidate can write: HOME names a path that does
not exist while the modules are imported (botocore fixes its ``~/.aws/models`` path at
import), that user model path is set to it, and the warm loader searches only botocore's and
boto3's own data directories. No thread is started and no request served there (a forked heap
must hold no other thread's locks); each step is best effort, leaving what failed to the run.
Random generators that loaded modules keep at module level (moto's, which makes its ids) are
reseeded in every run, so no two runs draw the same ids.

It does NOT guard against: the candidate killing this process (same uid; the parent sees no
result line and says so), the candidate exhausting memory or disk that this process also
needs, or moto behaving differently from AWS.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from tasksieve.verifiers.families.api.guest.gate import ALLOWED_SERVICES, Gate
from tasksieve.verifiers.families.api.guest.state import read_state

# Third-party modules this guest may import inside the sandbox: the host's site-packages,
# bound read-only (``Capabilities.site_packages``); the test of the layout reads this.
GUEST_REQUIRES = ("boto3", "botocore", "moto", "werkzeug")

REGION = "us-east-1"
FAKE_KEY = "testing"
TAIL_BYTES = 2000
_CANDIDATE_LIMITS = """
import os, resource, sys
mem, cpu = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
os.execv(sys.argv[4], sys.argv[4:])
"""


# ------------------------------------------------------------------ warm start
# In the family's own fork server (``Sandbox.dedicated``), the registered copy of this script
# ends in ``preload(site)`` under ``if __name__ == "__warm__"`` (``verifier.warm_source``):
# run once at the server's boot, so every run forked from it finds this work done.
WARM_SERVICES = ("s3", "sqs", "logs")
_PARTS = ("models", "responses", "urls")
_MODULES = (
    "moto.moto_server.werkzeug_app", "werkzeug.serving", "boto3", "botocore.config",
    "botocore.session", "moto.core.utils", "moto.core.routing",
    *(f"moto.{s}.{p}" for s in WARM_SERVICES for p in _PARTS),
)  # fmt: skip
_NO_HOME = "/proc/nonexistent"
_DATA = ("endpoints", "partitions", "_retry", "sdk-default-configuration")
WARM: dict[str, Any] = {}  # "loader", "app", "randoms": what ``preload`` built, for each run


def preload(site: list[str]) -> None:
    """Import and build what every run needs (see the module docstring); never raises."""
    home, path = os.environ.get("HOME"), list(sys.path)
    sys.path[:0] = [p for p in site if p not in sys.path]
    os.environ["HOME"] = _NO_HOME  # set in place: the server's environment keeps its order
    try:
        with contextlib.suppress(Exception):  # first: every loader made later searches it
            from botocore import loaders

            loaders.Loader.CUSTOMER_DATA_PATH = os.path.join(_NO_HOME, ".aws", "models")
        for name in _MODULES:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        with contextlib.suppress(Exception):
            WARM["loader"] = _loader()
        with contextlib.suppress(Exception):
            WARM["app"] = _app()
        WARM["randoms"] = _generators()
    finally:
        sys.path[:] = path
        if home is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = home


def _generators() -> list[random.Random]:
    """The random generators the loaded modules hold at module level (moto's ids come from
    one), besides ``random``'s own, which reseeds itself in a forked child: each warm run
    reseeds them (``warm_main``), or every run would draw the same ids."""
    found: dict[int, random.Random] = {}
    for mod in list(sys.modules.values()):
        with contextlib.suppress(Exception):
            for value in vars(mod).values():
                if isinstance(value, random.Random) and value is not random._inst:
                    found[id(value)] = value
    return list(found.values())


def _loader() -> Any:
    import boto3
    from botocore import loaders

    paths = [os.path.join(os.path.dirname(str(m.__file__)), "data") for m in (loaders, boto3)]
    loader = loaders.Loader(extra_search_paths=paths, include_default_search_paths=False)
    for service in WARM_SERVICES:
        loader.load_service_model(service, "service-2")
        loader.load_service_model(service, "endpoint-rule-set-1")
    for name in _DATA:
        loader.load_data(name)
    return loader


def _app() -> Any:
    from moto.core import routing, utils
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    make: Any = create_backend_app  # typed for moto's own service names only
    app = DomainDispatcherApplication(create_backend_app)
    for service in WARM_SERVICES:
        utils.get_service_model(service)
        routing.get_service_router(service)
        app.app_instances[service] = make(service)
    return app


def _no_dump() -> None:
    """Make this process non-dumpable (PR_SET_DUMPABLE = 4) or fail."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _emit(nonce: str, event: str, **data: Any) -> None:
    sys.stdout.write(json.dumps({"nonce": nonce, "event": event, **data}) + "\n")
    sys.stdout.flush()


def _start_server(gate_factory: Callable[[Any], Gate]) -> tuple[Gate, int]:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class Quiet(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    app = WARM.get("app") or DomainDispatcherApplication(create_backend_app)
    gate = gate_factory(app)
    server = make_server("127.0.0.1", 0, gate, threaded=True, request_handler=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return gate, int(server.server_port)


def _clients(endpoint: str) -> dict[str, Any]:
    import boto3
    import botocore.session
    from botocore.config import Config

    core = botocore.session.Session()
    if "loader" in WARM:  # models parsed at the warm server's boot (``preload``)
        core.register_component("data_loader", WARM["loader"])
    session = boto3.session.Session(
        aws_access_key_id=FAKE_KEY,
        aws_secret_access_key=FAKE_KEY,
        region_name=REGION,
        botocore_session=core,
    )
    cfg = Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30)
    return {s: session.client(s, endpoint_url=endpoint, config=cfg) for s in ALLOWED_SERVICES}


def seed(c: dict[str, Any], initial: dict[str, Any]) -> None:
    """Create the task's buckets, objects, queues, messages and log groups."""
    for bucket, objects in initial.get("buckets", {}).items():
        c["s3"].create_bucket(Bucket=bucket)
        for key, body in objects.items():
            c["s3"].put_object(Bucket=bucket, Key=key, Body=body.encode("utf-8"))
    queues = list(initial.get("queues", []))
    queues += [q for q in initial.get("queue_messages", {}) if q not in queues]
    for q in queues:
        attrs = (
            {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
            if q.endswith(".fifo")
            else {}
        )
        url = c["sqs"].create_queue(QueueName=q, Attributes=attrs)["QueueUrl"]
        for body in initial.get("queue_messages", {}).get(q, []):
            extra = {"MessageGroupId": "seed"} if q.endswith(".fifo") else {}
            c["sqs"].send_message(QueueUrl=url, MessageBody=body, **extra)
    for group in initial.get("log_groups", []):
        c["logs"].create_log_group(logGroupName=group)


def run_candidate(cfg: dict[str, Any], endpoint: str) -> dict[str, Any]:
    """Run solution.py in its own session under the time budget; return how it ended."""
    site = os.pathsep.join(cfg["site_paths"])
    cwd = os.getcwd()  # the sandbox's scratch dir
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": cwd,
        "TMPDIR": cwd,
        "LANG": "C.UTF-8",
        "PYTHONPATH": site,
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    py = cfg["python"]
    mem = int(cfg["candidate_memory_mb"]) * 1024 * 1024
    cpu = max(1, int(cfg["timeout_s"]) + 1)
    cmd = [py, "-I", "-S", "-c", _CANDIDATE_LIMITS, str(mem), str(cpu), "--", py, "-s"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [*cmd, "solution.py"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=float(cfg["timeout_s"]))
        except subprocess.TimeoutExpired:
            timed_out = True
        duration = time.monotonic() - t0
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if cfg.get("kill_all"):  # own pid namespace: take down anything that left the group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
        proc.wait()
        return {
            "exit_code": proc.returncode,
            "timed_out": timed_out,
            "duration_s": round(duration, 3),
            "stdout_tail": _tail(out),
            "stderr_tail": _tail(err),
        }


def _tail(f: Any) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - TAIL_BYTES))
    return f.read().decode("utf-8", errors="replace")


def main() -> int:
    """Seed, run, read back; print one nonce-tagged JSON line per phase."""
    nonce = sys.stdin.readline().strip()
    try:
        _no_dump()
        # Our own boto3 must not read config or service models the candidate could write.
        os.environ.update(
            HOME="/proc/nonexistent",
            AWS_CONFIG_FILE="/dev/null",
            AWS_SHARED_CREDENTIALS_FILE="/dev/null",
            AWS_EC2_METADATA_DISABLED="true",
        )
        os.environ.pop("AWS_DATA_PATH", None)
        with open("api_config.json", encoding="utf-8") as f:
            cfg = json.load(f)
        sys.path[:0] = list(cfg["site_paths"])
        t0 = time.monotonic()
        gate, port = _start_server(Gate)
        endpoint = f"http://127.0.0.1:{port}"
        clients = _clients(endpoint)
        seed(clients, cfg["initial"])
        t_seed = time.monotonic() - t0
    except Exception:
        _emit(nonce, "infra_error", detail=traceback.format_exc()[-1500:])
        return 3
    _emit(nonce, "ready")
    gate.t0 = time.monotonic()
    gate.phase = "candidate"
    try:
        cand = run_candidate(cfg, endpoint)
    except Exception:
        _emit(nonce, "infra_error", detail=traceback.format_exc()[-1500:])
        return 3
    gate.phase = "read"
    t1 = time.monotonic()
    state, errors = read_state(clients)
    _emit(
        nonce,
        "result",
        candidate=cand,
        state=state,
        read_errors=errors,
        calls=gate.calls,
        calls_dropped=gate.dropped,
        calls_denied=gate.denied,
        timings={"start_and_seed_s": round(t_seed, 3), "read_s": round(time.monotonic() - t1, 3)},
    )
    return 0


def warm_main() -> None:
    """What a warm server runs for this script (after ``preload`` at its boot)."""
    for gen in WARM.get("randoms", ()):
        gen.seed()  # from os.urandom: this run's own ids
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
