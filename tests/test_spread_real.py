"""Levels beyond one generator process: spread over several netarena-load processes started together, merged
into one result. A low generator_open_files stands in for the machine's limit, so a few dozen connections
need two processes (20,000 real ones would need minutes here); the plan's address spreading is checked on
the numbers of a machine whose port range is smaller than a level."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from hdrh.histogram import HdrHistogram

from conftest import CLI_TIMEOUT_S, FIXTURE_CONTESTANTS, REPO, cli_env, db_rows, generator_percentile, run_cli, write_suite
from netarena.doctor import FD_SPARE
from netarena.errors import ConfigError
from netarena.spread import plan_spread

SCHEMA = REPO / "docs" / "schema" / "netarena-load.schema.json"
FLOOD_BYTES = 3000  # not ECHO_VERIFY_BYTES: the server's count tells the flood's connections from verification's
CONNECTIONS = 60

SPREAD = f"""name = "spread"
contestants = ["fx-good"]
repeat = 1
warmup_s = 0
duration_s = 60
timeout_s = 10
generator_open_files = {FD_SPARE + 40}

[[measure]]
scenario = "echo"
connections = [{CONNECTIONS}]
echo_chunk_bytes = 1000
echo_bytes = [{FLOOD_BYTES}]
"""


def test_level_above_one_process_is_spread_over_two_and_merged(tmp_path, cache_dir, generator_binary,
                                                                 no_leftover_processes):
    suite = write_suite(tmp_path / "spread.toml", SPREAD)
    counts = tmp_path / "echo-counts.json"
    results = tmp_path / "results"
    out = run_cli(["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--json"],
                  cache_dir, FIXTURE_ECHO_COUNT_FILE=str(counts))
    assert out.returncode == 0, out.stderr
    [row] = db_rows(results, "SELECT * FROM measurements")
    assert row["status"] == "ok", row["error"]
    generator = json.loads(row["generator_json"])
    argv = json.loads(row["generator_argv_json"])
    # Two processes (40 connections fit in one), each with --prepare and its share.
    assert argv.count("--prepare") == 2 and argv.count("[process 1]") == 1 and argv.count("[process 2]") == 1
    parts = [h["document"] for h in generator["hosts"]]
    assert [p["config"]["connections"] for p in parts] == [30, 30]
    assert all(p["config"]["prepare"] for p in parts)
    # One merged result: counts are the sums of the processes', the histogram holds every request.
    assert generator["config"]["connections"] == CONNECTIONS
    assert generator["echo"]["connections_completed"] == CONNECTIONS == \
        sum(p["echo"]["connections_completed"] for p in parts)
    assert generator["echo"]["verified_bytes"] == CONNECTIONS * FLOOD_BYTES
    assert generator["totals"]["requests"] == sum(p["totals"]["requests"] for p in parts)
    assert generator["latency"]["count"] == sum(p["latency"]["count"] for p in parts)
    assert generator["errors"]["total"] == 0
    # One start time, given to both: the merged measured phase begins at the earliest process's.
    assert generator["started_at"] == min(p["started_at"] for p in parts)
    # The echo server's own count: every flood connection echoed exactly FLOOD_BYTES.
    server = json.loads(counts.read_text())
    assert server["connections"].get(str(FLOOD_BYTES)) == CONNECTIONS, server
    assert generator["spread"]["processes"] == 2 and generator["spread"]["start_ns"] > 0
    # The merged document is a netarena-load document (the schema's optional hosts/spread aside) whose time
    # series are the parts' summed second by second and interval by interval.
    jsonschema.validate(generator, json.loads(SCHEMA.read_text()))
    waits = [p["generator"]["run_delay_fraction_max"] for p in parts]
    assert generator["generator"]["run_delay_fraction_max"] == (None if None in waits else max(waits))
    for key in ("requests", "bytes_received", "errors"):
        assert sum(second[key] for second in generator["timeline"]) == \
            sum(second[key] for p in parts for second in p["timeline"])
    entries = generator["intervals"]["entries"]
    assert len(entries) == max(len(p["intervals"]["entries"]) for p in parts)
    assert sum(e["count"] for e in entries) == sum(e["count"] for p in parts for e in p["intervals"]["entries"])
    for index, entry in enumerate(entries):
        hist = HdrHistogram(1, 3_600_000_000, 3)
        for p in parts:
            if index < len(p["intervals"]["entries"]) and p["intervals"]["entries"][index]["count"]:
                hist.decode_and_add(p["intervals"]["entries"][index]["data"])
        assert entry["count"] == hist.get_total_count()
        if entry["count"]:
            assert entry["p99_us"] == generator_percentile(hist, 99) and entry["max_us"] == hist.get_max_value()


def test_level_above_one_address_ports_uses_an_address_per_process(tmp_path, cache_dir, generator_binary,
                                                                     no_leftover_processes):
    """In a network namespace of its own (the port range is per namespace) with 50 ephemeral ports, 60
    connections cannot come from one address: each of the two processes binds to a 127.0.1.x of its own."""
    suite = write_suite(tmp_path / "spread.toml", SPREAD)
    counts = tmp_path / "echo-counts.json"
    results = tmp_path / "results"
    script = ("ip link set lo up && echo '40000 40049' > /proc/sys/net/ipv4/ip_local_port_range && "
              'exec "$0" -m netarena "$@"')
    out = subprocess.run(["unshare", "--net", "sh", "-c", script, sys.executable, "run", str(suite), "--results",
                          str(results), "--contestants-dir", str(FIXTURE_CONTESTANTS), "--json"],
                         capture_output=True, text=True, timeout=CLI_TIMEOUT_S, cwd=REPO,
                         env=cli_env(cache_dir, FIXTURE_ECHO_COUNT_FILE=str(counts)))
    assert out.returncode == 0, out.stderr
    [row] = db_rows(results, "SELECT * FROM measurements")
    assert row["status"] == "ok", row["error"]
    generator = json.loads(row["generator_json"])
    assert generator["spread"]["ports_per_address"] == 50
    assert generator["spread"]["source_ips"] == ["127.0.1.1", "127.0.1.2"]
    assert generator["echo"]["connections_completed"] == CONNECTIONS and generator["errors"]["total"] == 0
    # The server saw each process's connections come from its own address.
    server = json.loads(counts.read_text())
    assert server["sources"].get("127.0.1.1") == server["sources"].get("127.0.1.2") == CONNECTIONS // 2, server
    assert server["connections"].get(str(FLOOD_BYTES)) == CONNECTIONS, server


def test_plan_spreads_over_processes_and_source_addresses():
    # Seed 000's top level on this machine's limits: 20,000 files per process, 28,232 ports per address.
    plan = plan_spread(32768, probe=False, open_files=20000, ports=28232, loopback=True)
    assert plan.shares == (16384, 16384)
    # Processes sharing an address would share its ports: each gets addresses of its own.
    assert plan.source_ips == ("127.0.1.1", "127.0.1.2")
    # The seed's wider port range holds them from one address each.
    assert plan_spread(32768, probe=False, open_files=20000, ports=40001, loopback=True).source_ips == (None, None)
    # One process with room for all, but more than one address's ports.
    big = plan_spread(60000, probe=True, open_files=1 << 20, ports=28232, loopback=True)
    assert big.shares == (60000,) and big.source_ips == ("127.0.1.1-127.0.1.3",)
    # The probe's socket counts against the first process.
    probed = plan_spread(2 * (20000 - FD_SPARE), probe=True, open_files=20000, ports=None, loopback=True)
    assert probed.processes == 3 and sum(probed.shares) == 2 * (20000 - FD_SPARE)
    assert plan_spread(100, probe=False, open_files=20000, ports=28232, loopback=True).reason is None
    with pytest.raises(ConfigError, match="not on loopback"):
        plan_spread(30000, probe=False, open_files=1 << 20, ports=28232, loopback=False)


def _limits_of_child(**kwargs) -> tuple[int, int]:
    import sys

    from netarena.process import ManagedProcess

    child = ManagedProcess([sys.executable, "-c", "import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))"],
                           capture=True, **kwargs)
    out, _ = child.proc.communicate(timeout=30)
    soft, hard = map(int, out.split())
    return soft, hard


def test_children_start_with_the_open_files_hard_limit_or_the_one_given():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))  # a shell's low soft limit
    try:
        assert _limits_of_child() == (hard, hard)
        assert _limits_of_child(open_files=200) == (200, 200)  # a suite's generator_open_files
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_level_a_server_cannot_hold_is_skipped_for_it_alone():
    from netarena.config import Suite
    from netarena.contestants import default_contestants_dir, load
    from netarena.plan.suite import build_plan

    suite = Suite.model_validate({"name": "big", "measure": [
        {"scenario": "echo", "connections": [100, 32768], "workers": [1, 2]}]})
    contestants = load(default_contestants_dir(), ["python-asyncio", "go-net", "python-threads"])
    plan = build_plan(suite, contestants, None, server_open_files=20000)
    planned = {(i.contestant, i.level.key) for i in plan.items}
    # Two worker processes share 32,768 connections; one process (go-net's workers are threads) cannot.
    assert ("python-asyncio", "c=32768,w=2") in planned and ("go-net", "c=100,w=2") in planned
    skips = {(c, k): why for c, _, k, why in plan.skips}
    assert "they all land in one server process" in skips[("python-asyncio", "c=32768,w=1")]
    assert "or measure it with more workers" in skips[("python-asyncio", "c=32768,w=1")]
    assert "threads or schedulers of one process" in skips[("go-net", "c=32768,w=2")]
    assert "may open 20,000 files" in skips[("go-net", "c=32768,w=1")]
    assert "single worker only" in skips[("python-threads", "c=32768,w=2")]
    # A machine whose hard limit holds them runs every level; None (servers elsewhere) checks nothing.
    assert not [s for s in build_plan(suite, contestants, None, server_open_files=1 << 20).skips
                if "cannot hold" in s[3]]
    assert not [s for s in build_plan(suite, contestants, None).skips if "cannot hold" in s[3]]


def test_a_search_that_would_need_two_processes_is_refused_before_anything_starts(tmp_path, cache_dir,
                                                                                  generator_binary):
    suite = write_suite(tmp_path / "search.toml", f"""name = "search"
contestants = ["fx-good"]
repeat = 1
duration_s = 1
generator_open_files = {FD_SPARE + 40}

[[measure]]
scenario = "hello"
connections = [60]
rate = [100]
find_max = {{ slo = "p99<=100ms", max_errors = "1%" }}
""")
    out = run_cli(["run", suite, "--results", tmp_path / "r", "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert out.returncode == 2, out.stderr
    assert "find_max needs one generator process" in out.stderr and "60 connections are more than" in out.stderr
    assert not (tmp_path / "r").exists()
