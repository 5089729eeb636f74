#!/usr/bin/env python3
"""netarena-load --h2 against h2load on the same nginx over HTTP/2: requests/s and generator CPU per request,
at several streams per connection.

Method
------
* nginx is started by this script from its own generated config in a temporary directory (one worker,
  ``daemon off``, ``access_log off``, ``keepalive_requests 1000000``), pinned to the server CPU (default 0),
  serving ``location = /hello { return 200 "Hello, World!"; }`` over cleartext HTTP/2 with prior knowledge
  (h2c, ``listen ... http2``) on one port, and its ``stub_status`` over HTTP/1.1 on another.
* For each ``--streams`` value (default 1, 10, 100), h2load (Debian's nghttp2-client: ``-c C -m STREAMS
  -t 1 -D SECONDS``, h2c with prior knowledge for an http:// URL) and netarena-load (``--h2 --streams
  STREAMS -c C -t 1 -d SECONDS``, verifying every body's size) in each of its ``--engines`` configurations
  (default ``default``: no option, --io auto, which runs HTTP/2's closed loop on io_uring where the kernel
  allows it; and ``epoll``) take turns, each pinned to the client CPU (default 1), with the same connections
  (default 10) and duration. Who goes first rotates from round to round. Both use the same receive window, h2load's default (2^30 - 1), netarena-load's default too.
* Generator CPU: user + system time of the generator process, from ``os.wait4``'s rusage, the same for both.
  CPU per request divides it by the requests nginx itself counted during the run (``stub_status``, read
  before and after), whatever each tool says of itself.
* Reported: every run, the medians per tool and streams, and netarena-load's CPU per request against
  h2load's (of the medians, and the median of each round's own ratio: steadier on a noisy machine). The
  goal: at least as efficient as h2load (CPU per request no higher) at every streams value. Quote medians,
  with the machine state printed at the top, never a best run.

Usage: bench/loadgen_vs_h2load.py [--runs 5] [--duration 10] [--connections 10] [--streams 1,10,100] [--quick]
                                  [--engines default,epoll] [--load-bin PATH] [--json-out FILE] [--server-cpu 0] [--client-cpu 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

import benchlib
from benchlib import BenchError

HELLO = b"Hello, World!"
PATH = "/hello"
STATUS_PATH = "/nginx_status"
DEFAULT_STREAMS = "1,10,100"
DEFAULT_ENGINES = "default,epoll"

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    http2_max_concurrent_streams 1000;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port} http2 backlog=4096;
        location = /hello {{
            default_type text/plain;
            return 200 "Hello, World!";
        }}
    }}
    server {{
        listen 127.0.0.1:{status_port};
        location = /nginx_status {{
            stub_status;
        }}
    }}
}}
"""


def start_nginx(tmp: Path, port: int, status_port: int, cpu: int):
    nginx = benchlib.require_tool("nginx", "install it with: apt-get install nginx")
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, status_port=status_port))
    return benchlib.start_pinned_server([nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")],
                                        port, cpu, tmp / "nginx.stderr", "nginx")


def run_netarena(load_bin: Path, url: str, engine: str, streams: int, args, tmp: Path) -> dict:
    argv = [str(load_bin), "http", url, "--h2", "--streams", str(streams), "-c", str(args.connections), "-t", "1",
            "-d", f"{args.duration}s", "--timeout", "5s", "--expect-body-size", str(len(HELLO)), "--json",
            *benchlib.LOAD_ENGINES[engine]]
    run, doc = benchlib.run_pinned_json(argv, args.client_cpu, args.duration + 60, tmp, "netarena-load")
    requests = doc["totals"]["requests"]
    return {"tool": f"netarena-load {engine}", "streams": streams, "io_backend": doc["config"].get("io_backend"),
            "requests": requests, "errors": doc["errors"]["total"],
            "requests_per_s": doc["throughput"]["requests_per_s"], "p50_us": doc["latency"]["p50_us"],
            "p99_us": doc["latency"]["p99_us"], **benchlib.cpu_figures(run, requests)}


def run_h2load(h2load: str, url: str, streams: int, args, tmp: Path) -> dict:
    argv = [h2load, "-c", str(args.connections), "-m", str(streams), "-t", "1", "-D", str(args.duration), url]
    run = benchlib.run_pinned(argv, args.client_cpu, args.duration + 60, tmp)
    if run.exit_status != 0:
        raise BenchError(f"h2load exited {run.exit_status}: {(run.stderr or run.stdout).strip()[-2000:]}")
    # "requests: 100 total, 100 started, 100 done, 100 succeeded, 0 failed, 0 errored, 0 timeout"
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                  run.stdout)
    if m is None:
        raise BenchError(f"h2load printed no requests line; its output was:\n{run.stdout[-2000:]}")
    succeeded, failed, errored = int(m.group(3)), int(m.group(4)), int(m.group(5))
    return {"tool": "h2load", "streams": streams, "requests": succeeded, "errors": failed + errored,
            "requests_per_s": succeeded / args.duration, "p50_us": None, "p99_us": None,
            **benchlib.cpu_figures(run, succeeded)}


