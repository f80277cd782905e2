"""One sub-package per task family: its verifier, host helpers and guest programs.

``python`` (family ``code``), ``sql``, ``config`` and ``api``. A family reaches its sandbox
only through ``tasksieve.verifiers.sandbox.Sandbox`` and the capabilities the backend declares.
"""
