# One command is CI: `.ci/run` calls `make lint`, then `make test`. Every target creates and
# reuses the local .venv; nothing is installed by hand.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.deps-stamp
# The extension is rebuilt when any Rust source or manifest changes.
RUST_SRC := $(shell find rust -name '*.rs' -o -name 'Cargo.toml') Cargo.toml Cargo.lock pyproject.toml
EXT_STAMP := $(VENV)/.ext-stamp
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all venv build browser test test-rust test-python golden demo bench opinfo models lint fmt wheel wheel-check trainer-check clean

all: test

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# tlparse: tests/test_torch_logs.py checks that it indexes aotgrad's structured-trace entries.
# torch from PyPI brings its CUDA libraries: about 6 GiB in .venv, more while unpacking.
$(STAMP): $(VENV)/bin/python pyproject.toml Makefile
	@free_kib=$$(df -Pk . | awk 'NR==2 {print $$4}'); \
	if [ "$$free_kib" -lt 8388608 ]; then \
	    echo "make: warning: $$((free_kib / 1048576)) GiB free on this disk; installing torch" \
	        "into .venv needs about 8 GiB (pip fails with 'No space left on device')" >&2; \
	fi
	$(PIP) install -q "torch>=2.15,<2.17" "numpy>=1.26" "maturin>=1.9,<2" \
	    "pytest>=8" "hypothesis>=6.100" "networkx>=3.2" "ruff>=0.6" "expecttest>=0.2" \
	    "tlparse>=0.3" "mypy>=1.10"
	touch $@

venv: $(STAMP)

# The extension is abi3 (`_rust.abi3.so`); a per-version build left from before would
# shadow it (Python tries `.cpython-3XX-...so` first), so it is removed once built.
$(EXT_STAMP): $(STAMP) $(RUST_SRC)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release -q
	rm -f python/aotgrad/_rust.cpython-*.so
	touch $@

build: $(EXT_STAMP)

test-rust:
	cargo test --workspace --exclude aotgrad-rust -q

# Headless Chromium renders the HTML report in tests/test_report.py (Debian's package).
browser:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium) \
	    || echo "make browser: chromium could not be installed; the browser tests will skip"

test-python: build browser
	$(PY) -m pytest -q -p no:cacheprovider

test: test-rust test-python

# Rewrite the golden partitions (tests/golden/partition_*.txt) from the current code;
# review the diff before committing it: it is every change in what is saved.
golden: build
	AOTGRAD_REGEN_GOLDEN=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_golden_partition.py

demo: build
	$(PY) -m aotgrad demo

# The Rust criterion suite, then the Python benchmark scripts (each prints its figures).
bench: build
	cargo bench -p aotgrad-bench
	$(PY) benches/table_roundtrip.py
	$(PY) benches/flow_vs_networkx.py
	$(PY) benches/partition_vs_torch.py
	$(PY) benches/backend_vs_inductor.py
	$(PY) benches/cache_second_process.py

# Every op of torch's op_db through aotgrad and through torch's aot_function.
opinfo: build
	$(PY) benches/opinfo_sweep.py

# Every model of the zoo (tests/zoo.py) through aotgrad's backends and torch's, static and dynamic.
models: build
	$(PY) benches/model_sweep.py

# stubtest imports the built extension and checks python/aotgrad/_rust.pyi against it.
lint: $(EXT_STAMP)
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests benches release
	$(VENV)/bin/ruff format --check python tests benches release
	$(PY) -m mypy.stubtest aotgrad._rust

fmt: $(STAMP)
	cargo fmt --all
	$(VENV)/bin/ruff format python tests benches release

# Release (issue 21): the abi3 manylinux wheel and the sdist in dist/ (`make wheel`); the
# same, installed into fresh venvs on pyenv's CPython 3.10 and 3.13 and smoke-tested
# (`make wheel-check`: downloads torch for each once; not part of CI). zig links the
# wheel against old glibc symbols (manylinux_2_17); auditwheel shows its compliance.
RELEASE_STAMP := $(VENV)/.release-stamp
$(RELEASE_STAMP): $(STAMP)
	$(PIP) install -q "ziglang>=0.13" "auditwheel>=6"
	touch $@

wheel: $(RELEASE_STAMP)
	WHEEL_CHECK_PYTHONS= bash release/wheel_check.sh

wheel-check: $(RELEASE_STAMP)
	bash release/wheel_check.sh

# The Hugging Face Trainer recipe of the README, checked: transformers and accelerate
# into the venv (once), then tests/test_hf_trainer.py (losses equal to inductor's). Not in CI.
trainer-check: build
	$(PIP) install -q "transformers>=4.46" "accelerate>=1.0"
	AOTGRAD_TRAINER_CHECK=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_hf_trainer.py

clean:
	rm -rf target dist $(VENV)/.ext-stamp

# Reliability (issue 9). `make fuzz`: each cargo-fuzz target (fuzz/, nightly)
# for FUZZ_RUNS executions, one job, release build with debug assertions
# (overflow checks); the core has no `unsafe`, so no sanitizer (-s none).
# `make soak`: the random-program test with 2000 programs instead of 250, then the
# fidelity soak: SOAK_PROGRAMS (10,000) programs per entry point against eager, in
# crash-proof subprocess chunks (benches/fidelity_soak.py prints mismatches by family,
# refusals by reason and the failing seeds).
# `make peak-rss`: partition a 10^6-node synthetic graph, fail above PEAK_RSS_MIB.
.PHONY: fuzz soak peak-rss
FUZZ_RUNS ?= 500000
FUZZ_FLAGS := -O -a -s none
PEAK_RSS_MIB ?= 512

fuzz:
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	cd fuzz && cargo +nightly fuzz build $(FUZZ_FLAGS)
	cd fuzz && for t in decode_table partition; do \
	    cargo +nightly fuzz run $(FUZZ_FLAGS) $$t -- -runs=$(FUZZ_RUNS) || exit 1; done

SOAK_PROGRAMS ?= 10000

soak: build
	AOTGRAD_RANDOM_PROGRAMS=2000 AOTGRAD_RANDOM_FRESH=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_random_programs.py
	$(PY) benches/fidelity_soak.py $(SOAK_PROGRAMS) --start 1000

peak-rss:
	cargo run --release -q -p aotgrad-bench --example peak_rss -- 1000000 $(PEAK_RSS_MIB)
