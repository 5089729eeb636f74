"""Backing services, real: FerretDB built from services/ferretdb (Go module proxy), its SQLite storage, fixture
contestants reading the mongo fixture with pymongo, a real store; the service killed mid-measurement."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from conftest import (FIXTURE_CONTESTANTS, REPO, cli_env, db_rows, default_cache_env, processes_with_cache, run_cli,
                      start_cli, write_suite)

# python3 of the fixture contestants must import pymongo: netarena's own venv first on PATH, as `make test` does.
VENV_PATH = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"

# apply_warmup_min = false: these runs check answers, not figures, so a JIT contestant's start.warmup_min_s (up
# to 20 s a level) is not waited for.
SUITE = """name = "services"
contestants = {contestants}
repeat = {repeat}
warmup_s = 0.3
duration_s = {duration}
timeout_s = 2
apply_warmup_min = false

[services.mongo]
backend = "sqlite"

[[measure]]
scenario = "mongo"
connections = [4]
doc = {docs}
"""


# FerretDB's first build, from an empty Go module and build cache, beside the other tests: about a minute and a
# half of CPU here, and many minutes on a host several times slower. It has a time limit of its own, so that the
# runs' limits below bound runs, not this build.
FERRETDB_BUILD_TIMEOUT_S = 2400
BUILD_FERRETDB = "from netarena.contestants import install; from netarena.services import load_all; " \
    "install(load_all()['ferretdb'])"


@pytest.fixture(scope="module")
def service_cache(tmp_path_factory) -> Path:
    """One cache for the module, FerretDB built into it first, once (the runs then find it current).
    Built into the default cache before: make test's background installs build it there at the same time, and
    two Go builds of one module at once each compile everything. Its install lock there makes this one wait for
    theirs (or theirs for this one); the module's own build then finds every package in Go's build cache."""
    cache = tmp_path_factory.mktemp("service-cache")
    for env in (default_cache_env(), cli_env(cache)):
        built = subprocess.run([sys.executable, "-c", BUILD_FERRETDB], capture_output=True, text=True,
                               timeout=FERRETDB_BUILD_TIMEOUT_S, env=env, cwd=REPO)
        if built.returncode != 0:
            pytest.fail(f"FerretDB's build failed (exit {built.returncode}, NETARENA_CACHE "
                        f"{env.get('NETARENA_CACHE', 'default')}):\n{built.stderr[-3000:]}")
    return cache


@pytest.fixture
def cache_dir(service_cache) -> Path:
    """conftest's no_leftover_processes watches cache_dir: here, the module's shared cache."""
    return service_cache


def processes_running(cache: Path, word: str) -> list[psutil.Process]:
    """Processes started under `cache` whose command line holds `word` (zombies and the just-gone ignored)."""
    found = []
    for proc in processes_with_cache(cache):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and word in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def start_mongo_run(tmp_path, cache: Path, repeat: int, duration: float):
    """A run of fx-mongo (small document) started in the background, with its results folder."""
    results = tmp_path / "results"
    path = suite(tmp_path, ["fx-mongo"], repeat=repeat, duration=duration, docs=["small"])
    return start_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache,
                     PATH=VENV_PATH), results


def wait_for(run, cache: Path, *words: str) -> list[psutil.Process]:
    """The processes holding words[0] once every word has a process under `cache`, polled while `run` lives."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        found = [processes_running(cache, word) for word in words]
        if all(found):
            return found[0]
        time.sleep(0.2)
    return []


def suite(tmp_path, contestants, repeat=1, duration=1.0, docs=("small", "big")):
    return write_suite(tmp_path / "suite.toml", SUITE.format(contestants=json.dumps(contestants), repeat=repeat,
                                                             duration=duration, docs=json.dumps(list(docs))))


def measurements(results):
    return [dict(r) for r in db_rows(results, "SELECT * FROM measurements ORDER BY id")]


