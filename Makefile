# The two commands of the README: `make demo` (the main job: pgfl and its compiled kernel
# only) and `make test` (everything CI runs: the linter, then the whole test suite, slow
# statistical claims included, with every optional backend installed).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test test-fast lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the demo's install: pgfl and numba (the compiled local phase); Ray, JAX, Flower/gRPC are
# extras (`$(BIN)/pip install -e '.[ray]'`, `'.[jax]'`, `'.[deploy]'`), installed by `make test`
$(BIN)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[fast]'
	touch $@

# what CI runs: the dev tools (pytest, hypothesis, ruff) and every optional backend.
# PyTorch (pgfl[torch]) is pinned to 2.13.0 first: on the project's machines that is the
# CPU build on local disk (about 750 MB installed, 1-2 min); pgfl[torch]'s own range,
# torch>=2.4, then installs nothing more (a bare `pip install torch` takes a CUDA build
# of several GB). Its tests skip when torch is missing (pytest.importorskip).
TORCH ?= torch==2.13.0
$(BIN)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q '$(TORCH)'
	$(BIN)/python -m pip install -q -e '.[dev,ray,fast,jax,deploy,torch]'
	touch $@ $(BIN)/.demo-installed

demo: $(BIN)/.demo-installed
	$(BIN)/pgfl reproduce fig2 --out runs/fig2

# two pytest worker processes (pytest-xdist): a test that crashes its process fails alone
# and the run goes on; the Ray tests share one worker (--dist loadgroup)
PYTEST = $(BIN)/python -m pytest -q -n 2 --dist loadgroup

test: lint
	$(PYTEST)

# the edit loop: every test but the slow statistical ones, no linter
test-fast: $(BIN)/.installed
	$(PYTEST) -m "not slow"

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: $(BIN)/.demo-installed
	$(BIN)/pgfl bench

clean:
	rm -rf $(VENV) runs .pytest_cache
