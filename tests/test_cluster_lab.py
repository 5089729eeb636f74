"""Runs across hosts, for real: a lab of network namespaces (netarena lab up), Dask with TLS, nginx and an
asyncio server and a thread-per-connection server on the server host, netarena-load on two generator hosts; a
contestant with a venv installed from PyPI on a fresh server host.

Needs root and `ip netns` (CI has both): without them the tests are skipped, and under CI=true that is a
failure. Each lab is removed when its test ends (fixture finalizer), and the tests check that nothing of it
(process or namespace) is left.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import psutil
import pytest

from conftest import REPO, cli_env, db_rows, run_cli, start_cli, write_suite
from netarena.cluster import ClusterError, lab

HEARTBEAT_S = 5.0


def _lab_possible() -> str | None:
    try:
        lab.check_can_build()
    except ClusterError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module", autouse=True)
def _needs_lab():
    reason = _lab_possible()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the lab cannot be built on the CI machine: {reason}")
        pytest.skip(reason)


def _make_lab(folder: Path, hosts: int, cache: Path, tag: str) -> tuple[Path, str]:
    name = f"nt{os.getpid() % 100000}{tag}"  # unique per test process and lab, short for namespace names
    previous = os.environ.get("NETARENA_CACHE")
    os.environ["NETARENA_CACHE"] = str(cache)  # the workers, and what they start, inherit it
    try:
        return lab.up(folder, hosts, name, heartbeat_timeout_s=HEARTBEAT_S), name
    finally:
        if previous is None:
            os.environ.pop("NETARENA_CACHE", None)
        else:
            os.environ["NETARENA_CACHE"] = previous


def _assert_gone(folder: Path, name: str) -> None:
    assert not (folder / lab.STATE_FILE).exists()
    left = [ns for ns in lab.existing_namespaces() if ns.startswith(f"{name}-")]
    assert not left, f"namespaces outlived the lab: {left}"


@pytest.fixture(scope="module")
def lab3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab3")
    cache = Path(os.environ.get("NETARENA_CACHE") or tmp_path_factory.mktemp("cache"))
    cluster_file, name = _make_lab(folder, 3, cache, "m")
    yield cluster_file, name, cache
    lab.down(folder)
    _assert_gone(folder, name)


def _ns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30).stdout
    return [int(p) for p in out.split()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _is_load(cmdline: str) -> bool:
    return "netarena-load" in cmdline and " --duration " in cmdline


LOAD_DURATION_S = 15


def _load_connected(ns: str) -> bool:
    """Whether netarena-load in namespace `ns` holds an established TCP connection (to the server host): with no
    warm-up, its measured phase has begun."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htnp", "state", "established"], capture_output=True,
                         text=True, timeout=30).stdout
    return '("netarena-load",' in out


def _suite_under_load(tmp_path: Path, cluster_file: Path, cache: Path, name: str, repeat: int,
                      watch_ns: str) -> tuple[subprocess.Popen, Path, float]:
    """Start `netarena run` of a LOAD_DURATION_S python-asyncio hello suite across the lab; return once
    netarena-load runs in watch_ns and is connected (the measured phase has begun), with when that load started
    (Unix time): its measurement cannot end on its own before that plus LOAD_DURATION_S."""
    suite = write_suite(tmp_path / "suite.toml", f"""
name = "{name}"
contestants = ["python-asyncio"]
repeat = {repeat}
warmup_s = 0
duration_s = {LOAD_DURATION_S}
timeout_s = 5

[[measure]]
scenario = "hello"
connections = [10]
""")
    results = tmp_path / "results"
    run = start_cli(["run", suite, "--cluster", cluster_file, "--results", results, "--quiet"], cache)
    deadline = time.monotonic() + 180
    # The load's own command line: the run also starts `netarena-load --version` on every generator host when
    # it gathers the hosts' facts, before it installs anything; a host killed then is lost before any measurement.
    # Then its connections, not a fixed sleep: a signal must land inside the measured phase however slow the host.
    load = None
    while load is None or not _load_connected(watch_ns):
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no generator started and connected in {watch_ns}"
        time.sleep(0.2)
        if load is None:
            load = next((pid for pid in _ns_pids(watch_ns) if _is_load(_cmdline(pid))), None)
    return run, results, psutil.Process(load).create_time()


