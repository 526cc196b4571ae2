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
	$(KCHAOS) run --name $(DEMO) --cluster $(DEMO) --workload queue --nemesis partition,kill \
		--time-limit 40 --nemesis-interval 8 --timing fast
	@echo "report: results/latest/report.html"

test: setup
	$(PY) -m pytest --hypothesis-profile ci

unit: $(VENV)/.installed
	$(PY) -m pytest -m "not docker"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: setup
	$(PY) bench/bench_cluster.py
