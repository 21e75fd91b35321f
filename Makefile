# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export SLEUTH_HOME ?= $(CURDIR)/.sleuth

CORE_VENV ?= .venv-core

.PHONY: demo test checks test-fast fix lint typecheck install install-dev core-check sample-pdfs bench clean chromium postgres

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

# `--no-compile`: byte-compiling every installed package took a third of the install; what the suite
# imports is compiled on first import instead.
install-dev: $(BIN)/python
	$(BIN)/pip install -q --no-compile -e '.[dev,bench]'

demo: install
	$(BIN)/sleuth compile examples/acme-corpus --context acme --manifest examples/acme-manifest.json
	$(BIN)/sleuth inspect acme
	$(BIN)/sleuth search --context acme "How many days a week can employees work remotely?"
	$(BIN)/sleuth search --context acme --mode keyword "ERR-4012"
	$(BIN)/sleuth exec --context acme examples/demo-step.py
	$(BIN)/sleuth ask --context acme "How many days a week can employees work remotely?"

lint: install-dev
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/lint-imports
	$(BIN)/python scripts/module_sizes.py
	@if grep -rnE --include='*.py' '(from [.a-z_]*conftest import|import [.a-z_]*conftest)' tests; then \
		echo 'tests must not import a conftest module: shared helpers go in a support.py'; exit 1; fi

typecheck: install-dev
	$(BIN)/mypy --strict src/sleuth tests

# The checks beside the suite: once the dev venv is installed, lint, typecheck and core-check (two at a
# time, the core venv installing while mypy runs) go on in the background while the suite runs, and
# their output is printed whole when both are done; either failing fails `make test`. The suite is
# busy ~89 % of two cores, so the checks fill its waits: 62 s before it became ~22 s beside it.
#
# The suite runs on one more worker than there are cores (pytest-xdist): many tests wait on servers,
# leases and slow models, and a third worker on 2 cores ran the suite in 364 s where two took 447 s.
# The slowest tests are listed so that the next one to cut is in plain sight.
#
# Bytecode is written here even where the environment says not to (`PYTHONDONTWRITEBYTECODE=1`, as this
# machine kind sets it): the venv is installed `--no-compile`, so otherwise every one of the suite's
# processes (three workers, each server, worker, CLI and sandbox it starts) compiled every module it
# imported from source, every time.
PYTEST_WORKERS ?= $(shell expr $$(nproc) + 1)
CHECKS_LOG := .checks.log
test: chromium postgres install-dev
	@rm -f $(CHECKS_LOG) $(CHECKS_LOG).rc
	@{ $(MAKE) -j2 --output-sync=target -o install-dev checks > $(CHECKS_LOG) 2>&1; echo $$? > $(CHECKS_LOG).rc; } & \
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n $(PYTEST_WORKERS) --durations=10; suite=$$?; \
	wait; echo '--- the checks (lint, typecheck, core-check), run beside the suite:'; cat $(CHECKS_LOG); \
	checks=$$(cat $(CHECKS_LOG).rc); echo "suite exit $$suite, checks exit $$checks"; \
	test "$$suite" -eq 0 && test "$$checks" -eq 0

checks: lint typecheck core-check

# The README's first hour as a user installs Sleuth (`pip install -e .`, no extras), in its own venv:
# the suite runs with every extra, so it cannot see a command that crashes without one.
core-check: $(BIN)/python
	@test -x $(CORE_VENV)/bin/python || $(PYTHON) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/pip install -q --no-compile -e .
	env -u PYTHONDONTWRITEBYTECODE $(CORE_VENV)/bin/python scripts/core_first_hour.py

# The console's browser tests drive Debian's chromium (no browser download): installed when missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo 'installing Debian chromium for the console tests'; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The PostgreSQL backend's tests start a throwaway cluster (tests/postgres.py) from Debian's server
# binaries: installed when missing. Nothing runs as a service; the single-machine default needs none.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
		echo 'installing Debian postgresql for the many-machines tests'; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

# The suite on every core (pytest-xdist), without the API fuzz run: for the edit-test loop. `make test`
# is what CI runs and what must pass before anything lands.
test-fast: install-dev chromium postgres
	$(BIN)/pytest -n auto --ignore=tests/api/test_fuzz.py

# Apply every fix ruff can make, then format.
fix: install-dev
	$(BIN)/ruff check --fix src tests benchmarks scripts
	$(BIN)/ruff format src tests benchmarks scripts

# Regenerate the sample corpus PDFs (committed; needs the dev extra for fpdf2).
sample-pdfs: install-dev
	$(BIN)/python scripts/make_sample_corpus.py examples/acme-corpus

bench: install-dev
	$(BIN)/python benchmarks/compile.py
	$(BIN)/python benchmarks/retrieval.py

clean:
	rm -rf $(VENV) $(CORE_VENV) .sleuth .pytest_cache .mypy_cache .ruff_cache .hypothesis
