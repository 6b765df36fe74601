# The two commands of the README: `make demo` (the main job) and `make test` (everything CI
# runs: the linter, then the whole test suite, slow statistical claims included).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test test-fast lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,ray,fast,jax]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/pgfl reproduce fig2 --out runs/fig2

test: lint
	$(BIN)/python -m pytest -q

# the edit loop: every test but the slow statistical ones, no linter
test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: $(BIN)/.installed
	$(BIN)/pgfl bench

clean:
	rm -rf $(VENV) runs .pytest_cache
