"""The sandbox fleet as an HTTP service (``tasksieve serve``): verify, run_code, sessions.

``app`` builds the ASGI application, ``guard`` checks the token and body sizes before any
body is read, ``scheduler`` the bounded priority queue and worker
threads, ``sessions`` the stateful sandboxes for multi-step agents, ``runcode`` the
SandboxFusion-shaped ``/run_code``. This package imports ``schemas`` and ``verifiers`` only
(never Beam or the pipeline); the client lives in ``tasksieve.verifiers.remote``.
"""