def _worker_pid(folder: Path, name: str) -> int:
    state = json.loads((folder / lab.STATE_FILE).read_text())
    return next(p["pid"] for p in state["processes"] if p["role"] == f"worker {name}")


SUITE = """
name = "lab-small"
contestants = ["nginx", "python-asyncio", "python-threads"]
repeat = 1
warmup_s = 0
duration_s = 2
timeout_s = 5

# Open loop: every scheduled request is sent and its reply waited for, and there is no warm-up, so the
# server's own count of requests during the load is exactly the sum of the generators' responses.
[[measure]]
scenario = "hello"
connections = [20]
rate = [1000]
"""


def _stub_requests(text: str) -> int:
    # "Active connections: 1\\nserver accepts handled requests\\n 3 3 7\\n..."
    return int(re.search(r"^\s*\d+\s+\d+\s+(\d+)\s*$", text, re.M).group(1))


def test_small_suite_across_the_lab_counts_exactly(lab3, tmp_path, generator_binary):
    cluster_file, name, cache = lab3
    suite = write_suite(tmp_path / "suite.toml", SUITE)
    results = tmp_path / "results"
    proc = run_cli(["run", suite, "--cluster", cluster_file, "--results", results, "--json"], cache, timeout_s=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["contestant"]: r for r in db_rows(results, "SELECT * FROM measurements")}
    # Every bundled contestant listens on {host} (0.0.0.0 on the server host), python-threads too.
    assert set(rows) == {"nginx", "python-asyncio", "python-threads"}, (
        db_rows(results, "SELECT * FROM skipped"),
        proc.stderr[-3000:],
    )
    assert not db_rows(results, "SELECT * FROM skipped")
    schema = json.loads((REPO / "docs" / "schema" / "netarena-load.schema.json").read_text())
    for contestant, row in rows.items():
        assert row["status"] == "ok", (contestant, row["error"], row["stderr_tail"])
        generator = json.loads(row["generator_json"])
        hosts = generator["hosts"]
        assert [h["host"] for h in hosts] == ["h2", "h3"]
        # Connections and the rate split over the hosts; the merged counts are the sums.
        assert sum(h["document"]["config"]["connections"] for h in hosts) == 20
        assert generator["totals"]["requests"] == sum(h["document"]["totals"]["requests"] for h in hosts)
        assert generator["latency"]["count"] == sum(h["document"]["latency"]["count"] for h in hosts)
        # A netarena-load document, its time series the hosts' summed second by second, interval by interval.
        jsonschema.validate(generator, schema)
        assert sum(s["requests"] for s in generator["timeline"]) == \
            sum(s["requests"] for h in hosts for s in h["document"]["timeline"])
        assert sum(e["count"] for e in generator["intervals"]["entries"]) == \
            sum(e["count"] for h in hosts for e in h["document"]["intervals"]["entries"])
        for h in hosts:
            assert "--prepare" in h["document"]["command_line"]
            assert h["document"]["config"]["target"].startswith("http://198.18.0.11:")
            assert h["cpu_user_s"] is not None
    status = json.loads(rows["nginx"]["monitor_json"])["server_status"]
    # The status reads themselves are requests too: the one after the load counts itself.
    served = _stub_requests(status["after"]) - _stub_requests(status["before"]) - 1
    merged = json.loads(rows["nginx"]["generator_json"])
    assert served == merged["totals"]["responses"] > 0
    env = json.loads(db_rows(results, "SELECT environment_json FROM runs")[0]["environment_json"])
    hosts = {h["name"]: h for h in env["cluster"]["hosts"]}
    assert {n: h["role"] for n, h in hosts.items()} == {"h1": "server", "h2": "generator", "h3": "generator"}
    for h in hosts.values():
        assert isinstance(h["clock_offset_s"], float) and h["environment"]


MONGO_SUITE = """
name = "lab-mongo"
contestants = ["python-aiohttp"]
repeat = 1
warmup_s = 0
duration_s = 2
timeout_s = 5

[services.mongo]
backend = "sqlite"

[[measure]]
scenario = "mongo"
doc = ["small"]
connections = [10]

[[measure]]
scenario = "queries"
queries = [5]
connections = [10]
"""


