# The two commands of the README: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format install clean-db system-packages

## The system libraries WeasyPrint draws invoice PDFs with (pango and its FreeType
## backend, HarfBuzz's font subsetter) and the DejaVu fonts the invoice names, on Debian
## and Ubuntu. Installed with apt-get only when dpkg says one is missing, so a machine
## that has them never needs apt (or root); elsewhere, install pango yourself.
SYSTEM_PACKAGES := libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

system-packages:
	@if ! command -v dpkg >/dev/null 2>&1; then \
	  echo "not Debian: install pango (>= 1.44) and the DejaVu fonts for invoice PDFs" >&2; \
	elif ! dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1; then \
	  echo "installing $(SYSTEM_PACKAGES) (invoice PDFs)"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    $(SYSTEM_PACKAGES); \
	fi

$(STAMP): setup.cfg pyproject.toml
	$(MAKE) --no-print-directory system-packages
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[testing]'
	touch $(STAMP)

install: system-packages $(STAMP)

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
