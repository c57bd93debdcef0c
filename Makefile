# Two commands do everything on a fresh machine (see README):
#   make run    - the benchmark suite against the built-in default agent, printing the table
#   make test   - the project's tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,solver,mcp,report]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/pytest suites -p no:cacheprovider -q $(PYTEST_ARGS)

test: $(STAMP)
	$(BIN)/pytest tests -n 2 -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