def assert_no_data_left(results):
    """Every data directory is gone; only the services' logs stay."""
    left = [p for p in (results / "services").rglob("*") if "logs" not in p.parts]
    assert left == [], left


def test_mongo_run_two_contestants_into_sqlite(tmp_path, service_cache, generator_binary, no_leftover_processes):
    results = tmp_path / "results"
    path = suite(tmp_path, ["fx-mongo", "fx-mongo-wrong"])
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--json"],
                     service_cache, timeout_s=900, PATH=VENV_PATH)
    rows = {(r["contestant"], json.loads(r["level_json"])["params"]["doc"]): r for r in measurements(results)}
    assert len(rows) == 4, result.stderr
    for doc in ("small", "big"):
        good = rows[("fx-mongo", doc)]
        assert good["status"] == "ok", (good["error"], result.stderr)
        generator = json.loads(good["generator_json"])
        assert generator["totals"]["requests"] > 0 and "--verify-learn" in json.loads(good["generator_argv_json"])
        services = json.loads(good["services_json"])
        assert services["ferretdb"]["label"] == "FerretDB 1.24.2 (SQLite)"
        assert services["ferretdb"]["fixture"]["documents"]["big"] > 9000
        assert services["ferretdb"]["install"]["go_modules"], services["ferretdb"]["install"]
        monitor = json.loads(good["monitor_json"])
        assert monitor["summary"]["services"]["ferretdb"]["cpu_user_s"] is not None
        wrong = rows[("fx-mongo-wrong", doc)]
        assert wrong["status"] == "failed"
        # The first repeat is verified and fails; nothing later is retried.
        assert wrong["failure_kind"] in ("verify_failed", "not_attempted")
    first_wrong = rows[("fx-mongo-wrong", "small")]
    assert first_wrong["failure_kind"] == "verify_failed"
    assert "differs from the fixture's 'small'" in first_wrong["error"]
    assert_no_data_left(results)
    # The run's environment names the database and its backend once, before any measurement describes it.
    with sqlite3.connect(results / "netarena.sqlite") as db:
        environment = json.loads(db.execute("SELECT environment_json FROM runs").fetchone()[0])
    ferretdb = environment["services"]["ferretdb"]
    assert (ferretdb["display_name"], ferretdb["version"], ferretdb["backend"]) == ("FerretDB", "1.24.2", "SQLite")
    assert ferretdb["go_modules"] and ferretdb["provides"] == "mongo"
    assert "postgresql" not in environment["services"]  # the SQLite backend installs no PostgreSQL
    report = run_cli(["report", "--results", results, "-o", tmp_path / "report.html"], service_cache)
    assert "FerretDB 1.24.2 (SQLite), CPUs" in (tmp_path / "report.html").read_text(), report.stderr
    shown = run_cli(["show", "--results", results], service_cache)
    assert "db cpu" in shown.stdout and "bound" in shown.stdout, shown.stdout


def test_service_killed_mid_measurement_fails_it_and_is_restarted(tmp_path, service_cache, generator_binary,
                                                                  no_leftover_processes):
    proc, results = start_mongo_run(tmp_path, service_cache, repeat=2, duration=6.0)
    killed = None
    try:
        ferret = wait_for(proc, service_cache, "ferretdb-netarena", "netarena-load")  # under load
        if ferret:
            ferret[0].send_signal(signal.SIGKILL)
            killed = ferret[0].pid
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed is not None, "the load never ran next to FerretDB"
    first, second = measurements(results)
    assert first["status"] == "failed" and first["failure_kind"] == "service_died", (first["error"], err)
    assert f"pid {killed}" in first["error"] and "exited with code -9" in first["error"]
    assert "ferretdb-netarena: serving" in (first["stderr_tail"] or "")
    assert second["status"] == "ok", (second["error"], err)
    logs = sorted(p.name for p in (results / "services" / "logs").iterdir())
    assert len(logs) == 2, logs  # a fresh instance (and data directory) for the second measurement
    assert_no_data_left(results)


