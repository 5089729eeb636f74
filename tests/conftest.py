"""Shared helpers: run the CLI as a real process, find the real generator, and check for leaked processes.

Under CI (the environment variable CI set, as .ci/run does) a skipped test is a failed test: CI installs
everything the tests need, so a skip there means a test silently checked nothing. Outside CI a skip
stays a skip, and pytest lists every one with its reason (-rs in pyproject.toml).
"""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

# pytester runs a small pytest session in a child process: how test_ci_skips.py checks the hook below.
pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent
FIXTURE_CONTESTANTS = TESTS / "fixtures" / "contestants"
REPO = TESTS.parent
CLI_TIMEOUT_S = 120

# A shell without job control (a script's `make test &`, nohup) starts its background commands with SIGINT
# and SIGQUIT ignored, and every process the tests start would inherit that: a test sending Ctrl-C to
# `netarena lab up` would see it ignored. Tests play a user at a terminal, whose Ctrl-C arrives, so the
# session restores the defaults (a handler, unlike "ignored", is not inherited across exec).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


# Contestants built with cargo build unoptimized in the tests (netarena.contestants.QUICK_BUILDS_ENV): the tests
# check what servers do, never how fast; optimized, the three Rust contestants' builds with their database
# drivers were about half an hour of a CI run's CPU. Their install records say so (the report's UNOPT badge),
# and a `make run` afterwards rebuilds them optimized. NETARENA_QUICK_BUILDS=0 make test builds as a run does.
# The same setting runs the JVM contestants' servers with the JIT's first tier alone (contestants.QUICK_JIT_OPTIONS).
os.environ.setdefault("NETARENA_QUICK_BUILDS", "1")

# The runs the tests start take no calibration (netarena run --no-calibration, as its environment variable): each
# takes about 3 s and 5 CPU seconds (a CPU loop and the reference pair under load; docs/testing.md), and the suite
# starts about ninety real runs of which only test_fingerprint.py's read it; that one asks for it
# (NETARENA_CALIBRATION=1).
# NETARENA_CALIBRATION=1 make test calibrates every run, as a user's runs do.
os.environ.setdefault("NETARENA_CALIBRATION", "0")

def under_ci() -> bool:
    return bool(os.environ.get("CI"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if under_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where every test must run: {reason}"


# `make test` runs pytest with three workers (pytest-xdist) and gives each a test file at a time: a file's module
# fixtures are set up once, on one worker (test_contestants_verify's starts every contestant's verification).
# The files that install the bundled contestants into the shared cache (test_contestants_verify.py with every
# optional part, the database files with theirs) may run at once: each install holds its contestant's lock, so a
# second one waits and finds the first one's build, and make test's background installs (the Makefile) have
# built most of them, every part included, by the time pytest starts.
# The files are handed out longest first, so that no file of minutes starts last beside idle workers: those of
# LONGEST_FILES in that order (by the per-file times of a `make test` from empty caches, 2026-12-01), then the
# others with the most tests first (xdist's own order). A file's tests keep their order.
LONGEST_FILES = ("test_contestants_verify.py", "test_run_real.py", "test_services_real.py",
                 "test_techempower_contestants_real.py", "test_cluster_lab.py", "test_profile_real.py")


def pytest_collection_modifyitems(session, config, items):
    tests_in_file: dict[str, int] = {}
    for item in items:
        tests_in_file[item.path.name] = tests_in_file.get(item.path.name, 0) + 1

    def rank(item) -> tuple[int, int, str]:
        name = item.path.name
        return (LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES), -tests_in_file[name],
                str(item.path))

    items.sort(key=rank)  # stable: the order within a file stays


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without the plugin (-p no:xdist) it is never called
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the collection's order (pytest_collection_modifyitems) is the one

    class ByTestFile(LoadScopeScheduling):
        """xdist's scope scheduling (each unit whole to one worker, in the collection's order), with a test file
        as the unit, where xdist's own would make one of each test class. (xdist's --dist loadgroup marks node ids
        in a way pytest 9 no longer reads, and would split a file over workers.)"""

        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0]

    return ByTestFile(config, log)


