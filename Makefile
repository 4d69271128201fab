# One task runner for people, CI (.ci/run) and pre-commit alike.
#
#   make dev        everything locally: embedded Postgres + Temporal + worker + API (Ctrl-C stops);
#                   installs the runtime only (no test tools, linters or Playwright)
#   make install    the runtime and the development tools (what test, lint and bench use)
#   make test       the test suite (real Postgres and Temporal, embedded; no Docker needed), on two processes
#   make test-fast  the tests that start no stack (`-m "not stack"`), on two processes: under a minute
#   make lint       ruff check, ruff format --check, mypy --strict, import contracts, module sizes
#   make fmt        format and autofix
#   make bench      the benchmarks in bench/
#   make lock       requirements.lock (the Docker image's exact runtime) from this virtualenv
#   make ui         rebuild the chat page (ui/ -> api/ui/, committed; needs Node and npm)
#
# The virtualenv is created with `python3` on first use; it is reinstalled only when
# pyproject.toml is newer than its stamp file, so re-runs start at once. Two stamps: running
# Think needs its runtime alone (`make dev`: about a fifth of the whole toolchain, no
# Playwright); tests, linters and benchmarks add the `dev` extra on top (`make test`).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
NODE_DIRS := tests/node ui

.DEFAULT_GOAL := help
# Python may write its bytecode caches (`__pycache__`, gitignored) whatever the environment
# says: with PYTHONDONTWRITEBYTECODE set, as some images set it, every test run, worker and
# gateway compiled the project and its tests again (collecting the suite: 18 s instead of 10).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help install dev test test-fast node ui lint fmt bench lock clean

help:
	@sed -n 's/^#   //p' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(STAMP): pyproject.toml $(RUNTIME_STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(STAMP)

# THINK_PORT=8001 make dev moves the API; DEV_ARGS passes flags (`--temporal-port 7234`).
dev: $(RUNTIME_STAMP)
	$(BIN)/think dev $(DEV_ARGS)

# The AI SDK harness that checks our streams with the client's own parser, and the chat
# page's sources (tests/ui/test_ui_build.py rebuilds them and compares with api/ui/): both need
# Node >= 22 and npm (`ai` 7 declares it; Node 20 works, with EBADENGINE warnings). Without
# npm, `make test` runs everything else and its summary lists the checks it skipped; in CI
# (CI=true or CI=1, as .ci/run sets) a missing npm fails. Reinstalled only when a lock file
# changes.
NO_NPM := npm not found: the AI SDK conformance checks (tests/streaming/test_ai_sdk_conformance.py) and the chat page's rebuild check (tests/ui/test_ui_build.py)
node:
	@if ! command -v npm >/dev/null 2>&1; then \
		case "$${CI:-}" in \
			""|0|false|no) echo "make: $(NO_NPM) are skipped; install Node >= 22 with npm to run them" ;; \
			*) echo "make: $(NO_NPM) must run in CI; install Node >= 22 with npm" >&2; exit 1 ;; \
		esac; \
	else \
		for dir in $(NODE_DIRS); do \
			stamp=$$dir/node_modules/.installed; lock=$$dir/package-lock.json; \
			if [ ! -f $$stamp ] || [ $$dir/package.json -nt $$stamp ] \
					|| { [ -f $$lock ] && [ $$lock -nt $$stamp ]; }; then \
				if [ -f $$lock ]; then npm ci --prefix $$dir --no-audit --no-fund; \
				else npm install --prefix $$dir --no-audit --no-fund; fi \
				&& touch $$stamp || exit 1; \
			fi; \
		done; \
	fi

# The chat page's bundle (api/ui/, package data: installing Think needs no Node). Commit it
# with its sources; tests/ui/test_ui_build.py fails when they differ.
ui: node
	@command -v node >/dev/null 2>&1 || { echo "make ui: needs Node >= 22 with npm" >&2; exit 1; }
	node ui/build.mjs

# `python -m pytest` (not bin/pytest) puts the repo root on sys.path, so `tests.*` imports.
# Two processes, each with its own stack (Postgres, Temporal, a worker, the API), a test file
# to one of them (`loadfile`: a file's own stacks start once): the suite mostly waits (on
# timers, restarts, streams), so on 2 cores it takes 6.5 minutes instead of 14 (117% CPU).
TEST_PROCESSES ?= 2
test: $(STAMP) node
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

# The tier that starts no embedded Postgres, Temporal, worker or API: tests/conftest.py
# marks every test that does `stack`, from the fixtures it uses.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not stack" -n 2 --dist worksteal $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/check_module_sizes.py

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

lock: $(STAMP)
	$(BIN)/python tools/lock.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(addsuffix /node_modules,$(NODE_DIRS))
