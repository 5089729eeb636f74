"""TechEmpower's database scenarios, real: PostgreSQL 15 from Debian with pg_stat_statements, TechEmpower's
hello_world database loaded with psycopg, fixture contestants serving /db, /queries, /fortunes and /updates
with psycopg (one right, five breaking one rule each), real runs of `netarena run` into a real SQLite store,
and the service's life on Ctrl-C."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from conftest import FIXTURE_CONTESTANTS, run_cli, start_cli, write_suite
from test_services_real import VENV_PATH, assert_no_data_left, measurements, processes_running, wait_for

# The broken fixtures, each with the scenario it breaks and the words of the reason verification must give.
BROKEN = {
    ("fx-pg-in-list", "queries"): "1 query on world for 20 rows: the rows were read in one query, each must be its own",
    ("fx-pg-cached", "queries"): "0 queries on world: the rows were served from a cache",
    ("fx-pg-cached", "db"): "0 queries on world: the row was served from a cache",
    ("fx-pg-unescaped", "fortunes"): "a <script> element in the page: the messages must be HTML-escaped",
    ("fx-pg-no-date", "db"): "no Date header",
    # Two queries for one row, in every count (a count above the expected one is taken again).
    ("fx-pg-double-read", "db"): "2 queries on world for 1 row, expected 1 (its counts, one request each: 2, 2, 2)",
    ("fx-pg-no-write", "updates"): "the updates were not written",
    ("fx-pg-no-cache", "cached-queries"): "20 queries on world or cachedworld for 20 rows: cached rows come from "
                                          "the in-process cache filled at start",
    # Right while checked before the load, cached under it: only the count over the load catches it.
    ("fx-pg-cached-under-load", "queries"): "during the load: ",
    # A cache filled again from the whole table every 20th request: more cache fills over the load than processes.
    ("fx-pg-refills", "cached-queries"): "whole-table reads of world or cachedworld over the load (pg_stat_statements), "
                                         "at most 1 expected (one cache fill per server process): the cache was "
                                         "filled again while serving",
}
SCENARIOS = ("db", "queries", "fortunes", "updates", "cached-queries")
# Right servers with a start-up read still in its transaction as the first requests come, or begun only after
# the port opened (and so after a reset made as soon as the port opens).
START_READ_LATE = tuple((name, scenario) for name in ("fx-pg-start-read-late", "fx-pg-start-read-after-listen")
                        for scenario in ("db", "queries"))
# Right, with another worker's cache fill (a whole-table read) landing while the counted request is served, and one
# during the load: a fill is no request's query.
LATE_FILLS = ("fx-pg-late-fills", "cached-queries")
# Right, with one more statement on World landing in the first count only (as a late one of an earlier request on
# a slow host): not confirmed by the count taken again.
STRAY_READ = ("fx-pg-stray-read", "db")

SUITE = """name = "techempower"
contestants = {contestants}
repeat = 1
warmup_s = 0.2
duration_s = {duration}
# Each verification request within it: /updates?queries=501 is 500 reads and 500 writes by a Python fixture.
timeout_s = 5

[[measure]]
scenario = "db"
connections = [2]

[[measure]]
scenario = "queries"
connections = [2]
queries = [5]

[[measure]]
scenario = "fortunes"
connections = [2]

[[measure]]
scenario = "updates"
connections = [2]
queries = [5]

