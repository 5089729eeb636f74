#!/usr/bin/env python3
"""What the orchestrator's process monitor costs: CPU of its sampler thread per second and per sample.

Method
------
* The trees of a measurement: a "server" of 10 processes (a root and 9 forked workers) and a
  "generator" of 4 threads, both sleeping (a busy tree costs the sampler the same files to read).
* netarena.monitor.Monitor watches both at the backend's interval (250 ms) for --duration seconds,
  --runs times. The sampler thread's own CPU time (thread_time) over the wall time is its cost:
  ``summary.monitor_cpu_pct``, the figure the run stores with every measurement.
* The reference, measured in the same run: a thread that reads, at the same grid and the same number
  of times, /proc/PID/stat of every process and /proc/PID/task/TID/stat of every thread of both
  trees, and nothing else: the least any sampler of these trees pays. Printed as the ratio.
* The budget the monitor was designed for is 1% of a core; tests/test_monitor.py only checks that the
  sampler sleeps between samples (under 10% of a core), so a slow machine does not fail the tests.

Needs the project's virtualenv (it imports netarena): .venv/bin/python bench/monitor_cost.py
Usage: bench/monitor_cost.py [--runs 3] [--duration 10] [--interval 0.25] [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import benchlib

sys.path.insert(0, str(benchlib.REPO_ROOT / "python"))
from netarena.monitor import Monitor  # noqa: E402

SERVER = ("import os, time\nfor _ in range(9):\n    if os.fork() == 0:\n        time.sleep(600)\n        os._exit(0)\n"
          "print('ready', flush=True)\ntime.sleep(600)\n")
GENERATOR = ("import threading, time\nfor _ in range(3):\n"
             "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
             "print('ready', flush=True)\ntime.sleep(600)\n")


def start_tree(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    if proc.stdout.readline().strip() != "ready":
        raise benchlib.BenchError("a test tree did not start")
    return proc


def stat_paths(root_pid: int) -> list[str]:
    pids = [root_pid] + [int(p) for p in Path(f"/proc/{root_pid}/task/{root_pid}/children").read_text().split()]
    paths = []
    for pid in pids:
        paths.append(f"/proc/{pid}/stat")
        paths += [f"/proc/{pid}/task/{tid}/stat" for tid in os.listdir(f"/proc/{pid}/task")]
    return paths


def reference_cpu_s(paths: list[str], samples: int, interval_s: float) -> float:
    """CPU time of a thread reading every stat file once per grid point, `samples` times."""
    out = []

    def read_all():
        start = time.thread_time()
        next_s = time.monotonic()
        for _ in range(samples):
            for path in paths:
                with open(path, "rb") as f:
                    f.read()
            next_s += interval_s
            time.sleep(max(0.0, next_s - time.monotonic()))
        out.append(time.thread_time() - start)

    t = threading.Thread(target=read_all)
    t.start()
    t.join()
    return out[0]


def bench(args) -> int:
    runs, duration = (1, 2.0) if args.quick else (args.runs, args.duration)
    benchlib.print_machine(benchlib.machine_state(), {"python": sys.version.split()[0]},
                           "reading the same /proc stat files at the same grid")
    server, generator = start_tree(SERVER), start_tree(GENERATOR)
    figures = []
    try:
        paths = stat_paths(server.pid) + stat_paths(generator.pid)
        for i in range(runs):
            with Monitor(server.pid, generator.pid, interval_s=args.interval) as monitor:
                time.sleep(duration)
            summary = monitor.result["summary"]
            ref_s = reference_cpu_s(paths, summary["samples"], args.interval)
            row = {"run": i + 1, "samples": summary["samples"], "monitor_cpu_pct": summary["monitor_cpu_pct"],
                   "monitor_us_per_sample": 1e6 * summary["monitor_cpu_s"] / summary["samples"],
                   "reference_us_per_sample": 1e6 * ref_s / summary["samples"], "stat_files": len(paths)}
            row["ratio"] = row["monitor_us_per_sample"] / max(row["reference_us_per_sample"], 1e-9)
            figures.append(row)
            print(f"run {row['run']}: {row['samples']} samples, monitor {row['monitor_cpu_pct']:.3f}% of a core, "
                  f"{row['monitor_us_per_sample']:.0f} µs/sample; reference {row['reference_us_per_sample']:.0f} "
                  f"µs/sample ({len(paths)} stat files); ratio {row['ratio']:.1f}x")
    finally:
        for proc in (server, generator):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"median: monitor {benchlib.median([r['monitor_cpu_pct'] for r in figures]):.3f}% of a core at "
          f"{args.interval * 1000:.0f} ms (budget 1%), "
          f"{benchlib.median([r['ratio'] for r in figures]):.1f}x the bare reads")
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": benchlib.machine_state(), "runs": figures}, indent=2))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--quick", action="store_true", help="1 run x 2 s: checks the set-up works")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    if args.runs < 1 or args.duration <= 0 or args.interval <= 0:
        benchlib.fail("--runs must be >= 1, --duration and --interval > 0")
    return benchlib.run_bench(bench, args, "the test trees")


if __name__ == "__main__":
    sys.exit(main())
