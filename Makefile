# The two entry points of the README. Both set up everything they need first.
#   make run   — build, install, and run the default benchmark suite with its report
#   make test  — build, install, and run every test (cargo + pytest)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test test-rust test-python clean

# Always re-run the editable install: it rebuilds the Rust generator (incremental, fast when nothing
# changed) so .venv/bin/netarena-load can never be older than the source.
setup:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[test]'

run: setup
	$(BIN)/netarena run

test-rust:
	cargo test --release --locked --workspace

test-python: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

test: setup test-rust test-python

clean:
	rm -rf $(VENV) target build
