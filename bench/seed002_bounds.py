#!/usr/bin/env python3
"""What bounds seed 002's database level: the servers, the database, its pools, or the CPU the database shares
with the generator? One document read from FerretDB per request (`mongo`) at 200 connections, measured in
configurations that each change one of those, side by side in one run.

Method
------
* `netarena run` (this checkout, the project's virtualenv) of a generated suite per configuration, every
  contestant in it, --repeats interleaved repeats of --duration s after --warmup s, the server on
  --server-cpu, the generator and the database (FerretDB and its PostgreSQL) on --client-cpu, as a default run
  places them:
  - `postgresql`: FerretDB on PostgreSQL (netarena's default backend), each driver's own pool (100 connections
    per process in the official drivers);
  - `postgresql, pool 1500`: the same with the seed's pool of 1,500 connections per server process
    (`mongo_pool`, given to the drivers as the URL's maxPoolSize);
  - `sqlite`: FerretDB on its SQLite backend, the drivers' pools;
  - `postgresql, big`: the ~10 KB document instead of the small one (the seed's second table).
* Per contestant and configuration, from `netarena show --json`: the median req/s, errors, the server's CPU
  (% of its one CPU), the database's (FerretDB + PostgreSQL, % of one core), the generator's (from its CPU
  per request), the two summed on the CPU they share, and the report's verdict (`bound_by`: server,
  database or neither).
* How to read it: a level ranks the frameworks when the servers differ and the server side is the one that
  is saturated; where every server lands on the same figure with the database (or the shared CPU) full, it
  measures FerretDB, and changing the pool or the backend moves every server together.

Needs the project's virtualenv (it runs netarena) and the contestants installed as a run installs them:
    .venv/bin/python bench/seed002_bounds.py
Usage: bench/seed002_bounds.py [--contestants a,b] [--repeats 3] [--duration 6] [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

# Seed 002's servers that are quick to install here (play-scala's sbt build takes minutes: add it by name).
DEFAULT_CONTESTANTS = "flask-gunicorn-gevent,flask-uwsgi-threads,node-express,python-tornado"
# --quick: the test fixture that reads the mongo fixture with pymongo (nothing to install), to check the set-up.
QUICK_CONTESTANTS = "fx-mongo"
FIXTURE_DIR = benchlib.REPO_ROOT / "tests" / "fixtures" / "contestants"
SEED_POOL = 1500  # seed 002: "For python and node, I used 6000/4 processes = 1500 in the pool configuration"

# name -> (FerretDB backend, document, mongo_pool or None for the driver's own)
CONFIGURATIONS = {
    "postgresql": ("postgresql", "small", None),
    f"postgresql, pool {SEED_POOL}": ("postgresql", "small", SEED_POOL),
    "sqlite": ("sqlite", "small", None),
    "postgresql, big": ("postgresql", "big", None),
}

SECTIONS = """services = [{client_cpu}]

[services.mongo]
backend = "{backend}"