POOL_SUITE = """name = "pool"
contestants = ["fx-mongo"]
repeat = 1
warmup_s = 0.3
duration_s = {duration}
timeout_s = 5

[services.mongo]
backend = "sqlite"

[[measure]]
scenario = "mongo"
connections = [16]
mongo_pool = [{pool}]
"""


def database_connections(server: psutil.Process, database: psutil.Process) -> int:
    """TCP connections the server's process tree holds to the ports the database listens on."""
    ports = {c.laddr.port for c in database.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    count = 0
    for proc in [server, *server.children(recursive=True)]:
        try:
            count += sum(1 for c in proc.net_connections("tcp") if c.raddr and c.raddr.port in ports)
        except psutil.Error:
            pass
    return count


def test_mongo_pool_caps_the_connections_each_server_process_opens(tmp_path, service_cache, generator_binary,
                                                                   no_leftover_processes):
    """A level's mongo_pool reaches the contestant as the URL's maxPoolSize, and the driver holds to it: at 16
    connections a threaded server (a thread per connection, each querying at once) opens at most the pool plus
    the driver's monitoring connections to FerretDB, while a larger pool lets it open more."""
    seen = {}
    for pool in (2, 64):
        results = tmp_path / f"results-{pool}"
        path = write_suite(tmp_path / f"pool-{pool}.toml", POOL_SUITE.format(duration=4.0, pool=pool))
        proc = start_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], service_cache,
                         PATH=VENV_PATH)
        most = 0
        try:
            servers = wait_for(proc, service_cache, "fixture_server.py", "netarena-load", "ferretdb-netarena")
            assert servers, "the load never ran against fx-mongo"
            server = servers[0]
            assert f"maxPoolSize={pool}" in " ".join(server.cmdline()), server.cmdline()
            database = processes_running(service_cache, "ferretdb-netarena")[0]
            while proc.poll() is None and processes_running(service_cache, "netarena-load"):
                most = max(most, database_connections(server, database))
                time.sleep(0.1)
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
        (row,) = measurements(results)
        assert row["status"] == "ok", (row["error"], err)
        assert json.loads(row["level_json"])["params"]["mongo_pool"] == pool
        assert row["level_key"].endswith(f"mongo_pool={pool}"), row["level_key"]
        seen[pool] = most
    # pymongo adds up to two monitoring connections (the server monitor and its round-trip-time monitor).
    assert 1 <= seen[2] <= 2 + 2, seen
    assert seen[64] > seen[2], seen


