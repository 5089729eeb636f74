#!/usr/bin/env python3
"""netarena-load's TCP echo flood against a native epoll echo server: bytes/s and bytes per CPU-second.

Method
------
* bench/echo_server.c (one thread, level-triggered epoll, 64 KiB buffer per connection) is compiled
  with ``cc -O2`` into a temporary directory and started pinned to the server CPU (default 0). It is
  as cheap per byte as a server gets, so the figures describe the generator, not the server.
* netarena-load runs pinned to the client CPU (default 1), one thread, in two variants:
  - ``bytes``: 100 connections each send 4 MiB in 32 KiB chunks, every echoed byte verified;
    bytes/s = ``echo.verified_bytes / echo.completion_time_s``;
  - ``duration``: 100 connections flood 32 KiB chunks for the run's duration;
    bytes/s = ``echo.verified_bytes / duration_s``.
* Generator CPU is user + system time of the netarena-load process from ``os.wait4``'s rusage
  (start-up and connection set-up included). The headline figure is verified bytes per generator
  CPU-second: how much echo traffic one generator core can check.
* At least 5 runs per variant by default, variants interleaved; medians are printed, with min..max
  and the machine state. Quote medians only (see bench/README.md).

Usage: bench/echo_throughput.py [--runs 5] [--connections 100] [--bytes 4194304] [--chunk 32768]
                                [--duration 10] [--quick] [--load-bin PATH] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib
from benchlib import BenchError

HERE = Path(__file__).resolve().parent


def build_server(tmp: Path) -> Path:
    cc = benchlib.require_tool("cc", "install a C compiler with: apt-get install gcc")
    exe = tmp / "echo_server"
    p = subprocess.run([cc, "-O2", "-Wall", "-o", str(exe), str(HERE / "echo_server.c")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise BenchError(f"compiling bench/echo_server.c failed:\n{p.stderr}")
    return exe


def start_server(exe: Path, cpu: int, tmp: Path) -> tuple[subprocess.Popen, int]:
    err = open(tmp / "echo_server.stderr", "wb")
    proc = subprocess.Popen(
        [str(exe), "0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
        start_new_session=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
    )
    line = proc.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "PORT":
        benchlib.stop_process_group(proc)
        raise BenchError(f"echo server did not report its port: {line!r}; "
                         f"stderr: {(tmp / 'echo_server.stderr').read_text(errors='replace')}")
    return proc, int(line[1])


def run_variant(load_bin: Path, port: int, variant: str, args, tmp: Path) -> dict:
    argv = [str(load_bin), "echo", f"127.0.0.1:{port}", "-c", str(args.connections), "-t", "1",
            "--chunk", str(args.chunk), "--timeout", "10s", "--json"]
    if variant == "bytes":
        argv += ["--bytes", str(args.bytes)]
        limit_s = 600
    else:
        argv += ["-d", f"{args.duration}s"]
        limit_s = args.duration + 60
    run = benchlib.run_pinned(argv, args.client_cpu, limit_s, tmp)
    if run.exit_status != 0:
        raise BenchError(f"netarena-load exited {run.exit_status}: {run.stderr.strip()[:2000]}")
    try:
        doc = json.loads(run.stdout)
    except json.JSONDecodeError as e:
        raise BenchError(f"netarena-load printed no JSON result ({e}): {run.stdout[:500]!r}")
    echo = doc["echo"]
    verified = echo["verified_bytes"]
    seconds = echo["completion_time_s"] if variant == "bytes" else doc["duration_s"]
    expected = args.connections * args.bytes if variant == "bytes" else None
    return {
        "variant": variant,
        "verified_bytes": verified,
        "expected_bytes": expected,
        "errors": doc["errors"]["total"],
        "seconds": seconds,
        "bytes_per_s": verified / seconds if seconds else 0.0,
        "cpu_user_s": run.cpu_user_s,
        "cpu_sys_s": run.cpu_sys_s,
        "bytes_per_cpu_s": verified / run.cpu_s if run.cpu_s else 0.0,
        "chunk_p99_us": doc["latency"]["p99_us"] if doc["latency"]["count"] else None,
        "generator_saturated": doc.get("generator_saturated"),
    }


def mib(x: float) -> str:
    return f"{x / 2**20:,.1f} MiB"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per variant (default 5)")
    p.add_argument("--connections", type=int, default=100)
    p.add_argument("--bytes", type=int, default=4 * 2**20, help="bytes per connection, bytes variant")
    p.add_argument("--chunk", type=int, default=32 * 2**10)
    p.add_argument("--duration", type=int, default=10, help="seconds, duration variant")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 run, 20 connections x 256 KiB, 2 s")
    p.add_argument("--load-bin", help="netarena-load binary (else $NETARENA_LOAD, PATH, target/release)")
    p.add_argument("--json-out", type=Path)
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    args = p.parse_args()
    if args.quick:
        args.runs, args.connections, args.bytes, args.duration = 1, 20, 256 * 2**10, 2
    if min(args.runs, args.connections, args.bytes, args.chunk, args.duration) < 1:
        p.error("--runs, --connections, --bytes, --chunk and --duration must be at least 1")
    try:
        return bench(args)
    except BenchError as e:
        benchlib.fail(str(e))
    except KeyboardInterrupt:
        print("interrupted; the echo server and any running generator were stopped", file=sys.stderr)
        return 130
    return 1


def bench(args) -> int:
    load_bin = benchlib.find_load_bin(args.load_bin)
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    print(f"machine: {state['cpu_model']}, {state['online_cpus']} CPUs, kernel {state['kernel']}, "
          f"load average {state['loadavg_1_5_15']}")
    print(f"echo server on CPU {args.server_cpu}, netarena-load on CPU {args.client_cpu}; {args.runs} run(s); "
          f"{args.connections} connections, {args.chunk} B chunks; bytes variant {args.bytes} B/connection, "
          f"duration variant {args.duration} s")
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="netarena-echo-bench-") as tmpdir:
        tmp = Path(tmpdir)
        exe = build_server(tmp)
        server, port = start_server(exe, args.server_cpu, tmp)
        try:
            for i in range(1, args.runs + 1):
                for variant in ("bytes", "duration") if i % 2 else ("duration", "bytes"):
                    load = os.getloadavg()[0]
                    r = run_variant(load_bin, port, variant, args, tmp)
                    r.update(run=i, loadavg_1m=load)
                    results.append(r)
                    short = "" if r["expected_bytes"] in (None, r["verified_bytes"]) else \
                        f" (expected {r['expected_bytes']:,})"
                    print(f"run {i}/{args.runs} {variant:<8} verified {r['verified_bytes']:,} B{short} in "
                          f"{r['seconds']:.3f} s: {mib(r['bytes_per_s'])}/s, {mib(r['bytes_per_cpu_s'])} per "
                          f"generator CPU-s (user {r['cpu_user_s']:.2f} s, sys {r['cpu_sys_s']:.2f} s), "
                          f"errors {r['errors']}, load {load:.2f}", flush=True)
        finally:
            benchlib.stop_process_group(server, signal.SIGTERM)

    print()
    summary = {}
    for variant in ("bytes", "duration"):
        rows = [r for r in results if r["variant"] == variant]
        bps = [r["bytes_per_s"] for r in rows]
        summary[variant] = {
            "bytes_per_s": benchlib.median(bps),
            "bytes_per_s_min": min(bps),
            "bytes_per_s_max": max(bps),
            "bytes_per_cpu_s": benchlib.median([r["bytes_per_cpu_s"] for r in rows]),
            "errors": sum(r["errors"] for r in rows),
        }
        s = summary[variant]
        print(f"median {variant:<8} {mib(s['bytes_per_s'])}/s (min..max {s['bytes_per_s_min'] / 2**20:,.1f}.."
              f"{mib(s['bytes_per_s_max'])}/s), {mib(s['bytes_per_cpu_s'])} verified per generator CPU-second, "
              f"errors {s['errors']}")
    if args.quick:
        print("(a --quick run is a smoke test, not a measurement)")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "benchmark": "echo_throughput",
            "config": {k: getattr(args, k) for k in ("runs", "connections", "bytes", "chunk", "duration",
                                                     "server_cpu", "client_cpu", "quick")},
            "machine": state, "runs": results, "summary": summary,
        }, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
