"""The ``--runner`` flag: a Beam runner's name, with the Dask runner's needs checked early.

Standard library only at the top. ``--runner DaskRunner`` (Beam's name) runs on tasksieve's
adaptation of Beam's Dask runner (``pipeline/curate/dask_runner.py``); parsing the flag
imports Beam's ``DaskOptions`` so that ``--dask_client_address`` and the other Dask options
are known pipeline options, and says how to install the ``dask`` extra when it is missing.
"""

from __future__ import annotations

import argparse

DASK_NAMES = (
    "DaskRunner",
    "apache_beam.runners.dask.dask_runner.DaskRunner",
    "tasksieve.pipeline.curate.dask_runner.DaskRunner",
)


def is_dask(name: str) -> bool:
    """Whether ``--runner NAME`` asks for the Dask runner."""
    return name in DASK_NAMES or name.lower() == "daskrunner"


def runner_name(text: str) -> str:
    """argparse type of ``--runner``: the name as given; for Dask, its options registered."""
    if is_dask(text):
        try:
            import dask.distributed  # noqa: F401

            import tasksieve.pipeline.curate.dask_runner  # noqa: F401  (registers DaskOptions)
        except ImportError as e:
            raise argparse.ArgumentTypeError(
                f"{text} needs dask.distributed ({e.msg}): pip install 'tasksieve[dask]'"
            ) from None
    return text
