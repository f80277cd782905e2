"""A stand-in for the ``vllm`` package, for tests on machines without a GPU (not vLLM).

Only ``python -m vllm.entrypoints.openai.api_server`` exists: it serves the model with
``transformers serve`` on the CPU (see that module). Importing this package does nothing, as
importing real vLLM does nothing a Beam launcher relies on: Beam's vLLM handlers import it
only to log whether it is installed.
"""

STANDIN = True
