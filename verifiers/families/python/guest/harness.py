"""Code that runs inside the sandbox for the Python verifier: a candidate server and a test runner.

Run as ``python -I -S python_harness.py candidate`` (loads ``solution.py`` and answers calls)
or ``... tests`` (runs ``tests.json`` with a proxy in place of the candidate). The two never
share a process: either the parent relays JSON lines between them, or (``pair-tests PID``, a
fork-server pair run) the tests process talks to the candidate over a pipe of its own and
reports results on fd 3, which the candidate never holds. The parent counts the results
itself. Standard library only; the parent imports the planning and codec modules.

Protocol (one JSON object per line, on fds that were stdin/stdout at start; the code under
test sees /dev/null and stderr instead):
- candidate -> parent: ``{"op": "loaded", "error": str | None}`` once, then one reply per call:
  ``{"ok": value}`` or ``{"exc": [type_name, message]}``.
- tests -> parent: ``{"op": "call", "fn", "args", "kwargs"}`` (reply ``{"ok"}``, ``{"exc"}``
  or ``{"crash": message}``), ``{"op": "result", "name", "passed", "detail"}``, ``{"op": "done"}``.
- pair and multi-sample runs: tests -> candidate ``{"fn", "args", "kwargs"}`` (reply as
  above), or ``{"batch": [request, ...]}`` for a check's leading certain calls (``prefetch``),
  answered with one reply line per request, in order; tests -> parent
  (fd 3) the candidate's ``loaded`` line (``{"op": "loaded", "error"}``, or ``"broken": true``
  when it broke the protocol), results, ``{"op": "cand_exit", "signal", "code"}`` (nulls if
  it still runs), then ``done``; the pair's tests process then closes the candidate's pipes
  and stays, reaping, until the host kills the run (``_outlive``), so no CPU time is lost.
Values cross in a tagged JSON codec (``codec``: tuples, sets, dicts with any keys, bytes,
complex, nan), so only plain built-in values ever reach the test process. The codec, the test
planning (``planning``) and the wire (``wire``) are guest modules of their own, inlined here by
``tasksieve.verifiers.sandbox.guest.bundle``: the verifiers send ``bundle()`` of this file.

Names in the tests process: trusted code runs there first (``tests.json`` ``trusted``: the
prompt when it parses as Python, then the reference solution, statement by statement), then
each name in ``candidate_names`` (the entry point by default) is bound to a proxy, then
``setup_code`` and the tests run. Any other name the tests use (a prompt helper, constant,
class or import) is the trusted definition or a NameError, never the candidate's; so is an
attribute of the ``solution`` module the tests may import. Nothing the candidate does in its
own process (redefining helpers, patching builtins or modules) reaches this one.

It does NOT guard against tests that need the candidate's objects themselves (custom classes,
generators, callables passed either way fail), in-place mutation of arguments (not copied
back), candidates that hard-code the visible test inputs, or trusted code that keeps its own
reference to the entry point under another name (an alias, a registry): tests calling that
name test the reference, not the candidate.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import sys
import time
import types
from typing import Any

from tasksieve.verifiers.families.python.guest.codec import decode, encode
from tasksieve.verifiers.families.python.guest.compiled import (
    _COMPILED,
    _check_codes,
    _code,
    _trusted_codes,
)
from tasksieve.verifiers.families.python.guest.planning import check_statements, plan
from tasksieve.verifiers.families.python.guest.prefetch import PURE, leading_calls
from tasksieve.verifiers.families.python.guest.wire import Wire, describe


# ----------------------------------------------------------------------------- candidate
def serve_candidate() -> None:
    """Load solution.py, then answer calls until the parent closes stdin."""
    wire = Wire()
    mod = types.ModuleType("solution")
    sys.modules["solution"] = mod
    try:
        with open("solution.py", encoding="utf-8") as fh:
            src = fh.read()
        exec(compile(src, "solution.py", "exec"), mod.__dict__)
    except BaseException as e:
        wire.send({"op": "loaded", "error": ": ".join(describe(e))})
        return
    wire.send({"op": "loaded", "error": None})
    while True:
        try:
            req = wire.recv()
        except EOFError:
            return
        batch = req.get("batch") if type(req) is dict else None
        for one in batch if type(batch) is list else [req]:  # a batch: one reply per call
            reply = _answer(mod, one)
            try:
                wire.send(reply)
            except ValueError as e:  # e.g. a float that JSON cannot hold
                wire.send({"exc": describe(e)})


def _answer(mod: types.ModuleType, req: Any) -> dict[str, Any]:
    """The reply to one call request: ``{"ok": value}`` or ``{"exc": [type, message]}``."""
    try:
        fn = mod.__dict__.get(req["fn"])
        if not callable(fn):
            raise NameError(f"name {req['fn']!r} is not defined by the solution")
        args = decode(req["args"])
        kwargs = decode(req["kwargs"])
        return {"ok": encode(fn(*args, **kwargs))}
    except BaseException as e:
        return {"exc": describe(e)}


# ----------------------------------------------------------------------------- tests
class CandidateError(Exception):
    """The candidate raised an exception that is not a plain built-in one."""


class CandidateCrashed(Exception):
    """The candidate's process is gone (exited, killed, or broke the protocol)."""


