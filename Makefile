# The two entry points of the README. Both set up everything they need first.
#   make run   — build, install, and run the default benchmark suite with its report
#   make test  — build, install, and run every test (cargo + pytest); first the Debian packages the tests need
#                (.ci/debian-packages.txt): installed when run as root, else named with the command to install them
# and, for whoever changes the Rust code: make lint (rustfmt and clippy, warnings as errors).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test-packages run test test-rust test-python lint clean

# Always re-run the editable install: it rebuilds the Rust generator (incremental, fast when nothing
# changed) so .venv/bin/netarena-load can never be older than the source. requirements.lock pins the
# transitive dependencies too, so two setups install the same packages.
# GENERATOR_PROFILE: the cargo profile of that build. release (fat LTO) is the generator runs and bench/ measure;
# the test targets build it with the tests profile instead, the one `cargo test --profile tests` uses: one build of
# the generator and its dependencies for both test phases instead of two (the release build alone took 2.5 of CI's
# minutes). Its --version says "(tests build)", and netarena run, doctor and bench/ name it until `make setup` (or
# `make run`) builds the release one again.
GENERATOR_PROFILE ?= release
# compileall: netarena's own modules as bytecode, which an editable install leaves to the first import, and which
# nothing writes where PYTHONDONTWRITEBYTECODE is set (as on the machines CI runs on): every netarena command then
# compiled its modules again, a quarter of a second of CPU each, hundreds of times in a `make test`.
setup:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	SETUPTOOLS_RUST_CARGO_PROFILE=$(GENERATOR_PROFILE) \
	  $(BIN)/pip install -q --disable-pip-version-check -c requirements.lock -e '.[test]'
	$(BIN)/python -m compileall -q python/netarena

# The Debian packages the tests need (nginx, wrk, chromium, ...): .ci/debian-packages installs the missing ones as
# root, else stops naming them and the apt-get command.
test-packages:
	.ci/debian-packages

# The build's time (setup: netarena-load's cargo build) is the run's first phase: netarena prints it with the
# others at the end (NETARENA_BUILD_S).
run:
	@start=$$(date +%s); $(MAKE) --no-print-directory setup && \
	NETARENA_BUILD_S=$$(( $$(date +%s) - start )) $(BIN)/netarena run

# --profile tests (Cargo.toml): the release profile without fat LTO (linking each test binary is then not a
# whole-program optimization), unwinding (one build of each dependency instead of two) and the tests' own
# dependencies unoptimized; the generator installed by setup keeps the release profile.
# The load tests run once per engine (NETARENA_LOAD_TEST_IO, see crates/loadgen/tests/common/run.rs): the default
# (--io auto), then again on each engine auto does not pick, so no pass repeats another. auto runs the HTTP
# closed loop on io_uring with coalescing (which make test needs), the open loop on epoll and echo on io_uring
# without coalescing. So the epoll pass leaves out open_loop (its one closed-loop test runs in the two other
# passes), and the io_uring pass without coalescing leaves out the echo tests.
# --no-fail-fast and the status kept: every test binary and engine runs even after a failure, so one run shows
# every failure (cargo test otherwise stops at the first failing binary).
ENGINE_TESTS := --test contract --test misbehaving_http --test uring --test run_control --test unfinished --test url_list --test load_models_agree
CARGO_TEST := cargo test --profile tests --locked --no-fail-fast
# Each pass names its engine first: cargo's own lines do not, and a failure's engine matters.
define RUST_TESTS
status=0; \
echo "make test: Rust tests, --io auto"; \
$(CARGO_TEST) --workspace || status=$$?; \
echo "make test: load tests again, NETARENA_LOAD_TEST_IO=epoll"; \
NETARENA_LOAD_TEST_IO=epoll $(CARGO_TEST) -p netarena-load $(ENGINE_TESTS) --test misbehaving_echo --test echo_scale || status=$$?; \
echo "make test: load tests again, NETARENA_LOAD_TEST_IO=uring (io_uring without coalescing)"; \
NETARENA_LOAD_TEST_IO=uring $(CARGO_TEST) -p netarena-load $(ENGINE_TESTS) --test open_loop || status=$$?; \
exit $$status
endef
test-rust: test-packages
	@$(RUST_TESTS)

# --durations: the slowest tests, after the time per test file (tests/conftest.py), so slow ones show in CI logs.
# NETARENA_LOAD: the generator setup just built, not an older target/release/netarena-load of this checkout.
# Three pytest-xdist workers (TEST_JOBS), each given a test file at a time, the longest first (tests/conftest.py):
# most of a real test waits (a server starting, a fixed-length measurement, a build's download), and the tests
# assert mechanisms made for a busy or slower host; with two workers, once the installs were done, a quarter of the
# two cores stayed idle. Then the tests marked `alone` (pyproject.toml), with nothing beside them, also when the
# others failed (every failure shows in one run).
TEST_JOBS ?= 3
# NETARENA_QUICK_BUILDS: unoptimized contestant builds and JVMs at their first JIT tier, the tests' default
# (tests/conftest.py sets the same for a bare pytest); NETARENA_QUICK_BUILDS=0 make test builds as a run does.
TEST_ENV = PATH="$(CURDIR)/$(BIN):$$PATH" NETARENA_LOAD="$(CURDIR)/$(BIN)/netarena-load" \
	NETARENA_QUICK_BUILDS="$${NETARENA_QUICK_BUILDS-1}"
