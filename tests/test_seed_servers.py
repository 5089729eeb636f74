"""The seeds' server set-ups, each checked against the real contestant: Tornado on Twisted (seed 004) answers
through Tornado's handlers behind Twisted's HTTP parser; a suite's `threads` axis sizes a thread pool (seed
002's /sleep); PyPy's declared JIT warm-up raises a short one; a pool still draining its accept queue after the
load is not hung.

`netarena verify` of every contestant (the catalog's scenarios) is test_contestants_verify.py's; these check
what makes each set-up what its seed ran.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from netarena import contestants as ct
from netarena.backends.real import RealBackend
from netarena.ports import free_port
from netarena.process import available_cpus

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 30.0


def _started(name: str, tmp_path: Path, workers: int = 1):
    """Install `name` as its manifest says, start it on a free port and wait until it answers hello."""
    contestant = ct.load(REPO / "contestants", [name])[0]
    ct.install(contestant)
    backend = RealBackend(generator=None)
    port = free_port()
    proc = backend.start_server(contestant, "hello", port, workers, tmp_path, available_cpus()[:1],
                                tmp_path / "server.log")
    kind, error, _ = backend.wait_ready(proc, contestant, "hello", port, tmp_path, READY_TIMEOUT_S, workers=workers)
    if kind is not None:
        backend.stop_server(contestant, proc)
        pytest.fail(f"{name} did not start: {kind}: {error}\n{ct.tail(tmp_path / 'server.log')}")
    return backend, contestant, proc, port


def test_tornado_on_twisted_answers_through_tornados_handler_behind_twisteds_parser(tmp_path):
    backend, contestant, proc, port = _started("python-tornado-on-twisted", tmp_path)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/hello")
        response = conn.getresponse()
        assert response.read() == b"Hello, World!"
        # RequestHandler.clear() sets this Server header; Twisted's own would be TwistedWeb/...
        assert (response.getheader("Server") or "").startswith("TornadoServer/"), response.getheaders()
        # RequestHandler.compute_etag: a SHA-1 of the body, and check_etag_header answers a match with 304.
        etag = response.getheader("Etag")
        assert etag, response.getheaders()
        conn.request("GET", "/hello", headers={"If-None-Match": etag})
        revalidated = conn.getresponse()
        assert revalidated.status == 304 and revalidated.read() == b"", revalidated.getheaders()
        conn.close()
        # The request was parsed by twisted.web, not by Tornado's HTTP1Connection: 18 KB of headers exceed
        # HTTPChannel.totalHeadersSize (16 KiB), which Twisted answers with its bare 400 and a close, while
        # Tornado's own server accepts up to 64 KiB (max_header_size) and would run the handler.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            big = b"".join(b"X-Big-%d: %s\r\n" % (i, b"a" * 6000) for i in range(3))
            sock.sendall(b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n" + big + b"\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        assert answer == b"HTTP/1.1 400 Bad Request\r\n\r\n", answer
    finally:
        stop = backend.stop_server(contestant, proc)
    assert not stop["leftover"] and not stop["escaped"] and not stop["killed"], stop


def python_threads_sleep_suite(tmp_path: Path, connections: list[int], threads: list[int], sleep_ms: int,
                               duration_s: float, timeout_s: float) -> Path:
    """A one-entry suite of python-threads' /sleep with a `threads` axis."""
    from conftest import write_suite

    return write_suite(tmp_path / "suite.toml", f"""name = "sleep-threads"
contestants = ["python-threads"]
repeat = 1
warmup_s = 0.3
duration_s = {duration_s}
timeout_s = {timeout_s}

[[measure]]
scenario = "sleep"
connections = {connections}
threads = {threads}
sleep_ms = [{sleep_ms}]
""")


def test_threads_axis_sizes_the_pool_two_sleeps_serialize_on_one_thread_and_overlap_on_two(tmp_path, cache_dir,
                                                                                        generator_binary,
                                                                                        no_leftover_processes):
    """Seed 002's /sleep introduction: one thread and two keep-alive connections, then two threads. A pool
    thread stays with its connection, so with one thread the second connection is never answered; with two
    both are. Counts of connections answered, not speeds."""
    import json

    from conftest import db_rows, run_cli

    path = python_threads_sleep_suite(tmp_path, [2], [1, 2], 200, duration_s=2, timeout_s=5)
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--json"], cache_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r["level_key"]: r for r in db_rows(results, "SELECT * FROM measurements ORDER BY id")}
    assert sorted(rows) == ["c=2,w=1,threads=1,sleep_ms=200", "c=2,w=1,threads=2,sleep_ms=200"], sorted(rows)
    answered = {}
    for key, row in rows.items():
        assert row["status"] == "ok", (key, row["error"])
        generator = json.loads(row["generator_json"])
        assert generator["totals"]["requests"] >= 1 and generator["totals"]["errors"] == 0, (key, generator["totals"])
        answered[key] = 2 - generator["no_answer"]["connections"]
    assert answered == {"c=2,w=1,threads=1,sleep_ms=200": 1, "c=2,w=1,threads=2,sleep_ms=200": 2}, answered


