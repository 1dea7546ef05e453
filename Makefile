# Everything a fresh machine needs is installed from here; nothing is done by hand.
SHELL := /bin/bash
PORT ?= 8000
VENV := .venv
PY := $(VENV)/bin/python
VIRGO_HOME ?= $(CURDIR)/var
export VIRGO_HOME

# Django 6 needs Python 3.12+; pyenv shims for versions that are not selected fail, so each
# candidate must actually run before it is chosen.
PYTHON := $(shell for c in python3.13 python3.12; do $$c -c 'import sys' >/dev/null 2>&1 && { command -v $$c; exit; }; done; \
	root=$$(pyenv root 2>/dev/null); for v in $$(ls -d $$root/versions/3.13.* $$root/versions/3.12.* 2>/dev/null | sort -rV); do \
	[ -x $$v/bin/python3 ] && { echo $$v/bin/python3; exit; }; done)

.PHONY: run serve static test lint format install agents clean bench mutation mutation-stale

$(VENV)/.installed: requirements/base.txt requirements/test.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "No Python 3.12+ found (tried python3.13, python3.12, pyenv versions)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements/test.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.installed

# The agent CLIs `virgo launch` confines, at the versions its tests prove it with (npm registry).
AGENTS := requirements/agents
$(AGENTS)/node_modules/.installed: $(AGENTS)/package.json $(AGENTS)/package-lock.json
	npm ci --prefix $(AGENTS) --no-audit --no-fund --loglevel=error
	touch $@

agents: $(AGENTS)/node_modules/.installed

# The embedded default: SQLite under var/, Celery tasks in-process, a local-memory cache.
# The links cards and the demo print follow PORT unless a public base URL is given: on this one
# machine a new URL is a deliberate move, so the installation's recorded one moves with it.
# var/virgo.env (owner-private) keeps the embedded flag, a SECRET_KEY made once and that base
# URL, so every command printed below works pasted into a new shell in this checkout. It serves
# with virgo-web (granian), as `make serve` does, in one process: the embedded default counts
# rate limits in the process, and code changes take a restart (no reloader: decision 283).
run: export VIRGO_PUBLIC_BASE_URL ?= http://127.0.0.1:$(PORT)
run: install
	$(PY) -m virgo.ports 127.0.0.1 "$(PORT)" --for "make run"
	@command -v bwrap >/dev/null 2>&1 || { . scripts/lib.sh && install_debian_packages bubblewrap; }
	$(PY) -m virgo.envfile embedded
	$(PY) manage.py migrate --noinput
	$(PY) manage.py cards move-base-url "$$VIRGO_PUBLIC_BASE_URL"
	$(PY) manage.py reconcile
	$(PY) manage.py load_demo
	VIRGO_BIND=127.0.0.1:$(PORT) WEB_CONCURRENCY=1 $(VENV)/bin/virgo-web

# The production shape: virgo-web (granian) + WhiteNoise, a Celery worker and beat, PostgreSQL and Redis
# (private local ones unless DATABASE_URL / REDIS_URL are set). Ctrl-C stops it all.
serve: install
	PORT=$(PORT) VIRGO_PYTHON=$(PY) scripts/serve

# The release's static files (VX-SCALE-2): collected once per build or install into STATIC_ROOT
# (staticfiles/ in the checkout, or VIRGO_STATIC_ROOT), hashed and with their manifest, as the
# production storage names them; every machine of the release serves them, none from VIRGO_HOME.
# Only the settings that storage needs: nothing is read from a database or VIRGO_HOME's secrets.
static: install
	VIRGO_EMBEDDED=0 DEBUG=0 SECRET_KEY=collectstatic-only DATABASE_URL=sqlite:///:memory: \
		VIRGO_KEY_ENCRYPTION_KEY=$$($(PY) -m virgo.kek) $(PY) manage.py collectstatic --noinput -v 0

# ruff, then the import contract of pyproject.toml (the layers point down; docs/architecture.md).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Lint, collect the static files into the release as a deployment does (readiness and the deploy
# checks need them), then the suite on SQLite and again on a private PostgreSQL + Redis that are
# stopped afterwards (scripts/run-tests). PYTEST_ARGS go to both runs, e.g. PYTEST_ARGS="-k health".
test: install agents lint static
	VIRGO_PYTHON=$(PY) VIRGO_PYTEST=$(VENV)/bin/pytest scripts/run-tests $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var $(AGENTS)/node_modules

# Minutes, not part of `make test`: Virgo's hot paths beside the a2a-sdk card route and nginx on
# this machine (loopback only); prints a table, writes docs/benchmarks.md, ends with name=value lines.
bench: install
	$(PY) -m pip install -q -r requirements/bench.txt
	missing=(); for tool in wrk nginx; do command -v $$tool >/dev/null 2>&1 || missing+=($$tool); done; \
	. scripts/lib.sh && install_debian_packages "$${missing[@]}"
	$(PY) -m bench.run $(BENCH_ARGS)

# Hours, not part of `make test`: mutmut over the enforcement code at low priority, on the non-live
# tests (mutation/run.py); writes docs/mutation.md. MUTATION_MODULES=stamps/validation.py,...
# runs a subset, MUTATION_KEEP=1 reuses mutants/ (its test map) from the last run, and with it
# MUTATION_TESTS=tests/test_card_fastpath.py,... runs the mutants it let through against those files;
# MUTATION_CHANGED=1 with it runs again only the mutants of functions changed since a module's row.
# MUTATION_MINUTES=120 stops the run then and reports only the modules it finished. With
# DATABASE_URL naming a PostgreSQL, MUTATION_TESTS run on it (each child on a database of its
# own): how the search's PostgreSQL-only SQL (cards/ard/matching.py) is mutated.
MUTATION_CHILDREN ?= 2
# Which rows of docs/mutation.md no longer describe their module's code (mutation/stale.py).
mutation-stale: install
	$(PY) -m mutation.stale

mutation: install
	$(PY) -m pip install -q -r requirements/mutation.txt
	# The suite it runs needs Redis, and bubblewrap for `launch --check` (as `make test` installs).
	missing=(); command -v redis-server >/dev/null 2>&1 || missing+=(redis-server); \
	command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap); \
	. scripts/lib.sh && install_debian_packages "$${missing[@]}"
	nice -n 19 $(PY) -m mutation.run --children $(MUTATION_CHILDREN) \
		--modules "$(MUTATION_MODULES)" $(if $(MUTATION_KEEP),--keep) \
		$(if $(MUTATION_CHANGED),--changed) \
		$(if $(MUTATION_TESTS),--tests "$(MUTATION_TESTS)") \
		$(if $(MUTATION_MINUTES),--minutes $(MUTATION_MINUTES))