def describe(i: int, runs: int, r: dict) -> str:
    return (f"run {i}/{runs} {r['tool']:<22} streams {r['streams']:>4} {r['requests_per_s']:>11,.0f} req/s  "
            f"{r['cpu_us_per_request']:6.2f} µs CPU/req  (user {r['cpu_user_s']:.2f} s, sys {r['cpu_sys_s']:.2f} s)  "
            f"nginx counted {r['nginx_requests']:,}, errors {r['errors']}  load {r['loadavg_1m']:.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per tool and streams value (default 5)")
    p.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    p.add_argument("--connections", type=int, default=10, help="connections (default 10)")
    p.add_argument("--streams", default=DEFAULT_STREAMS, help=f"streams per connection to measure at (default {DEFAULT_STREAMS})")
    p.add_argument("--engines", default=DEFAULT_ENGINES,
                   help=f"netarena-load configurations to measure, of {', '.join(benchlib.LOAD_ENGINES)} "
                        f"(default {DEFAULT_ENGINES})")
    benchlib.add_common_args(p, quick_help="smoke run: 1 run of 2 s each")
    args = p.parse_args()
    if args.quick:
        args.runs, args.duration = 1, 2
    try:
        args.streams = [int(s) for s in args.streams.split(",")]
    except ValueError:
        p.error(f"--streams {args.streams!r}: give whole numbers separated by commas, e.g. 1,10,100")
    if args.runs < 1 or args.duration < 1 or args.connections < 1 or min(args.streams) < 1:
        p.error("--runs, --duration, --connections and every --streams value must be at least 1")
    args.engines = benchlib.parse_choices(p, "--engines", args.engines, benchlib.LOAD_ENGINES)
    return benchlib.run_bench(bench, args, stopped="nginx and any running generator")


