# Each target works alone on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install system-deps bench clean

$(STAMP): pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	@touch $(STAMP)

install: $(STAMP)

# Debian's stock adb client: used by the interoperability tests and benchmarks.
system-deps:
	@command -v adb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq adb >/dev/null; \
	  else echo "note: install Debian's 'adb' package (sudo apt-get install adb) for the stock-client tests"; fi; }

run: $(STAMP)
	$(BIN)/bench run

test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q tests

bench: $(STAMP) system-deps
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) reports/*/ reports/latest
