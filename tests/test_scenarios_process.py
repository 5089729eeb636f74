"""Verification against real fixture servers, the load mapping, the static set, and process control."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import statistics
import subprocess
import sys
import time

import psutil
import pytest

from conftest import FIXTURE_CONTESTANTS
from netarena.config import Measure, load_manifest
from netarena.contestants import Contestant
from netarena.ports import ephemeral_port_range, free_port
from netarena.process import ManagedProcess, group_members, kill_group
from netarena.scenarios import (MIN_LISTEN_BACKLOG, NAGLE_CHECK_REQUESTS, NAGLE_MIN_STALL_MS, SLEEP_OVERLAP_CONNECTIONS, STATIC_MAX_BYTES,
                                STATIC_MEDIAN_BYTES, STATIC_MIN_BYTES, build_static_files, levels_for,
                                listen_backlogs, load_spec, static_file_bytes, static_file_sizes, verify)
from netarena.scenarios.socket_diag import peer_tcp_nodelay

SERVER = FIXTURE_CONTESTANTS / "_fixture-shared" / "fixture_server.py"


@pytest.fixture
def serve(tmp_path, cache_dir, no_leftover_processes, monkeypatch):
    monkeypatch.setenv("NETARENA_CACHE", str(cache_dir))
    started = []

    def start(*flags, cpus=None):
        port = free_port()
        proc = ManagedProcess([sys.executable, str(SERVER), "--port", str(port), *flags], cpus=cpus,
                              log_path=tmp_path / f"server-{port}.log", env=dict(os.environ))
        started.append(proc)
        assert proc.wait_port(port, 10) is None
        return proc, port

    yield start
    for proc in started:
        proc.stop("SIGTERM", 2)


def test_verify_passes_every_claimed_scenario(serve, tmp_path):
    _, port = serve()
    for scenario in ("hello", "bytes", "json", "sleep"):
        result = verify(scenario, port, tmp_path)
        assert result.ok, result.reason
    _, echo_port = serve("--echo")
    assert verify("echo", echo_port, tmp_path).ok


def test_verify_rejects_a_wrong_answer_for_good(serve, tmp_path):
    _, port = serve("--wrong")
    result = verify("hello", port, tmp_path)
    assert not result.ok and not result.retryable
    assert "Hello, World?" in result.reason and "GET /hello" in result.reason


def test_verify_against_a_closed_port_is_retryable(tmp_path):
    result = verify("hello", free_port(), tmp_path, timeout_s=1)
    assert not result.ok and result.retryable


def test_verify_missing_route_is_a_wrong_answer(serve, tmp_path):
    _, port = serve()
    result = verify("static", port, build_static_files(tmp_path / "static", count=1))
    assert not result.ok and "status 404" in result.reason


def test_load_spec_carries_the_expected_body():
    level = levels_for(Measure(scenario="bytes", connections=[8], sizes=[10000]))[0]
    spec = load_spec("bytes", level, 4242, None)
    assert spec.target == "http://127.0.0.1:4242/bytes/10000"
    args = spec.args
    assert args[args.index("--expect-body-size") + 1] == "10000"
    assert args[args.index("--expect-body-sha256") + 1] == hashlib.sha256(b"*" * 10000).hexdigest()
    assert args[args.index("-c") + 1] == "8"
    echo = load_spec("echo", levels_for(Measure(scenario="echo", connections=[3]))[0], 4242, None)
    assert echo.mode == "echo" and echo.target == "127.0.0.1:4242" and "--chunk" in echo.args


def test_levels_expand_every_combination_with_stable_keys():
    levels = levels_for(Measure(scenario="sleep", connections=[10, 100], workers=[1, 2], sleep_ms=[50]))
    assert [lv.key for lv in levels] == ["c=10,w=1,sleep_ms=50", "c=100,w=1,sleep_ms=50",
                                         "c=10,w=2,sleep_ms=50", "c=100,w=2,sleep_ms=50"]


def test_static_set_is_reproducible_and_follows_the_distribution(tmp_path):
    sizes = static_file_sizes()
    assert len(sizes) == 10_000
    assert min(sizes) >= STATIC_MIN_BYTES and max(sizes) <= STATIC_MAX_BYTES
    assert abs(statistics.median(sizes) - STATIC_MEDIAN_BYTES) / STATIC_MEDIAN_BYTES < 0.05
    first = build_static_files(tmp_path / "a", count=5)
    second = build_static_files(tmp_path / "b", count=5)
    for i in range(5):
        data = (first / "img" / f"{i:05d}.jpg").read_bytes()
        assert data == (second / "img" / f"{i:05d}.jpg").read_bytes() == static_file_bytes(i, sizes[i])
    assert (first / "bytes" / "524288").read_bytes() == b"*" * 524288
    marker = first / ".netarena-static-complete"
    before = marker.stat().st_mtime_ns
    build_static_files(first, count=5)  # complete: reused, not rebuilt
    assert marker.stat().st_mtime_ns == before


def test_server_is_pinned_and_in_its_own_group(serve):
    proc, _ = serve(cpus=[0])
    assert psutil.Process(proc.pid).cpu_affinity() == [0]
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)


# A process that builds a child's setup, forks, and dies before the child runs it: the race between a
# kill -9 of netarena and a server being forked, made certain.
ORPHANED_BEFORE_SETUP = """
import os, sys, time
from pathlib import Path
from netarena.process import child_setup
out = Path(sys.argv[1])
setup = child_setup(None)
if os.fork() == 0:
    parent = os.getppid()
    (out / "child.pid.part").write_text(str(os.getpid()))
    os.replace(out / "child.pid.part", out / "child.pid")  # whole when the parent sees it
    while os.getppid() == parent:  # until the parent has exited and this process is re-parented
        time.sleep(0.01)
    setup()
    (out / "survived").write_text("setup returned in an orphan")
    time.sleep(60)
    os._exit(0)