def test_postgresql_starts_under_a_results_path_longer_than_a_socket_path_may_be(tmp_path, service_cache,
                                                                               generator_binary,
                                                                               no_leftover_processes):
    """FerretDB's default backend, PostgreSQL, under a --results path so long that an absolute path of its unix
    socket would pass the kernel's 107 bytes (PostgreSQL then refused to start). PostgreSQL runs as its own
    user: the folder must be one it can enter, not pytest's private one."""
    base = Path(tempfile.mkdtemp(prefix="netarena-long-results-"))
    try:
        base.chmod(0o755)
        results = base / ("a-results-folder-named-at-length-" * 2) / "results"
        assert len(str(results / "services/run-1/postgresql-1/sockets/.s.PGSQL.65535")) > 107
        path = write_suite(tmp_path / "pg.toml", SUITE.replace('backend = "sqlite"', 'backend = "postgresql"').format(
            contestants=json.dumps(["fx-mongo"]), repeat=1, duration=0.5, docs=json.dumps(["small"])))
        result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS],
                         service_cache, timeout_s=900, PATH=VENV_PATH)
        (row,) = measurements(results)
        assert row["status"] == "ok", (row["error"], row["stderr_tail"], result.stderr[-2000:])
        assert json.loads(row["services_json"])["ferretdb"]["label"] == "FerretDB 1.24.2 (PostgreSQL)"
        assert_no_data_left(results)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_list_says_when_the_database_cannot_be_built(tmp_path):
    # No Go toolchain on PATH: FerretDB cannot be built, and list says so with the fix and who is affected.
    result = run_cli(["list", "--json", "--contestants-dir", FIXTURE_CONTESTANTS], tmp_path,
                     PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    row = next(r for r in json.loads(result.stdout)["contestants"] if r["name"] == "fx-mongo")
    assert row["services"]["mongo"]["runnable"] is False
    assert any("go not installed" in r for r in row["services"]["mongo"]["reasons"])
    text = run_cli(["list", "--contestants-dir", FIXTURE_CONTESTANTS], tmp_path,
                   PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    assert "service mongo cannot run here" in text.stdout and "fx-mongo" in text.stdout


def test_kill_9_of_the_run_leaves_no_database_and_resume_cleans_its_data(tmp_path, service_cache, generator_binary,
                                                                         no_leftover_processes):
    proc, results = start_mongo_run(tmp_path, service_cache, repeat=2, duration=2.0)
    try:
        # On a cold cache `go build -o .../ferretdb-netarena` also names it: wait for the running service,
        # whose data directory exists, then take its processes.
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline \
                and not any((results / "services").glob("run-*/*/data")):
            time.sleep(0.2)
        ferret = wait_for(proc, service_cache, "ferretdb-netarena")
        assert ferret, "FerretDB never started"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The kernel kills the service's main process with its parent (parent-death signal).
    psutil.wait_procs(ferret, timeout=10)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ferret)
    assert any((results / "services").glob("run-*")), "the data directory of the killed run should be there"
    resumed = run_cli(["run", "--resume", "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], service_cache,
                      timeout_s=600, PATH=VENV_PATH)
    assert "removed the database data left by an interrupted run" in resumed.stderr + resumed.stdout
    assert resumed.returncode == 0, resumed.stderr
    assert {r["status"] for r in measurements(results)} == {"ok"}
    assert_no_data_left(results)


REPO_CONTESTANTS = Path(__file__).resolve().parents[1] / "contestants"
# Every bundled contestant that claims the mongo scenario, read from the manifests: one added later is covered.
MONGO_CONTESTANTS = sorted(p.parent.name for p in REPO_CONTESTANTS.glob("*/contestant.toml")
                           if "mongo" in tomllib.loads(p.read_text()).get("scenarios", []))


# The bundled contestants' mongo check runs this many `netarena run`s at once, each with its share of the
# contestants, its own FerretDB and results. It checks correctness only (verification before and during the
# load, responses > 0), no figure, so sharing the CPUs costs no truth; what is timed inside (ready_timeout_s,
# the request timeout_s, warmup_min_s) has room for a host several times slower. Run one after another, the
# Java contestants' warm-ups (warmup_min_s, up to 20 s a level) added up to most of the test's time.
MONGO_RUNS_AT_ONCE = 3


def run_bundled(path: Path, results: Path) -> subprocess.CompletedProcess:
    """`netarena run` of a suite of bundled contestants in the default cache and server user, as `netarena
    verify` installed them (test_contestants_verify)."""
    return subprocess.run([sys.executable, "-m", "netarena", "run", str(path), "--results", str(results), "--json"],
                          capture_output=True, text=True, timeout=1800, env=dict(default_cache_env(), COLUMNS="200"))


def test_every_bundled_contestant_claiming_mongo_serves_the_fixture(tmp_path, generator_binary):
    """Each real driver (pymongo, PyMongo's async client, the mongodb npm driver, …) against a real FerretDB:
    both documents verified against the fixture before the load and held to it during the load."""
    assert len(MONGO_CONTESTANTS) >= 6, MONGO_CONTESTANTS
    shares = [MONGO_CONTESTANTS[i::MONGO_RUNS_AT_ONCE] for i in range(MONGO_RUNS_AT_ONCE)]

    def run_share(index: int):
        folder = tmp_path / f"share-{index}"
        folder.mkdir()
        path = write_suite(folder / "suite.toml", SUITE.format(contestants=json.dumps(shares[index]), repeat=1,
                                                                duration=1.0, docs=json.dumps(["small", "big"])))
        return run_bundled(path, folder / "results"), folder / "results"

    with ThreadPoolExecutor(MONGO_RUNS_AT_ONCE) as pool:
        runs = list(pool.map(run_share, range(MONGO_RUNS_AT_ONCE)))
    for share, (proc, results) in zip(shares, runs):
        rows = {(r["contestant"], json.loads(r["level_json"])["params"]["doc"]): r for r in measurements(results)}
        assert sorted({name for name, _ in rows}) == share, (share, proc.stderr[-3000:], db_rows(
            results, "SELECT contestant, reason FROM skipped"))
        for (name, doc), row in sorted(rows.items()):
            assert row["status"] == "ok", (name, doc, row["failure_kind"], row["error"], row["stderr_tail"])
            verification = json.loads(row["verification_json"])
            assert verification["ok"] is True, (name, doc, verification)
            generator = json.loads(row["generator_json"])
            assert generator["totals"]["responses"] > 0 and "--verify-learn" in json.loads(row["generator_argv_json"])
        assert_no_data_left(results)


GRIDFS_SUITE = """name = "gridfs"
contestants = {contestants}
repeat = 1
warmup_s = 0.3
duration_s = {duration}
timeout_s = 5
apply_warmup_min = false

[services.mongo]
backend = "sqlite"

# One file, in a closed loop: each response held to its size and sha256.
[[measure]]
scenario = "gridfs"
connections = [4]
gridfs_files = {files}

# A random file of the bucket per request, at a constant rate: each response held to its own file's size.
[[measure]]
scenario = "gridfs"
connections = [4]
gridfs_files = {files}
gridfs_path = "img/"
rate = [20]

# The same in the closed loop (siege's): each connection asks for the next random file when one arrived.
[[measure]]
scenario = "gridfs"
connections = [4]
gridfs_files = {files}
gridfs_path = "img/"
"""


def gridfs_rows(results) -> dict:
    """The run's measurements by (contestant, gridfs_path, rate): rate None for the closed loop."""
    rows = {}
    for r in measurements(results):
        params = json.loads(r["level_json"])["params"]
        rows[(r["contestant"], params["gridfs_path"], params.get("rate"))] = r
    return rows


def gridfs_suite(tmp_path, contestants, files=6, duration=1.5):
    return write_suite(tmp_path / "suite.toml", GRIDFS_SUITE.format(contestants=json.dumps(contestants),
                                                                    files=files, duration=duration))


def test_gridfs_bucket_loaded_once_and_every_file_checked(tmp_path, service_cache, generator_binary,
                                                          no_leftover_processes):
    """The bucket is loaded once for the run (its load time stored), a right server passes both loads, a server
    whose files differ fails verification, and one that is right for the verified files but a byte short for
    the others passes verification and is caught file by file during the load."""
    results = tmp_path / "results"
    path = gridfs_suite(tmp_path, ["fx-mongo", "fx-mongo-wrong", "fx-gridfs-short"])
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--json"],
                     service_cache, timeout_s=900, PATH=VENV_PATH)
    rows = gridfs_rows(results)
    assert len(rows) == 9, result.stderr[-3000:]
    # Loaded once for the run: every gridfs measurement (all contestants, both levels) names the same load.
    loads = {json.dumps(json.loads(r["services_json"])["ferretdb"]["fixture"]["gridfs"]) for r in rows.values()
             if r["services_json"]}
    assert len(loads) == 1, loads

    levels = [("img/00000.jpg", None), ("img/", 20), ("img/", None)]
    for level in levels:
        good = rows[("fx-mongo", *level)]
        assert good["status"] == "ok", (level, good["error"], result.stderr[-2000:])
        generator = json.loads(good["generator_json"])
        assert generator["totals"]["responses"] > 0 and not any(generator["errors"]["by_class"].values()), \
            generator["errors"]
        fixture = json.loads(good["services_json"])["ferretdb"]["fixture"]["gridfs"]
        assert (fixture["files"], fixture["bucket"]) == (6, "fs") and fixture["load_s"] > 0, fixture
    for rate in (20, None):  # both loops get the list of the bucket's files with their sizes
        argv = json.loads(rows[("fx-mongo", "img/", rate)]["generator_argv_json"])
        urls = Path(argv[argv.index("--urls") + 1]).read_text().splitlines()
        assert len(urls) == 6 and urls[0].startswith("/gridfs/img/00000.jpg ") and urls[0].split()[1].isdigit(), urls
        assert ("--rate" in argv) == (rate is not None), argv
    single = json.loads(rows[("fx-mongo", "img/00000.jpg", None)]["generator_argv_json"])
    assert "--expect-body-sha256" in single and single[2].endswith("/gridfs/img/00000.jpg"), single

    wrong = rows[("fx-mongo-wrong", "img/00000.jpg", None)]
    assert wrong["failure_kind"] == "verify_failed", wrong["error"]
    assert "/gridfs/img/00000.jpg" in wrong["error"] and "differs from the file" in wrong["error"], wrong["error"]

    # Files 0-2 are verified and served right; 3-5 come a byte short: the random-file load catches them.
    assert rows[("fx-gridfs-short", "img/00000.jpg", None)]["status"] == "ok"
    for rate in (20, None):  # open and closed loop alike
        short = json.loads(rows[("fx-gridfs-short", "img/", rate)]["generator_json"])
        assert short["errors"]["by_class"].get("verification_mismatch", 0) > 0, (rate, short["errors"])
        assert any("/gridfs/img/0000" in e and "expected" in e for e in short["errors"]["examples"]), short["errors"]
    assert_no_data_left(results)


def test_gridfs_path_outside_the_bucket_is_refused(tmp_path, service_cache):
    body = GRIDFS_SUITE.format(contestants='["fx-mongo"]', files=6, duration=1).replace(
        'gridfs_path = "img/"\nrate = [20]', 'gridfs_path = "img/00006.jpg"')
    result = run_cli(["run", write_suite(tmp_path / "suite.toml", body), "--results", tmp_path / "results",
                      "--contestants-dir", FIXTURE_CONTESTANTS], service_cache)
    assert result.returncode == 2, result.stderr
    assert "img/00006.jpg" in result.stderr and "gridfs_files = 6" in result.stderr, result.stderr
    assert not (tmp_path / "results" / "netarena.sqlite").exists()


GRIDFS_CONTESTANTS = sorted(p.parent.name for p in REPO_CONTESTANTS.glob("*/contestant.toml")
                            if "gridfs" in tomllib.loads(p.read_text()).get("scenarios", []))


def test_every_bundled_contestant_claiming_gridfs_serves_the_bucket(tmp_path, generator_binary):
    """Each real GridFS implementation (pymongo's GridFSBucket under gevent, the mongodb npm driver's) against a
    real FerretDB: three files byte for byte before the load, every response's size during it."""
    assert {"python-gevent", "node-express"} <= set(GRIDFS_CONTESTANTS), GRIDFS_CONTESTANTS
    path = gridfs_suite(tmp_path, GRIDFS_CONTESTANTS, files=5, duration=1.0)
    results = tmp_path / "results"
    proc = run_bundled(path, results)
    rows = gridfs_rows(results)
    assert sorted({name for name, _, _ in rows}) == GRIDFS_CONTESTANTS, (proc.stderr[-3000:], db_rows(
        results, "SELECT contestant, reason FROM skipped"))
    for (name, *level), row in sorted(rows.items(), key=str):
        assert row["status"] == "ok", (name, level, row["failure_kind"], row["error"], row["stderr_tail"])
        assert json.loads(row["verification_json"])["ok"] is True, (name, level)
        generator = json.loads(row["generator_json"])
        assert generator["totals"]["responses"] > 0 and not any(generator["errors"]["by_class"].values()), \
            (name, level, generator["errors"])
    assert_no_data_left(results)
