# The two commands of the README: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format install clean-db

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[testing]'
	touch $(STAMP)

install: $(STAMP)

## Serve development.ini on http://127.0.0.1:6543 with demo data on var/cmsshop.sqlite,
## and the mail worker beside it (messages land as .eml files in var/mail/). The worker
## stops (SIGTERM, after the message in flight) when pserve exits, Ctrl-C included.
run: $(STAMP)
	mkdir -p var
	$(BIN)/cmsshop-admin development.ini initdb
	$(BIN)/cmsshop-admin development.ini seed-demo --if-empty
	$(BIN)/cmsshop-admin development.ini worker & worker=$$!; \
	trap 'kill -TERM $$worker 2>/dev/null; wait $$worker' EXIT; \
	trap 'exit 130' INT TERM; \
	$(BIN)/pserve development.ini

## The whole suite; on PostgreSQL with CMSSHOP_TEST_DATABASE_URL=postgresql+psycopg://...
test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-db:
	rm -f var/cmsshop.sqlite var/cmsshop.sqlite-wal var/cmsshop.sqlite-shm
