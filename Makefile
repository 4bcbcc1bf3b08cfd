# Each target works alone on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint install system-deps bench clean

$(STAMP): pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

# Debian packages the tests use, installed only when missing: the stock adb client
# (interoperability tests), a PostgreSQL server (the results store's PostgreSQL tests start a
# private cluster), Chromium with its driver (the HTML report's headless-browser tests) and
# veritysetup (reference dm-verity trees for the Merkle tests).
system-deps:
	@missing=""; \
	command -v adb >/dev/null 2>&1 || missing="$$missing adb"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	command -v veritysetup >/dev/null 2>&1 || missing="$$missing cryptsetup-bin"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note: install Debian's$$missing (sudo apt-get install$$missing) for the tests that use them"; fi; \
	fi

run: $(STAMP)
	$(BIN)/bench run

# Layer contracts (pyproject.toml [tool.importlinter]): one-way layers, no cycles.
lint: $(STAMP)
	$(BIN)/lint-imports

test: $(STAMP) system-deps lint
	$(BIN)/python -m pytest -q tests

# The developer's tier: unit and quick integration tests, no whole bench runs (under a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -p no:cacheprovider tests

bench: $(STAMP) system-deps
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) reports/*/ reports/latest
