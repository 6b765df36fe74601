# The two commands of the README: `make demo` (the main job) and `make test` (the whole test suite).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/pgfl reproduce fig2 --out runs/fig2

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks

bench: $(BIN)/.installed
	$(BIN)/pgfl bench

clean:
	rm -rf $(VENV) runs .pytest_cache
