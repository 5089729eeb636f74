"""Every bundled contestant that claims TechEmpower's database scenarios serves them, real: one `netarena run`
of all of them against one real PostgreSQL 15 (started by the run), each scenario verified (rows equal to the
database's, the query counts by pg_stat_statements, the writes, the fortunes page) and then loaded briefly.
The default cache and server user, as `netarena verify` installed them (test_contestants_verify)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from conftest import db_rows, write_suite
from netarena.scenarios import registry
from test_services_real import REPO_CONTESTANTS, measurements

# Every scenario served from PostgreSQL, from the catalog: one added later is covered.
POSTGRESQL_SCENARIOS = [s.name for s in registry.all() if s.service == "postgresql"]
# Every bundled contestant that claims one of them, read from the manifests: one added later is covered.
CLAIMING = sorted(p.parent.name for p in REPO_CONTESTANTS.glob("*/contestant.toml")
                  if set(POSTGRESQL_SCENARIOS) & set(tomllib.loads(p.read_text()).get("scenarios", [])))


def claimed(name: str) -> list[str]:
    scenarios = tomllib.loads((REPO_CONTESTANTS / name / "contestant.toml").read_text())["scenarios"]
    return [s for s in POSTGRESQL_SCENARIOS if s in scenarios]


def suite_text() -> str:
    # As small as a real check allows: 4 connections, 5 rows a request (each scenario's parameters, whatever
    # they are named: queries, count), 0.3 s of load after 0.2 s of warm-up; verification is the point.
    lines = [f"name = \"techempower-contestants\"\ncontestants = {json.dumps(CLAIMING)}\nrepeat = 1\n"
             "warmup_s = 0.2\nduration_s = 0.3\n"]
    for name in POSTGRESQL_SCENARIOS:
        params = "".join(f"{param} = [5]\n" for param in registry.get(name).params)
        lines.append(f"[[measure]]\nscenario = \"{name}\"\nconnections = [4]\n{params}")
    return "\n".join(lines)


def test_every_bundled_contestant_claiming_a_postgresql_scenario_serves_it(tmp_path, generator_binary):
    assert {"db", "queries", "fortunes", "updates", "cached-queries"} <= set(POSTGRESQL_SCENARIOS)
    assert {"python-aiohttp", "python-fastapi"} <= set(CLAIMING), CLAIMING
    path = write_suite(tmp_path / "suite.toml", suite_text())
    # PostgreSQL's own user must reach its data under the results folder (pytest's tmp folders are mode 700).
    base = Path(tempfile.mkdtemp(prefix="netarena-te-contestants-"))
    base.chmod(0o755)
    try:
        results = base / "results"
        env = {k: v for k, v in os.environ.items()
               if k not in ("NETARENA_CACHE", "NETARENA_RUN_AS_ROOT", "NETARENA_BACKEND")}
        proc = subprocess.run([sys.executable, "-m", "netarena", "run", str(path), "--results", str(results),
                               "--json"], capture_output=True, text=True, timeout=1800, env=dict(env, COLUMNS="200"))
        rows = {(r["contestant"], r["scenario"]): r for r in measurements(results)}
        expected = sorted((name, s) for name in CLAIMING for s in claimed(name))
        assert sorted(rows) == expected, (proc.stderr[-3000:], db_rows(
            results, "SELECT contestant, reason FROM skipped"))
        failed = {key: (row["failure_kind"], row["error"], (row["stderr_tail"] or "")[-1500:])
                  for key, row in sorted(rows.items()) if row["status"] != "ok"}
        assert not failed, "\n".join(f"{name} {scenario}: {why}" for (name, scenario), why in failed.items())
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        shutil.rmtree(base, ignore_errors=True)