_SAFE_EXC = {
    n: c for n, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, Exception)
}


_GONE = {"crash": "candidate process gone or broke the protocol"}


class _RelayLink:
    """Calls relayed by the parent (``tests`` mode)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def call(self, req: dict[str, Any]) -> Any:
        self.wire.send({"op": "call", **req})
        return self.wire.recv()


class _DirectLink:
    """Calls sent straight to the candidate (``pair-tests`` mode); a broken reply ends it.

    ``send_ahead`` sends calls known to come next (``prefetch``) in one message; ``call``
    then takes their replies in order. A call that is not the one expected next (never, by
    ``prefetch``'s rule) first takes the replies still owed, then goes out alone.
    """

    def __init__(self, wire: Wire) -> None:
        self.wire, self.alive, self.eof = wire, True, False
        self.ahead: list[str] = []

    def recv(self) -> Any:
        """The candidate's next JSON line, or None (and marked gone) on EOF or garbage."""
        try:
            return self.wire.recv()
        except BaseException as e:  # EOF, a line too long, bad JSON, nesting bombs
            self.alive, self.eof = False, self.eof or isinstance(e, EOFError)
            return None

    def send_ahead(self, reqs: list[dict[str, Any]]) -> None:
        if not reqs or not self.alive:
            return
        try:
            self.wire.send({"batch": reqs})
        except (OSError, ValueError):
            self.alive = False
            return
        self.ahead = [json.dumps(r, sort_keys=True) for r in reqs]

    def call(self, req: dict[str, Any]) -> Any:
        if not self.alive:
            return _GONE
        if self.ahead and self.ahead[0] != json.dumps(req, sort_keys=True):
            while self.ahead and self.alive:  # not the expected call: settle what is owed
                self.ahead.pop(0)
                self.recv()
        if self.ahead:
            self.ahead.pop(0)
        else:
            try:
                self.wire.send(req)
            except OSError:
                self.alive = False
                return _GONE
        rep = self.recv()
        if type(rep) is not dict or not ({"ok", "exc"} & rep.keys()):
            self.alive = False
            return _GONE
        return rep


class _Proxy:
    """Stands in for a candidate function; each call goes to the candidate process."""

    def __init__(self, link: _RelayLink | _DirectLink, name: str) -> None:
        self._link, self._name = link, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        req = {"fn": self._name, "args": encode(list(args)), "kwargs": encode(kwargs)}
        rep = self._link.call(req)
        if "ok" in rep:
            return decode(rep["ok"])
        if "exc" in rep:
            name, msg = str(rep["exc"][0]), str(rep["exc"][1])
            raise _SAFE_EXC.get(name, CandidateError)(
                f"{name}: {msg}" if name not in _SAFE_EXC else msg
            )
        raise CandidateCrashed(str(rep.get("crash", "candidate gone")))


_BUILTINS = {n: getattr(builtins, n) for n in PURE}


def _send_ahead(link: Any, test_code: str, fn: Any, names: list[str], entry: str, g: Any) -> None:
    """Send the check's leading certain calls (``prefetch``) in one message on a direct link."""
    if not isinstance(link, _DirectLink):
        return
    key = (test_code, "<ast>")
    if key not in _COMPILED:
        _COMPILED[key] = [st for _, st in check_statements(test_code) or []]
    cands = {n: n for n in names}
    cands[fn.__code__.co_varnames[0]] = entry
    pure = {n for n in PURE if n not in g and getattr(builtins, n, None) is _BUILTINS[n]}
    calls = leading_calls(_COMPILED[key], cands, pure)
    link.send_ahead([{"fn": f, "args": encode(a), "kwargs": encode(k)} for f, a, k in calls])


def load_trusted(sources: list[str], ns: dict[str, Any]) -> None:
    """Run trusted sources (prompt, reference solution) into ``ns``, one statement at a time.

    A source that is not Python (a prose prompt) is skipped, and so is a statement that
    raises (an import the sandbox lacks, a top-level call reading stdin): later definitions
    still land. Only called before any proxy exists, so nothing here can reach the candidate.
    """
    for src in sources:
        for code in _trusted_codes(src):
            with contextlib.suppress(BaseException):
                exec(code, ns)


def _solution_module(proxies: dict[str, _Proxy], trusted: dict[str, Any]) -> types.ModuleType:
    """The ``solution`` module the tests may import: candidate names, else trusted names."""
    mod = types.ModuleType("solution")

    def attr(name: str) -> Any:
        if name in proxies:
            return proxies[name]
        if name in trusted and not name.startswith("__"):
            return trusted[name]
        raise AttributeError(f"module 'solution' has no attribute {name!r}")

    mod.__dict__["__getattr__"] = attr
    return mod


def _serve_candidate(link: _DirectLink, out: Wire) -> None:
    """Forward the candidate's load status to ``out``, then run the tests against it."""
    loaded = link.recv()
    if type(loaded) is dict and loaded.get("op") == "loaded":
        err = loaded.get("error")
        out.send({"op": "loaded", "error": None if err is None else str(err)[:500]})
        if err is None:
            run_tests(link, out)
    else:
        link.alive = False
        out.send({"op": "loaded", "broken": True})


def run_pair_tests() -> None:
    """Pair mode: forward the candidate's load status, run the tests, report its exit."""
    cand_pid = int(sys.argv[2])
    link = _DirectLink(Wire())
    out = Wire(wfd=os.dup(3))
    os.close(3)
    _serve_candidate(link, out)
    sig = code = None
    if not link.alive:  # give a candidate that broke the pipe a moment to be reaped
        if not link.eof:
            with contextlib.suppress(OSError):
                os.kill(cand_pid, 9)
        for _ in range(200):
            with contextlib.suppress(ChildProcessError):
                got, st = os.waitpid(cand_pid, os.WNOHANG)
                if got:
                    sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else None
                    code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else None
                    break
            time.sleep(0.005)
    out.send({"op": "cand_exit", "signal": sig, "code": code})
    out.send({"op": "done"})
    _outlive(link.wire)


def _outlive(wire: Wire) -> None:
    """Stay until the host's kill (or until the candidate and what it left have ended): this
    process is the run's init, and exiting first would take them along with their CPU time
    uncounted; alive, they are read by the fork server as it kills the run, or reaped here."""
    for fd in (wire.rfd, wire.wfd):
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(ChildProcessError):
        while True:  # the candidate, then its orphans (this init inherits them)
            os.waitpid(-1, 0)


def run_multi_tests() -> None:
    """Multi-sample mode: the samples one after another, init starting and ending each.

    Init starts sample ``i`` once ``i - 1`` ended; this process tells it ``{"end": i,
    "broken"}`` and waits for its answer only when the candidate broke its pipe.

    fds: 0/1 the control pipes from/to init, 3 the results, then per sample ``i`` the
    candidate's replies (``4 + 2i``) and its requests (``5 + 2i``). Each sample's report is
    the pair mode's lines between ``{"op": "sample", "i"}`` and ``{"op": "done", "i"}``;
    ``cand_exit`` carries what init saw (``wall``: init killed it on its wall limit).
    """
    count = int(sys.argv[2])
    ctl = Wire()
    out = Wire(wfd=os.dup(3))
    os.close(3)
    for i in range(count):
        out.send({"op": "sample", "i": i})
        link = _DirectLink(Wire(wfd=5 + 2 * i, rfd=4 + 2 * i))
        _serve_candidate(link, out)
        for fd in (4 + 2 * i, 5 + 2 * i):
            os.close(fd)
        ctl.send({"end": i, "broken": not link.alive})
        # Only a candidate that broke its pipe may have died of a limit; init answers then.
        end = ctl.recv() if not link.alive else {}
        out.send({"op": "cand_exit", **{k: end.get(k) for k in ("signal", "code", "wall")}})
        out.send({"op": "done", "i": i})


def run_tests(link: _RelayLink | _DirectLink | None = None, out: Wire | None = None) -> None:
    """Run the tests in tests.json, reporting one result per planned test, then done."""
    if link is None:
        link = _RelayLink(Wire())
    wire = out or link.wire
    with open("tests.json", encoding="utf-8") as fh:
        cfg = json.load(fh)
    entry = cfg.get("entry_point")
    # Trusted definitions first (never the candidate's), then proxies for the names the
    # candidate may provide; any other name is the trusted one or a NameError.
    g: dict[str, Any] = {"__name__": "__tests__", "__builtins__": builtins}
    load_trusted(list(cfg.get("trusted") or []), g)
    names = list(cfg.get("candidate_names") or ([entry] if entry else []))
    proxies = {n: _Proxy(link, n) for n in names}
    sys.modules["solution"] = _solution_module(proxies, dict(g))
    g.update(proxies)

    def report(name: str, err: BaseException | None) -> None:
        detail = "" if err is None else ": ".join(describe(err))
        wire.send({"op": "result", "name": name, "passed": err is None, "detail": detail})

    def attempt(code: Any, ns: dict[str, Any]) -> BaseException | None:
        try:
            exec(code, ns)
        except BaseException as e:
            return e
        return None

    setup_err = attempt(cfg["setup_code"], g) if cfg.get("setup_code") else None
    style = cfg["style"]
    if style == "asserts":
        for i, a in enumerate(cfg["asserts"]):
            report(f"assert_{i}", setup_err or attempt(_code(a, f"<assert {i}>"), g))
    elif style == "pytest":
        load_err = setup_err or attempt(_code(cfg["test_code"], "tests.py"), g)
        for name in plan(cfg):
            fn = g.get(name)
            err = load_err or (None if callable(fn) else NameError(f"{name} not collected"))
            report(name, err or attempt(_code(f"{name}()", name), g))
    else:
        load_err = setup_err or attempt(_code(cfg["test_code"], "tests.py"), g)
        stmts = _check_codes(cfg["test_code"])
        if stmts is None or not any(n for n, _ in stmts) or load_err:
            code = _code("check(%s)" % (entry or "candidate"), "check")
            report("check", load_err or attempt(code, g))
        else:
            fn = g["check"]
            local = dict(g)
            local[fn.__code__.co_varnames[0]] = _Proxy(link, entry or "candidate")
            if cfg.get("prefetch"):
                _send_ahead(link, cfg["test_code"], fn, names, entry or "candidate", g)
            pending: BaseException | None = None  # a failed setup statement fails the next test
            for label, st in stmts:
                err = attempt(st, local)
                if label:
                    report(label, pending or err)
                    pending = None
                elif err is not None:
                    pending = pending or err
    if out is None:
        wire.send({"op": "done"})


def warm_main() -> None:
    """Run the mode named by ``argv[1]``; the warm servers call this directly when warm."""
    modes = {"candidate": serve_candidate, "tests": run_tests, "pair-tests": run_pair_tests}
    {**modes, "multi-tests": run_multi_tests}[sys.argv[1]]()


if __name__ == "__main__":
    warm_main()
