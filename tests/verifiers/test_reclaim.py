"""No process of a run outlives its verdict or the sandbox's ``close()``, on any path.

Runs are found by a marker in their argv (see ``reclaim_util``). Covered: normal end, wall
limit, CPU limit, a crashing candidate, the fork server killed, the sandbox closed with runs
still going (also right after a kill request, and under load), pair runs, and the host
process SIGKILLed mid-run. Every wait is bounded; leftovers are killed on the way out.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.process.uids import UIDS
from tests.verifiers.reclaim_util import (
    FORK_BOMB,
    KINDS,
    SLEEPERS_THEN,
    SPIN_WITH_CHILDREN,
    at_least,
    command,
    descendants,
    host_process,
    marked,
    marker,
    marks,
    still_alive,
    survivors,
)

SHORT = Limits(wall_s=1.5, cpu_s=30, memory_mb=256, max_processes=16)
ENDINGS = {  # program, limits, the verdict's expected limit_hit
    "normal_end": (SLEEPERS_THEN.format(end="print('done')"), SHORT, None),
    "wall": (SPIN_WITH_CHILDREN, SHORT, "wall"),
    "fork_bomb": (FORK_BOMB, SHORT, "wall"),
    "cpu": (SLEEPERS_THEN.format(end="while True: pass"), Limits(wall_s=30, cpu_s=1), "cpu"),
    "crash": (SLEEPERS_THEN.format(end="os.abort()"), SHORT, None),
}


@pytest.fixture(params=list(KINDS))
def box(request: pytest.FixtureRequest) -> Iterator[ProcessSandbox]:
    sb = ProcessSandbox(**KINDS[request.param])
    try:
        yield sb
    finally:
        sb.close()


def _server_pid(sb: ProcessSandbox) -> int | None:
    return None if sb._server is None else sb._server.server_pid


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_nothing_outlives_the_verdict(box, ending):
    code, limits, hit = ENDINGS[ending]
    with marks() as made:
        made.append(mark := marker())
        ex = box.run({}, command(box, code, mark), limits)
        assert ex.limit_hit == hit and ex.infra_error is None, ex
        assert marked(mark) == []


@pytest.mark.parametrize("program", [FORK_BOMB, SPIN_WITH_CHILDREN], ids=["bomb", "spin"])
def test_close_reclaims_runs_still_going(box, program):
    with marks() as made:
        made.append(mark := marker())
        procs = [box.spawn({}, command(box, program, mark), SHORT) for _ in range(2)]
        assert procs[0].popen.stdout is not None
        box.close()  # without closing the runs first
        assert survivors(mark, 15.0) == []
        for p in procs:
            p.close()


def test_close_right_after_a_kill_request(box):
    """The kill and the control socket's EOF may reach the server in one poll round."""
    with marks() as made:
        made.append(mark := marker())
        for _ in range(3):
            proc = box.spawn({}, command(box, SPIN_WITH_CHILDREN, mark), SHORT)
            proc.popen.kill()
            box.close()
            assert survivors(mark, 15.0) == []
            proc.close()