while not (out / "child.pid").exists():
    time.sleep(0.01)
os._exit(0)
"""


def wait_dead(proc: psutil.Process, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_child_whose_parent_died_before_its_setup_does_not_run_on(tmp_path):
    # The parent-death signal only covers a parent dying after the prctl; the child checks for one gone before.
    subprocess.run([sys.executable, "-c", ORPHANED_BEFORE_SETUP, str(tmp_path)], check=True, timeout=30)
    try:
        child = psutil.Process(int((tmp_path / "child.pid").read_text()))
    except psutil.NoSuchProcess:
        child = None  # already gone and reaped by its new parent
    try:
        if child is not None:
            # Gone, or a zombie its new parent (init, or a subreaper such as a CI runner) has not reaped yet.
            assert wait_dead(child, 10), "the orphaned child is still running"
        assert not (tmp_path / "survived").exists()
    finally:
        if child is not None and child.is_running():
            child.kill()


def test_stop_escalates_to_sigkill_and_leaves_nothing(serve):
    proc, _ = serve("--ignore-term", "--spawn-child")
    assert len(group_members(proc.pgid)) == 2  # the server and its child
    outcome = proc.stop("SIGTERM", 0.5)
    assert outcome.killed and outcome.leftover == [] and outcome.exit_code == -9
    assert group_members(proc.pgid) == []


def test_kill_group_signals_only_what_is_proven_ours(serve):
    proc, _ = serve()
    assert kill_group(proc.pgid, proc.start_time - 100, proc.token) == []  # another start time: a reused PID
    assert kill_group(proc.pgid, None, proc.token) == []  # no start time recorded: nothing is proven
    assert kill_group(proc.pgid, proc.start_time, None) == []
    assert kill_group(proc.pgid, proc.start_time, "0" * 32) == []  # not this run's token
    assert proc.alive
    assert len(kill_group(proc.pgid, proc.start_time, proc.token)) == 1


def test_placeholders_expand_in_commands():
    contestant = Contestant(load_manifest(FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml"),
                            FIXTURE_CONTESTANTS / "fx-good")
    from netarena.contestants import expand
    values = contestant.placeholders(port=1234, workers=2)
    argv = [expand(w, values) for w in contestant.command("echo")]
    assert argv[-3:] == ["--port", "1234", "--echo"]
    assert argv[1] == f"{FIXTURE_CONTESTANTS / 'fx-good'}/../_fixture-shared/fixture_server.py"
    assert expand('{"a": {port}}', values) == '{"a": 1234}'


def test_verify_reports_what_the_socket_checks_measured(serve, tmp_path):
    _, port = serve()
    result = verify("hello", port, tmp_path, concurrency_model="threads")
    assert result.ok, result.reason
    assert "listen backlog: backlog 1024" in result.observed
    assert f"{NAGLE_CHECK_REQUESTS} x 2 GET /hello on one connection: median" in result.observed


def test_verify_rejects_a_listen_backlog_below_the_catalog_minimum(serve, tmp_path):
    _, port = serve("--backlog", "128")
    result = verify("hello", port, tmp_path)
    assert not result.ok and not result.retryable
    assert f"backlog 128, expected at least {MIN_LISTEN_BACKLOG}" in result.reason


def test_listen_backlogs_reads_the_kernels_value(serve):
    _, port = serve("--backlog", "1500")
    somaxconn = int(open("/proc/sys/net/core/somaxconn").read())
    assert listen_backlogs(port) == [min(1500, somaxconn)]
    assert listen_backlogs(free_port()) == []


def test_verify_rejects_responses_delayed_by_nagle(serve, tmp_path):
    """Headers and body in two writes without TCP_NODELAY: each response waits for the delayed ACK."""
    _, port = serve("--nagle")
    result = verify("bytes", port, tmp_path)
    assert not result.ok and not result.retryable
    assert "GET /bytes/10000 on one connection" in result.reason and "TCP_NODELAY" in result.reason
    # A stall the manifest declares (nagle_stall) is measured and shown with its reason, and passes.
    declared = verify("bytes", port, tmp_path, nagle_stall="the framework offers no TCP_NODELAY")
    assert declared.ok, declared.reason
    assert "the declared Nagle stall (the framework offers no TCP_NODELAY)" in declared.observed
    # After a load only the responses are checked (is it still answering?), not the set-up.
    assert verify("bytes", port, tmp_path, responses_only=True).ok


NAGLE_MEASURED = re.compile(r"GET /bytes/10000 on one connection: median ([\d.]+) ms from a response's first byte to "
                            r"its last with delayed ACKs, ([\d.]+) ms with immediate ACKs \(([\d.]+) ms from the "
                            r"request\)")


def test_nagle_check_times_the_response_not_the_server(serve, tmp_path):
    """A server that takes 60 ms before each answer (a JIT still compiling, a busy machine) but writes it whole:
    slow, not stalled by Nagle. Slow and without TCP_NODELAY: still stalled."""
    _, port = serve("--slow-ms", "60")
    result = verify("bytes", port, tmp_path)
    assert result.ok, result.reason
    measured = NAGLE_MEASURED.search(result.observed)
    assert measured and float(measured.group(3)) >= 60, result.observed
    _, nagle_port = serve("--slow-ms", "60", "--nagle")
    result = verify("bytes", nagle_port, tmp_path)
    assert not result.ok and "TCP_NODELAY" in result.reason, result.reason


def test_nagle_check_tells_a_stall_from_pieces_written_slowly(serve, tmp_path):
    """A server (or a slow host) whose head and body come 60 ms apart on their own, with TCP_NODELAY: every response
    spends 60 ms between its first byte and its last, more than Linux's 40 ms delayed ACK, yet it is not Nagle,
    because the body comes as late when the client acknowledges at once. The same pieces without TCP_NODELAY
    add the delayed ACK's wait to the delayed half only: Nagle."""
    _, port = serve("--pace-ms", "60")
    result = verify("bytes", port, tmp_path)
    assert result.ok, result.reason
    measured = NAGLE_MEASURED.search(result.observed)
    assert measured and float(measured.group(1)) >= 60 and float(measured.group(2)) >= 60, result.observed
    _, nagle_port = serve("--nagle")
    result = verify("bytes", nagle_port, tmp_path)
    measured = NAGLE_MEASURED.search(result.reason)
    assert not result.ok and measured, result.reason
    # The stall is the delayed ACK's own timeout (at least 40 ms on Linux), on top of what the immediate ACK costs.
    assert float(measured.group(1)) - float(measured.group(2)) >= NAGLE_MIN_STALL_MS, result.reason


