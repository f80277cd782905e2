# A Beam SDK worker image for curate on Dataflow, Flink or Spark: Beam's Python SDK image with
# bubblewrap (the process sandbox) and tasksieve installed. Not built in this repository's CI.
# Build from the repository root (the Beam and Python versions must match the driver's):
#   docker build -f deploy/beam-worker.Dockerfile \
#     --build-arg BEAM_VERSION=2.77.0 --build-arg PYTHON=3.11 -t REGISTRY/tasksieve-worker:TAG .
ARG BEAM_VERSION=2.77.0
ARG PYTHON=3.11
FROM apache/beam_python${PYTHON}_sdk:${BEAM_VERSION}

# bubblewrap: the process sandbox's namespaces; util-linux: prlimit/setpriv/unshare fallback.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap util-linux procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/tasksieve
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY verifiers ./verifiers
COPY transforms ./transforms
COPY pipeline ./pipeline
RUN pip install --no-cache-dir .

# Beam's boot program stays the entrypoint (the runner starts it with its endpoints).
