#!/usr/bin/env python3
"""Does CPU per request hold where throughput does not? The CV of req/s against the CV of the server's CPU µs
per request, over repeats, quiet and with a CPU hog beside the server.

Method
------
* `netarena run` (this checkout, the project's virtualenv) measures each contestant's `hello` at --connections
  for --repeats repeats of --duration s, interleaved as every run is, server on --server-cpu and generator on
  --client-cpu, with noisy_retries = 0 so that no measurement is discarded: every repeat counts.
* Twice: quiet, then with a hog on the server's CPU: a busy loop pinned there that runs and sleeps in turns of
  random length (HOG_TURN_S, seeded), so some repeats share their CPU with it for most of their window and
  others hardly: their throughput differs by as much as the share the hog took.
* Per contestant and mode, from `netarena show --json`: the median req/s and its CV over the repeats, the
  median server CPU µs per request (stats.cost_per_unit, the figure every report shows) and its CV, and the
  most that other processes used of the server's CPU in a repeat (stats.contention), the hog's mark.
* Goal: where the hog makes req/s vary (CV > 10%), CPU per request stays put (CV <= 2%).

Needs the project's virtualenv (it runs netarena): .venv/bin/python bench/cost_cv.py
Usage: bench/cost_cv.py [--contestants nginx,go-net,...] [--repeats 10] [--duration 3] [--quick] [--json-out FILE]
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

DEFAULT_CONTESTANTS = "nginx,go-net,python-asyncio,python-uvloop,node-http"
# --quick: the test fixtures' servers (Python's standard library, nothing to install), to check the set-up.
QUICK_CONTESTANTS = "fx-good,fx-other"
FIXTURE_DIR = benchlib.REPO_ROOT / "tests" / "fixtures" / "contestants"
# The hog's turns: busy for a random time in this range, then asleep for another.
HOG_TURN_S = (0.2, 2.0)
HOG_SEED = 1
GOAL_RPS_CV = 0.10
GOAL_CPU_CV = 0.02

HOG = """
import os, random, sys, time
os.sched_setaffinity(0, {{{cpu}}})
rng = random.Random({seed})
print("ready", flush=True)
while True:
    end = time.monotonic() + rng.uniform({low}, {high})
    while time.monotonic() < end:
        pass
    time.sleep(rng.uniform({low}, {high}))
