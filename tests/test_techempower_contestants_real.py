"""Every bundled contestant that claims TechEmpower's database scenarios serves them, real: one `netarena run`
of all of them against one real PostgreSQL 15 (started by the run), each scenario verified (rows equal to the
database's, the query counts by pg_stat_statements, the writes, the fortunes page) and then loaded briefly.
The default cache and server user, as `netarena verify` installed them (test_contestants_verify)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import db_rows, write_suite
from netarena.scenarios import registry
from test_services_real import REPO_CONTESTANTS, measurements, run_bundled

# Every scenario served from PostgreSQL, from the catalog: one added later is covered.
POSTGRESQL_SCENARIOS = [s.name for s in registry.all() if s.service == "postgresql"]
# Every bundled contestant that claims one of them, read from the manifests: one added later is covered.
CLAIMING = sorted(p.parent.name for p in REPO_CONTESTANTS.glob("*/contestant.toml")
                  if set(POSTGRESQL_SCENARIOS) & set(tomllib.loads(p.read_text()).get("scenarios", [])))


def claimed(name: str) -> list[str]:
    scenarios = tomllib.loads((REPO_CONTESTANTS / name / "contestant.toml").read_text())["scenarios"]
    return [s for s in POSTGRESQL_SCENARIOS if s in scenarios]


# As test_services_real's mongo check, this many `netarena run`s at once, each with its share of the contestants
# and its own PostgreSQL: the Java contestants' starts and warm-ups overlap instead of adding up. A query count
# is exact on a busy machine too: each reset waits for the database's connections to go idle
# (techempower.reset_when_quiet), which three runs at once once needed (rust-hyper's /updates?queries=20
# counted 21 SELECTs).
RUNS_AT_ONCE = 3


def suite_text(contestants: list[str]) -> str:
    # As small as a real check allows: 4 connections, 5 rows a request (each scenario's parameters, whatever
    # they are named: queries, count), 0.3 s of warm-up even for a JIT contestant whose manifest asks for more
    # (apply_warmup_min = false), then 8 responses (`requests`: the closed loop stops after them), whatever they
    # take up to duration_s: verification is the point, not speed. (A fixed 0.5 s, then 2 s for /updates, whose
    # every request commits to disk, ended with none of rust-hyper's /updates answered in a 35% CPU quota beside
    # the other tests.) timeout_s 20, not the default 5: the checks' largest request (500 rows, each its own query:
    # /queries?queries=501) took longer than 5 s on django-asgi-uvicorn beside two other runs and the other tests
    # in that quota, so the server was never found ready; a request's time is not what this test checks.
    lines = [f"name = \"techempower-contestants\"\ncontestants = {json.dumps(contestants)}\nrepeat = 1\n"
             "warmup_s = 0.3\ntimeout_s = 20\napply_warmup_min = false\n"]
    for name in POSTGRESQL_SCENARIOS:
        params = "".join(f"{param} = [5]\n" for param in registry.get(name).params)
        lines.append(f"[[measure]]\nscenario = \"{name}\"\nconnections = [4]\nrequests = 8\nduration_s = 120\n{params}")
    return "\n".join(lines)


def test_every_bundled_contestant_claiming_a_postgresql_scenario_serves_it(tmp_path, generator_binary):
    assert {"db", "queries", "fortunes", "updates", "cached-queries"} <= set(POSTGRESQL_SCENARIOS)
    assert {"python-aiohttp", "python-fastapi"} <= set(CLAIMING), CLAIMING
    shares = [CLAIMING[i::RUNS_AT_ONCE] for i in range(RUNS_AT_ONCE)]
    # PostgreSQL's own user must reach its data under the results folder (pytest's tmp folders are mode 700).
    base = Path(tempfile.mkdtemp(prefix="netarena-te-contestants-"))
    base.chmod(0o755)

    def run_share(index: int) -> tuple[subprocess.CompletedProcess, Path]:
        path = write_suite(tmp_path / f"suite-{index}.toml", suite_text(shares[index]))
        return run_bundled(path, base / f"results-{index}"), base / f"results-{index}"

    try:
        with ThreadPoolExecutor(RUNS_AT_ONCE) as pool:
            runs = list(pool.map(run_share, range(RUNS_AT_ONCE)))
        for share, (proc, results) in zip(shares, runs):
            rows = {(r["contestant"], r["scenario"]): r for r in measurements(results)}
            expected = sorted((name, s) for name in share for s in claimed(name))
            assert sorted(rows) == expected, (proc.stderr[-3000:], db_rows(
                results, "SELECT contestant, reason FROM skipped"))
            failed = {key: (row["failure_kind"], row["error"], (row["stderr_tail"] or "")[-1500:])
                      for key, row in sorted(rows.items()) if row["status"] != "ok"}
            assert not failed, "\n".join(f"{name} {scenario}: {why}" for (name, scenario), why in failed.items())
            assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        shutil.rmtree(base, ignore_errors=True)
