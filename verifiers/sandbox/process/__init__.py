"""The ``process`` backend: bubblewrap namespaces, a warm fork server, rlimits, seccomp."""

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

__all__ = ["ProcessSandbox"]
