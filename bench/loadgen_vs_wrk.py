#!/usr/bin/env python3
"""netarena-load against wrk on the same nginx: requests/s and generator CPU per request.

Method
------
* nginx is started by this script from its own generated config in a temporary directory
  (one worker, ``daemon off``, ``access_log off``, ``keepalive_requests 1000000``) serving
  ``location = /hello { return 200 "Hello, World!"; }`` on 127.0.0.1 at a free port. nginx (master
  and worker) is pinned to the server CPU (default 0). Its response is checked before any run.
* wrk and each netarena-load configuration (``--engines``, default ``default`` (no option: --io auto),
  ``epoll``, ``uring`` and ``uring-auto``, see ENGINES) take turns, each pinned to the client CPU (default 1), one thread, the
  same number of keep-alive connections (default 100) for the same duration. Who goes first rotates
  from run to run so that drift in the machine's state does not favour any of them.
* requests/s: netarena-load's ``throughput.requests_per_s`` from its ``--json`` result; for wrk, a Lua
  ``done`` hook prints ``summary.requests`` and ``summary.duration`` and we divide (the same numbers
  wrk's own summary line is computed from).
* Generator CPU: user + system time of the generator process itself, from ``os.wait4``'s rusage,
  measured identically for both tools. It includes each tool's start-up and connection set-up, which
  is why runs should be long (the default 10 s) when quoting µs per request.
* CPU per request divides that CPU by the requests nginx itself counted during the run (its
  ``stub_status`` ``requests`` counter, read before and after each run on a separate location): the
  same independent count for both tools, whatever each tool reports about itself. Each run also
  records the tool's own count (``requests``) next to nginx's (``nginx_requests``).
* Reported: every run, then the median requests/s, CPU µs per request and latency of each tool, the
  ratios of each netarena-load configuration to wrk (of the medians, and the median of each round's own
  ratio to the wrk run beside it: ``efficiency_paired``, ``rps_ratio_paired``, steadier on a noisy machine
  because drift between rounds cancels), and for each whether the project's goal holds: 1.5× wrk's
  efficiency (CPU per request ≤ 0.667 × wrk's) and requests/s ≥ wrk's. The last line is the headline: the default configuration's efficiency
  (wrk's CPU per request ÷ netarena-load's) and requests/s ratio. Quote medians, with the machine state printed at the top (load average,
  CPU model), never a best run. See bench/README.md.
* ``--floor`` adds a third kind of client to the rotation: bench/http_floor.c, the cheapest closed loop
  this bench knows how to write (netarena-load's io_uring fast path with no parsing, no histogram, no
  checks; it needs liburing). Its CPU per request is what this I/O alone costs here: a generator doing
  the same I/O and its own work on top spends no less, but for the machine's noise. So the bench also
  prints the floor's own efficiency against wrk and each configuration's CPU per request against the
  floor's (of the medians, and paired with the floor's run of the same round). The floor counts answers
  by the length of the first one; its count must agree with nginx's.
* ``--tls``: HTTP/1.1 over TLS instead. nginx's ssl module (OpenSSL, TLS 1.2 and 1.3) with a certificate made for
  the run as netarena makes a run's (``netarena.tls.make_run_certificate``), wrk and netarena-load (``--cacert``) to ``https://``,
  keep-alive; every engine configuration (each speaks TLS), no floor. The goal there: wrk's
  efficiency at least (CPU per request no higher than wrk's), at no fewer requests/s. nginx's stub_status is on a
  cleartext port of its own in both modes.

Usage: bench/loadgen_vs_wrk.py [--runs 5] [--duration 10] [--connections 100] [--quick] [--tls]
                               [--engines default,epoll,uring,uring-auto] [--floor] [--load-args "..."] [--load-bin PATH] [--json-out FILE] [--server-cpu 0] [--client-cpu 1]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import shlex
import signal
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib
from benchlib import BenchError

HELLO = b"Hello, World!"
PATH = "/hello"
STATUS_PATH = "/nginx_status"

# The goal: 1.5x wrk's efficiency (its CPU per request / ours), at no fewer requests/s; over TLS (--tls), at least
# wrk's efficiency (most of either tool's work is then the encryption, which neither can skip).
GOAL_CPU_RATIO = 1 / 1.5
GOAL_CPU_RATIO_TLS = 1.0
GOAL_RPS_RATIO = 1.0

# The netarena-load configurations measured against wrk (--engines picks among them).
ENGINES = benchlib.LOAD_ENGINES
DEFAULT_ENGINES = "default,epoll,uring,uring-auto"

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
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port}{ssl} backlog=4096;
{tls}        location = /hello {{
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
# --tls: nginx's ssl module (OpenSSL) with a self-signed certificate made for the bench; TLS 1.3 as both tools
# negotiate by default.
NGINX_TLS = """\
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
"""

# wrk calls done() once at the end with the merged summary; summary.duration is in microseconds.
WRK_DONE_LUA = """\
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "NETARENA_WRK {\\"requests\\": %d, \\"duration_us\\": %d, \\"connect\\": %d, \\"read\\": %d, " ..
    "\\"write\\": %d, \\"status\\": %d, \\"timeout\\": %d, \\"p50_us\\": %d, \\"p99_us\\": %d}\\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def start_nginx(tmp: Path, port: int, status_port: int, cpu: int, cert: tuple[Path, Path] | None) -> subprocess.Popen:
    """nginx serving /hello on `port` (over TLS with `cert`, a (certificate, key) pair), its stub_status in
    cleartext on `status_port`."""
    nginx = benchlib.require_tool("nginx", "install it with: apt-get install nginx")
    conf = tmp / "nginx.conf"
    tls = NGINX_TLS.format(cert=cert[0], key=cert[1]) if cert else ""
    conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, status_port=status_port, ssl=" ssl" if cert else "",
                                      tls=tls))
    return benchlib.start_pinned_server([nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")],
                                        port, cpu, tmp / "nginx.stderr", "nginx")


def make_certificate(tmp: Path) -> tuple[Path, Path]:
    """The certificate and key a run's TLS servers get (netarena.tls.make_run_certificate: self-signed, not a CA,
    for localhost, 127.0.0.1 and ::1), made for this bench."""
    try:
        from netarena.tls import make_run_certificate
    except ImportError as exc:
        raise BenchError(f"--tls makes its certificate with netarena's own code, which needs its venv ({exc}): run "
                         ".venv/bin/python bench/loadgen_vs_wrk.py --tls (after make setup)") from None
    made = make_run_certificate(tmp / "tls")
    return made.cert, made.key


def check_hello(port: int, cert: Path | None) -> None:
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5,
                                       context=ssl.create_default_context(cafile=str(cert))) if cert \
        else http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", PATH)
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 200 or body != HELLO:
        raise BenchError(f"nginx answered {resp.status} {body[:60]!r} on {PATH}, expected 200 {HELLO!r}")


