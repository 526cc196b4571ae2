# The two commands the README gives: `make demo` (set up, then a real run) and `make test`.
# Every target is idempotent: setup re-checks and only does what is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
KCHAOS := $(VENV)/bin/kchaos
DEMO := demo

.PHONY: setup demo test unit lint bench

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed
	$(KCHAOS) setup

demo: setup
	$(KCHAOS) cluster down --name $(DEMO) >/dev/null 2>&1 || true
	$(KCHAOS) cluster up --name $(DEMO) --topology kraft-combined --timing fast
	$(KCHAOS) cluster status --name $(DEMO)
	$(KCHAOS) cluster down --name $(DEMO) --collect results/$(DEMO)/cluster

test: setup
	$(PY) -m pytest

unit: $(VENV)/.installed
	$(PY) -m pytest -m "not docker"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: setup
	$(PY) bench/bench_cluster.py
