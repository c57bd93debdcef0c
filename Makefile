# Two commands do everything on a fresh machine (see README):
#   make run    - the benchmark suite against the built-in default agent, printing the table
#   make test   - the project's tests (tests sharing an expensive fixture are one xdist_group;
#                 a test still running after 15 minutes fails with every thread's stack)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PYTEST_ARGS ?=

.PHONY: run test lint bench clean chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The run needs the base install only (what a user's `pip install pytest-resilibench` gets).
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

# The tests need every extra: PPO (torch, pinned to a CPU wheel), MCP, plots, the agent
# framework adapters, dev tools.
$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,solver,mcp,report,agents-sdk,langgraph,otel]"
	touch $(DEV_STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/pytest suites -p no:cacheprovider -q --resili-summary=full $(PYTEST_ARGS)

# The browser test drives Debian's Chromium: installed here when missing and we are root (a
# fresh CI machine); without it that test skips and says why.
chromium:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium (apt-get) for the browser test"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null 2>&1 && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } || \
	  echo "could not install chromium: the browser test will skip"; \
	fi

# The OpenTelemetry tests' receiver: Arize Phoenix, in a venv of its own (its pins are not
# ours); tests/plugin/otel_receiver.py finds it through RESILIBENCH_PHOENIX and skips, saying
# why, without it.
PHOENIX_VENV := .venv-phoenix
PHOENIX := $(PHOENIX_VENV)/bin/phoenix
$(PHOENIX):
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet "arize-phoenix>=12" || \
	  echo "could not install arize-phoenix: the OpenTelemetry receiver tests will skip"

test: $(DEV_STAMP) chromium $(PHOENIX)
	RESILIBENCH_PHOENIX=$(abspath $(PHOENIX)) \
	  $(BIN)/pytest tests -n 2 --dist loadgroup -q --timeout=900 $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(DEV_STAMP)
	for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script; done

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