PYTEST_MAIN = $(TEST_ENV) $(BIN)/python -m pytest -q --durations=15 -n $(TEST_JOBS) -m "not alone"
PYTEST_ALONE = $(TEST_ENV) $(BIN)/python -m pytest -q --durations=5 -m alone
test-python: test-packages setup
	@status=0; $(PYTEST_MAIN) || status=$$?; $(PYTEST_ALONE) || status=$$?; exit $$status

# Background installs: the Rust tests mostly wait (in-process servers, fixed-length runs; about a quarter of two
# CPUs busy), while pytest's first lane installs every bundled contestant (test_contestants_verify.py's verify
# --build-all-parts, as below) with both CPUs busy, and the database tests build FerretDB (and apt-get PostgreSQL)
# beside the other lane. So the same installs (--install-only installs those services too) start in the background
# with the Rust tests, at the lowest CPU priority (nice 19: a Rust test's server or generator, at the default priority, takes a
# CPU from them at once), and go on beside pytest until done, filling the CPU the tests leave idle. Their session
# (setsid, below) is also a scheduler autogroup of its own where the kernel has them (Linux's sched_autogroup): the
# kernel shares the CPU between autogroups by the autogroup's nice, not the tasks', so that one gets nice 19 too
# (/proc/self/autogroup); without it the installs had half the CPU and the Rust tests' build took 3.5 min, not 1.5.
# Two installs at a time, not the default's two per CPU (meant for netarena run, with nothing beside it): here the
# tests share the CPUs with them. The first make test with four at once, on a 2-CPU host throttled to a third of
# its speed, failed a verify test whose server answered too late; the runs before it, with two, had passed.
# Each install holds its contestant's lock: a verify test that comes to a contestant being installed waits for it
# and finds it built, one that comes first installs it itself and the background one then finds it built. Their
# output goes to BACKGROUND_INSTALLS_LOG; their status is not the tests' (a failed install fails its verify test,
# with its log).
# When pytest starts they go back to the default priority (root only): a verify test waiting for a contestant
# they are still installing would otherwise wait on a process that gets only the CPU pytest leaves idle (in a run
# from empty caches, six minutes of installs went on beside pytest, and the verify tests took two minutes longer).
# Stopped if still running when pytest's main part ends (the tests marked `alone` run with nothing beside them), and
# when make test is stopped (the trap: they are in a session of their own, out of the terminal's Ctrl-C): SIGTERM to
# their whole process group, not SIGINT, which a shell without job control starts background commands ignoring.
BACKGROUND_INSTALLS_LOG := target/background-installs.log
define BACKGROUND_INSTALLS_START
mkdir -p target; \
echo "make test: installing the contestants in the background (nice 19) beside the tests: $(BACKGROUND_INSTALLS_LOG)"; \
$(TEST_ENV) setsid sh -c 'echo 19 2>/dev/null > /proc/self/autogroup; exec nice -n 19 "$$@"' background-installs \
  $(BIN)/netarena verify --install-only --build-all-parts --install-jobs 2 > $(BACKGROUND_INSTALLS_LOG) 2>&1 < /dev/null & \
installs=$$!
endef
define BACKGROUND_INSTALLS_UNNICE
if [ -n "$$(ps -o stat= -p $$installs | grep -v Z)" ]; then \
  echo "make test: the background installs go on beside pytest, at the default priority"; \
  echo 0 2>/dev/null > /proc/$$installs/autogroup; \
  renice -n 0 -g $$installs > /dev/null 2>&1; \
fi
endef
define BACKGROUND_INSTALLS_END
if [ -z "$$(ps -o stat= -p $$installs | grep -v Z)" ]; then :; else \
  echo "make test: stopping the background installs, still running"; \
  kill -TERM -$$installs 2>/dev/null; \
fi; \
wait $$installs; \
kill -KILL -$$installs 2>/dev/null; \
echo "make test: background installs: $$(grep -c ': ready after' $(BACKGROUND_INSTALLS_LOG)) ready," \
  "$$(grep -c ': install failed after' $(BACKGROUND_INSTALLS_LOG)) failed ($(BACKGROUND_INSTALLS_LOG))"
endef

# The Rust tests, then pytest also when they failed: the exit status is non-zero when either failed.
test test-rust test-python: GENERATOR_PROFILE = tests
test: test-packages setup
	@status=0; \
	$(BACKGROUND_INSTALLS_START); \
	trap 'kill -TERM -$$installs 2>/dev/null; exit 130' INT TERM; \
	( $(RUST_TESTS) ) || status=$$?; \
	$(BACKGROUND_INSTALLS_UNNICE); \
	$(PYTEST_MAIN) || status=$$?; \
	$(BACKGROUND_INSTALLS_END); \
	$(PYTEST_ALONE) || status=$$?; \
	exit $$status

lint:
	cargo fmt --all --check
	cargo clippy --release --locked --workspace --all-targets -- -D warnings

clean:
	rm -rf $(VENV) target build
