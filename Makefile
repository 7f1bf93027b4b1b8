# Two commands on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed
# `make demo PORT=7432` when 6432 is taken.
PORT ?= 6432

.PHONY: demo test lint fuzz

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dpgate demo --port $(PORT)

# ruff, then mypy over proxy/ rewriter/ accounting/ mechanisms/ ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Two workers, each with its own PostgreSQL; a module's tests stay on one worker, so its
# module-scoped proxy starts once. xdist hands out the modules with the most tests first,
# so tests/test_differential.py (one test per corpus query, the longest module) starts at
# once rather than last. One worker when DPGATE_TEST_DSN names a single server.
test: lint
	$(VENV)/bin/pytest $(if $(DPGATE_TEST_DSN),,-n 2 --dist loadfile)

# The totality fuzzer at length (tests/test_totality_fuzz.py runs a bounded version).
FUZZ_COUNT ?= 20000
fuzz: $(STAMP)
	$(VENV)/bin/python -m bench.totality_fuzz --count $(FUZZ_COUNT)
