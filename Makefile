# AccelOpt Studio: the two commands a newcomer needs.
#   make run    install (first time only), prepare the database, serve on http://$(HOST):$(PORT)/
#   make test   install the dev tools and the scale extra (first time only), ruff check, pytest; tests/scale
#               starts PostgreSQL, Redis and a Ray cluster itself (`.ci/run` installs the first two with apt)
#   (both also run `make sandbox`: it installs bubblewrap if missing, as root, and checks that an
#   evaluation child starts in its namespaces)
# Re-running is fast: pip runs only when pyproject.toml is newer than the install stamp.

PYTHON ?= python3
VENV   ?= .venv
HOST   ?= 127.0.0.1
PORT   ?= 8000
PYTEST_ARGS ?=

BIN := $(VENV)/bin
PY  := $(BIN)/python
# Stamps record "this venv has pyproject.toml's dependencies"; they live inside the venv, so deleting
# the venv also forgets them.
RUNTIME_STAMP := $(VENV)/.accelopt-installed
DEV_STAMP     := $(VENV)/.accelopt-dev-installed
# --no-compile: byte-compiling all ~7,000 installed modules up front is slow; the ones we import compile
# on first use.
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar off --quiet --no-compile

.PHONY: run test install install-dev prepare sandbox serve lint clean-venv

# sandbox before prepare: prepare evaluates the suite baselines, which run in the sandbox.
run: sandbox prepare serve

test: install-dev lint sandbox
	$(BIN)/pytest $(PYTEST_ARGS)

install: $(RUNTIME_STAMP)
install-dev: $(DEV_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(RUNTIME_STAMP): pyproject.toml | $(PY)
	$(PIP) -e .
	@touch $@

# The dev extra includes the runtime dependencies, so it satisfies the runtime stamp as well. The tests also
# need the scale extra (Ray, channels-redis, psycopg): tests/scale starts real servers (make run never needs it).
$(DEV_STAMP): pyproject.toml | $(PY)
	$(PIP) -e '.[dev,scale]'
	@touch $@ $(RUNTIME_STAMP)

# migrate, role groups, first admin (password printed once), built-in suites when their app exists.
prepare: install
	$(PY) manage.py prepare

# Installs bubblewrap when missing (apt-get, as root), lets the sandbox uids reach the interpreter, and checks
# that an isolated evaluation child really starts (docs/operations.md, "Evaluation sandbox"). Idempotent;
# prints what it changed; fails, stopping make, if children cannot be isolated.
sandbox: install
	$(PY) -m benchmark.evaluation.sandbox_setup

serve: install
	@echo "AccelOpt Studio on http://$(HOST):$(PORT)/  (Ctrl-C to stop)"
	$(BIN)/daphne -b $(HOST) -p $(PORT) accelopt_site.asgi:application

lint: install-dev
	$(BIN)/ruff check .

clean-venv:
	rm -rf $(VENV)