[[measure]]
scenario = "mongo"
connections = [{connections}]
doc = ["{doc}"]
{pool}"""


def netarena(args: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
    # The fixture contestant's python3 must import pymongo: this virtualenv first on PATH, as `make test` does.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    return benchlib.netarena(args, timeout_s, env, what)


def measure(name: str, args, contestants: list[str], workdir: Path) -> list[dict]:
    backend, doc, pool = CONFIGURATIONS[name]
    slug = name.replace(",", "").replace(" ", "-")
    results = workdir / f"results-{slug}"
    suite = workdir / f"suite-{slug}.toml"
    # The services share the generator's CPU, as a default run places them ([cpus] services follows the head).
    suite.write_text(benchlib.suite_head("seed-002-bounds", args, contestants)
                     + SECTIONS.format(client_cpu=args.client_cpu, backend=backend, connections=args.connections,
                                       doc=doc, pool=f"mongo_pool = [{pool}]\n" if pool else ""))
    # The fixture runs this virtualenv's python3 (for pymongo), which the unprivileged server user may not
    # reach: run it as the tests do.
    extra = ["--contestants-dir", str(FIXTURE_DIR), "--run-as-root"] if args.quick else []
    budget_s = 900 + len(contestants) * args.repeats * (args.warmup + args.duration + 60)
    netarena(["run", str(suite), "--results", str(results), *extra], budget_s, f"netarena run ({name})")
    shown = netarena(["show", "--json", "--results", str(results)], 120, "netarena show")
    rows = []
    for g in json.loads(shown.stdout)["groups"]:
        rps = g["requests_per_s_median"]
        generator_pct = (g["generator_cpu_us_median"] * rps / 1e4
                         if g["generator_cpu_us_median"] is not None and rps else None)
        database_pct = g["database_cpu_pct_median"]
        rows.append({"configuration": name, "backend": backend, "doc": doc, "mongo_pool": pool,
                     "contestant": g["contestant"], "repeats_ok": g["repeats_ok"], "rps_median": rps,
                     "rps_min": g["requests_per_s_min"], "rps_max": g["requests_per_s_max"],
                     "error_rate_median": g["error_rate_median"], "server_cpu_pct": g["server_cpu_pct_median"],
                     "database_cpu_pct": database_pct, "generator_cpu_pct": generator_pct,
                     "shared_cpu_pct": (database_pct + generator_pct
                                        if database_pct is not None and generator_pct is not None else None),
                     "bound_by": g["bound_by"], "latency_p50_us": g["latency_p50_us"],
                     "latency_p99_us": g["latency_p99_us"]})
    return rows


def number(value: float | None, digits: int = 0, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{suffix}"


def spread(rows: list[dict]) -> float | None:
    """The fastest contestant's median over the slowest's: how far apart the level puts the servers."""
    medians = [r["rps_median"] for r in rows if r["rps_median"]]
    return max(medians) / min(medians) if len(medians) >= 2 else None


def bench(args) -> int:
    contestants = [c.strip() for c in (QUICK_CONTESTANTS if args.quick else args.contestants).split(",") if c.strip()]
    configurations = list(CONFIGURATIONS)
    if args.quick:
        args.repeats, args.duration, args.warmup, args.connections = 1, 1.0, 0.3, 8
        configurations = configurations[:2]
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    benchlib.print_machine(state, {"netarena": benchlib.tool_version([sys.executable, "-m", "netarena", "--version"])})
    print(f"{len(contestants)} contestants x {args.repeats} repeats x {args.duration:g} s, mongo at "
          f"{args.connections} connections; server CPU {args.server_cpu}, generator and database CPU "
          f"{args.client_cpu}"
          + (" (--quick: checks the set-up works, measures nothing)" if args.quick else ""))
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="netarena-seed002-") as tmp:
        os.chmod(tmp, 0o755)  # PostgreSQL runs as its own user and must reach its data directory under it
        for name in configurations:
            started = time.monotonic()
            found = measure(name, args, contestants, Path(tmp))
            rows += found
            print(f"\n{name} ({time.monotonic() - started:.0f} s); fastest / slowest "
                  f"{number(spread(found), 2, 'x')}:")
            print(f"  {'contestant':24} {'req/s':>8} {'(min–max)':>17} {'errors':>7} {'p50 ms':>8} {'p99 ms':>8} "
                  f"{'server':>7} {'db':>6} {'gen':>6} {'db+gen':>7}  bound")
            for r in sorted(found, key=lambda r: -(r["rps_median"] or 0)):
                print(f"  {r['contestant']:24} {number(r['rps_median']):>8} "
                      f"{'(' + number(r['rps_min']) + '–' + number(r['rps_max']) + ')':>17} "
                      f"{number(100 * r['error_rate_median'] if r['error_rate_median'] is not None else None, 1, '%'):>7} "
                      f"{number(r['latency_p50_us'] and r['latency_p50_us'] / 1000, 1):>8} "
                      f"{number(r['latency_p99_us'] and r['latency_p99_us'] / 1000, 1):>8} "
                      f"{number(r['server_cpu_pct'], 0, '%'):>7} {number(r['database_cpu_pct'], 0, '%'):>6} "
                      f"{number(r['generator_cpu_pct'], 0, '%'):>6} {number(r['shared_cpu_pct'], 0, '%'):>7}  "
                      f"{r['bound_by'] or 'neither'}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": state, "quick": args.quick, "contestants": contestants,
                                             "repeats": args.repeats, "duration_s": args.duration,
                                             "warmup_s": args.warmup, "connections": args.connections,
                                             "rows": rows}, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_common_args(p, "the pymongo fixture, 1 repeat x 1 s, two configurations: checks the set-up works")
    benchlib.add_run_args(p, DEFAULT_CONTESTANTS, repeats=3, duration_s=6.0, warmup_s=2.0, connections=200)
    args = p.parse_args()
    if args.repeats < 1:
        p.error("--repeats: at least 1")
    return benchlib.run_bench(bench, args, "netarena runs")


if __name__ == "__main__":
    sys.exit(main())
