#!/usr/bin/env python3
"""netarena's JSON ranking beside TechEmpower's Round 23, as ratios to a common reference (Go's net/http).

Absolute figures cannot be compared: TechEmpower ran each framework on a 56-thread Xeon server with a 40 Gb/s
network, the best of 16 to 512 connections, while a netarena run here gives each server the CPUs its suite
pins (the quick-style suites: one CPU, 50 connections). Ratios to a reference measured under the same
conditions can: "gin serves 1.28x what Go's net/http serves" means the same thing in both. The reference is
Go's net/http because both have it, it is a plain standard-library server, and it scales on cores by itself.

TechEmpower's figures (JSON serialization, Round 23, physical hardware, run
91a66052-9d86-446c-b31a-eadbd669ed08 of 2025-02, published 2025-02-24 at
https://www.techempower.com/benchmarks/#section=data-r23): each framework's best successful requests/s over
its concurrency levels. techempower.com is not reachable from this project's machines; the figures below were
read from extracts of that run's results file that quote it line by line (see docs/frameworks.md). Round 23
has no result for actix (its tests failed to start in that run) and none for the other contestants' frameworks
listed as missing in docs/frameworks.md.

Usage: .venv/bin/python bench/techempower_ratios.py --results DIR [--run ID] [--scenario json]
       (a run of suites/frameworks.toml; by default its newest run)
Prints one row per framework both have: netarena's median req/s and its ratio to go-net, TechEmpower's
figure and ratio to go, and the quotient of the two ratios; then both orders and their rank correlation.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "python"))
from netarena.report import load_report  # noqa: E402

REFERENCE = "go-net"
# netarena contestant -> (TechEmpower's test name, Round 23 JSON serialization, successful requests/s)
ROUND_23_JSON = {
    "go-net": ("go", 388_485),
    "go-gin": ("gin", 498_192),
    "rust-hyper": ("hyper", 2_885_610),
    "rust-axum": ("axum", 2_709_795),
    "node-http": ("nodejs", 1_147_305),
    "node-express": ("express", 224_163),
    "node-fastify": ("fastify", 844_960),
    "node-hono": ("hono", 740_451),
}


def ranks(values: dict[str, float]) -> dict[str, int]:
    order = sorted(values, key=lambda k: -values[k])
    return {name: i + 1 for i, name in enumerate(order)}


def spearman(a: dict[str, float], b: dict[str, float]) -> float:
    """Spearman's rank correlation of two figures over the same names (no ties expected in req/s)."""
    ra, rb, n = ranks(a), ranks(b), len(a)
    return 1 - 6 * sum((ra[k] - rb[k]) ** 2 for k in a) / (n * (n * n - 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="the results folder of the run")
    parser.add_argument("--run", type=int, help="the run's id (default: the newest)")
    parser.add_argument("--scenario", default="json")
    args = parser.parse_args()
    store = args.results / "netarena.sqlite"
    if not store.exists():
        print(f"no store at {store}: run `netarena run frameworks --results {args.results}` first", file=sys.stderr)
        return 2
    run_id = args.run or sqlite3.connect(store).execute("SELECT max(id) FROM runs").fetchone()[0]
    report = load_report(args.results, run_id)
    ours = {g.contestant: g.requests_per_s_median for g in report.groups
            if g.scenario == args.scenario and g.requests_per_s_median and g.contestant in ROUND_23_JSON}
    if REFERENCE not in ours:
        print(f"run {run_id} has no {args.scenario} figure for {REFERENCE}, the reference", file=sys.stderr)
        return 2
    missing = sorted(set(ROUND_23_JSON) - set(ours))
    tfb = {name: ROUND_23_JSON[name][1] for name in ours}
    print(f"run {run_id} ({report.run.suite_name}), scenario {args.scenario}; reference {REFERENCE} = "
          f"{ours[REFERENCE]:,.0f} req/s here, {tfb[REFERENCE]:,} in TechEmpower Round 23")
    print(f"{'contestant':<14} {'TFB test':<9} {'netarena':>10} {'x ref':>7} {'TFB R23':>11} {'x ref':>7} "
          f"{'ours/TFB':>9}")
    for name in sorted(ours, key=lambda n: -ours[n]):
        ours_ratio, tfb_ratio = ours[name] / ours[REFERENCE], tfb[name] / tfb[REFERENCE]
        print(f"{name:<14} {ROUND_23_JSON[name][0]:<9} {ours[name]:>10,.0f} {ours_ratio:>7.2f} {tfb[name]:>11,} "
              f"{tfb_ratio:>7.2f} {ours_ratio / tfb_ratio:>9.2f}")
    print("order here:      " + " > ".join(sorted(ours, key=lambda n: -ours[n])))
    print("order in TFB R23: " + " > ".join(sorted(tfb, key=lambda n: -tfb[n])))
    print(f"Spearman rank correlation over {len(ours)} frameworks: {spearman(ours, tfb):.2f}")
    if missing:
        print("not in this run: " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
