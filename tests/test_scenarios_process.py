"""Verification against real fixture servers, the load mapping, the static set, and process control."""

from __future__ import annotations

import hashlib
import os
import statistics
import sys

import psutil
import pytest

from conftest import FIXTURE_CONTESTANTS
from netarena.config import Measure, load_manifest
from netarena.contestants import Contestant
from netarena.process import ManagedProcess, free_port, group_members, kill_group
from netarena.scenarios import (STATIC_MAX_BYTES, STATIC_MEDIAN_BYTES, STATIC_MIN_BYTES, build_static_files,
                                levels_for, load_spec, static_file_bytes, static_file_sizes, verify)

SERVER = FIXTURE_CONTESTANTS.parent / "fixture_server.py"


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


def test_stop_escalates_to_sigkill_and_leaves_nothing(serve):
    proc, _ = serve("--ignore-term", "--spawn-child")
    assert len(group_members(proc.pgid)) == 2  # the server and its child
    outcome = proc.stop("SIGTERM", 0.5)
    assert outcome.killed and outcome.leftover == [] and outcome.exit_code == -9
    assert group_members(proc.pgid) == []


def test_kill_group_refuses_a_reused_pid(serve):
    proc, _ = serve()
    assert kill_group(proc.pgid, leader_start_time=proc.start_time - 100) == []
    assert proc.alive
    assert len(kill_group(proc.pgid, leader_start_time=proc.start_time)) == 1


def test_placeholders_expand_in_commands():
    contestant = Contestant(load_manifest(FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml"),
                            FIXTURE_CONTESTANTS / "fx-good")
    from netarena.contestants import expand
    values = contestant.placeholders(port=1234, workers=2)
    argv = [expand(w, values) for w in contestant.command("echo")]
    assert argv[-3:] == ["--port", "1234", "--echo"]
    assert argv[1] == f"{FIXTURE_CONTESTANTS / 'fx-good'}/../../fixture_server.py"
    assert expand('{"a": {port}}', values) == '{"a": 1234}'