def test_quick_suite_warms_pypy_twisted_up_past_its_jit_and_says_so():
    """pypy-twisted declares start.warmup_min_s: the quick suite's 1 s warm-up is raised for it (badge WARM),
    not for CPython's Twisted."""
    from netarena.config import load_suite
    from netarena.plan.suite import build_plan

    suite, _ = load_suite(REPO / "suites" / "quick.toml")
    pypy, cpython = ct.load(REPO / "contestants", ["pypy-twisted", "python-twisted"])
    plan = build_plan(suite, [pypy, cpython])
    hello = {i.contestant: i for i in plan.items if i.scenario == "hello"}
    declared = pypy.manifest.start.warmup_min_s
    assert declared > suite.warmup_s
    assert plan.timing(hello["pypy-twisted"])[0] == declared and plan.warmup_raised(hello["pypy-twisted"])
    assert plan.timing(hello["python-twisted"])[0] == suite.warmup_s
    assert not plan.warmup_raised(hello["python-twisted"])




def test_a_pool_still_draining_its_accept_queue_after_the_load_is_not_hung(tmp_path, cache_dir, generator_binary,
                                                                          no_leftover_processes):
    """One thread, four keep-alive connections, 1 s sleeps, 2 s timeout: three connections time out under load and
    are replaced, and the closed ones stay in the kernel's accept queue, each still costing the thread a sleep.
    The fresh request after the load waits behind them past its timeout while the queue shrinks: the server is
    accepting, so it is draining (recorded as such), not hung."""
    import json

    from conftest import db_rows, run_cli

    path = python_threads_sleep_suite(tmp_path, [4], [1], 1000, duration_s=3, timeout_s=2)
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--json"], cache_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = db_rows(results, "SELECT * FROM measurements")
    # after_load is there only when requests timed out under load.
    after = json.loads(row["verification_json"])["after_load"]
    assert row["status"] == "ok", (row["failure_kind"], row["error"], after)
    assert after["ok"] and after["draining"]["queued"] > 0, after


SHARED = Path(__file__).resolve().parents[1] / "contestants" / "_python-shared"
CLIENTS_PER_PROCESS = r"""
import json, os, threading
from netarena_shared.mongo import sync_docs_collection
barrier = threading.Barrier(32)
seen, errors = [], []

def first_request():
    barrier.wait()  # every thread asks at once, as uWSGI's threads do on the first requests
    try:
        seen.append(id(sync_docs_collection().database.client))
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=first_request) for _ in range(32)]
for t in threads: t.start()
for t in threads: t.join()
parent = set(seen)
parent_client = sync_docs_collection().database.client  # held, so the child cannot reuse its address
pid = os.fork()
if pid == 0:  # a worker forked after the parent made its client gets a client of its own
    os._exit(0 if sync_docs_collection().database.client is not parent_client else 3)
_, status = os.waitpid(pid, 0)
print(json.dumps({"clients": len(parent), "calls": len(seen), "errors": errors,
                  "child_exit": os.waitstatus_to_exitcode(status)}))
"""


def test_the_python_contestants_make_one_mongo_client_per_process_under_concurrent_first_requests(tmp_path):
    """netarena_shared.mongo.sync_docs_collection, which the Flask app and the thread/greenlet servers use: 32
    threads asking for the collection at once get one MongoClient (and no KeyError), and a forked worker gets
    its own. MongoClient connects in the background, so an address with nothing listening is enough here."""
    env = {**os.environ, "PYTHONPATH": str(SHARED),
           "NETARENA_MONGO_URL": f"mongodb://127.0.0.1:{free_port()}/netarena?serverSelectionTimeoutMS=100"}
    done = subprocess.run([sys.executable, "-c", CLIENTS_PER_PROCESS], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"clients": 1, "calls": 32, "errors": [], "child_exit": 0}, done.stdout
