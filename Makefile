# Quick start: `make serve` and `make test` each set everything up from scratch.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
TRACE_DIR ?= $(if $(ILUCID_TRACE_DIR),$(ILUCID_TRACE_DIR),$(wildcard ../shared/traces))

.PHONY: serve demo native native-clean test check lint typecheck imports bench bench-policies bench-mixed bench-mixed-robustness bench-placement clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## native: compile the replay's hot modules with mypyc beside their sources (about 1.5 min;
## the same results in about 3/5 of the time). Used only while they match their sources:
## an edit, ILUCID_PURE=1 or `make native-clean` runs the pure Python (--version tells)
NATIVE := src/ilucid/compiled/manifest.json
NATIVE_SOURCES := $(shell $(PYTHON) tools/build_native.py --list)
$(NATIVE): $(STAMP) $(NATIVE_SOURCES) tools/build_native.py tools/mypyc.ini
	$(BIN)/python tools/build_native.py

native: $(NATIVE)

native-clean: $(STAMP)
	$(BIN)/python tools/build_native.py --clean

## serve: install and start the live scheduler here (SQLite in .ilucid, local backend);
## prints the dashboard URL. GPUs come from NVML, else GPUS virtual ones (default 4);
## the API and dashboard listen on PORT (default 8787; the client commands find it).
GPUS ?= 4
PORT ?= 8787
serve: $(STAMP) $(NATIVE)
	$(BIN)/ilucid serve --port $(PORT) $(if $(wildcard /dev/nvidia0),,--gpus $(GPUS))

## demo: install and compare the baseline policies (Philly when ILUCID_TRACE_DIR is set)
demo: $(STAMP) $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/ilucid demo --out out/demo

## test: install dev tools, run lint, types, import rules and the whole test suite
test: check $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python -m pytest -n 2 --dist loadgroup tests

check: lint typecheck imports

lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

## bench: simulator wall time and peak memory on Philly and ITP cluster04
bench: $(STAMP) $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/simulator.py

## bench-policies: issues #3 and #15: every policy and the default profile on Philly and ITP 01-05
bench-policies: $(STAMP) $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/policies.py

## bench-mixed: the default profile vs static partitioning vs FIFO with inference (issue #4's table)
bench-mixed: $(STAMP) $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/mixed.py

## bench-mixed-robustness: the default profile vs static with every training job d s longer
bench-mixed-robustness: $(STAMP) $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/mixed_robustness.py

## bench-placement: issue #5: fragmentation table, hybrid cost/wait, per-type speeds
bench-placement: $(STAMP) $(NATIVE)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/placement.py

## bench-scale: issue #20: the default profile's pass latency on 2k-50k nodes x 10k-100k
## pending, under churn (ARGS="--quick" for one small cell)
.PHONY: bench-scale bench-sharded
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py $(ARGS)

## bench-service-scale: issue #32: the real ilucid serve on 10,000 hollow nodes x 100k pending,
## SQLite and PostgreSQL, under churn and a stream of submissions (ARGS="--quick": one small cell)
.PHONY: bench-service-scale
bench-service-scale: $(STAMP)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/service_scale.py $(ARGS)

## bench-sharded: issue #20: conflict rate of N schedulers with optimistic commits on Philly
bench-sharded: $(STAMP)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/sharded_conflicts.py $(ARGS)

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache build/native src/ilucid/compiled/manifest.json
	find src -name "*.so" -delete