[[measure]]
scenario = "cached-queries"
connections = [2]
count = [5]
"""


@pytest.fixture
def results_base():
    """A folder PostgreSQL's own user can enter (it refuses root, and pytest's tmp folders are mode 700)."""
    base = Path(tempfile.mkdtemp(prefix="netarena-techempower-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def suite(tmp_path, contestants, duration=0.5):
    return write_suite(tmp_path / "suite.toml", SUITE.format(contestants=json.dumps(contestants), duration=duration))


def test_the_good_fixture_passes_every_scenario_and_each_broken_one_fails_with_its_reason(
        tmp_path, cache_dir, results_base, generator_binary, no_leftover_processes):
    results = results_base / "results"
    contestants = ["fx-pg", *dict.fromkeys(c for c, _ in START_READ_LATE), LATE_FILLS[0], STRAY_READ[0],
                   *dict.fromkeys(c for c, _ in BROKEN)]
    result = run_cli(["run", suite(tmp_path, contestants), "--results", results,
                      "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir, timeout_s=300, PATH=VENV_PATH)
    rows = {(r["contestant"], r["scenario"]): r for r in measurements(results)}
    assert set(rows) == {*((("fx-pg", s) for s in SCENARIOS)), *START_READ_LATE, LATE_FILLS, STRAY_READ, *BROKEN}, \
        (sorted(rows), result.stderr[-3000:])
    # Right, with a start-up read still running as the first check resets the count (the first request waits
    # for it): the reset waits for the database's connections to go idle instead of counting that SELECT as the
    # request's. Or begun after the port opened: the count's reset follows an uncounted first answer.
    for key in START_READ_LATE:
        assert rows[key]["status"] == "ok", (key, rows[key]["error"])
    late = rows[LATE_FILLS]
    assert late["status"] == "ok", late["error"]
    late_checks = json.loads(late["verification_json"])
    counted = [c for c in late_checks["checks"] if "pg_stat_statements" in c["request"]]
    assert [c["detail"] for c in counted] == [
        "0 SELECT on world or cachedworld, 0 rows; 1 whole-table read (a cache fill at start) not counted"], counted
    assert late_checks["during_load"]["cache_fills"] == 1 and late_checks["during_load"]["selects"] == 0, \
        late_checks["during_load"]
    stray = rows[STRAY_READ]
    assert stray["status"] == "ok", stray["error"]
    counted = [c for c in json.loads(stray["verification_json"])["checks"] if "pg_stat_statements" in c["request"]]
    assert [(c["ok"], c["detail"].split(" rows")[0], c["detail"].split("; ")[1]) for c in counted] == [
        (True, "1 SELECT on world, 1", "counted again after 2, not confirmed (a late statement of an earlier request "
                                      "counts once, a server's own queries every time)")], counted

    for scenario in SCENARIOS:
        good = rows[("fx-pg", scenario)]
        assert good["status"] == "ok", (scenario, good["error"], result.stderr[-3000:])
        assert json.loads(good["generator_json"])["totals"]["requests"] > 0
        argv = json.loads(good["generator_argv_json"])
        assert argv[argv.index("--expect-status") + 1] == "200"
        # fortunes: every response the same table, held to the first; the others' rows differ per request.
        assert ("--verify-learn" in argv) == (scenario == "fortunes"), argv
        service = json.loads(good["services_json"])["postgresql"]
        loaded = service["fixture"]["techempower"]
        assert service["url"].startswith("postgres://") and loaded["world_rows"] == loaded["cachedworld_rows"] == 10_000
        checks = {c["request"]: c for c in json.loads(good["verification_json"])["checks"]}
        counted = [c for name, c in checks.items() if "pg_stat_statements" in name]
        assert len(counted) == 1 and counted[0]["ok"], checks
        if scenario in ("queries", "updates", "cached-queries"):
            param = "count" if scenario == "cached-queries" else "queries"
            assert argv[2].endswith(f"/{scenario}?{param}=5"), argv  # the level's count
            selects = 0 if scenario == "cached-queries" else 20
            # cached-queries: a read of world or of cachedworld (what TechEmpower's caches are filled from) is a query.
            tables = "world or cachedworld" if scenario == "cached-queries" else "world"
            assert counted[0]["detail"].startswith(f"{selects} SELECT on {tables}, {selects} rows"), counted
            for edge in ("0", "foo", "501", ""):
                assert checks[f"GET /{scenario}?{param}={edge}"]["ok"]
            assert checks[f"GET /{scenario}"]["ok"]
        # The count over the whole load: every request answered made its level's queries, on its table.
        during = json.loads(good["verification_json"])["during_load"]
        generator = json.loads(good["generator_json"])
        per_request = {"queries": 5, "updates": 5, "cached-queries": 0}.get(scenario, 1)
        assert during["ok"] and during["table"] == {"fortunes": "fortune", "cached-queries": "world or cachedworld"}.get(
            scenario, "world"), during
        assert during["answered"] == generator["totals"]["responses"] + generator["totals"]["warmup_responses"]
        assert during["expected_per_request"] == per_request, during
        assert per_request * during["answered"] * 0.99 <= during["selects"], during
    # The updates wrote into World: the next measurement that needed the database found it changed and reloaded it.
    after_updates = rows[("fx-pg-no-write", "updates")]
    assert json.loads(after_updates["services_json"])["postgresql"]["fixture"]["techempower"]["reloaded"] is True

    for (contestant, scenario), reason in BROKEN.items():
        broken = rows[(contestant, scenario)]
        assert broken["status"] == "failed" and broken["failure_kind"] == "verify_failed", (contestant, scenario)
        assert reason in broken["error"], (contestant, scenario, broken["error"])
    # The cheat under load passed every check before it, and its figures stay with the failed measurement.
    cheat = rows[("fx-pg-cached-under-load", "queries")]
    verification = json.loads(cheat["verification_json"])
    assert all(c["ok"] for c in verification["checks"]), verification["checks"]
    during = verification["during_load"]
    assert not during["ok"] and during["per_request"] < 5 * 0.99, during
    assert "rows were served from a cache or read several to a query under load" in cheat["error"], cheat["error"]
    assert json.loads(cheat["generator_json"])["totals"]["requests"] > 0
    assert_no_data_left(results)


def test_ctrl_c_of_the_run_leaves_no_postgres_and_no_data_directory(tmp_path, cache_dir, results_base,
                                                                       generator_binary, no_leftover_processes):
    results = results_base / "results"
    proc = start_cli(["run", suite(tmp_path, ["fx-pg"], duration=30), "--results", results,
                      "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir, PATH=VENV_PATH)
    try:
        postgres = wait_for(proc, cache_dir, "postgres -D", "netarena-load")  # the load is running against it
        assert postgres, "the load never ran next to PostgreSQL"
        assert any((results / "services").glob("run-*/postgresql-*/data")), "no data directory while it ran"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    psutil.wait_procs(postgres, timeout=10)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in postgres), err[-2000:]
    assert not processes_running(cache_dir, "postgres"), err[-2000:]
    assert_no_data_left(results)
    assert not any((results / "services").glob("run-*/postgresql-*")), list((results / "services").rglob("*"))