def test_a_stall_on_one_half_of_the_pairs_only_is_not_confirmed_by_the_reversed_round(serve, tmp_path):
    """Pauses that fall on every other response (a CPU quota's, in step with the check's pairs) make the first
    round's delayed-ACK half slow and its immediate half quick, as Nagle would; the second round, each pair in the
    other order, puts them on the immediate half: not Nagle, and said so. A real Nagle stall is confirmed.
    Which half the pauses fall on depends on how many requests the connection carried before the check: one server
    pauses the odd responses, one the even ones, and the first round of one of them sees the false stall."""
    observed = []
    for parity in ([], ["--pace-even"]):
        _, port = serve("--pace-alternate-ms", "60", *parity)
        result = verify("bytes", port, tmp_path)
        assert result.ok, result.reason
        observed.append(result.observed)
    assert sum("was not confirmed by a second in the other order" in o for o in observed) == 1, observed
    _, nagle_port = serve("--nagle")
    result = verify("bytes", nagle_port, tmp_path)
    assert not result.ok and "TCP_NODELAY" in result.reason and "not confirmed" not in result.reason, result.reason


def test_a_stall_on_a_server_with_tcp_nodelay_is_not_called_nagle(serve, tmp_path):
    """A server with TCP_NODELAY whose body comes late whenever the client delays its ACKs (a loaded host can look
    so, in both rounds): the stall is measured, but the server's socket has TCP_NODELAY, so it is not Nagle and the
    check passes, saying so. A server without TCP_NODELAY fails, and the check says its socket has it off."""
    _, port = serve("--pace-unacked-ms", "60")
    result = verify("bytes", port, tmp_path)
    assert result.ok, result.reason
    measured = NAGLE_MEASURED.search(result.observed)
    assert measured and float(measured.group(1)) - float(measured.group(2)) >= NAGLE_MIN_STALL_MS, result.observed
    assert "yet the server's socket has TCP_NODELAY on, so Nagle held nothing back" in result.observed
    _, nagle_port = serve("--nagle")
    result = verify("bytes", nagle_port, tmp_path)
    assert not result.ok and "TCP_NODELAY is off on the server's socket" in result.reason, result.reason