def test_the_database_runs_on_the_server_host_beside_the_contestant(lab3, tmp_path, generator_binary):
    # The server host installs both itself (PyPI, the Go module proxy), as it would on a real host.
    cluster_file, name, cache = lab3
    suite = write_suite(tmp_path / "suite.toml", MONGO_SUITE)
    results = tmp_path / "results"
    proc = run_cli(["run", suite, "--cluster", cluster_file, "--results", results, "--json"], cache, timeout_s=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["scenario"]: r for r in db_rows(results, "SELECT * FROM measurements")}
    assert sorted(rows) == ["mongo", "queries"], sorted(rows)
    for row in rows.values():
        assert row["status"] == "ok", (row["scenario"], row["error"], row["stderr_tail"])
    # PostgreSQL beside the contestant too, and its queries counted there over the whole load, against the
    # generator hosts' merged document: every answered request made its 5 SELECTs.
    queries = rows["queries"]
    during = json.loads(queries["verification_json"])["during_load"]
    merged = json.loads(queries["generator_json"])
    assert during["ok"] and during["table"] == "world", during
    assert during["answered"] == merged["totals"]["responses"] + merged["totals"]["warmup_responses"] > 0
    assert 5 * during["answered"] * 0.99 <= during["selects"], during
    assert len(merged["hosts"]) == 2
    assert not [p for p in _ns_pids(f"{name}-h1") if "postgres" in _cmdline(p)]
    row = rows["mongo"]
    services = json.loads(row["services_json"])
    assert services["ferretdb"]["label"] == "FerretDB 1.24.2 (SQLite)"
    assert services["ferretdb"]["fixture"]["documents"]["small"] > 0
    # Monitored on the server host like the server: its own CPU, beside the contestant's.
    assert json.loads(row["monitor_json"])["summary"]["services"]["ferretdb"]["cpu_user_s"] is not None
    generator = json.loads(row["generator_json"])
    assert generator["totals"]["responses"] > 0 and generator["errors"]["total"] == 0
    assert all(h["document"]["config"]["target"].startswith("http://198.18.0.11:") for h in generator["hosts"])
    env = json.loads(db_rows(results, "SELECT environment_json FROM runs")[0]["environment_json"])
    assert env["services"]["ferretdb"]["backend"] == "SQLite"
    # The run's end stopped the database on the server host.
    assert not [p for p in _ns_pids(f"{name}-h1") if "ferretdb" in _cmdline(p)]


VENV_SUITE = """
name = "lab-venv"
contestants = ["python-tornado"]
repeat = 1
warmup_s = 0
duration_s = 1
timeout_s = 5

[[measure]]
scenario = "hello"
connections = [4]
"""


