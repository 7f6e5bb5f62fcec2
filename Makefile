# Quick start: `make serve` and `make test` each set everything up from scratch.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
TRACE_DIR ?= $(if $(ILUCID_TRACE_DIR),$(ILUCID_TRACE_DIR),$(wildcard ../shared/traces))

.PHONY: serve demo wheel test test-pure check lint typecheck imports bench bench-policies bench-mixed bench-mixed-robustness bench-placement clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml setup.py | $(BIN)/python
	ILUCID_COMPILE=0 $(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## wheel: build the wheel a user installs (`python -m build`; setup.py compiles the replay's
## hot modules with mypyc, about 1.5 min, or builds pure Python without a C compiler) and
## install it into the venv in place of the editable sources: `make serve`, `demo`, `test`
## and the benchmarks run what `pip install` gives. `ilucid --version` says which core runs
WHEEL := $(VENV)/.installed-wheel
PACKAGE_FILES := $(shell find src/ilucid -type f ! -name '*.pyc' ! -name '*.so' 2>/dev/null)
$(WHEEL): $(STAMP) setup.py MANIFEST.in tools/mypyc.ini $(PACKAGE_FILES)
	@# an older in-place build (the former `make native`) would shadow the sources
	find src -name '*.so' -delete
	rm -rf src/ilucid/compiled dist/ilucid-*.whl
	@mkdir -p build
	@echo "wheel: python -m build (mypyc compiles the hot modules: about 1.5 min; log in build/wheel.log)"
	@$(BIN)/python -m build --wheel --outdir dist . > build/wheel.log 2>&1 || { tail -40 build/wheel.log; exit 1; }
	@grep -E "^ilucid: |: (warning|error): " build/wheel.log || true
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall dist/ilucid-*.whl
	touch $@

wheel: $(WHEEL)

## serve: install and start the live scheduler here (SQLite in .ilucid, local backend);
## prints the dashboard URL. GPUs come from NVML, else GPUS virtual ones (default 4);
## the API and dashboard listen on PORT (default 8787; the client commands find it).
GPUS ?= 4
PORT ?= 8787
serve: $(STAMP) $(WHEEL)
	$(BIN)/ilucid serve --port $(PORT) $(if $(wildcard /dev/nvidia0),,--gpus $(GPUS))

## demo: install and compare the baseline policies (Philly when ILUCID_TRACE_DIR is set)
demo: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/ilucid demo --out out/demo

## test: install dev tools, run lint, types, import rules, the whole test suite against the
## installed wheel (compiled core), then the core's tests again on the Python sources
test: check $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python -m pytest -n 2 --dist loadgroup tests
	$(MAKE) --no-print-directory test-pure

## test-pure: the fast pure-Python subset: the core's tests on src/ (PYTHONPATH), not the wheel
test-pure: $(STAMP)
	PYTHONPATH=src ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python -m pytest -n 2 tests/core

check: lint typecheck imports

lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools setup.py
	$(BIN)/ruff format --check src tests bench tools setup.py

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	PYTHONPATH=src $(BIN)/lint-imports

## bench: simulator wall time and peak memory on Philly and ITP cluster04
bench: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/simulator.py

## bench-policies: issues #3 and #15: every policy and the default profile on Philly and ITP 01-05
bench-policies: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/policies.py

## bench-mixed: the default profile vs static partitioning vs FIFO with inference (issue #4's table)
bench-mixed: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/mixed.py

## bench-mixed-robustness: the default profile vs static with every training job d s longer
bench-mixed-robustness: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/mixed_robustness.py

## bench-placement: issue #5: fragmentation table, hybrid cost/wait, per-type speeds
bench-placement: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/placement.py

## bench-hetero: issue #33: speed-ratio GPU type allocation vs type-blind on itp-04 and Philly
.PHONY: bench-hetero
bench-hetero: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/hetero.py

## bench-progress: issue #33: the default profile vs oracle SRTF with 60% of jobs reporting progress
.PHONY: bench-progress
bench-progress: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/progress.py

## bench-hybrid: issue #35: bursting vs always-on cloud nodes on itp-04 and Philly
.PHONY: bench-hybrid
bench-hybrid: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/hybrid.py

## bench-start-ranges: issue #37: expected starts' 80% ranges (coverage, error) on Philly and
## ITP 01-05, and what predictions cost a full Philly replay
.PHONY: bench-start-ranges
bench-start-ranges: $(STAMP) $(WHEEL)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/start_ranges.py $(ARGS)

## bench-wheel: issue #34: `python -m build` wheels (compiled and pure) in fresh virtual
## environments: --version, and full Philly under the default profile, the same jobs CSV
.PHONY: bench-wheel
bench-wheel: $(STAMP)
	ILUCID_TRACE_DIR=$(TRACE_DIR) $(BIN)/python bench/wheel.py $(ARGS)

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
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache build dist src/ilucid/compiled
	find src -name "*.so" -delete