def run_netarena(load_bin: Path, url: str, engine: str, args, tmp: Path) -> dict:
    argv = [str(load_bin), "http", url, "-c", str(args.connections), "-t", "1",
            "-d", f"{args.duration}s", "--timeout", "5s", "--json", *ENGINES[engine],
            *(["--cacert", str(args.cert)] if args.tls else []), *shlex.split(args.load_args)]
    run, doc = benchlib.run_pinned_json(argv, args.client_cpu, args.duration + 60, tmp, "netarena-load")
    requests = doc["totals"]["requests"]
    return {
        "tool": f"netarena-load {engine}",
        "engine": engine,
        "batch_wait_max_us": doc["generator"].get("batch_wait_max_us"),
        "requests": requests,
        "errors": doc["errors"]["total"],
        "requests_per_s": doc["throughput"]["requests_per_s"],
        "p50_us": doc["latency"]["p50_us"],
        "p99_us": doc["latency"]["p99_us"],
        "generator_saturated": doc.get("generator_saturated"),
        **benchlib.cpu_figures(run, requests),
    }


def run_wrk(url: str, args, tmp: Path) -> dict:
    wrk = benchlib.require_tool("wrk", "install it with: apt-get install wrk")
    script = tmp / "done.lua"
    script.write_text(WRK_DONE_LUA)
    argv = [wrk, "-t", "1", "-c", str(args.connections), "-d", f"{args.duration}s",
            "--timeout", "5s", "-s", str(script), url]
    run = benchlib.run_pinned(argv, args.client_cpu, args.duration + 60, tmp)
    if run.exit_status != 0:
        raise BenchError(f"wrk exited {run.exit_status}: {run.stderr.strip()[:2000]}")
    line = next((l for l in run.stdout.splitlines() if l.startswith("NETARENA_WRK ")), None)
    if line is None:
        raise BenchError(f"wrk's done hook printed nothing; output was:\n{run.stdout}")
    s = json.loads(line.split(" ", 1)[1])
    # Like netarena-load's totals.requests: only successful responses count.
    good = s["requests"] - s["status"]
    errors = s["connect"] + s["read"] + s["write"] + s["status"] + s["timeout"]
    return {
        "tool": "wrk",
        "requests": good,
        "errors": errors,
        "requests_per_s": good / (s["duration_us"] / 1e6),
        "p50_us": s["p50_us"],
        "p99_us": s["p99_us"],
        "generator_saturated": None,
        **benchlib.cpu_figures(run, good),
    }


