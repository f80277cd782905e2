"""API family verification: the family's own warm fork server against a cold harness and a
plain moto server.

``python -m benchmarks.api_verify --n 24 --rounds 3 --workers 1`` verifies the reference of
every task in ``examples/tasks/api.jsonl`` round-robin, ``--n`` times per setup per round,
from ``--workers`` threads:

- baseline: what a user would run without a sandbox: one moto server kept running in this
  process (reset through its ``/moto-api/reset`` before each verification), warm boto3
  clients seeding and reading back, and the candidate as a fresh ``python -s`` subprocess
  with the same environment and limits as in the harness (``harness.run_candidate``);
- cold: ``ApiVerifier(warm=False)`` on the common fork server, the path before this change
  (every run imports moto and boto3 and parses their models);
- ours: ``ApiVerifier`` as the pipeline builds it (its runs on the family's own fork server,
  ``Sandbox.dedicated``, which did that work once at boot).

Every verdict must be ``pass``. Prints the rate and the machine's CPU-ms per verification of
each setup per round and the ratios ours / cold and ours / baseline (rates), with the
machine report (load before and after, the fork limit of the same run).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.timing import Pass, command_line, median, rotated, run_reported, timed_pass
from tasksieve.schemas import ApiSpec, TaskRecord

ROOT = Path(__file__).resolve().parents[1]
Check = Callable[[TaskRecord], bool]


def load_tasks() -> list[TaskRecord]:
    lines = (ROOT / "examples" / "tasks" / "api.jsonl").read_text().splitlines()
    return [TaskRecord.model_validate_json(ln) for ln in lines if ln.strip()]


class PlainMoto:
    """The baseline: one moto server in this process, reset before each verification."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        from tasksieve.verifiers.families.api.guest import harness

        class Quiet(MotoRequestHandler):  # type: ignore[misc]
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        self.h = harness
        app = DomainDispatcherApplication(create_backend_app)
        self.server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"
        self.clients = harness._clients(self.endpoint)
        self.lock = threading.Lock()  # one moto state: verifications take turns
        self.site = [p for p in sys.path if p.endswith("-packages")]

    def check(self, task: TaskRecord) -> bool:
        import urllib.request

        from tasksieve.verifiers.families.api.verifier import compare

        spec = task.verifier
        assert isinstance(spec, ApiSpec)
        cfg: dict[str, Any] = {
            "site_paths": self.site,
            "python": sys.executable,
            "candidate_memory_mb": spec.memory_mb,
            "timeout_s": spec.timeout_s,
        }
        with self.lock, tempfile.TemporaryDirectory() as scratch:
            reset = urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST")
            urllib.request.urlopen(reset, timeout=30).close()
            self.h.seed(self.clients, spec.initial_state.model_dump())
            Path(scratch, "solution.py").write_text(task.reference_solution)
            cwd = os.getcwd()
            os.chdir(scratch)
            try:
                cand = self.h.run_candidate(cfg, self.endpoint)
            finally:
                os.chdir(cwd)
            state, errors = self.h.read_state(self.clients)
        checks = compare(spec, state)
        return cand["exit_code"] == 0 and not errors and all(c.passed for c in checks)

    def close(self) -> None:
        self.server.shutdown()


def cycle(check: Check, tasks: list[TaskRecord]) -> Callable[[int], bool]:
    """Job ``i`` checks the reference of task ``i`` modulo the task count."""
    return lambda i: check(tasks[i % len(tasks)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=24, help="verifications per setup per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=1, help="threads verifying at once")
    args = p.parse_args(argv)
    print("command: " + command_line("benchmarks.api_verify"))
    from tasksieve.verifiers.families.api.verifier import ApiVerifier
    from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

    tasks = load_tasks()
    sandbox = ProcessSandbox()
    plain = PlainMoto()
    ours, cold = ApiVerifier(sandbox), ApiVerifier(sandbox, warm=False)
    if ours.runner is sandbox:
        print(f"no fork server here ({sandbox.warm_unavailable}): ours runs cold too")
    setups: dict[str, Check] = {
        "baseline": plain.check,
        "cold": lambda t: cold.verify(t, t.reference_solution).status == "pass",
        "ours": lambda t: ours.verify(t, t.reference_solution).status == "pass",
    }
    try:
        for check in setups.values():  # warm up: servers started, models read
            for t in tasks:
                check(t)
        table: dict[str, list[Pass]] = {name: [] for name in setups}
        for r in range(args.rounds):
            for name in rotated(list(setups), r):
                res = timed_pass(cycle(setups[name], tasks), args.n, args.workers)
                if not all(res.verdicts):
                    sys.exit(f"{name}: a reference did not pass")
                table[name].append(res)
            cells = "  ".join(
                f"{n}: {table[n][-1].rate:.2f}/s {table[n][-1].cpu_ms:.0f} CPU-ms" for n in setups
            )
            print(f"round {r + 1}: {cells}")
        rate = {n: median([x.rate for x in table[n]]) for n in setups}
        cpu = {n: median([x.cpu_ms for x in table[n]]) for n in setups}
        print(
            f"median over {args.rounds} rounds, {args.workers} worker(s): "
            + "  ".join(f"{n} {rate[n]:.2f}/s {cpu[n]:.0f} CPU-ms" for n in setups)
        )
        print(
            f"ours/cold {rate['ours'] / rate['cold']:.2f}x the rate "
            f"({cpu['ours'] / cpu['cold']:.2f}x the CPU); "
            f"ours/baseline {rate['ours'] / rate['baseline']:.2f}x the rate "
            f"({cpu['ours'] / cpu['baseline']:.2f}x the CPU)"
        )
    finally:
        plain.close()
        sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
