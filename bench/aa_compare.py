#!/usr/bin/env python3
"""The false-alarm rate of `netarena compare`: the same contestant measured as A and as B, many pairs.

Method
------
* One pair = two `netarena run`s of the same suite (one contestant, one closed-loop level, --repeat N
  repeats each) into one store, back to back; which side runs first alternates from pair to pair. Nothing
  differs between A and B but the machine's noise and drift, so every change `compare` calls significant is
  a false alarm.
* For each pair and each setting (repeats per side n, confidence), compare's own verdict
  (netarena.report.compare.metric_of: the bootstrap interval of the ratio of medians excludes 1, at least
  MIN_REPEATS_FOR_SIGNIFICANCE repeats each) is applied to the first n repeats of each side, for throughput
  (rps) and for each repeat's p99, the two metrics `compare --fail-on-regression` watches by default.
* Printed per setting: the share of pairs called significant (rps, p99, either), with the binomial 95%
  interval of that share (Clopper-Pearson, from the same order-statistic reasoning as the report's median
  interval); then the defaults' figure (5 repeats per side at 95%: the fewest compare gives a verdict on) and
  the cheapest setting whose false-alarm rate stayed under 1%.
* Medians: each pair's median throughput on each side is printed, and their median over the pairs.

Needs the project's virtualenv (it imports netarena and runs it): .venv/bin/python bench/aa_compare.py
Usage: bench/aa_compare.py [--pairs 20] [--repeat 10] [--duration 1] [--contestant fx-good
       --contestants-dir DIR] [--connections 16] [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib

sys.path.insert(0, str(benchlib.REPO_ROOT / "python"))
from netarena.report import load_report  # noqa: E402
from netarena.report.compare import MIN_REPEATS_FOR_SIGNIFICANCE, metric_of  # noqa: E402

FIXTURES = benchlib.REPO_ROOT / "tests" / "fixtures" / "contestants"
CONFIDENCES = (0.95, 0.99)
RUN_TIMEOUT_S = 3600  # one side's run: a bound for hangs, far above what --repeat x --duration needs

SUITE = """name = "aa-compare"
contestants = ["{contestant}"]
repeat = {repeat}
warmup_s = {warmup}
duration_s = {duration}

[[measure]]
scenario = "hello"
connections = [{connections}]
"""


def clopper_pearson(hits: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of a share hits/n (Clopper & Pearson), by bisection (stdlib only)."""
    from math import comb

    def at_least(k: int, p: float) -> float:  # P(X >= k), X ~ Binomial(n, p): increasing in p
        return sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))

    def solve(k: int, target: float) -> float:  # the p where P(X >= k) = target
        low, high = 0.0, 1.0
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if at_least(k, mid) < target else (low, mid)
        return (low + high) / 2

    alpha = 1 - confidence
    lower = 0.0 if hits == 0 else solve(hits, alpha / 2)          # P(X >= hits) = alpha/2
    upper = 1.0 if hits == n else solve(hits + 1, 1 - alpha / 2)  # P(X <= hits) = alpha/2
    return lower, upper


