# Bailing Hub — the only prerequisites are Python >= 3.11 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install demo test screenshots browser node pgbouncer lint bench stop clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

## Set up and run the hub with its demo (embedded PostgreSQL, demo workspace, demo business system).
## scripts/run-demo starts the embedded PostgreSQL's supervisor (restarts it whenever it stops) and
## the Demo Shop, seeds the demo (bailing_demo refreshes its tool spec) and runs the hub; Ctrl-C stops
## them all but the database.
demo: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	BAILING_BIND=$(HOST):$(PORT) BAILING_PUBLIC_URL=http://$(HOST):$(PORT) ./scripts/run-demo

## Run the whole test suite (service, API contract and headless-Chromium console tests) in
## TEST_WORKERS pytest-xdist workers, each on a test database of its own (`make test TEST_WORKERS=0`:
## one process). Work is stolen between workers, so a long test does not hold up a queue. The default
## is one and a half workers per core: many tests wait on real deadlines and processes, and on 2 cores
## 3 workers took 315 s where 2 took 356 s (4 gave nothing more: 311 s). Bytecode
## is written even where PYTHONDONTWRITEBYTECODE is set: pytest caches its rewritten test modules
## and every hub, Demo Shop and manage.py the tests start reads compiled modules (__pycache__/ is
## gitignored) instead of compiling the project again (about 10 s of CPU per collecting process).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n + n / 2 )))
test: install browser node pgbouncer
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

## The console's browser tests alone, saving a full-page PNG of every page they visit under
## var/screenshots/ (make test takes none: no test reads them).
screenshots: install browser node
	BAILING_SCREENSHOTS=1 PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m browser

## Debian Chromium for the console tests (never a browser download of the test tool's own).
browser:
	@./scripts/ensure-chromium

## Debian's PgBouncer for the tests that run the hub through a pooler in transaction mode.
pgbouncer:
	@./scripts/ensure-pgbouncer

## Node.js >= 20 and npm for the TypeScript MCP SDK test (which runs `npm ci` from its lock file).
node:
	@./scripts/ensure-node

## Benchmarks (figures, not tests): agent endpoints against a bare endpoint, then governed tool calls
## against the same signed call sent directly, then the tool-invocation and knowledge-search
## endpoints with a data policy off and on (each starts its own gunicorn and Demo Shop), then
## audited actions per second hub-wide (its events stay in the ledger: a development database only).
bench: install
	$(BIN)/python manage.py migrate --noinput -v 0
	$(BIN)/python manage.py bailing_bench
	$(BIN)/python manage.py bailing_bench --suite invocations
	$(BIN)/python manage.py bailing_bench --suite data-policy
	$(BIN)/python manage.py bailing_bench_audit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## Stop the embedded PostgreSQL under var/pg if one is running (the demo and tests share it). While
## `make demo` runs, its supervisor starts it again: stop the demo first.
stop:
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m bailing.db.embedded stop; fi

clean: stop
	rm -rf $(VENV) var
