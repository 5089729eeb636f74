#!/usr/bin/env python3
"""netarena-load's default (`--coalesce-us auto`, with its CPU trial) against no coalescing window, on two
servers: one whose answers come in bunches (nginx) and one whose answers trickle in (Go's net/http).

Method
------
* Servers, each in turn, pinned to the server CPU (default 0): nginx as bench/loadgen_vs_wrk.py starts
  it (one worker, ``GET /hello``), and contestants/go-net built with the Go toolchain on PATH into a
  temporary directory, run with GOMAXPROCS=1 (as the quick suite runs it with one worker).
* On each server, netarena-load takes turns in two configurations, pinned to the client CPU (default 1),
  one thread, 50 keep-alive connections (the quick suite's), 1 s warm-up, ``--duration`` measured:
  - ``default``: no option (``--io auto``: io_uring with ``--coalesce-us auto``, whose trial keeps the
    window only while it measurably saves CPU per response, src/io/uring/window.rs);
  - ``no-window``: ``--io uring --coalesce-us 0``.
  Who goes first alternates from round to round.
* CPU per request = the generator's user + system time (its document's ``generator.cpu_user_s`` and
  ``cpu_sys_s``, measured phase) / its responses: the same count for both, since both are netarena-load.
  Also printed: requests/s, the busy share (``generator.busy_fraction``; 0.90 flags a run
  generator-bound) and ``generator.batch_wait_share`` (the share of the measured time the window was
  used).
* Reported per server: medians, and the median of each round's own ratio default / no-window of CPU
  per request. The goal: on every server the default costs at most 1.05× what no window costs (the
  trial drops a window that does not pay), and less where the window pays. Quote medians of several
  runs (bench/README.md).

Usage: bench/coalesce_trial.py [--runs 5] [--duration 4] [--servers nginx,go-net] [--quick]
                               [--load-bin PATH] [--json-out FILE] [--server-cpu 0] [--client-cpu 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

import benchlib
import loadgen_vs_wrk
from benchlib import BenchError

HERE = Path(__file__).resolve().parent
GO_NET = HERE.parent / "contestants" / "go-net"
CONNECTIONS = 50
WARMUP_S = 1
VARIANTS = {"default": [], "no-window": ["--io", "uring", "--coalesce-us", "0"]}
SERVERS = ("nginx", "go-net")
GOAL_MAX_RATIO = 1.05


def start_go_net(tmp: Path, port: int, cpu: int) -> subprocess.Popen:
    go = benchlib.require_tool("go", "install the Go toolchain (the go-net contestant's install needs it too)")
    binary = tmp / "go-net-server"
    build = subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_NET, capture_output=True, text=True)
    if build.returncode != 0:
        raise BenchError(f"go build in {GO_NET} failed: {build.stderr.strip()[-2000:]}")
    argv = [str(binary), "-mode", "http", "-host", "127.0.0.1", "-port", str(port), "-static-dir", str(tmp),
            # /hello needs no database; the server only wants a well-formed URL.
            "-mongo-url", "mongodb://127.0.0.1:9/unused"]
    return benchlib.start_pinned_server(argv, port, cpu, tmp / "go-net.stderr", "go-net",
                                        env={**os.environ, "GOMAXPROCS": "1"})


def run_variant(load_bin: Path, url: str, variant: str, args, tmp: Path) -> dict:
    argv = [str(load_bin), "http", url, "-c", str(CONNECTIONS), "--warmup", f"{WARMUP_S}s",
            "--duration", f"{args.duration}s", "--json", *VARIANTS[variant]]
    _, doc = benchlib.run_pinned_json(argv, args.client_cpu, args.duration + WARMUP_S + 60, tmp, "netarena-load")
    gen, responses = doc["generator"], doc["totals"]["responses"]
    if not responses:
        raise BenchError(f"netarena-load ({variant}) got no response from {url}")
    return {
        "variant": variant,
        "requests_per_s": doc["throughput"]["requests_per_s"],
        "cpu_us_per_request": (gen["cpu_user_s"] + gen["cpu_sys_s"]) / responses * 1e6,
        "busy_fraction": gen["busy_fraction"],
        "batch_wait_share": gen["batch_wait_share"],
        "io_backend": doc["config"]["io_backend"],
        "errors": doc["errors"]["total"],
    }


def require_uring(load_bin: Path, url: str, args, tmp: Path) -> None:
    """Both variants must run on io_uring (the window is io_uring's): a BenchError saying why not, before
    any round, instead of a default that quietly ran epoll or a no-window variant failing mid-way."""
    for variant, flags in VARIANTS.items():
        why, doc = benchlib.probe_load(load_bin, url, flags, args.client_cpu, tmp)
        if why:
            raise BenchError(f"this bench compares io_uring's coalescing window with none, and netarena-load "
                             f"{' '.join(flags) or '(default flags)'} cannot run here: {why}")
        config = doc["config"]
        if config.get("io_backend") != "uring":
            raise BenchError(f"this bench compares io_uring's coalescing window with none, but netarena-load's "
                             f"default ran {config.get('io_backend', 'no engine')} here: "
                             f"{config.get('io_reason') or 'no reason given'}")


def describe(server: str, rnd: int, r: dict) -> str:
    share = "-" if r["batch_wait_share"] is None else f"{r['batch_wait_share']:.2f}"
    return (f"{server:7s} round {rnd}  {r['variant']:10s} {r['requests_per_s']:>10,.0f} req/s  "
            f"{r['cpu_us_per_request']:6.2f} µs CPU/req  busy {r['busy_fraction']:.2f}  window share {share}  "
            f"errors {r['errors']}")


def bench(args) -> int:
    load_bin = benchlib.find_load_bin(args.load_bin)
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    benchlib.print_machine(state, {"netarena-load": benchlib.tool_version([str(load_bin), "--version"])})
    results, summary = [], {}
    for server in args.servers:
        with tempfile.TemporaryDirectory(prefix=f"netarena-coalesce-{server}-") as tmp_name:
            tmp = Path(tmp_name)
            port = benchlib.free_port()
            start = loadgen_vs_wrk.start_nginx if server == "nginx" else start_go_net
            proc = start(tmp, port, args.server_cpu)
            try:
                url = f"http://127.0.0.1:{port}/hello"
                if not summary:
                    require_uring(load_bin, url, args, tmp)
                rounds = []
                for rnd in range(1, args.runs + 1):
                    order = list(VARIANTS) if rnd % 2 else list(reversed(VARIANTS))
                    row = {}
                    for variant in order:
                        r = run_variant(load_bin, url, variant, args, tmp)
                        print(describe(server, rnd, r), flush=True)
                        results.append({"server": server, "round": rnd, **r})
                        row[variant] = r
                    rounds.append(row)
            finally:
                benchlib.stop_process_group(proc)
        summary[server] = summarize(rounds)
    print()
    met = True
    for server, s in summary.items():
        ok = s["cpu_ratio_paired"] is not None and s["cpu_ratio_paired"] <= GOAL_MAX_RATIO
        met = met and ok
        print(f"{server:7s} median CPU/req default {s['default_cpu_us']:.2f} µs, no window {s['no_window_cpu_us']:.2f} µs; "
              f"busy {s['default_busy']:.2f} vs {s['no_window_busy']:.2f}; window share {s['default_share']:.2f}; "
              f"default / no window, paired: {benchlib.ratio_text(s['cpu_ratio_paired'])} "
              f"(goal <= {GOAL_MAX_RATIO}): {'met' if ok else 'NOT MET'}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"benchmark": "coalesce_trial", "config": {
            "runs": args.runs, "duration_s": args.duration, "connections": CONNECTIONS, "servers": args.servers},
            "machine": state, "runs": results, "summary": summary, "goal_met": met}, indent=2))
        print(f"saved {args.json_out}")
    return 0


def summarize(rounds: list[dict]) -> dict:
    def med(variant: str, key: str) -> float:
        return benchlib.median([row[variant][key] for row in rounds])
    ratio, used = benchlib.median_of_ratios(
        [(row["default"]["cpu_us_per_request"], row["no-window"]["cpu_us_per_request"]) for row in rounds])
    return {
        "default_cpu_us": med("default", "cpu_us_per_request"),
        "no_window_cpu_us": med("no-window", "cpu_us_per_request"),
        "default_busy": med("default", "busy_fraction"),
        "no_window_busy": med("no-window", "busy_fraction"),
        "default_share": benchlib.median([row["default"]["batch_wait_share"] or 0.0 for row in rounds]),
        "cpu_ratio_paired": ratio,
        "rounds_paired": used,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="rounds per server (default 5)")
    p.add_argument("--duration", type=int, default=4, help="measured seconds per run, after 1 s of warm-up (default 4)")
    p.add_argument("--servers", default=",".join(SERVERS), help=f"of {', '.join(SERVERS)} (default both)")
    benchlib.add_common_args(p, quick_help="smoke run: 1 round of 2 s per server")
    args = p.parse_args()
    if args.quick:
        args.runs, args.duration = 1, 2
    if args.runs < 1 or args.duration < 1:
        p.error("--runs and --duration must be at least 1")
    args.servers = benchlib.parse_choices(p, "--servers", args.servers, SERVERS)
    return benchlib.run_bench(bench, args, stopped="the server and any running generator")


if __name__ == "__main__":
    raise SystemExit(main())
