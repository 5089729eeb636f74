#!/usr/bin/env python3
"""What profiling costs a server, and where each server's CPU goes: `netarena run --profile` several times, each
run measuring every contestant's unprofiled repeats and then one profiled repeat per level.

Method
------
* --runs runs of `netarena run --profile` (this checkout, the project's virtualenv) of one generated suite:
  hello at --connections for --repeats unprofiled repeats of --duration s (interleaved as every run is), then
  the profiled repeat of each contestant (netarena.profile: py-spy for CPython, perf's cpu-clock for native
  code), server on --server-cpu and generator (and profiler) on --client-cpu; `noisy_retries = 0`.
* Per run and contestant, a paired ratio: the profiled repeat's req/s over the median of the same run's
  unprofiled repeats (the report's "profiling overhead"); the median of the runs' ratios is the figure.
* From the last run's profiles: the split of on-CPU samples into the server's own code, its framework, the
  runtime and the kernel, and the three frames with the most self time.

Needs the project's virtualenv (it runs netarena), root for py-spy and perf, and the contestants installed or
installable: .venv/bin/python bench/profile_overhead.py
Usage: bench/profile_overhead.py [--contestants a,b] [--runs 3] [--repeats 3] [--duration 3] [--quick] [--json-out F]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import benchlib

DEFAULT_CONTESTANTS = "python-asyncio,python-tornado,python-aiohttp,go-net,rust-hyper"
# --quick: the test fixtures' server (Python's standard library, nothing to install), to check the set-up.
QUICK_CONTESTANTS = "fx-good"
FIXTURE_DIR = benchlib.REPO_ROOT / "tests" / "fixtures" / "contestants"

MEASURE = """
[[measure]]
scenario = "hello"
connections = [{connections}]
"""


def one_run(index: int, args, contestants: list[str], workdir: Path) -> dict[str, dict]:
    """One `netarena run --profile`; per contestant its unprofiled median, its profiled req/s and profile."""
    results = workdir / f"results-{index}"
    suite = workdir / "suite.toml"
    suite.write_text(benchlib.suite_head("profile-overhead", args, contestants)
                     + MEASURE.format(connections=args.connections))
    extra = ["--contestants-dir", str(FIXTURE_DIR), "--run-as-root"] if args.quick else []
    budget_s = 600 + len(contestants) * (args.repeats + 1) * (args.warmup + args.duration + 30)
    benchlib.netarena(["run", str(suite), "--profile", "--results", str(results), *extra], budget_s,
                      what=f"netarena run {index + 1}")
    with sqlite3.connect(results / "netarena.sqlite") as db:
        rows = db.execute("SELECT contestant, requests_per_s, discarded, profile_json FROM measurements "
                          "WHERE status = 'ok'").fetchall()
    found: dict[str, dict] = {}
    for contestant, rps, discarded, profile in rows:
        entry = found.setdefault(contestant, {"unprofiled": [], "profiled_rps": None, "profile": None})
        if discarded == "profiled":
            entry["profiled_rps"], entry["profile"] = rps, json.loads(profile) if profile else None
        elif discarded is None:
            entry["unprofiled"].append(rps)
    for entry in found.values():
        median = benchlib.median(entry["unprofiled"]) if entry["unprofiled"] else None
        entry["unprofiled_median"] = median
        entry["ratio"] = entry["profiled_rps"] / median if median and entry["profiled_rps"] else None
    return found


def bench(args) -> int:
    contestants = [c.strip() for c in (QUICK_CONTESTANTS if args.quick else args.contestants).split(",") if c.strip()]
    if args.quick:
        args.runs, args.repeats, args.duration, args.warmup = 1, 1, 1.0, 0.3
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    benchlib.print_machine(state, {"netarena": benchlib.tool_version([sys.executable, "-m", "netarena", "--version"])})
    print(f"{len(contestants)} contestants x {args.runs} runs x ({args.repeats} repeats + 1 profiled) x "
          f"{args.duration:g} s, hello at {args.connections} connections")
    runs: list[dict[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="netarena-profile-overhead-") as tmp:
        for index in range(args.runs):
            started = time.monotonic()
            runs.append(one_run(index, args, contestants, Path(tmp)))
            print(f"run {index + 1}: {time.monotonic() - started:.0f} s")
    print(f"\n  {'contestant':18} {'tool':7} {'profiled / unprofiled req/s, per run':>40} {'median':>8}")
    summary = {}
    for contestant in contestants:
        ratios = [r[contestant]["ratio"] for r in runs if contestant in r and r[contestant]["ratio"]]
        profile = next((r[contestant]["profile"] for r in reversed(runs) if r.get(contestant, {}).get("profile")),
                       None) or {}
        median = benchlib.median(ratios) if ratios else None
        summary[contestant] = {"ratios": ratios, "median_ratio": median, "profile": profile}
        tool = profile.get("tool") or "-"
        print(f"  {contestant:18} {tool:7} {', '.join(f'{x:.3f}' for x in ratios) or 'n/a':>40} "
              f"{benchlib.ratio_text(median, 3)}")
    print("\nthe last run's profiles: on-CPU samples by part, and the three frames with the most self time")
    for contestant, found in summary.items():
        profile = found["profile"]
        if profile.get("unsupported") or profile.get("error") or not profile.get("samples"):
            print(f"  {contestant}: {profile.get('unsupported') or profile.get('error') or 'no profile'}")
            continue
        total = sum(profile["categories"].values()) or 1
        split = ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in profile["categories"].items() if n)
        top = "; ".join(f"{t['frame']} {100 * t['share']:.0f}%" for t in profile["top_self"][:3])
        print(f"  {contestant} ({profile['samples']} samples): {split}\n      top: {top}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": state, "contestants": contestants, "runs": args.runs,
                                             "repeats": args.repeats, "duration_s": args.duration,
                                             "summary": summary}, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_common_args(p, "the fixture server, 1 run of 1 repeat + 1 profiled: checks the set-up works")
    p.add_argument("--runs", type=int, default=3, help="paired runs (the figure is their median)")
    benchlib.add_run_args(p, DEFAULT_CONTESTANTS, repeats=3, duration_s=3.0, warmup_s=1.0, connections=50)
    args = p.parse_args()
    if args.runs < 1 or args.repeats < 1:
        p.error("--runs and --repeats: at least 1")
    return benchlib.run_bench(bench, args, "netarena runs")


if __name__ == "__main__":
    sys.exit(main())