def run_floor(exe: Path, port: int, args, tmp: Path) -> dict:
    argv = [str(exe), str(port), PATH, str(args.connections), str(args.duration)]
    run, doc = benchlib.run_pinned_json(argv, args.client_cpu, args.duration + 60, tmp, "http_floor")
    return {
        "tool": "floor",
        "requests": doc["responses"],
        "errors": 0,
        "requests_per_s": doc["responses"] / doc["seconds"],
        "p50_us": None,
        "p99_us": None,
        "generator_saturated": None,
        **benchlib.cpu_figures(run, doc["responses"]),
    }


def check_floor_count(r: dict, connections: int) -> None:
    """The floor does not parse: it counts answers by the first one's length. If nginx's count differs by
    more than the requests in flight at the end (plus the floor's first request), that assumption broke."""
    if abs(r["nginx_requests"] - r["requests"]) > connections + 1:
        raise BenchError(f"the floor client counted {r['requests']} answers where nginx served {r['nginx_requests']}: "
                         "its answers did not all have the first one's length, so its figures mean nothing")


def latency_text(us) -> str:
    """The floor measures no latency."""
    return "-" if us is None else f"{us:,.0f}"


def describe(i: int, runs: int, r: dict) -> str:
    sat = " generator-saturated" if r.get("generator_saturated") else ""
    return (f"run {i}/{runs} {r['tool']:<24} {r['requests_per_s']:>11,.0f} req/s  "
            f"{r['cpu_us_per_request']:6.2f} µs CPU/req  (user {r['cpu_user_s']:.2f} s, sys {r['cpu_sys_s']:.2f} s)  "
            f"p50 {latency_text(r['p50_us'])} µs  p99 {latency_text(r['p99_us'])} µs  errors {r['errors']}  load {r['loadavg_1m']:.2f}{sat}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per tool (default 5)")
    p.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    p.add_argument("--connections", type=int, default=100, help="keep-alive connections (default 100)")
    benchlib.add_common_args(p, quick_help="smoke run: 1 run of 2 s each")
    p.add_argument("--engines", default=DEFAULT_ENGINES,
                   help=f"netarena-load configurations to measure, of {', '.join(ENGINES)} (default {DEFAULT_ENGINES})")
    p.add_argument("--floor", action="store_true",
                   help="also run bench/http_floor.c, the cheapest io_uring client (needs liburing-dev): "
                        "what this I/O alone costs per request on this machine")
    p.add_argument("--load-args", default="",
                   help='extra netarena-load options for every configuration (default: none)')
    p.add_argument("--tls", action="store_true",
                   help="HTTP/1.1 over TLS: nginx's ssl module, wrk (OpenSSL) and netarena-load (rustls) to https:// "
                        "(keep-alive: the handshakes happen at connect; every response is encrypted)")
    args = p.parse_args()
    if args.quick:
        args.runs, args.duration = 1, 2
    if args.runs < 1 or args.duration < 1 or args.connections < 1:
        p.error("--runs, --duration and --connections must be at least 1")
    args.engines = benchlib.parse_choices(p, "--engines", args.engines, ENGINES)
    if args.tls and args.floor:
        p.error("--tls takes no --floor (the floor client is cleartext): drop it")

    return benchlib.run_bench(bench, args, stopped="nginx and any running generator")


