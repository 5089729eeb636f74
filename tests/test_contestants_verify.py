"""Every real contestant passes `netarena verify` for every scenario it claims.

Each contestant is installed exactly as its manifest says (venvs, npm, go build, cargo, Maven, Debian
packages when root) and checked against the scenario catalog by the orchestrator's own verification.
A contestant whose runtime cannot be had here is skipped with the reason `netarena list` gives; under CI
(CI=true), where .ci/run installs what the manifests ask for, that skip fails the run (tests/conftest.py).
"""

import json
import os
import queue
import re
import socket
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from netarena.config import SERVICE_SCENARIOS, load_manifest, protocols_for

REPO = Path(__file__).resolve().parents[1]
NAMES = sorted(p.parent.name for p in (REPO / "contestants").glob("*/contestant.toml"))
# First installs (uwsgi from source, Play's sbt resolution, cargo builds) take minutes.
VERIFY_TIMEOUT_S = 1200


def _netarena(*args, timeout):
    argv = [sys.executable, "-m", "netarena", *args]
    # Starting the child failed once in CI (the child reported an exec-time OSError, exit 255) while two verifies
    # started at once; the log cut the errno. The harness's own spawn is not what is under test: one retry, and a
    # second failure names the error in full.
    for attempt in (1, 2):
        try:
            return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        except OSError as exc:
            if attempt == 2:
                raise AssertionError(f"could not start {argv}: {exc!r} (errno {exc.errno}, {exc.filename!r})") from exc
            print(f"starting {argv} failed ({exc!r}); retrying once", file=sys.stderr)
            time.sleep(2)


@pytest.fixture(scope="module")
def availability():
    listed = _netarena("list", "--json", timeout=120)
    assert listed.returncode == 0, listed.stderr
    return {row["name"]: row for row in json.loads(listed.stdout)["contestants"]}


# How many `netarena verify` run at once (verifications fixture). Its timed checks compare within one server
# (Nagle: delayed against immediate ACKs; sleep overlap: a batch against one sleep, with rounds for a cold JIT)
# and are made for a busy or slower host (docs/scenarios.md); two at once on two cores is such a host.
VERIFY_AT_ONCE = 2


@pytest.fixture(scope="module")
def verifications(request, availability):
    """The `netarena verify` of every contestant this session's test_contestant_passes_verify items ask for,
    VERIFY_AT_ONCE at a time in their order, started with the first of them: most of a verification waits
    (a JVM starting, a server's sleeps, its readiness), so two overlap instead of adding up."""
    names = [item.callspec.params["name"] for item in request.session.items
             if item.originalname == "test_contestant_passes_verify" and item.module is request.module]
    from netarena.contestants import cache_root
    from netarena.scenarios.static_set import STATIC_SET_VERSION, build_static_files

    # Each verify makes the static file set when the cache has none; two at once would replace it under each
    # other's servers: made once, first.
    build_static_files(cache_root() / "static" / f"v{STATIC_SET_VERSION}")
    pool = ThreadPoolExecutor(VERIFY_AT_ONCE)
    # Each verification's server on a CPU no other verification's server has (--server-cpus; verify's default is
    # the first CPU, for both): the two at once share no CPU, as far as the machine has CPUs for them.
    cpus = sorted(os.sched_getaffinity(0))
    free_cpus: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(VERIFY_AT_ONCE):
        free_cpus.put(cpus[slot % len(cpus)])

    def verify_on_a_free_cpu(name: str) -> subprocess.CompletedProcess:
        cpu = free_cpus.get()
        try:
            # --build-all-parts: the database drivers too, each contestant's in one build, which test_services_real
            # and test_techempower_contestants_real then find in the cache instead of rebuilding it per database.
            return _netarena("verify", name, "--build-all-parts", "--server-cpus", str(cpu),
                             timeout=VERIFY_TIMEOUT_S)
        finally:
            free_cpus.put(cpu)

    futures = {name: pool.submit(verify_on_a_free_cpu, name) for name in names if availability[name]["runnable"]}
    yield futures
    pool.shutdown(cancel_futures=True)


def verified_pairs(name: str, scenarios: list[str]) -> list[tuple[str, str]]:
    """The (scenario, protocol) rows `netarena verify` checks for these scenarios of the contestant."""
    manifest = load_manifest(REPO / "contestants" / name / "contestant.toml")
    return [(s, p) for s in scenarios for p in protocols_for(manifest, s)]


