# The two commands of the README: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test smoke lint format install clean-db system-packages nginx

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

## nginx, Debian's package, for the smoke suite's production topology (deploy/): installed
## like the packages above, only when missing. RUNLEVEL=1 keeps the package from starting
## a system nginx on port 80 (the suite runs its own, under a folder of its own).
NGINX := $(shell command -v nginx 2>/dev/null || command -v /usr/sbin/nginx 2>/dev/null)

nginx:
	@if [ -n "$(NGINX)" ]; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	  echo "not Debian: install nginx for the smoke suite (make smoke)" >&2; \
	else \
	  echo "installing nginx (the smoke suite's reverse proxy)"; \
	  ( $(SUDO) apt-get update -q && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -q \
	      --no-install-recommends nginx ) >/dev/null \
	  || echo "nginx could not be installed" >&2; \
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

## The production topology tested over HTTPS (tests/deploy, about a minute): nginx with a
## throw-away certificate, two application processes, the worker, an SMTP server, on a
## PostgreSQL database of its own (on CMSSHOP_TEST_DATABASE_URL's server, else
## CMSSHOP_SMOKE_DATABASE_SERVER or postgres@127.0.0.1:5432). Skipped, with a line saying
## so, only where nginx cannot be installed.
smoke: $(STAMP) nginx
	@if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then \
	  CMSSHOP_SMOKE=1 $(BIN)/pytest tests/deploy; \
	else \
	  echo "SKIPPED make smoke: nginx is not installed and could not be installed" >&2; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-db:
	rm -f var/cmsshop.sqlite var/cmsshop.sqlite-wal var/cmsshop.sqlite-shm