def pytest_terminal_summary(terminalreporter):
    """At the end of a run, each test file's time (its tests' set-up, call and tear-down summed), slowest first:
    which files make the suite slow shows in any CI log (`make test` adds pytest's --durations for single tests)."""
    seconds_by_file: dict[str, float] = {}
    tests_by_file: dict[str, set[str]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) not in ("setup", "call", "teardown"):
                continue  # collection reports and warnings have no test time
            path = report.nodeid.split("::", 1)[0]
            seconds_by_file[path] = seconds_by_file.get(path, 0.0) + report.duration
            tests_by_file.setdefault(path, set()).add(report.nodeid)
    if not seconds_by_file:
        return
    terminalreporter.write_sep("=", "time per test file (set-up + call + tear-down)")
    for path, seconds in sorted(seconds_by_file.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:9.1f} s  {len(tests_by_file[path]):4d} tests  {path}")
    terminalreporter.write_line(f"{sum(seconds_by_file.values()):9.1f} s  total")


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    """A private NETARENA_CACHE: every process a test starts inherits it, which is how leaks are found."""
    path = tmp_path / "cache"
    path.mkdir()
    return path


def processes_with_cache(cache: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get("NETARENA_CACHE") == str(cache) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def no_leftover_processes(cache_dir):
    """After the test, no process started under this test's cache may still be running."""
    yield
    deadline = time.monotonic() + 3
    left = processes_with_cache(cache_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_with_cache(cache_dir)
    described = [(p.pid, " ".join(p.cmdline())) for p in left if p.is_running()]
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    assert not described, f"processes outlived the test: {described}"


def cli_env(cache_dir: Path, **extra) -> dict:
    # As root, servers would run as the unprivileged user 'netarena', which cannot enter pytest's tmp folders
    # (mode 700) where these caches live; test_edges.py runs that default with a cache it can reach.
    env = dict(os.environ, NETARENA_CACHE=str(cache_dir), COLUMNS="200", NETARENA_RUN_AS_ROOT="1")
    env.pop("NETARENA_BACKEND", None)
    env.update(extra)
    return env


def default_cache_env() -> dict:
    """The environment of a netarena process using the default cache and server user, as `netarena verify`
    installs the bundled contestants there (test_contestants_verify, make test's background installs)."""
    return {k: v for k, v in os.environ.items() if k not in ("NETARENA_CACHE", "NETARENA_RUN_AS_ROOT",
                                                              "NETARENA_BACKEND")}


def run_cli(args: list[str], cache_dir: Path, timeout_s: float = CLI_TIMEOUT_S, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netarena", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout_s, env=cli_env(cache_dir, **env), cwd=REPO)


def start_cli(args: list[str], cache_dir: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "netarena", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(cache_dir, **env), cwd=REPO)


@pytest.fixture(scope="session")
def generator_binary() -> Path:
    """The real netarena-load. Missing or not working is a failure, never a silent skip."""
    from netarena.generator import GeneratorMissing, find_generator

    try:
        path = find_generator()
    except GeneratorMissing as exc:
        pytest.fail(f"these tests need the real load generator: {exc}")
    probe = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10)
    if probe.returncode != 0 or "netarena-load" not in probe.stdout:
        pytest.fail(f"{path} does not work as netarena-load (--version printed {probe.stdout!r}, exit "
                    f"{probe.returncode}); rebuild it: cargo build --release -p netarena-load")
    return path


def write_suite(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


def db_rows(results: Path, query: str, params=()) -> list[sqlite3.Row]:
    db = sqlite3.connect(results / "netarena.sqlite")
    db.row_factory = sqlite3.Row
    try:
        return db.execute(query, params).fetchall()
    finally:
        db.close()


def generator_percentile(hist, percentile: float) -> int:
    """The value at `percentile` of an hdrh histogram as netarena-load computes it (Rust hdrhistogram's
    value_at_quantile: the first value with at least ceil(q * count) entries at or below it). hdrh's own
    get_value_at_percentile rounds the count instead (int(q * count + 0.5)), one entry lower at times, which on a
    small histogram is another bucket: a document's percentiles are the generator's."""
    count = hist.get_total_count()
    at = max(1, math.ceil(percentile / 100 * count))
    # hdrh finds the value for exactly `at` entries when asked for the percentile `at` is of the count.
    return hist.get_value_at_percentile(at * 100 / count)