def failed_rows(table: str) -> str:
    """The rows of `netarena verify`'s table that failed, each with its wrapped lines (those whose first cell is
    blank), so that the failure message names them even when the whole table is too long to show."""
    rows, inside = [], False
    for line in table.splitlines():
        if "│ FAIL" in line:
            inside = True
        elif not re.match(r"^\s*│\s+│", line):
            inside = False
        if inside:
            rows.append(line)
    return "\n".join(rows) or "(no FAIL row in the table)"


@pytest.mark.parametrize("name", NAMES)
def test_contestant_passes_verify(name, availability, verifications):
    row = availability[name]
    if not row["runnable"]:
        pytest.skip(f"{name} cannot run here: {'; '.join(row['reasons'])}")
    result = verifications[name].result()
    assert result.returncode == 0, (f"netarena verify {name} failed:\n{failed_rows(result.stdout)}\n"
                                    f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
    claimed = [s for s, reason in row["scenarios"].items() if reason is None]
    # verify starts no database: a scenario that needs a backing service is shown skipped (test_services_real
    # runs it for real); every other claimed scenario must pass.
    # Each over every protocol the manifest lists that the scenario may be measured over.
    checked = verified_pairs(name, [s for s in claimed if s not in SERVICE_SCENARIOS])
    passed = [line for line in result.stdout.splitlines() if line.count("│") >= 5 and "│ pass " in line]
    assert len(passed) == len(checked), f"{len(passed)} of {len(checked)} claimed (scenario, protocol) passed:\n{result.stdout}"
    assert "needed SIGKILL" not in result.stdout, result.stdout


WORKER_NAMES = [n for n in NAMES
                if tomllib.loads((REPO / "contestants" / n / "contestant.toml").read_text())
                .get("workers", {}).get("supported")]


@pytest.mark.parametrize("name", WORKER_NAMES)
def test_contestant_with_two_workers_starts_serves_and_stops_cleanly(name, availability):
    """workers=2 starts, serves and stops (no SIGKILL needed, nothing left running)."""
    row = availability[name]
    if not row["runnable"]:
        pytest.skip(f"{name} cannot run here: {'; '.join(row['reasons'])}")
    claimed = [s for s, reason in row["scenarios"].items() if reason is None]
    scenarios = [s for s in ("hello", "echo") if s in claimed]
    result = _netarena("verify", name, "--workers", "2", "--scenario", ",".join(scenarios), timeout=VERIFY_TIMEOUT_S)
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    passed = [line for line in result.stdout.splitlines() if line.count("│") >= 5 and "│ pass " in line]
    # hello over each protocol the manifest lists (h1-tls included), echo over h1.
    assert len(passed) == len(verified_pairs(name, scenarios)), result.stdout
    assert "needed SIGKILL" not in result.stdout, result.stdout


# Clients driven at once against a workers=2 server, each opening a new connection per request, and how
# many requests each sends. Thousands of accepts, not a burst of keep-alive connects: with a shared
# listening socket one worker may legitimately accept a whole burst (nginx did, here), but not every one of
# thousands of connections while it is busy serving; SO_REUSEPORT hashes each new connection to a worker.
# A count, not a duration: the same work on a machine of any speed (a slow one just takes longer, up to
# WORKER_LOAD_LIMIT_S, a bound on a hung server only).
WORKER_LOAD_CLIENTS = 16
WORKER_LOAD_REQUESTS = 150
WORKER_LOAD_LIMIT_S = 120.0
# A process (or thread) "did work" when it used at least this share of the server tree's CPU time for those
# requests: a share of the same work, not a rate, so a slow or busy machine does not change it.
WORKER_MIN_CPU_SHARE = 0.10


# Contestants whose {workers} are threads of one process (`workers.processes` false in their manifests): Go's
# GOMAXPROCS, Erlang's schedulers, Netty's event loops, Pekko's dispatcher, tokio's worker threads. Every other
# one's workers are processes.
THREAD_WORKERS = {n for n in WORKER_NAMES
                  if not tomllib.loads((REPO / "contestants" / n / "contestant.toml").read_text())["workers"]
                  .get("processes", False)}


def _cpu_by_unit(root_pid: int, threads: bool) -> dict[str, float]:
    """CPU seconds per process of the server tree, or per thread of its processes (`threads`)."""
    import psutil

    root = psutil.Process(root_pid)
    out = {}
    for proc in [root] + root.children(recursive=True):
        try:
            name = proc.name()
            if threads:
                for t in proc.threads():
                    out[f"pid {proc.pid} {name} thread {t.id}"] = t.user_time + t.system_time
            else:
                times = proc.cpu_times()
                out[f"pid {proc.pid} {name}"] = times.user + times.system
        except psutil.Error:
            pass
    return out


@pytest.mark.parametrize("name", WORKER_NAMES)
def test_two_workers_both_serve(name, availability, tmp_path):
    """With workers=2 more than one process (or thread, for thread-based workers) of the server does the work
    of many connections, not just the first one."""
    import http.client
    import threading
    import time

    from netarena import contestants as ct
    from netarena.backends.real import RealBackend
    from netarena.ports import free_port
    from netarena.process import available_cpus

    row = availability[name]
    if not row["runnable"]:
        pytest.skip(f"{name} cannot run here: {'; '.join(row['reasons'])}")
    contestant = ct.load(REPO / "contestants", [name])[0]
    ct.install(contestant)
    backend = RealBackend(generator=None)
    port = free_port()
    cpus = available_cpus()[:2]
    proc = backend.start_server(contestant, "hello", port, 2, tmp_path, cpus, tmp_path / "server.log")
    try:
        kind, error, verification = backend.wait_ready(proc, contestant, "hello", port, tmp_path, 5.0, workers=2)
        assert kind is None, f"{kind}: {error}\n{ct.tail(tmp_path / 'server.log')}"
        before = _cpu_by_unit(proc.pid, name in THREAD_WORKERS)
        served = [0] * WORKER_LOAD_CLIENTS
        barrier = threading.Barrier(WORKER_LOAD_CLIENTS)

        def drive(i):
            barrier.wait()
            deadline = time.monotonic() + WORKER_LOAD_LIMIT_S
            while served[i] < WORKER_LOAD_REQUESTS and time.monotonic() < deadline:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                try:
                    conn.request("GET", "/hello", headers={"Connection": "close"})
                    if conn.getresponse().read() == b"Hello, World!":
                        served[i] += 1
                finally:
                    conn.close()

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(WORKER_LOAD_CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WORKER_LOAD_LIMIT_S + 10)
        after = _cpu_by_unit(proc.pid, name in THREAD_WORKERS)
    finally:
        stop = backend.stop_server(contestant, proc)
    assert served == [WORKER_LOAD_REQUESTS] * WORKER_LOAD_CLIENTS, f"not every request was served: {served}"
    used = {unit: after[unit] - before.get(unit, 0.0) for unit in after}
    total = sum(used.values())
    busy = sorted((u for u, s in used.items() if s >= WORKER_MIN_CPU_SHARE * total), key=used.get, reverse=True)
    shown = ", ".join(f"{u}: {s:.2f} s" for u, s in sorted(used.items(), key=lambda kv: -kv[1]) if s > 0)
    assert len(busy) >= 2, (f"{name} with workers=2: only {busy} did work for {sum(served)} requests ({shown}); "
                            f"readiness: {verification.get('settled')}")
    assert not stop["leftover"] and not stop["escaped"] and not stop["killed"], stop


def _installed(name, availability, protocol="h1"):
    """The contestant `name` installed with the install parts a level over `protocol` needs (done by verify above:
    a cache hit), a backend to start it and the static folder to give it (built by verify; a server only checks it
    exists); skipped when it cannot run here."""
    from netarena.backends.real import RealBackend
    from netarena.contestants import cache_root, default_contestants_dir, for_servers, install, install_parts, load
    from netarena.scenarios import STATIC_SET_VERSION

    row = availability[name]
    if not row["runnable"]:
        pytest.skip(f"{name} cannot run here: {'; '.join(row['reasons'])}")
    contestant = load(default_contestants_dir(), [name])[0]
    user = for_servers(False, [contestant])
    install(contestant, allow_apt=False, say=lambda *_: None, user=user,
            parts=install_parts(contestant, [("hello", protocol)]))
    static_dir = cache_root() / "static" / f"v{STATIC_SET_VERSION}"
    static_dir.mkdir(parents=True, exist_ok=True)
    return contestant, RealBackend(generator=None, user=user), static_dir


# An address of the loopback network that no contestant would pick by itself: a server that ignores {host}
# (binding 127.0.0.1 or every address) is told apart from one that listens where it is told.
LISTEN_TEST_HOST = "127.0.0.3"


@pytest.mark.parametrize("name", NAMES)
def test_contestant_listens_on_the_host_it_is_given(name, availability, tmp_path):
    """{host} reaches the server: started with host 127.0.0.3, it accepts there and nowhere else on loopback, so
    on a cluster's server host (host 0.0.0.0) the generators of other hosts can reach it (docs/many-machines.md)."""
    from netarena.ports import free_port
    from netarena.process import available_cpus

    contestant, backend, static_dir = _installed(name, availability)
    row = availability[name]
    claimed = [s for s, reason in row["scenarios"].items() if reason is None and s not in SERVICE_SCENARIOS]
    scenario = "hello" if "hello" in claimed else claimed[0]
    port = free_port()
    server = backend.start_server(contestant, scenario, port, 1, static_dir,
                                  [available_cpus()[0]], tmp_path / "server.log", host=LISTEN_TEST_HOST)
    try:
        deadline = time.monotonic() + contestant.manifest.start.ready_timeout_s
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                socket.create_connection((LISTEN_TEST_HOST, port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"nothing accepted on {LISTEN_TEST_HOST}:{port}"
                time.sleep(0.1)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        outcome = backend.stop_server(contestant, server)
    assert not outcome.get("killed"), outcome


# The JavaScript contestants serving TLS (node-http's own check; node-express, node-fastify, node-hono and deno-serve
# through contestants/_node-shared/tls.js): each is started for each TLS protocol it claims (h1-tls, h2) here without
# the run's certificate and key.
JS_TLS_STARTS = [(n, protocol) for n in NAMES
                 if (m := load_manifest(REPO / "contestants" / n / "contestant.toml")).language == "javascript"
                 for protocol in ("h1-tls", "h2") if protocol in m.protocols]
# And for each protocol it does not claim, which it must refuse instead of serving another.
JS_UNSERVED_STARTS = [(n, protocol) for n in NAMES
                      if (m := load_manifest(REPO / "contestants" / n / "contestant.toml")).language == "javascript"
                      for protocol in ("h1-tls", "h2", "h2c") if protocol not in m.protocols]


def _started_without_a_certificate(name, protocol, availability, tmp_path) -> tuple[int | None, str]:
    """Starts the contestant for a TLS protocol with neither NETARENA_TLS_CERT nor NETARENA_TLS_KEY and waits
    (up to its ready timeout) for it to stop: its exit code (None: still running) and what it wrote."""
    from netarena.ports import free_port
    from netarena.process import available_cpus

    contestant, backend, static_dir = _installed(name, availability, protocol)
    log = tmp_path / "server.log"
    server = backend.start_server(contestant, "hello", free_port(), 1, static_dir, [available_cpus()[0]], log,
                                  tls=None, protocol=protocol)
    try:
        deadline = time.monotonic() + contestant.manifest.start.ready_timeout_s
        while server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        code = server.poll()
    finally:
        backend.stop_server(contestant, server)
    return code, log.read_text()


@pytest.mark.parametrize("name,protocol", JS_TLS_STARTS)
def test_js_contestant_started_for_tls_without_a_certificate_stops_with_one_message(name, protocol, availability,
                                                                                     tmp_path):
    """NETARENA_PROTOCOL=h1-tls or h2 with neither NETARENA_TLS_CERT nor NETARENA_TLS_KEY: the server exits non-zero
    naming the missing variable, instead of serving cleartext where TLS was asked for."""
    code, said = _started_without_a_certificate(name, protocol, availability, tmp_path)
    assert code not in (None, 0), f"{name} started for {protocol} without a certificate did not stop (exit {code}):\n{said}"
    assert "NETARENA_TLS_CERT" in said and "Error:" not in said and "    at " not in said, said


@pytest.mark.parametrize("name,protocol", JS_UNSERVED_STARTS)
def test_js_contestant_refuses_a_start_for_a_protocol_it_does_not_serve(name, protocol, availability, tmp_path):
    """Started for a protocol its manifest does not claim (deno-serve for h1-tls, node-express for h2), the server
    exits with code 2 saying what it serves."""
    code, said = _started_without_a_certificate(name, protocol, availability, tmp_path)
    assert code == 2, f"{name} started for {protocol}: exit {code}, not 2:\n{said}"
    assert f"(this contestant serves no other), got \"{protocol}\"" in said and "Error:" not in said, said


# The contestants whose start goes through a script choosing the listener by NETARENA_PROTOCOL (the uWSGI ones'
# contestants/_flask-shared/uwsgi_start.sh, play-scala's and python-granian's start.sh): h1-tls without the run's
# certificate and key, a protocol they do not claim, and a value that is no protocol at all, are refused by the
# script before the server starts.
START_SCRIPT_NAMES = [n for n in NAMES
                      if (m := load_manifest(REPO / "contestants" / n / "contestant.toml")).start.command
                      and any(word.endswith("start.sh") for word in m.start.command[:2]) and "h1-tls" in m.protocols]


@pytest.mark.parametrize("name", START_SCRIPT_NAMES)
def test_start_script_refuses_h1_tls_without_a_certificate_and_a_protocol_it_does_not_serve(name, availability,
                                                                                             tmp_path):
    assert {"flask-uwsgi-threads", "play-scala", "python-granian"} <= set(START_SCRIPT_NAMES), START_SCRIPT_NAMES
    manifest = load_manifest(REPO / "contestants" / name / "contestant.toml")
    (tmp_path / "h1-tls").mkdir()
    code, said = _started_without_a_certificate(name, "h1-tls", availability, tmp_path / "h1-tls")
    assert code == 2, f"{name} started for h1-tls without a certificate: exit {code}, not 2:\n{said}"
    assert "h1-tls needs NETARENA_TLS_CERT and NETARENA_TLS_KEY" in said, said
    for protocol in (p for p in ("h2", "h2c") if p not in manifest.protocols):
        (tmp_path / protocol).mkdir()
        code, said = _started_without_a_certificate(name, protocol, availability, tmp_path / protocol)
        assert code == 2, f"{name} started for {protocol}: exit {code}, not 2:\n{said}"
        assert f"not {protocol}" in said, said
    # A value netarena never sends (it starts servers for the four protocols only), so the script is run by hand,
    # with its manifest's arguments: a script claiming all four still has this branch.
    folder = str(REPO / "contestants" / name)
    argv = [re.sub(r"\{[a-z_]+\}", "unused", word.replace("{dir}", folder)) for word in manifest.start.command]
    said = subprocess.run(argv, env={"PATH": os.environ["PATH"], "NETARENA_PROTOCOL": "h3"}, capture_output=True,
                          text=True, timeout=30)
    assert said.returncode == 2, f"{name}'s start script given NETARENA_PROTOCOL=h3: exit {said.returncode}:\n{said}"
    assert "h3" in said.stderr and said.stdout == "", said


# The contestants serving twisted.web's HTTP/2 (python-twisted's server.py: python-twisted, python-twisted-asyncio).
TWISTED_H2_NAMES = [n for n in NAMES
                    if (m := load_manifest(REPO / "contestants" / n / "contestant.toml")).framework == "twisted"
                    and "h2" in m.protocols]


@pytest.mark.parametrize("name", TWISTED_H2_NAMES)
def test_twisted_contestant_refuses_h2c_and_tls_without_a_certificate(name, availability, tmp_path):
    """Started for h2c (twisted.web has no cleartext HTTP/2 server), or for h1-tls or h2 without the run's certificate
    and key, the server exits with code 2 saying why, without a traceback, instead of serving another protocol."""
    assert {"python-twisted", "python-twisted-asyncio"} <= set(TWISTED_H2_NAMES), TWISTED_H2_NAMES
    for protocol, reason in (("h2c", "Twisted has no HTTP/2 server for a cleartext connection"),
                             ("h1-tls", "NETARENA_PROTOCOL=h1-tls is over TLS: set NETARENA_TLS_CERT"),
                             ("h2", "NETARENA_PROTOCOL=h2 is over TLS: set NETARENA_TLS_CERT")):
        (tmp_path / protocol).mkdir()
        code, said = _started_without_a_certificate(name, protocol, availability, tmp_path / protocol)
        assert code == 2, f"{name} started for {protocol} without a certificate: exit {code}, not 2:\n{said}"
        assert reason in said and "Traceback" not in said, said


# The Rust contestants serving TLS through contestants/_rust-shared/tls (rust-hyper, rust-axum, rust-actix: h1-tls
# and h2), with each TLS protocol each claims.
RUST_TLS_STARTS = [(n, protocol) for n in NAMES
                   if (m := load_manifest(REPO / "contestants" / n / "contestant.toml")).language == "rust"
                   for protocol in ("h1-tls", "h2") if protocol in m.protocols]


@pytest.mark.parametrize("name,protocol", RUST_TLS_STARTS)
def test_rust_contestant_started_for_tls_without_a_certificate_stops_with_one_message(name, protocol, availability,
                                                                                       tmp_path):
    """Started for h1-tls or h2 without the run's certificate and key, the server exits with code 2 (its bad
    setting) naming NETARENA_TLS_CERT, without a panic, instead of serving cleartext where TLS was asked for."""
    code, said = _started_without_a_certificate(name, protocol, availability, tmp_path)
    assert code == 2, f"{name} started for {protocol} without a certificate: exit {code}, not 2:\n{said}"
    assert f"NETARENA_PROTOCOL={protocol} without NETARENA_TLS_CERT" in said and "panicked" not in said, said


# rust-actix's two binaries (its manifest's install steps): the base one, without Actix's HTTP/2, started for h1 and
# h1-tls, and the `http2` build for h2 and h2c, each through a link named for the protocol. Each refuses the other's
# protocols, so a link to the wrong one stops the start instead of serving another protocol (over TLS, Actix's
# HTTP/2 build offers h2 first by ALPN, which h1-tls must not).
ACTIX_BINARIES = {"h1": "netarena-rust-actix", "h1-tls": "netarena-rust-actix", "h2": "netarena-rust-actix-h2",
                  "h2c": "netarena-rust-actix-h2"}


@pytest.mark.parametrize("binary,protocol,says", [
    ("netarena-rust-actix", "h2", "built without the `http2` cargo feature"),
    ("netarena-rust-actix", "h2c", "built without the `http2` cargo feature"),
    ("netarena-rust-actix-h2", "h1-tls", "built with the `http2` cargo feature, whose TLS listeners offer h2 first"),
])
def test_rust_actix_binary_refuses_the_protocols_of_the_other_one(binary, protocol, says, availability):
    from netarena.ports import free_port

    contestant, _, _ = _installed("rust-actix", availability, "h2")
    build = contestant.env_dir / "build"
    assert {p: (build / f"netarena-rust-actix-{p}").resolve().name for p in ACTIX_BINARIES} == ACTIX_BINARIES
    said = subprocess.run([str(build / binary), "--port", str(free_port())], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "NETARENA_PROTOCOL": protocol}, timeout=30)
    assert said.returncode == 2, f"{binary} started for {protocol}: exit {said.returncode}, not 2:\n{said}"
    assert f"NETARENA_PROTOCOL={protocol}: this binary was {says}" in said.stderr, said
    assert "panicked" not in said.stderr and said.stdout == "", said


# The JVM contestants serving h1-tls (java-netty, java-vertx, java-helidon-se, java-spring-mvc-vt and
# java-spring-webflux), each checking NETARENA_PROTOCOL and the certificate's variables before its server starts.
JVM_TLS_NAMES = [n for n in NAMES
                 if (m := load_manifest(REPO / "contestants" / n / "contestant.toml")).runtime == "jvm"
                 and "h1-tls" in m.protocols]


@pytest.mark.parametrize("name", JVM_TLS_NAMES)
def test_jvm_contestant_started_for_h1_tls_without_a_certificate_stops_with_one_message(name, availability,
                                                                                         tmp_path):
    """Started for h1-tls without the run's certificate and key, the JVM exits with code 2 (its bad setting) naming
    NETARENA_TLS_CERT, without a stack trace, instead of serving cleartext where HTTPS was asked for."""
    code, said = _started_without_a_certificate(name, "h1-tls", availability, tmp_path)
    assert code == 2, f"{name} started for h1-tls without a certificate: exit {code}, not 2:\n{said}"
    assert "NETARENA_TLS_CERT" in said and "\tat " not in said and "Exception" not in said, said
