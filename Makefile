# Two commands on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed
# `make demo PORT=7432` when 6432 is taken.
PORT ?= 6432

.PHONY: demo test test-native lint fuzz native

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dpgate demo --port $(PORT)

# The relay's hot modules compiled with mypyc into build/native/ (proxy/native.py), unless
# the build there matches the source already; used only while it does. ~1 min with gcc.
native: $(STAMP)
	$(VENV)/bin/python -c 'from proxy.native import main; main()'

# ruff, then mypy over proxy/ rewriter/ accounting/ mechanisms/ ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Two workers, each with its own PostgreSQL; a module's tests stay on one worker, so its
# module-scoped proxy starts once. xdist hands out the modules with the most tests first,
# so tests/test_differential.py (one test per corpus query, the longest module) starts at
# once rather than last. One worker when DPGATE_TEST_DSN names a single server.
# The suite runs on the modules' .py (whatever build/native holds); `make test-native`
# builds the compiled relay and runs the relay's and the protocol's tests on it, so both
# ways pass (.ci/run runs both).
test: lint
	DPGATE_PURE_PYTHON=1 $(VENV)/bin/pytest $(if $(DPGATE_TEST_DSN),,-n 2 --dist loadfile)

test-native: native
	DPGATE_REQUIRE_NATIVE=1 $(VENV)/bin/pytest -q $(if $(DPGATE_TEST_DSN),,-n 2 --dist loadfile) \
		$(RELAY_TESTS)

RELAY_TESTS = tests/test_native.py tests/test_fast_relay.py tests/test_relay_routine.py \
	tests/test_extended_protocol.py tests/test_extended_fuzz.py tests/test_startup.py \
	tests/test_cancel.py tests/test_ops.py tests/test_pgwire_codes.py tests/test_psql.py \
	tests/test_catalog_clients.py tests/test_backend_restart.py tests/test_robustness.py \
	tests/test_lexical_settings.py tests/clients

# The totality fuzzer at length (tests/test_totality_fuzz.py runs a bounded version).
FUZZ_COUNT ?= 20000
fuzz: $(STAMP)
	$(VENV)/bin/python -m bench.totality_fuzz --count $(FUZZ_COUNT)
