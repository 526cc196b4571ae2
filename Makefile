# The two commands the README gives: `make demo` (set up, then a real run) and `make test`.
# Every target is idempotent: setup re-checks and only does what is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
KCHAOS := $(VENV)/bin/kchaos
DEMO := demo

.PHONY: setup demo test nightly unit lint bench lock

# Every night installs the same thing: the exact versions and hashes in requirements.lock, then
# the project itself without its dependencies and with the build backend the lock pinned.
$(VENV)/.installed: pyproject.toml requirements.lock
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --require-hashes -r requirements.lock
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $@

# On purpose only: resolves the newest versions pyproject.toml allows into requirements.lock.
lock:
	python3 -m venv .lockenv
	.lockenv/bin/pip install -q pip-tools
	CUSTOM_COMPILE_COMMAND="make lock" .lockenv/bin/pip-compile -q --upgrade --extra dev \
		--generate-hashes --strip-extras --allow-unsafe --no-emit-find-links \
		-o requirements.lock pyproject.toml

setup: $(VENV)/.installed
	$(KCHAOS) setup

demo: setup
	$(KCHAOS) run --name $(DEMO) --cluster $(DEMO) --workload queue --nemesis partition,kill \
		--time-limit 40 --nemesis-interval 8 --timing fast
	@echo "report: results/latest/report.html"

# Unit tests on both cores (a file's tests stay on one worker: module fixtures are shared),
# then the real-cluster tests one at a time: two clusters at once starve 2 cores.
test: setup
	$(PY) -m pytest -n 2 --dist loadfile --hypothesis-profile ci -m "not slow and not docker" \
		--durations=15
	$(PY) -m pytest --hypothesis-profile ci -m "docker and not slow" --durations=30

# Long real-cluster scenarios (marked slow): what a nightly campaign adds to `make test`.
nightly: setup
	$(PY) -m pytest --hypothesis-profile ci -m slow

unit: $(VENV)/.installed
	$(PY) -m pytest -n 2 --dist loadfile -m "not docker"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: setup
	$(PY) bench/bench_cluster.py
