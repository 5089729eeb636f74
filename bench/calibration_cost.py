#!/usr/bin/env python3
"""What a run's calibration costs: a small `netarena run` with it and without it (--no-calibration).

Method
------
* One run = `netarena run` of a one-level suite (one fixture contestant, --repeats repeats of --duration s,
  hello at --connections connections) into a store of its own. The runs alternate with and without the
  calibration, --runs of each, so the machine's drift falls on both sides alike.
* Each run's wall time, and the CPU time of everything it started (its children's, reaped: the CLI, the
  servers, the generator, the calibration's reference server and clients).
* Printed: each side's medians, the calibration's cost as their difference, and the machine's steal over
  the bench (from /proc/stat), beside its load average at the start.

Needs the project's virtualenv and netarena-load: .venv/bin/python bench/calibration_cost.py
Usage: bench/calibration_cost.py [--runs 3] [--repeats 2] [--duration 0.7] [--contestants fx-good]
       [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import benchlib

FIXTURES = benchlib.REPO_ROOT / "tests" / "fixtures" / "contestants"


def cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def steal_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine so far: /proc/stat's first line."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return fields[7], sum(fields)


def one_run(suite: Path, results: Path, calibration: bool, load_bin: Path) -> tuple[float, float]:
    env = dict(os.environ, NETARENA_CALIBRATION="1" if calibration else "0", NETARENA_RUN_AS_ROOT="1",
               NETARENA_LOAD=str(load_bin))
    cpu_before, started = cpu_of_children(), time.monotonic()
    benchlib.netarena(["run", str(suite), "--results", str(results), "--contestants-dir", str(FIXTURES), "--quiet"],
                      timeout_s=300, env=env, what="netarena run")
    return time.monotonic() - started, cpu_of_children() - cpu_before


def bench(args) -> int:
    runs = 1 if args.quick else args.runs
    load_bin = benchlib.find_load_bin(args.load_bin)
    state = benchlib.machine_state()
    benchlib.print_machine(state, {}, "the same run without calibration")
    steal_before = steal_ticks()
    figures: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory(prefix="netarena-calibration-cost-") as tmp:
        suite = Path(tmp) / "suite.toml"
        suite.write_text(benchlib.suite_head("calibration-cost", args, args.contestants.split(","))
                         + f"\n[[measure]]\nscenario = \"hello\"\nconnections = [{args.connections}]\n")
        for index in range(runs):
            for side in ("with", "without"):
                wall_s, cpu_s = one_run(suite, Path(tmp) / f"results-{side}-{index}", side == "with", load_bin)
                figures[side].append((wall_s, cpu_s))
                print(f"run {index + 1} {side} calibration: {wall_s:.2f} s, {cpu_s:.2f} CPU s")
    steal_after = steal_ticks()
    steal_pct = 100 * (steal_after[0] - steal_before[0]) / max(1, steal_after[1] - steal_before[1])
    medians = {side: (benchlib.median([w for w, _ in rows]), benchlib.median([c for _, c in rows]))
               for side, rows in figures.items()}
    print(f"median with calibration: {medians['with'][0]:.2f} s, {medians['with'][1]:.2f} CPU s; without: "
          f"{medians['without'][0]:.2f} s, {medians['without'][1]:.2f} CPU s ({runs} run(s) each)")
    print(f"the calibration costs {medians['with'][0] - medians['without'][0]:.2f} s and "
          f"{medians['with'][1] - medians['without'][1]:.2f} CPU s per run; steal over the bench {steal_pct:.1f}%")
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": state, "runs": figures, "medians": medians,
                                             "steal_pct": steal_pct}, indent=2))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    benchlib.add_common_args(p, "one run of each side")
    benchlib.add_run_args(p, "fx-good", repeats=2, duration_s=0.7, warmup_s=0.3, connections=4)
    p.add_argument("--runs", type=int, default=3, help="runs of each side (default 3)")
    args = p.parse_args()
    if args.runs < 1:
        benchlib.fail("--runs must be at least 1")
    return benchlib.run_bench(bench, args, "the runs")


if __name__ == "__main__":
    raise SystemExit(main())
