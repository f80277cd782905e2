"""tasksieve: curate verified, difficulty-calibrated RL tasks on Apache Beam.

The source lives in the repository's top-level folders, installed under this package:
``tasksieve.schemas`` (records and their JSON/Arrow schemas) <- ``tasksieve.verifiers``
(sandboxes, workspaces and family verifiers; no Beam) <- ``tasksieve.transforms`` (the Beam
stages and the plain algorithms they wrap) <- ``tasksieve.pipeline`` (commands, the curate run,
its outputs, training). In a checkout, ``tasksieve/<name>`` is a link to ``<name>/``; a wheel
holds the files themselves (``package-dir`` in ``pyproject.toml``).
"""