def test_peer_tcp_nodelay_reads_the_other_ends_socket():
    """The server's end of a loopback connection, found by its ports and read through pidfd_getfd: its
    TCP_NODELAY as set, over IPv4 and IPv6, and the server's connection still works after the look."""
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        for nodelay in (False, True):
            with socket.socket(family) as listener:
                listener.bind((host, 0))
                listener.listen()
                with socket.create_connection(listener.getsockname()[:2]) as client:
                    accepted, _ = listener.accept()
                    with accepted:
                        accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, nodelay)
                        assert peer_tcp_nodelay(client) == (nodelay, "")
                        accepted.sendall(b"still open")
                        assert client.recv(64) == b"still open"


def test_verify_sleep_requires_overlap_by_concurrency_model(serve, tmp_path):
    _, port = serve()  # a thread per connection: every sleep overlaps
    for model in ("event-loop", "threads"):
        result = verify("sleep", port, tmp_path, concurrency_model=model)
        assert result.ok, result.reason
        assert f"all {SLEEP_OVERLAP_CONNECTIONS} done after" in result.observed
    _, serial_port = serve("--serial")  # one request at a time: sleeps run one after another
    for model in ("event-loop", "threads"):
        result = verify("sleep", serial_port, tmp_path, concurrency_model=model)
        assert not result.ok and not result.retryable, result.to_dict()
        assert "concurrent GET /sleep/" in result.reason and "overlapped" in result.reason


def test_free_port_stays_out_of_the_range_the_kernel_numbers_sockets_from():
    """A server's port must not be one the kernel can hand to another socket (bind to port 0, connect) between
    free_port and the server's own bind: uWSGI binds its internal socket to port 0 first, and once drew it."""
    low, high = ephemeral_port_range()
    if low == 1024 and high == 65535:
        pytest.skip("the ephemeral range covers every unprivileged port: there is no port outside it")
    for _ in range(200):
        port = free_port()
        assert not low <= port <= high, f"free_port gave {port}, inside the ephemeral range {low}-{high}"
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # and it is really free


def test_free_port_skips_a_taken_port_and_falls_back_to_the_kernels_choice():
    """With one port outside the given range: that port while it is free; the kernel's choice while a socket
    holds it (not a port in use)."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", 1024))
        except OSError:
            pytest.skip("port 1024 is in use on this machine")
        holder.listen()
        port = free_port(ephemeral=(1025, 65535))
        assert port != 1024
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
    assert free_port(ephemeral=(1025, 65535)) == 1024
