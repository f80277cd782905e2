#!/bin/sh
# A dask.distributed cluster on loopback for `tasksieve curate --runner DaskRunner`: one
# scheduler and N separate worker processes (each under its nanny), in the foreground until
# Ctrl-C or SIGTERM, which stops every process it started. Run it from the environment that
# has tasksieve and its `dask` extra installed (the workers import tasksieve from it).
#
#   deploy/dask-cluster.sh [--workers N] [--threads T]
#
# It prints the scheduler's address and the curate options that use it, e.g.
#   tasksieve curate ... --runner=DaskRunner --dask_client_address=tcp://127.0.0.1:PORT
set -eu
exec "${PYTHON:-python}" -m tasksieve.pipeline.curate.local_dask "$@"