def test_close_under_load(box):
    """Several fork bombs and spinners, spawned and run from threads, while closing."""
    with marks() as made:
        made.append(mark := marker())
        procs = [
            box.spawn({}, command(box, prog, mark), Limits(wall_s=60, max_processes=16))
            for prog in (FORK_BOMB, FORK_BOMB, FORK_BOMB, SPIN_WITH_CHILDREN, SPIN_WITH_CHILDREN)
        ]
        threads = [
            threading.Thread(
                target=box.run, args=({}, command(box, FORK_BOMB, mark), SHORT), daemon=True
            )
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        survivors(marker(), 1.0)  # let them get going
        box.close()
        for p in procs:
            p.close()
        for t in threads:
            t.join(30.0)
        assert survivors(mark, 15.0) == []


def test_killed_while_still_being_set_up(box):
    """A run closed at once, or a few ms in: its launcher may not have made the init yet,
    or the init may not yet have bound itself to the launcher's death. None survives."""
    with marks() as made:
        made.append(mark := marker())
        for i in range(24):
            proc = box.spawn({}, command(box, FORK_BOMB, mark), SHORT)
            time.sleep((i % 8) * 0.002)
            proc.close()
        assert survivors(mark, 15.0) == []


def test_uids_come_back_only_when_the_run_is_gone(box):
    if not box.describe()["uid"].startswith("per-run"):
        pytest.skip(f"{box.describe()['isolation']} without root: runs keep the caller's uid")
    before = set(UIDS._used)
    with marks() as made:
        made.append(mark := marker())
        proc = box.spawn({}, command(box, SPIN_WITH_CHILDREN, mark), SHORT)
        assert len(set(UIDS._used) - before) == 1  # the live run holds one uid
        proc.close()
        assert survivors(mark, 5.0) == []
    assert set(UIDS._used) == before


@pytest.mark.parametrize("victim", ["server", "bwrap"])
def test_runs_die_with_a_killed_fork_server(victim):
    sb = ProcessSandbox()
    with marks() as made:
        made.append(mark := marker())
        try:
            procs = [sb.spawn({}, command(sb, SPIN_WITH_CHILDREN, mark), SHORT)]
            pid = _server_pid(sb)
            if pid is None:
                pytest.skip(f"no fork server here: {sb.warm_unavailable}")
            survivors(marker(), 0.5)
            tree = descendants(pid)
            target = pid if victim == "bwrap" else tree[1]  # bwrap -> its init -> the server
            os.kill(target, signal.SIGKILL)
            assert survivors(mark, 15.0) == []
            assert still_alive(tree, 15.0) == []
            for p in procs:
                p.close()
        finally:
            sb.close()


def test_pair_run_leaves_nothing():
    sb = ProcessSandbox()
    with marks() as made:
        made.append(mark := marker())
        try:
            if not sb.capabilities.paired_runs:
                pytest.skip(f"pair runs need the fork server: {sb.warm_unavailable}")
            for close_pair in (True, False):
                pair = sb.spawn_pair(
                    ({}, command(sb, SPIN_WITH_CHILDREN, mark)),
                    ({}, command(sb, SLEEPERS_THEN.format(end="time.sleep(60)"), mark)),
                    SHORT,
                )
                survivors(marker(), 0.5)
                if close_pair:
                    pair.close()
                    assert marked(mark) == []
                else:
                    sb.close()
                    assert survivors(mark, 15.0) == []
                    pair.close()
        finally:
            sb.close()


HOST = """
import json, sys, time
from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.reclaim_util import FORK_BOMB, KINDS, SPIN_WITH_CHILDREN, command
mark = sys.argv[1]
limits = Limits(wall_s=600, cpu_s=600, max_processes=16)
keep, servers = [], []
for kind in KINDS.values():
    sb = ProcessSandbox(**kind)
    for prog in (FORK_BOMB, SPIN_WITH_CHILDREN):
        keep.append(sb.spawn({}, command(sb, prog, mark), limits))
    if sb.capabilities.paired_runs:
        keep.append(sb.spawn_pair(({}, command(sb, SPIN_WITH_CHILDREN, mark)),
                                  ({}, command(sb, SPIN_WITH_CHILDREN, mark)), limits))
    if sb._server is not None:
        servers.append(sb._server.server_pid)
    keep.append(sb)
print(json.dumps(servers), flush=True)
time.sleep(600)
"""


def test_nothing_survives_a_killed_host(tmp_path):
    with marks() as made:
        made.append(mark := marker())
        with host_process(HOST, mark, tmp_path) as first:
            servers = json.loads(first or "[]")
            running = at_least(mark, 6, 60.0)  # every run started, however slow the start
            tree = [p for s in servers for p in descendants(s)]
        assert len(running) >= 6  # the host really had runs going
        assert survivors(mark, 20.0) == []
        assert still_alive([*servers, *tree], 15.0) == []