"""

MEASURE = """
[[measure]]
scenario = "hello"
connections = [{connections}]
"""


def start_hog(cpu: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOG.format(cpu=cpu, seed=HOG_SEED, low=HOG_TURN_S[0],
                                                              high=HOG_TURN_S[1])],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    if proc.stdout.readline().strip() != "ready":
        raise benchlib.BenchError("the CPU hog did not start")
    return proc


def netarena(args: list[str], timeout_s: float, load_bin: Path | None = None, what: str = "netarena") \
        -> subprocess.CompletedProcess:
    env = dict(os.environ, **({"NETARENA_LOAD": str(load_bin)} if load_bin else {}))
    return benchlib.netarena(args, timeout_s, env, what)


def measure(mode: str, args, contestants: list[str], workdir: Path) -> list[dict]:
    """One `netarena run` of every contestant; per contestant its medians and CVs (`show --json`)."""
    results = workdir / f"results-{mode}"
    suite = workdir / f"suite-{mode}.toml"
    suite.write_text(benchlib.suite_head("cost-cv", args, contestants) + MEASURE.format(connections=args.connections))
    extra = ["--contestants-dir", str(FIXTURE_DIR)] if args.quick else []
    budget_s = 600 + len(contestants) * args.repeats * (args.warmup + args.duration + 30)
    hog = start_hog(args.server_cpu) if mode == "hog" else None
    try:
        netarena(["run", str(suite), "--results", str(results), *extra], budget_s, args.load_bin_path,
                 f"netarena run ({mode})")
    finally:
        if hog is not None:
            benchlib.stop_process_group(hog, grace_s=1.0)
    shown = netarena(["show", "--json", "--results", str(results)], 120, what="netarena show")
    rows = []
    for g in json.loads(shown.stdout)["groups"]:
        rows.append({"mode": mode, "contestant": g["contestant"], "repeats_ok": g["repeats_ok"],
                     "rps_median": g["requests_per_s_median"], "rps_cv": g["cv"],
                     "cpu_us_median": g["server_cpu_us_median"], "cpu_us_cv": g["server_cpu_us_cv"],
                     "generator_cpu_us_median": g["generator_cpu_us_median"],
                     "server_cpus_others_pct_max": g["server_cpus_others_pct_max"],
                     "steal_pct_max": g["steal_pct_max"]})
    return rows


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def number(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def bench(args) -> int:
    contestants = [c.strip() for c in (QUICK_CONTESTANTS if args.quick else args.contestants).split(",") if c.strip()]
    if args.quick:
        args.repeats, args.duration, args.warmup = 2, 1.0, 0.3
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    args.load_bin_path = benchlib.find_load_bin(args.load_bin)
    state = benchlib.machine_state()
    versions = {"netarena": benchlib.tool_version([sys.executable, "-m", "netarena", "--version"]),
                "netarena-load": benchlib.tool_version([str(args.load_bin_path), "--version"])}
    benchlib.print_machine(state, versions)
    print(f"{len(contestants)} contestants x {args.repeats} repeats x {args.duration:g} s, hello at "
          f"{args.connections} connections; server CPU {args.server_cpu}, generator CPU {args.client_cpu}"
          + (" (--quick: checks the set-up works, measures nothing)" if args.quick else ""))
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="netarena-cost-cv-") as tmp:
        for mode in ("quiet", "hog"):
            started = time.monotonic()
            found = measure(mode, args, contestants, Path(tmp))
            rows += found
            print(f"\n{mode} ({time.monotonic() - started:.0f} s):")
            print(f"  {'contestant':24} {'req/s':>10} {'req/s CV':>9} {'cpu/req µs':>11} {'cpu/req CV':>11} "
                  f"{'others max':>10} {'steal max':>9}")
            for r in found:
                print(f"  {r['contestant']:24} {number(r['rps_median'], 0):>10} {pct(r['rps_cv']):>9} "
                      f"{number(r['cpu_us_median'], 2):>11} {pct(r['cpu_us_cv']):>11} "
                      f"{number(r['server_cpus_others_pct_max'], 0):>9}% {number(r['steal_pct_max']):>8}%")
    summary = {}
    print("\nmedians over the contestants:")
    for mode in ("quiet", "hog"):
        of_mode = [r for r in rows if r["mode"] == mode]
        rps_cv = [r["rps_cv"] for r in of_mode if r["rps_cv"] is not None]
        cpu_cv = [r["cpu_us_cv"] for r in of_mode if r["cpu_us_cv"] is not None]
        # Each contestant's two CVs come from the same repeats: their ratio, median over the contestants.
        ratio, _ = benchlib.median_of_ratios([(r["rps_cv"], r["cpu_us_cv"]) for r in of_mode
                                              if r["rps_cv"] is not None and r["cpu_us_cv"] is not None])
        summary[mode] = {"rps_cv_median": benchlib.median(rps_cv) if rps_cv else None,
                         "cpu_us_cv_median": benchlib.median(cpu_cv) if cpu_cv else None,
                         "rps_cv_over_cpu_cv_median": ratio}
        print(f"  {mode:6} req/s CV {pct(summary[mode]['rps_cv_median'])}, CPU per request CV "
              f"{pct(summary[mode]['cpu_us_cv_median'])}; req/s CV / CPU CV {benchlib.ratio_text(ratio, 1)}")
    varied = [r for r in rows if r["rps_cv"] is not None and r["rps_cv"] > GOAL_RPS_CV]
    held = [r for r in varied if r["cpu_us_cv"] is not None and r["cpu_us_cv"] <= GOAL_CPU_CV]
    goal = f"CPU per request CV <= {GOAL_CPU_CV:.0%} where req/s CV > {GOAL_RPS_CV:.0%}"
    print(f"goal ({goal}): {len(held)} of {len(varied)} such groups"
          + ("" if varied else " (none varied that much: the goal was not put to the test)"))
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": state, "quick": args.quick, "contestants": contestants,
                                             "repeats": args.repeats, "duration_s": args.duration,
                                             "connections": args.connections, "hog_turn_s": HOG_TURN_S,
                                             "rows": rows, "summary": summary, "goal": goal,
                                             "goal_groups": len(varied), "goal_held": len(held)}, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_common_args(p, "2 fixture contestants x 2 repeats x 1 s: checks the set-up works, measures nothing")
    benchlib.add_run_args(p, DEFAULT_CONTESTANTS, repeats=10, duration_s=3.0, warmup_s=1.0, connections=50)
    args = p.parse_args()
    if args.repeats < 2:
        p.error("--repeats: at least 2 (a CV needs two values)")
    return benchlib.run_bench(bench, args, "netarena runs and the CPU hog")


if __name__ == "__main__":
    sys.exit(main())