def bench(args) -> int:
    load_bin = benchlib.find_load_bin(args.load_bin)
    benchlib.require_tool("wrk", "install it with: apt-get install wrk")
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    versions = {
        "netarena-load": benchlib.tool_version([str(load_bin), "--version"]),
        "wrk": benchlib.tool_version(["wrk", "-v"]),
        "nginx": benchlib.tool_version(["nginx", "-v"]),
    }
    benchlib.print_machine(state, versions)
    print(f"nginx on CPU {args.server_cpu}, generators on CPU {args.client_cpu}; "
          f"{args.runs} run(s) x {args.duration} s, {args.connections} connections, 1 thread"
          + (f"; netarena-load extra options: {args.load_args}" if args.load_args else ""))

    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="netarena-bench-") as tmpdir:
        tmp = Path(tmpdir)
        floor_exe = None
        if args.floor:  # before nginx starts: a missing liburing stops the bench with nothing to undo
            floor_exe = benchlib.build_c(tmp, "http_floor", ("-luring",),
                                         hint="it needs liburing: apt-get install liburing-dev")
        port, status_port = benchlib.free_port(), benchlib.free_port()
        args.cert = None
        cert = make_certificate(tmp) if args.tls else None
        if cert:
            args.cert = cert[0]
        nginx = start_nginx(tmp, port, status_port, args.server_cpu, cert)
        try:
            check_hello(port, args.cert)
            url = f"{'https' if args.tls else 'http'}://127.0.0.1:{port}{PATH}"
            for engine in list(args.engines):
                why, _ = benchlib.probe_load(load_bin, url, [*ENGINES[engine], *shlex.split(args.load_args),
                                                             *(["--cacert", str(args.cert)] if args.tls else [])],
                                             args.client_cpu, tmp)
                if why:
                    print(f"skipping netarena-load {engine}: it cannot run here: {why}")
                    args.engines.remove(engine)
            if not args.engines:
                raise BenchError("no netarena-load configuration can run here (see above)")
            tools = ["wrk", *args.engines, *(["floor"] if floor_exe else [])]
            for i in range(1, args.runs + 1):
                # Rotate who goes first, so no tool always runs on a warmer (or busier) machine.
                shift = (i - 1) % len(tools)
                for tool in tools[shift:] + tools[:shift]:
                    load = os.getloadavg()[0]
                    before = benchlib.nginx_requests(status_port, STATUS_PATH)
                    if tool == "wrk":
                        r = run_wrk(url, args, tmp)
                    elif tool == "floor":
                        r = run_floor(floor_exe, port, args, tmp)
                    else:
                        r = run_netarena(load_bin, url, tool, args, tmp)
                    served = benchlib.nginx_requests(status_port, STATUS_PATH) - before - 1  # not the second status request
                    r.update(run=i, loadavg_1m=load, nginx_requests=served,
                             cpu_us_per_request=r["cpu_s"] / served * 1e6 if served > 0 else math.inf)
                    if tool == "floor":
                        check_floor_count(r, args.connections)
                    results.append(r)
                    print(describe(i, args.runs, r), flush=True)
        finally:
            # SIGQUIT is nginx's graceful stop; stop_process_group escalates to SIGKILL if needed.
            benchlib.stop_process_group(nginx, signal.SIGQUIT)

    summary = summarize(results, args.engines, args.floor, args.tls)
    print()
    for tool in tool_names(args.engines, args.floor):
        s = summary[tool]
        print(f"median {tool:<24} {s['requests_per_s']:>11,.0f} req/s  {s['cpu_us_per_request']:6.2f} µs CPU/req  "
              f"p50 {latency_text(s['p50_us'])} µs  p99 {latency_text(s['p99_us'])} µs  "
              f"(min..max req/s {s['requests_per_s_min']:,.0f}..{s['requests_per_s_max']:,.0f})")
    for engine in args.engines:
        v = summary["vs_wrk"][engine]
        print(f"ratio netarena-load {engine}/wrk: req/s {v['rps_ratio']:.3f} (goal >= {GOAL_RPS_RATIO}), "
              f"CPU/req {v['cpu_ratio']:.3f} (goal <= {goal_cpu_ratio(args.tls):.3f}), efficiency {v['efficiency']:.2f}x: goal "
              + ("MET" if v["goal_met"] else "NOT MET")
              + f"; median of the {v['runs_paired']} runs' own ratios to wrk's run of the same round: "
                f"efficiency {benchlib.ratio_text(v['efficiency_paired'], 2, 'x')}, req/s {benchlib.ratio_text(v['rps_ratio_paired'])}")
    if args.floor:
        f = summary["floor_vs_wrk"]
        print(f"floor (this I/O alone: no parsing, histogram or checks): {f['efficiency']:.2f}x wrk's efficiency "
              f"(paired {benchlib.ratio_text(f['efficiency_paired'], 2, 'x')}) at {f['rps_ratio']:.2f}x its req/s")
        for engine in args.engines:
            v = summary["vs_floor"][engine]
            print(f"netarena-load {engine}: {v['cpu_ratio']:.3f}x the floor's CPU per request "
                  f"(paired {benchlib.ratio_text(v['cpu_ratio_paired'])})")
    if "default" in args.engines:
        v = summary["vs_wrk"]["default"]
        print(f"headline: netarena-load with default flags: {v['efficiency']:.2f}x wrk's efficiency "
              f"(wrk's CPU/req / netarena-load's, both per request nginx counted) at {v['rps_ratio']:.2f}x its req/s; "
              f"paired: {benchlib.ratio_text(v['efficiency_paired'], 2, 'x')} at {benchlib.ratio_text(v['rps_ratio_paired'], 2, 'x')}")
    if args.quick:
        print("(a --quick run is a smoke test, not a measurement)")

    if args.json_out:
        args.json_out.write_text(json.dumps({
            "benchmark": "loadgen_vs_wrk",
            "config": {"runs": args.runs, "duration_s": args.duration, "connections": args.connections,
                       "threads": 1, "engines": {e: ENGINES[e] for e in args.engines}, "floor": args.floor,
                       "load_args": args.load_args, "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
                       "quick": args.quick, "tls": args.tls,
                       "target": "nginx return 200 \"Hello, World!\"" + (" over TLS" if args.tls else "")},
            "machine": state, "versions": versions, "runs": results, "summary": summary,
        }, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


def tool_names(engines: list[str], floor: bool) -> list[str]:
    return ["wrk", *(f"netarena-load {e}" for e in engines), *(["floor"] if floor else [])]


def goal_cpu_ratio(tls: bool) -> float:
    return GOAL_CPU_RATIO_TLS if tls else GOAL_CPU_RATIO


def summarize(results: list[dict], engines: list[str], floor: bool = False, tls: bool = False) -> dict:
    """Medians per tool, then each netarena-load configuration's ratios to wrk and the goal verdict, and with
    the floor its efficiency against wrk and each configuration's CPU per request against it."""
    out: dict = {"vs_wrk": {}}
    for tool in tool_names(engines, floor):
        rows = [r for r in results if r["tool"] == tool]
        rps = [r["requests_per_s"] for r in rows]
        out[tool] = {
            "requests_per_s": benchlib.median(rps),
            "requests_per_s_min": min(rps),
            "requests_per_s_max": max(rps),
            "cpu_us_per_request": benchlib.median([r["cpu_us_per_request"] for r in rows]),
            # None for the floor, which measures no latency.
            "p50_us": benchlib.median([r["p50_us"] for r in rows]) if rows[0]["p50_us"] is not None else None,
            "p99_us": benchlib.median([r["p99_us"] for r in rows]) if rows[0]["p99_us"] is not None else None,
            "errors": sum(r["errors"] for r in rows),
        }
    for engine in engines:
        tool = f"netarena-load {engine}"
        mine, wrk = out[tool], out["wrk"]
        rps_ratio = mine["requests_per_s"] / wrk["requests_per_s"]
        cpu_ratio = mine["cpu_us_per_request"] / wrk["cpu_us_per_request"]
        # Each run against the wrk run of the same round (see benchlib.median_of_ratios).
        efficiency_paired, runs_paired = benchlib.paired_ratio(results, tool, "wrk", "cpu_us_per_request", True)
        rps_paired, _ = benchlib.paired_ratio(results, tool, "wrk", "requests_per_s", False)
        out["vs_wrk"][engine] = {"rps_ratio": rps_ratio, "cpu_ratio": cpu_ratio, "efficiency": 1 / cpu_ratio,
                                 "goal_met": cpu_ratio <= goal_cpu_ratio(tls) and rps_ratio >= GOAL_RPS_RATIO,
                                 "efficiency_paired": efficiency_paired, "rps_ratio_paired": rps_paired,
                                 "runs_paired": runs_paired}
    if floor:
        f, wrk = out["floor"], out["wrk"]
        out["floor_vs_wrk"] = {
            "efficiency": wrk["cpu_us_per_request"] / f["cpu_us_per_request"],
            "rps_ratio": f["requests_per_s"] / wrk["requests_per_s"],
            "efficiency_paired": benchlib.paired_ratio(results, "floor", "wrk", "cpu_us_per_request", True)[0],
        }
        out["vs_floor"] = {engine: {
            "cpu_ratio": out[f"netarena-load {engine}"]["cpu_us_per_request"] / f["cpu_us_per_request"],
            "cpu_ratio_paired": benchlib.paired_ratio(results, f"netarena-load {engine}", "floor", "cpu_us_per_request", False)[0],
        } for engine in engines}
    return out


if __name__ == "__main__":
    sys.exit(main())