def run_side(store_dir: Path, suite: Path, contestants_dir: Path, server_cpu: int, client_cpu: int) -> int:
    """One `netarena run`; returns its run id (the store's newest)."""
    argv = [sys.executable, "-m", "netarena", "run", str(suite), "--results", str(store_dir), "--contestants-dir",
            str(contestants_dir), "--server-cpus", str(server_cpu), "--generator-cpus", str(client_cpu),
            "--quiet", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env=dict(os.environ, PYTHONPATH=str(benchlib.REPO_ROOT / "python")))
    if done.returncode != 0:
        raise benchlib.BenchError(f"netarena run exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)["run"]["id"]


def side_values(store_dir: Path, run_id: int) -> tuple[list[float], list[float]]:
    """A run's ok repeats in order: throughput and p99, as compare reads them."""
    report = load_report(store_dir, run_id)
    if len(report.groups) != 1:
        raise benchlib.BenchError(f"run {run_id} has {len(report.groups)} groups; the bench measures one")
    group = report.groups[0]
    by_id = {m.id: m for m in report.measurements}
    rps = [by_id[i].generator["throughput"]["requests_per_s"] for i in group.ok_ids]
    if len(rps) < group.repeats_ok + group.repeats_failed:
        raise benchlib.BenchError(f"run {run_id}: {group.repeats_failed} repeat(s) failed: {group.failures[:1]}")
    return rps, group.p99_us_by_repeat


def bench(args) -> int:
    pairs, repeat, duration, warmup = (2, MIN_REPEATS_FOR_SIGNIFICANCE, 0.3, 0.2) if args.quick else \
        (args.pairs, args.repeat, args.duration, args.warmup)
    repeats_grid = sorted({n for n in (MIN_REPEATS_FOR_SIGNIFICANCE, 7, 10, repeat) if
                           MIN_REPEATS_FOR_SIGNIFICANCE <= n <= repeat})
    contestants_dir = Path(args.contestants_dir).absolute()
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    benchlib.print_machine(benchlib.machine_state(), {"python": sys.version.split()[0]},
                           f"{args.contestant} measured as A and as B")
    print(f"{pairs} pairs x 2 runs x {repeat} repeats of {duration:g} s, hello at c={args.connections}")
    figures = []
    with tempfile.TemporaryDirectory(prefix="netarena-aa-") as tmp:
        tmp_path = Path(tmp)
        suite = tmp_path / "suite.toml"
        suite.write_text(SUITE.format(contestant=args.contestant, repeat=repeat, warmup=warmup, duration=duration,
                                      connections=args.connections))
        store_dir = tmp_path / "results"
        for pair in range(pairs):
            ids = {}
            for side in ("AB" if pair % 2 == 0 else "BA"):
                ids[side] = run_side(store_dir, suite, contestants_dir, args.server_cpu, args.client_cpu)
            (a_rps, a_p99), (b_rps, b_p99) = side_values(store_dir, ids["A"]), side_values(store_dir, ids["B"])
            row = {"pair": pair + 1, "a_run": ids["A"], "b_run": ids["B"], "a_rps": a_rps, "b_rps": b_rps,
                   "a_p99_us": a_p99, "b_p99_us": b_p99, "verdicts": {}}
            for n in repeats_grid:
                for confidence in CONFIDENCES:
                    rps = metric_of(a_rps[:n], b_rps[:n], confidence=confidence)
                    p99 = metric_of(a_p99[:n], b_p99[:n], confidence=confidence)
                    row["verdicts"][f"{n}@{confidence:.0%}"] = {"rps": rps.verdict, "p99": p99.verdict,
                                                                "rps_interval": [rps.ratio_low, rps.ratio_high]}
            figures.append(row)
            first = row["verdicts"][f"{repeats_grid[0]}@95%"]
            print(f"pair {pair + 1}: median req/s A {benchlib.median(a_rps):,.0f}, B {benchlib.median(b_rps):,.0f}; "
                  f"at {repeats_grid[0]} repeats, 95%: rps {first['rps']}, p99 {first['p99']}")
    settings = []
    for n in repeats_grid:
        for confidence in CONFIDENCES:
            key = f"{n}@{confidence:.0%}"
            called = {metric: sum(1 for r in figures if r["verdicts"][key][metric] in ("higher", "lower"))
                      for metric in ("rps", "p99")}
            either = sum(1 for r in figures if {r["verdicts"][key]["rps"], r["verdicts"][key]["p99"]} &
                         {"higher", "lower"})
            low, high = clopper_pearson(either, len(figures))
            settings.append({"repeats": n, "confidence": confidence, "pairs": len(figures), "rps": called["rps"],
                             "p99": called["p99"], "either": either, "share": either / len(figures),
                             "share_interval_95": [low, high]})
            print(f"{n} repeats per side, {confidence:.0%}: false alarms rps {called['rps']}/{len(figures)}, "
                  f"p99 {called['p99']}/{len(figures)}, either {either}/{len(figures)} = "
                  f"{either / len(figures):.1%} (95% interval {low:.1%}–{high:.1%})")
    print(f"median over pairs of the median req/s: A {benchlib.median([benchlib.median(r['a_rps']) for r in figures]):,.0f}, "
          f"B {benchlib.median([benchlib.median(r['b_rps']) for r in figures]):,.0f}")
    defaults = next(s for s in settings if s["repeats"] == MIN_REPEATS_FOR_SIGNIFICANCE and s["confidence"] == 0.95)
    print(f"defaults ({MIN_REPEATS_FOR_SIGNIFICANCE} repeats per side, 95%): {defaults['share']:.1%} of the pairs "
          "called significant (goal: under 5%)")
    # A share under 1% is a claim only as good as its interval's upper bound: 0 of 20 pairs bounds it at 17%.
    under = [s for s in settings if s["share"] < 0.01]
    print("under 1%: " + ("; ".join(f"{s['repeats']} repeats at {s['confidence']:.0%} (upper 95% bound "
                                    f"{s['share_interval_95'][1]:.1%})" for s in under) if under else
                          "no setting measured"))
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": benchlib.machine_state(), "contestant": args.contestant,
                                             "duration_s": duration, "repeat": repeat, "pairs": figures,
                                             "settings": settings}, indent=2))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=20, help="A/B pairs (at least 20 for a figure)")
    p.add_argument("--repeat", type=int, default=10, help="repeats per run (the largest setting tried)")
    p.add_argument("--duration", type=float, default=1.0, help="seconds per repeat")
    p.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per repeat")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--contestant", default="fx-good", help="the contestant measured twice (default: a fixture)")
    p.add_argument("--contestants-dir", default=str(FIXTURES))
    p.add_argument("--quick", action="store_true", help="2 pairs x 5 repeats x 0.3 s: checks the set-up works")
    p.add_argument("--json-out", type=Path)
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    args = p.parse_args()
    if not args.quick and (args.pairs < 20 or args.repeat < MIN_REPEATS_FOR_SIGNIFICANCE or args.duration <= 0):
        benchlib.fail(f"--pairs must be >= 20, --repeat >= {MIN_REPEATS_FOR_SIGNIFICANCE} (the fewest compare gives "
                      "a verdict on), --duration > 0")
    return benchlib.run_bench(bench, args, "the runs (each stops its own servers)")


if __name__ == "__main__":
    sys.exit(main())