def test_a_venv_contestant_installs_on_a_fresh_server_host(tmp_path, generator_binary):
    # An empty cache: the server host makes the venv and pip fetches from PyPI, which its own namespace has no
    # route to (it installs in the machine's). Once the run lost such contestants, skipped as "install failed".
    cache = tmp_path / "cache"
    cache.mkdir()
    folder = tmp_path / "venvlab"
    cluster_file, name = _make_lab(folder, 2, cache, "v")
    try:
        suite = write_suite(tmp_path / "suite.toml", VENV_SUITE)
        results = tmp_path / "results"
        proc = run_cli(["run", suite, "--cluster", cluster_file, "--results", results, "--quiet"], cache,
                       timeout_s=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        skipped = db_rows(results, "SELECT reason FROM skipped")
        assert not skipped, [r["reason"] for r in skipped]
        [installed] = db_rows(results, "SELECT * FROM contestants")
        record = json.loads(installed["install_json"])
        assert installed["status"] == "ready" and record["host"] == "h1"
        assert any(p.startswith("tornado==") for p in record["pip_freeze"]), record["pip_freeze"]
        assert (cache / "envs" / "python-tornado" / "venv" / "bin" / "python").exists()
        # The server still ran in the server host's namespace, loaded from the generator host.
        [row] = db_rows(results, "SELECT * FROM measurements")
        assert row["status"] == "ok", (row["error"], row["stderr_tail"])
        [host] = json.loads(row["generator_json"])["hosts"]
        assert host["host"] == "h2" and host["document"]["config"]["target"].startswith("http://198.18.0.11:")
    finally:
        lab.down(folder)
    _assert_gone(folder, name)


def test_thresholds_and_find_max_are_refused_across_hosts(lab3, tmp_path):
    cluster_file, _, cache = lab3
    suite = write_suite(tmp_path / "suite.toml", SUITE)
    proc = run_cli(["run", suite, "--cluster", cluster_file, "--results", tmp_path / "r", "--threshold", "p99<1s"],
                   cache, timeout_s=120)
    assert proc.returncode == 2 and "thresholds are not supported across hosts" in proc.stderr, proc.stderr
    assert not (tmp_path / "r" / "netarena.sqlite").exists()


def test_unauthenticated_worker_and_client_are_refused(lab3, tmp_path):
    cluster_file, name, cache = lab3
    other = tmp_path / "other-ca"
    from netarena.cluster.certs import make_certs

    make_certs(other)
    scheduler = f"tls://{lab.CTL_ADDRESS}:{lab.SCHEDULER_PORT}"
    base = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--no-nanny", "--death-timeout", "8",
            "--host", lab.host_address(2)]
    attempts = {
        "no-certs": base + ["--name", "intruder-plain"],
        "other-ca": base + ["--name", "intruder-ca", "--tls-ca-file", str(other / "ca.pem"),
                            "--tls-cert", str(other / "worker.pem"), "--tls-key", str(other / "worker.key")],
    }
    for label, argv in attempts.items():
        out = subprocess.run(["ip", "netns", "exec", f"{name}-h2", *argv], capture_output=True, text=True, timeout=60)
        assert out.returncode != 0, f"{label}: the worker ran ({out.stderr[-500:]})"
        assert "Registered to" not in out.stderr, label
    # A client with another CA's certificate cannot submit either; the lab's own client can, and sees no intruder.
    probe = (
        "import sys\n"
        "from distributed import Client\n"
        "from distributed.security import Security\n"
        f"d = {str(other)!r}\n"
        "s = Security(tls_ca_file=d + '/ca.pem', tls_client_cert=d + '/client.pem', tls_client_key=d + '/client.key',"
        " require_encryption=True)\n"
        "try:\n"
        f"    Client({scheduler!r}, security=s, timeout=8)\n"
        "except Exception as exc:\n"
        "    print('refused:', type(exc).__name__); sys.exit(0)\n"
        "sys.exit('the client with a foreign certificate connected')\n")
    out = subprocess.run(["ip", "netns", "exec", f"{name}-ctl", sys.executable, "-c", probe], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "refused" in out.stdout, out.stdout + out.stderr[-1000:]
    check = run_cli(["cluster", "check", cluster_file, "--json"], cache)
    assert check.returncode == 0, check.stderr
    assert sorted(h["name"] for h in json.loads(check.stdout)["hosts"]) == ["h1", "h2", "h3"]


def test_worker_of_another_version_is_refused_naming_both(lab3, tmp_path):
    cluster_file, name, cache = lab3
    import netarena

    fake = tmp_path / "old"
    shutil.copytree(Path(netarena.__file__).parent, fake / "netarena")
    init = fake / "netarena" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', '__version__ = "0.0.1-old"', init.read_text()))
    folder = cluster_file.parent
    argv = lab.worker_argv(f"tls://{lab.CTL_ADDRESS}:{lab.SCHEDULER_PORT}", "old", lab.host_address(3),
                           folder / "certs", tmp_path / "work")
    env = dict(os.environ, PYTHONPATH=str(fake))
    worker = subprocess.Popen(["ip", "netns", "exec", f"{name}-h3", *argv], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        text = cluster_file.read_text().replace('workers = ["h2", "h3"]', 'workers = ["h2", "old"]')
        other = folder / "cluster-old.toml"
        other.write_text(text)
        check = run_cli(["cluster", "check", other], cache, timeout_s=120)
        assert check.returncode == 2, check.stdout + check.stderr
        assert "0.0.1-old" in check.stderr and netarena.__version__ in check.stderr, check.stderr
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)


def test_generator_killed_mid_measurement_fails_it_and_the_run_goes_on(tmp_path, generator_binary):
    cache = Path(os.environ.get("NETARENA_CACHE") or tmp_path / "cache")
    folder = tmp_path / "killlab"
    cluster_file, name = _make_lab(folder, 3, cache, "k")
    revived = None
    try:
        worker_h3 = _worker_pid(folder, "h3")
        run, results, load_started = _suite_under_load(tmp_path, cluster_file, cache, "lab-kill", 2, f"{name}-h3")
        os.killpg(os.getpgid(worker_h3), signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
        rows = db_rows(results, "SELECT * FROM measurements ORDER BY repeat_index")
        assert [r["status"] for r in rows] == ["failed", "ok"], (stderr[-3000:], [dict(r) for r in rows])
        assert rows[0]["failure_kind"] == "host_lost" and "h3" in rows[0]["error"]
        # The failure was noticed when the host was lost (a killed worker's connection drops at once, a silent one
        # misses its heartbeats), not when the measurement ended: before its load could have ended on its own.
        from datetime import datetime

        ended = datetime.fromisoformat(rows[0]["ended_at"].replace("Z", "+00:00")).timestamp()
        assert ended < load_started + LOAD_DURATION_S, (ended - load_started, rows[0]["error"])
        # The second repeat ran on the one generator host left.
        hosts = json.loads(rows[1]["generator_json"])["hosts"]
        assert [h["host"] for h in hosts] == ["h2"] and hosts[0]["document"]["config"]["connections"] == 10
        # The killed worker's generator died with it (parent-death signal): nothing runs in h3 any more.
        deadline = time.monotonic() + 10
        while _ns_pids(f"{name}-h3") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _ns_pids(f"{name}-h3"), [_cmdline(p) for p in _ns_pids(f"{name}-h3")]

        # With generators.min_hosts = 2, losing one of two generator hosts stops the run (after failing the
        # measurement it was in) instead of going on with one. h3 comes back first (a new worker, same name).
        strict = folder / "cluster-min2.toml"
        strict.write_text(cluster_file.read_text().replace("[generators]\n", "[generators]\nmin_hosts = 2\n", 1))
        argv = lab.worker_argv(f"tls://{lab.CTL_ADDRESS}:{lab.SCHEDULER_PORT}", "h3", lab.host_address(3),
                               folder / "certs", folder / "work" / "h3-again")
        revived = subprocess.Popen(["ip", "netns", "exec", f"{name}-h3", *argv], env=cli_env(cache),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 90
        while run_cli(["cluster", "check", strict], cache, timeout_s=120).returncode != 0:
            assert time.monotonic() < deadline, "the revived h3 worker did not join"
            time.sleep(1)
        (tmp_path / "min2").mkdir()
        run, results, _ = _suite_under_load(tmp_path / "min2", strict, cache, "lab-min2", 2, f"{name}-h3")
        os.killpg(revived.pid, signal.SIGKILL)
        revived.wait(timeout=30)
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 1, stderr[-3000:]
        assert "fewer than generators.min_hosts = 2" in stderr and "--resume" in stderr, stderr[-3000:]
        statuses = [r["failure_kind"] or r["status"] for r in db_rows(results, "SELECT * FROM measurements ORDER BY id")]
        assert statuses[0] == "host_lost" and "ok" not in statuses, statuses

        # Ctrl-C of a run across hosts: stored as interrupted, its server and generator gone from the hosts.
        # On h2 alone (h3 is gone for good now), once the stopped run's generator has left h2.
        only_h2 = folder / "cluster-h2.toml"
        only_h2.write_text(cluster_file.read_text().replace('workers = ["h2", "h3"]', 'workers = ["h2"]', 1))
        deadline = time.monotonic() + 30
        while any("netarena-load" in _cmdline(p) for p in _ns_pids(f"{name}-h2")):
            assert time.monotonic() < deadline, "the stopped run's generator is still on h2"
            time.sleep(0.2)
        (tmp_path / "ctrl-c").mkdir()
        run, results, _ = _suite_under_load(tmp_path / "ctrl-c", only_h2, cache, "lab-ctrl-c", 1, f"{name}-h2")
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 130, stderr[-3000:]
        assert [r["status"] for r in db_rows(results, "SELECT status FROM runs")] == ["interrupted"]
        deadline = time.monotonic() + 30
        busy = lambda: [_cmdline(p) for ns in ("h1", "h2") for p in _ns_pids(f"{name}-{ns}")  # noqa: E731
                        if "netarena-load" in _cmdline(p) or "server.py" in _cmdline(p)]
        while busy() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not busy()
    finally:
        if revived is not None and revived.poll() is None:
            os.killpg(revived.pid, signal.SIGKILL)
            revived.wait(timeout=30)
        lab.down(folder)
    _assert_gone(folder, name)


def test_server_host_dying_stops_the_run_and_resume_finishes_it(tmp_path, generator_binary):
    cache = Path(os.environ.get("NETARENA_CACHE") or tmp_path / "cache")
    folder = tmp_path / "srvlab"
    cluster_file, name = _make_lab(folder, 2, cache, "s")
    revived = None
    try:
        worker_h1 = _worker_pid(folder, "h1")
        run, results, _ = _suite_under_load(tmp_path, cluster_file, cache, "lab-server-dies", 1, f"{name}-h2")
        os.killpg(os.getpgid(worker_h1), signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 1, stderr[-3000:]
        assert "server host h1" in stderr and "--resume" in stderr, stderr[-3000:]
        rows = db_rows(results, "SELECT status FROM measurements")
        assert [r["status"] for r in rows] == ["interrupted"]
        assert db_rows(results, "SELECT status FROM runs")[0]["status"] == "interrupted"
        # The host comes back (a new worker of the same name); --resume finishes the run there.
        argv = lab.worker_argv(f"tls://{lab.CTL_ADDRESS}:{lab.SCHEDULER_PORT}", "h1", lab.host_address(1),
                               folder / "certs", folder / "work" / "h1-again")
        revived = subprocess.Popen(["ip", "netns", "exec", f"{name}-h1", *argv], env=cli_env(cache),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        resumed = run_cli(["run", "--resume", "--results", results, "--quiet"], cache, timeout_s=300)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        rows = db_rows(results, "SELECT status FROM measurements")
        assert [r["status"] for r in rows] == ["ok"]
    finally:
        if revived is not None:
            os.killpg(revived.pid, signal.SIGKILL)
            revived.wait(timeout=30)
        lab.down(folder)
    _assert_gone(folder, name)


def test_ctrl_c_during_lab_up_removes_what_it_made(tmp_path):
    name = f"nt{os.getpid() % 100000}c"
    folder = tmp_path / "intlab"
    up = subprocess.Popen([sys.executable, "-m", "netarena", "lab", "up", "--hosts", "3", "--dir", str(folder),
                           "--name", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=cli_env(tmp_path / "cache"), cwd=REPO)
    deadline = time.monotonic() + 120
    while not any(ns.startswith(f"{name}-") for ns in lab.existing_namespaces()):
        assert up.poll() is None and time.monotonic() < deadline, up.communicate()
        time.sleep(0.05)
    up.send_signal(signal.SIGINT)
    try:
        out, err = up.communicate(timeout=120)
        assert up.returncode == 130, out + err
        _assert_gone(folder, name)
    finally:
        lab.down(folder)  # only when the assertions failed is there anything left to take down



def test_ctrl_c_held_down_during_lab_up_still_exits_130(tmp_path):
    """Ctrl-C sent again and again, from the first namespace until the process is gone: the clean-up still finishes
    and the exit is 130. Once it restored the default handlers before exiting through sys.exit (cli.lab_up), a
    Ctrl-C in that gap ended the command by KeyboardInterrupt ("Aborted!", exit 1) or by SIGINT."""
    name = f"nt{os.getpid() % 100000}h"
    folder = tmp_path / "heldlab"
    up = subprocess.Popen([sys.executable, "-m", "netarena", "lab", "up", "--hosts", "2", "--dir", str(folder),
                           "--name", name], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=cli_env(tmp_path / "cache"), cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not any(ns.startswith(f"{name}-") for ns in lab.existing_namespaces()):
            assert up.poll() is None and time.monotonic() < deadline, up.communicate()
            time.sleep(0.02)
        sent = 0
        while up.poll() is None and time.monotonic() < deadline:
            try:
                up.send_signal(signal.SIGINT)
                sent += 1
            except ProcessLookupError:
                break
            time.sleep(0.002)
        _, err = up.communicate(timeout=30)
        assert up.returncode == 130, f"exit {up.returncode} after {sent} SIGINTs: {err}"
        _assert_gone(folder, name)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(timeout=30)
        lab.down(folder)

def test_lab_needs_root_or_says_so(tmp_path):
    # As an unprivileged user the command refuses with one clear message and makes nothing.
    nobody = subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True)
    if nobody.returncode != 0:
        pytest.skip("no 'nobody' user to run as")
    env = cli_env(tmp_path)
    out = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", sys.executable,
                          "-m", "netarena", "lab", "up", "--dir", str(tmp_path / "lab")], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "needs root" in out.stderr
    assert not (tmp_path / "lab" / "lab.json").exists()
