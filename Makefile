# Two commands on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed

.PHONY: demo test lint fuzz

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dpgate demo

# ruff, then mypy over proxy/ rewriter/ accounting/ mechanisms/ ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest

# The totality fuzzer at length (tests/test_totality_fuzz.py runs a bounded version).
FUZZ_COUNT ?= 20000
fuzz: $(STAMP)
	$(VENV)/bin/python -m bench.totality_fuzz --count $(FUZZ_COUNT)
