#!/usr/bin/env python3
"""netarena-load's TCP echo flood against a reference C client, on a native echo server: bytes/s and bytes per CPU-second.

Method
------
* bench/echo_server.c (one thread, level-triggered epoll, 64 KiB buffer per connection) and
  bench/echo_client.c (the reference generator) are compiled with ``cc -O2`` into a temporary
  directory. The server is started once, pinned to the server CPU (default 0). It is as cheap per
  byte as a server gets, so the figures describe the generators, not the server.
* Two generators take turns on the client CPU (default 1), one thread each, who goes first
  alternating from run to run:
  - netarena-load (``netarena-load echo``), which checks every echoed byte and times every chunk;
  - the reference, bench/echo_client.c: the same workload (edge-triggered epoll registered once,
    TCP_NODELAY, send of up to 64 KiB, recv into 64 KiB until a short read, the next chunk sent only
    once the previous one is fully echoed) but no verification, timing or histograms: the floor of
    what moving these bytes costs with send(). netarena-load's epoll engine sends the same bytes by
    write() and its io_uring engine with a plain (copying) send, as the reference does; what
    netarena-load adds on top is its verification and timing.
* ``--io epoll|uring`` is passed on to netarena-load (default: none, its own ``--io auto``); every run
  prints the engine that ran (``config.io_backend``). Compare the engines by running the script once
  per engine.
* Two variants, interleaved:
  - ``bytes``: 100 connections each send 32 MiB in 32 KiB chunks; bytes/s = bytes echoed (verified,
    for netarena-load) / completion time (start to the last connection's last byte);
  - ``duration``: 100 connections flood 32 KiB chunks for the run's duration; bytes/s = bytes
    echoed within the duration / the duration.
* Generator CPU is user + system time of the generator process from ``os.wait4``'s rusage (start-up
  and connection set-up included), measured identically for both. The headline figure is echoed
  bytes per generator CPU-second: how much echo traffic one generator core can move (and, for
  netarena-load, check).
* At least 5 runs per variant by default; per variant and generator the medians are printed, with
  min..max and the machine state, then the ratios netarena-load / reference of the median bytes/s
  and of the median bytes per CPU-second, and the median of the per-run ratios of bytes per
  CPU-second (each run's netarena-load figure over the reference's measured next to it: less
  sensitive to the machine drifting between runs). Quote medians only (see bench/README.md).
* ``--variant bytes`` (or ``duration``) runs only that variant: many short bytes-variant runs
  (``--runs 20``) give a steadier paired ratio in the same time than a few 10 s floods.

Usage: bench/echo_throughput.py [--runs 5] [--connections 100] [--bytes 33554432] [--chunk 32768]
                                [--duration 10] [--variant both|bytes|duration]
                                [--quick] [--load-bin PATH] [--json-out FILE]
                                [--server-cpu 0] [--client-cpu 1] [--io auto|epoll|uring]
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

LOAD = "netarena-load"
REFERENCE = "reference"
TOOLS = (LOAD, REFERENCE)
VARIANTS = ("bytes", "duration")
# Hard limit on one bytes-variant run, for either generator; it is a hang guard, not a measurement.
BYTES_LIMIT_S = 600


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


def workload_argv(variant: str, args) -> tuple[list[str], float]:
    """The options both generators share (same spelling), and the time limit for the run."""
    argv = ["-c", str(args.connections), "--chunk", str(args.chunk)]
    if variant == "bytes":
        return argv + ["--bytes", str(args.bytes)], BYTES_LIMIT_S + 60
    return argv + ["-d", f"{args.duration}"], args.duration + 60


def cpu_figures(run: benchlib.ChildRun, moved: int, seconds: float) -> dict:
    return {
        "seconds": seconds,
        "bytes_per_s": moved / seconds if seconds else 0.0,
        "wall_s": run.wall_s,
        "cpu_user_s": run.cpu_user_s,
        "cpu_sys_s": run.cpu_sys_s,
        "bytes_per_cpu_s": moved / run.cpu_s if run.cpu_s else 0.0,
    }


def run_load(load_bin: Path, port: int, variant: str, args, tmp: Path) -> dict:
    common, limit_s = workload_argv(variant, args)
    argv = [str(load_bin), "echo", f"127.0.0.1:{port}", "-t", "1", *common, "--timeout", "10s", "--json"]
    if args.io != "auto":
        argv += ["--io", args.io]
    run, doc = benchlib.run_pinned_json(argv, args.client_cpu, limit_s, tmp, "netarena-load")
    echo = doc["echo"]
    verified = echo["verified_bytes"]
    seconds = echo["completion_time_s"] if variant == "bytes" else doc["duration_s"]
    return {
        "tool": LOAD,
        "variant": variant,
        "io_backend": doc["config"]["io_backend"],
        "verified_bytes": verified,
        "expected_bytes": args.connections * args.bytes if variant == "bytes" else None,
        "errors": doc["errors"]["total"],
        **cpu_figures(run, verified, seconds),
        "chunk_p99_us": doc["latency"]["p99_us"] if doc["latency"]["count"] else None,
        "generator_saturated": doc.get("generator_saturated"),
    }


def run_reference(client: Path, port: int, variant: str, args, tmp: Path) -> dict:
    common, limit_s = workload_argv(variant, args)
    argv = [str(client), f"127.0.0.1:{port}", *common]
    if variant == "bytes":
        argv += ["--limit", str(BYTES_LIMIT_S)]
    # It stops at its first failed connection (a non-zero exit): a reference with failures is no reference.
    run, doc = benchlib.run_pinned_json(argv, args.client_cpu, limit_s, tmp,
                                        "the reference client (bench/echo_client.c)")
    echoed = doc["bytes_echoed"]
    expected = args.connections * args.bytes if variant == "bytes" else None
    if expected is not None and echoed != expected:
        raise BenchError(f"the reference client echoed {echoed:,} B, expected {expected:,} B: {run.stdout.strip()}")
    seconds = doc["completion_time_s"] if variant == "bytes" else doc["duration_s"]
    return {
        "tool": REFERENCE,
        "variant": variant,
        "echoed_bytes": echoed,
        "expected_bytes": expected,
        "errors": 0,
        **cpu_figures(run, echoed, seconds),
    }


def mib(x: float) -> str:
    return f"{x / 2**20:,.1f} MiB"


def describe(i: int, runs: int, r: dict) -> str:
    moved = r["verified_bytes"] if r["tool"] == LOAD else r["echoed_bytes"]
    what = "verified" if r["tool"] == LOAD else "echoed  "
    short = "" if r["expected_bytes"] in (None, moved) else f" (expected {r['expected_bytes']:,})"
    sat = " generator-saturated" if r.get("generator_saturated") else ""
    tool = f"{r['tool']} ({r['io_backend']})" if "io_backend" in r else r["tool"]
    return (f"run {i}/{runs} {r['variant']:<8} {tool:<21} {what} {moved:,} B{short} in {r['seconds']:.3f} s: "
            f"{mib(r['bytes_per_s'])}/s, {mib(r['bytes_per_cpu_s'])} per generator CPU-s "
            f"(user {r['cpu_user_s']:.2f} s, sys {r['cpu_sys_s']:.2f} s), errors {r['errors']}, "
            f"load {r['loadavg_1m']:.2f}{sat}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per variant and generator (default 5)")
    p.add_argument("--connections", type=int, default=100)
    p.add_argument("--bytes", type=int, default=32 * 2**20, help="bytes per connection, bytes variant (default 32 MiB)")
    p.add_argument("--chunk", type=int, default=32 * 2**10)
    p.add_argument("--duration", type=int, default=10, help="seconds, duration variant")
    p.add_argument("--variant", choices=("both", *VARIANTS), default="both",
                   help="run both variants (default) or only one")
    p.add_argument("--io", choices=("auto", "epoll", "uring"), default="auto",
                   help="netarena-load's --io (default auto: none given, its own default)")
    benchlib.add_common_args(p, quick_help="smoke run: 1 run, 20 connections x 256 KiB, 2 s")
    args = p.parse_args()
    if args.quick:
        args.runs, args.connections, args.bytes, args.duration = 1, 20, 256 * 2**10, 2
    if min(args.runs, args.connections, args.bytes, args.chunk, args.duration) < 1:
        p.error("--runs, --connections, --bytes, --chunk and --duration must be at least 1")
    return benchlib.run_bench(bench, args, stopped="the echo server and any running generator")


def bench(args) -> int:
    load_bin = benchlib.find_load_bin(args.load_bin)
    benchlib.check_cpus(args.server_cpu, args.client_cpu)
    state = benchlib.machine_state()
    versions = {"netarena-load": benchlib.tool_version([str(load_bin), "--version"])}
    benchlib.print_machine(state, versions, reference="bench/echo_client.c (cc -O2)")
    print(f"echo server on CPU {args.server_cpu}, netarena-load and the reference on CPU {args.client_cpu}; "
          f"{args.runs} run(s); {args.connections} connections, {args.chunk} B chunks; bytes variant "
          f"{args.bytes} B/connection, duration variant {args.duration} s; netarena-load --io {args.io}")
    variants = VARIANTS if args.variant == "both" else (args.variant,)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="netarena-echo-bench-") as tmpdir:
        tmp = Path(tmpdir)
        server_exe = benchlib.build_c(tmp, "echo_server")
        client_exe = benchlib.build_c(tmp, "echo_client")
        server, port = start_server(server_exe, args.server_cpu, tmp)
        try:
            for i in range(1, args.runs + 1):
                # Alternate who goes first, so neither generator always meets a warmer (or busier) machine.
                tools = TOOLS if i % 2 else TOOLS[::-1]
                for variant in variants if i % 2 else variants[::-1]:
                    for tool in tools:
                        load = os.getloadavg()[0]
                        if tool == LOAD:
                            r = run_load(load_bin, port, variant, args, tmp)
                        else:
                            r = run_reference(client_exe, port, variant, args, tmp)
                        r.update(run=i, loadavg_1m=load)
                        results.append(r)
                        print(describe(i, args.runs, r), flush=True)
        finally:
            benchlib.stop_process_group(server, signal.SIGTERM)

    summary = summarize(results, variants)
    print()
    for variant in variants:
        for tool in TOOLS:
            s = summary[variant] if tool == LOAD else summary[variant]["reference"]
            what = "verified" if tool == LOAD else "echoed"
            print(f"median {variant:<8} {tool:<13} {mib(s['bytes_per_s'])}/s (min..max "
                  f"{s['bytes_per_s_min'] / 2**20:,.1f}..{mib(s['bytes_per_s_max'])}/s), "
                  f"{mib(s['bytes_per_cpu_s'])} {what} per generator CPU-second, errors {s['errors']}")
    for variant in variants:
        v = summary[variant]["vs_reference"]
        print(f"ratio {variant:<8} netarena-load/reference: bytes/s {benchlib.ratio_text(v['bytes_per_s_ratio'])}, "
              f"bytes per generator CPU-second {benchlib.ratio_text(v['bytes_per_cpu_s_ratio'])} "
              f"(median of the {v['runs_paired']} runs' own ratios {benchlib.ratio_text(v['bytes_per_cpu_s_paired_ratio'])})")
    if args.quick:
        print("(a --quick run is a smoke test, not a measurement)")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "benchmark": "echo_throughput",
            "config": {**{k: getattr(args, k) for k in ("runs", "connections", "bytes", "chunk", "duration",
                                                        "server_cpu", "client_cpu", "quick", "io", "variant")},
                       "reference": "bench/echo_client.c, cc -O2"},
            "machine": state, "versions": versions, "runs": results, "summary": summary,
        }, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


def medians(rows: list[dict]) -> dict:
    bps = [r["bytes_per_s"] for r in rows]
    return {
        "bytes_per_s": benchlib.median(bps),
        "bytes_per_s_min": min(bps),
        "bytes_per_s_max": max(bps),
        "bytes_per_cpu_s": benchlib.median([r["bytes_per_cpu_s"] for r in rows]),
        "errors": sum(r["errors"] for r in rows),
    }


def summarize(results: list[dict], variants: tuple[str, ...]) -> dict:
    """Per variant: netarena-load's medians (the keys this file always had), the reference's medians
    under "reference", and under "vs_reference" the ratios of the medians, netarena-load / reference,
    and the median of each run's own ratio of bytes per CPU-second (the two generators' runs of one
    round, measured back to back)."""
    out = {}
    for variant in variants:
        rows = [r for r in results if r["variant"] == variant]
        mine = medians([r for r in rows if r["tool"] == LOAD])
        ref = medians([r for r in rows if r["tool"] == REFERENCE])
        # None (null in --json-out) when the reference's figure is 0, e.g. a run too short for rusage.
        ratio = lambda k: mine[k] / ref[k] if ref[k] else None
        by_run: dict[int, dict[str, float]] = {}
        for r in rows:
            by_run.setdefault(r["run"], {})[r["tool"]] = r["bytes_per_cpu_s"]
        paired, runs_paired = benchlib.median_of_ratios(
            [(p[LOAD], p[REFERENCE]) for p in by_run.values() if len(p) == 2])
        out[variant] = {**mine, "reference": ref,
                        "vs_reference": {"bytes_per_s_ratio": ratio("bytes_per_s"),
                                         "bytes_per_cpu_s_ratio": ratio("bytes_per_cpu_s"),
                                         "bytes_per_cpu_s_paired_ratio": paired,
                                         "runs_paired": runs_paired}}
    return out


if __name__ == "__main__":
    sys.exit(main())
