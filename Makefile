# AccelOpt Studio: the two commands a newcomer needs.
#   make run    install (first time only, with the triton extra when it installs), prepare the database, serve on
#               http://$(HOST):$(PORT)/
#   make test   install the dev tools and the scale extra (first time only), ruff check, pytest; tests/scale
#               starts PostgreSQL, Redis and a Ray cluster itself (`.ci/run` installs the first two with apt)
#   (both also run `make sandbox`: it installs bubblewrap and libseccomp2 if missing, as root, and checks that an
#   evaluation child starts in its namespaces)
# Re-running is fast: pip runs only when pyproject.toml is newer than the install stamp.

PYTHON ?= python3
VENV   ?= .venv
HOST   ?= 127.0.0.1
PORT   ?= 8000
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (`auto`: one per CPU core). The suite spends much of its time waiting on
# evaluation children, servers and the browser, so two workers on two cores finish well before one; tests that
# start heavy servers share a group and run one at a time (tests/conftest.py, XDIST_GROUPS). TEST_WORKERS=0: serial.
TEST_WORKERS ?= auto
# The browser tests need Debian's chromium: `make test` installs it when it can (as root, like .ci/run) and
# otherwise stops saying how; NO_BROWSER=1 runs everything else (the browser tests are then ignored, not skipped).
CHROMIUM ?= /usr/bin/chromium
CAN_INSTALL ?= $(if $(filter 0,$(shell id -u)),1,0)
NO_BROWSER ?=

BIN := $(VENV)/bin
PY  := $(BIN)/python
# Stamps record "this venv has pyproject.toml's dependencies"; they live inside the venv, so deleting
# the venv also forgets them.
RUNTIME_STAMP := $(VENV)/.accelopt-installed
DEV_STAMP     := $(VENV)/.accelopt-dev-installed
# --no-compile: byte-compiling all ~7,000 installed modules up front is slow; the ones we import compile
# on first use.
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar off --quiet --no-compile

.PHONY: run test install install-dev prepare sandbox serve lint clean-venv chromium

# sandbox before prepare: prepare evaluates the suite baselines, which run in the sandbox.
run: sandbox prepare serve

test: install-dev lint sandbox $(if $(NO_BROWSER),,chromium)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(if $(NO_BROWSER),--ignore=tests/browser) $(PYTEST_ARGS)

install: $(RUNTIME_STAMP)
install-dev: $(DEV_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# The runtime includes the triton extra (PyTorch CPU and Triton: the Triton platforms' interpreter backend) when
# this machine can install it; when it cannot (no wheel for this platform, no network), the base install goes on
# and the Triton pages say what to install before anything is queued (docs/operations.md, "Triton platform").
$(RUNTIME_STAMP): pyproject.toml | $(PY)
	@if $(PIP) -e '.[triton]'; then echo "Installed AccelOpt Studio with the Triton extra (PyTorch CPU, Triton)."; \
	else echo "make: the triton extra (PyTorch, Triton) did not install; installing without it. Triton kernels" \
	  "cannot be evaluated until it is: $(BIN)/pip install -e '.[triton]'" >&2; $(PIP) -e .; fi
	@touch $@

# The dev extra includes the runtime dependencies, so it satisfies the runtime stamp as well. The tests also
# need the scale extra (Ray, channels-redis, psycopg): tests/scale starts real servers (make run never needs it).
$(DEV_STAMP): pyproject.toml | $(PY)
	$(PIP) -e '.[dev,scale]'
	@touch $@ $(RUNTIME_STAMP)

# migrate, role groups, first admin (password printed once), built-in suites when their app exists; then the
# static files, collected and compressed for WhiteNoise (only after they change: compressing takes a minute).
prepare: install
	$(PY) manage.py prepare
	$(PY) manage.py collect_static_if_changed

# Installs bubblewrap and libseccomp2 when missing (apt-get, as root), lets the sandbox uids reach the interpreter, and checks
# that an isolated evaluation child really starts (docs/operations.md, "Evaluation sandbox"). Idempotent;
# prints what it changed; fails, stopping make, if children cannot be isolated.
sandbox: install
	$(PY) -m engine.evaluator.sandbox.setup

serve: install
	@echo "AccelOpt Studio on http://$(HOST):$(PORT)/  (Ctrl-C to stop)"
	$(BIN)/daphne -b $(HOST) -p $(PORT) accelopt_site.asgi:application

chromium:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$(CAN_INSTALL)" = 1 ]; then \
	    echo "Installing chromium for the browser tests (apt-get)"; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; \
	  else \
	    echo "make test: the browser tests (tests/browser) need $(CHROMIUM). Install it (sudo apt-get install chromium)," \
	      "or run everything else with: make test NO_BROWSER=1" >&2; \
	    exit 1; \
	  fi; \
	fi

lint: install-dev
	$(BIN)/ruff check .

clean-venv:
	rm -rf $(VENV)
