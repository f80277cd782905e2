"""Look up sandbox backends and verifiers by name."""

from __future__ import annotations

from verifiers.base import Sandbox, UnsupportedFamily, Verifier

SANDBOXES: tuple[str, ...] = ("process", "docker")


def make_sandbox(name: str = "process", allow_weak_isolation: bool = False) -> Sandbox:
    """Build the sandbox backend called ``name`` (``process`` or ``docker``)."""
    if name == "process":
        from verifiers.process import ProcessSandbox

        return ProcessSandbox(allow_weak_isolation=allow_weak_isolation)
    if name == "docker":  # image from $TASKSIEVE_SANDBOX_IMAGE or the built default
        from verifiers.docker_sandbox import DockerSandbox

        return DockerSandbox()
    raise ValueError(f"unknown sandbox {name!r}; choose one of: {', '.join(SANDBOXES)}")


def get_verifier(family: str, sandbox: Sandbox) -> Verifier:
    """The verifier for a task family, running its executions in ``sandbox``."""
    if family == "code":
        from verifiers.python_code import PythonVerifier

        return PythonVerifier(sandbox)
    raise UnsupportedFamily(f"no verifier for family {family!r} yet (supported: code)")