def bench(args) -> int:
    load_bin = benchlib.find_load_bin(args.load_bin)
    h2load = benchlib.require_tool("h2load", "install it with: apt-get install nghttp2-client")
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    versions = {"netarena-load": benchlib.tool_version([str(load_bin), "--version"]),
                "h2load": benchlib.tool_version([h2load, "--version"]),
                "nginx": benchlib.tool_version(["nginx", "-v"])}
    benchlib.print_machine(state, versions)
    print(f"nginx (h2c) on CPU {args.server_cpu}, generators on CPU {args.client_cpu}; {args.runs} run(s) x "
          f"{args.duration} s per tool and streams value, {args.connections} connections, 1 thread")
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="netarena-bench-h2-") as tmpdir:
        tmp = Path(tmpdir)
        port, status_port = benchlib.free_port(), benchlib.free_port()
        nginx = start_nginx(tmp, port, status_port, args.server_cpu)
        try:
            url = f"http://127.0.0.1:{port}{PATH}"
            tools = ["h2load", *(f"netarena-load {engine}" for engine in args.engines)]
            for streams in args.streams:
                for i in range(1, args.runs + 1):
                    shift = (i - 1) % len(tools)
                    for tool in tools[shift:] + tools[:shift]:
                        load = os.getloadavg()[0]
                        before = benchlib.nginx_requests(status_port, STATUS_PATH)
                        r = run_h2load(h2load, url, streams, args, tmp) if tool == "h2load" \
                            else run_netarena(load_bin, url, tool.split()[1], streams, args, tmp)
                        served = benchlib.nginx_requests(status_port, STATUS_PATH) - before - 1
                        r.update(run=i, loadavg_1m=load, nginx_requests=served,
                                 cpu_us_per_request=r["cpu_s"] / served * 1e6 if served > 0 else math.inf)
                        results.append(r)
                        print(describe(i, args.runs, r), flush=True)
        finally:
            benchlib.stop_process_group(nginx, signal.SIGQUIT)

    summary = summarize(results, args.streams, tools[1:])
    print()
    for streams in args.streams:
        s = summary[str(streams)]
        for tool in tools:
            t = s[tool]
            print(f"median streams {streams:>4} {tool:<22} {t['requests_per_s']:>11,.0f} req/s  "
                  f"{t['cpu_us_per_request']:6.2f} µs CPU/req" + (f"  (ran on {t['io_backend']})"
                                                                   if t.get("io_backend") else ""))
        for tool in tools[1:]:
            r = s["ratios"][tool]
            print(f"ratio streams {streams}: {tool}'s CPU/req / h2load's {r['cpu_ratio']:.3f} "
                  f"(paired {benchlib.ratio_text(r['cpu_ratio_paired'])}), req/s {r['rps_ratio']:.3f}: goal (<= 1) "
                  + ("MET" if r["goal_met"] else "NOT MET"))
    if args.quick:
        print("(a --quick run is a smoke test, not a measurement)")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "benchmark": "loadgen_vs_h2load",
            "config": {"runs": args.runs, "duration_s": args.duration, "connections": args.connections,
                       "streams": args.streams, "engines": args.engines, "threads": 1, "server_cpu": args.server_cpu,
                       "client_cpu": args.client_cpu, "quick": args.quick,
                       "target": "nginx h2c return 200 \"Hello, World!\""},
            "machine": state, "versions": versions, "runs": results, "summary": summary,
        }, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


def summarize(results: list[dict], streams_values: list[int], load_tools: list[str]) -> dict:
    """Per streams value: each tool's medians, and each netarena-load configuration's ratios to h2load (of the
    medians, and paired round by round)."""
    out: dict = {}
    for streams in streams_values:
        rows = [r for r in results if r["streams"] == streams]
        tools = {}
        for tool in ("h2load", *load_tools):
            mine = [r for r in rows if r["tool"] == tool]
            engines = sorted({r["io_backend"] for r in mine if r.get("io_backend")})
            tools[tool] = {"requests_per_s": benchlib.median([r["requests_per_s"] for r in mine]),
                           "cpu_us_per_request": benchlib.median([r["cpu_us_per_request"] for r in mine]),
                           "errors": sum(r["errors"] for r in mine), "io_backend": ", ".join(engines) or None}
        ratios = {}
        for tool in load_tools:
            cpu_ratio = tools[tool]["cpu_us_per_request"] / tools["h2load"]["cpu_us_per_request"]
            paired, n = benchlib.paired_ratio(rows, tool, "h2load", "cpu_us_per_request", False)
            ratios[tool] = {"cpu_ratio": cpu_ratio, "cpu_ratio_paired": paired, "runs_paired": n,
                            "rps_ratio": tools[tool]["requests_per_s"] / tools["h2load"]["requests_per_s"],
                            "goal_met": cpu_ratio <= 1.0}
        out[str(streams)] = {**tools, "ratios": ratios}
    return out


if __name__ == "__main__":
    sys.exit(main())
