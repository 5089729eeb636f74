#!/usr/bin/env python3
"""What netarena-load's release profile costs to build, against what it buys in CPU per request.

Method
------
* Each profile (``--profiles``, see PROFILES) is the workspace's ``[profile.release]`` with cargo's
  ``CARGO_PROFILE_RELEASE_*`` variables overriding link-time optimisation and codegen units; nothing else
  differs (opt-level 3, panic = abort, no debug info).
* Build time: ``cargo build --release --locked -p netarena-load`` into an empty target directory of its
  own, so every dependency is compiled as on a fresh machine. The crates are fetched first
  (``cargo fetch --locked``) and that time is printed on its own: with ``--fresh-cargo-home`` the fetch
  downloads every crate into an empty CARGO_HOME, as a machine that never ran cargo would; without it,
  the machine's registry cache is used and the figure is compile time alone. The build uses every CPU,
  as ``make run``'s does.
* CPU per request: each profile's binary in ``bench/loadgen_vs_wrk.py --floor --engines default``, a
  set of ``--runs`` x ``--duration`` s against the same pinned nginx, with wrk and the floor client
  (bench/http_floor.c) in the same rotation. What carries from set to set is the binary's CPU per
  request against the floor's of the same round (``vs_floor``, paired): the floor is the same program in
  every set, so a profile's ratio to it compares profiles measured minutes apart. The sets run
  ``--sets`` times, the profiles' order rotating, and the medians over the sets are reported.
* The verdict: a profile pays if it costs less than the shipped one's CPU per request minus the noise
  (each ratio's spread over the sets is printed beside it) - otherwise the faster build wins.

Usage: bench/release_profile.py [--profiles shipped,thin,off] [--sets 3] [--runs 3] [--duration 10]
                                [--fresh-cargo-home] [--build-only] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib
from benchlib import REPO_ROOT, BenchError

# name -> (what it is, the CARGO_PROFILE_RELEASE_* overrides). "shipped" overrides nothing: Cargo.toml's own.
PROFILES: dict[str, tuple[str, dict[str, str]]] = {
    "shipped": ("Cargo.toml's [profile.release] as committed", {}),
    "fat": ("fat LTO, 1 codegen unit", {"LTO": "fat", "CODEGEN_UNITS": "1"}),
    "thin": ("thin LTO, 16 codegen units", {"LTO": "thin", "CODEGEN_UNITS": "16"}),
    "thin-1": ("thin LTO, 1 codegen unit", {"LTO": "thin", "CODEGEN_UNITS": "1"}),
    "off": ("no LTO across crates, 16 codegen units (cargo's release default)", {"LTO": "false", "CODEGEN_UNITS": "16"}),
}
DEFAULT_PROFILES = "shipped,thin,off"


def cargo_env(overrides: dict[str, str], target_dir: Path, cargo_home: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_PROFILE_RELEASE_")}
    env.update({f"CARGO_PROFILE_RELEASE_{k}": v for k, v in overrides.items()}, CARGO_TARGET_DIR=str(target_dir))
    if cargo_home is not None:
        env["CARGO_HOME"] = str(cargo_home)
        # rustup's proxies find the toolchain through RUSTUP_HOME, which defaults to a path beside the
        # original CARGO_HOME: keep it where it is.
        env.setdefault("RUSTUP_HOME", str(Path(os.environ.get("RUSTUP_HOME", Path.home() / ".rustup"))))
    return env


def timed(argv: list[str], env: dict[str, str], what: str, log: Path) -> float:
    start = time.monotonic()
    with log.open("w") as out:
        p = subprocess.run(argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    took = time.monotonic() - start
    if p.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise BenchError(f"{what} failed (exit {p.returncode}):\n{tail}")
    return took


def build(name: str, tmp: Path, fresh_cargo_home: bool) -> dict:
    overrides = PROFILES[name][1]
    target_dir = tmp / f"target-{name}"
    cargo_home = tmp / f"cargo-home-{name}" if fresh_cargo_home else None
    if cargo_home is not None:
        cargo_home.mkdir()
        # The fresh home still needs the registry's address and the toolchain's proxies: the original
        # home's config is copied (never its caches).
        real_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
        for config in ("config.toml", "config"):
            if (real_home / config).is_file():
                shutil.copy(real_home / config, cargo_home / config)
    env = cargo_env(overrides, target_dir, cargo_home)
    fetch_s = timed(["cargo", "fetch", "--locked"], env, f"cargo fetch for profile {name}", tmp / f"fetch-{name}.log")
    build_s = timed(["cargo", "build", "--release", "--locked", "-p", "netarena-load"], env,
                    f"cargo build for profile {name}", tmp / f"build-{name}.log")
    binary = target_dir / "release" / "netarena-load"
    if not binary.is_file():
        raise BenchError(f"profile {name}: the build left no {binary}")
    print(f"built {name:<8} ({PROFILES[name][0]}): fetch {fetch_s:5.1f} s, compile {build_s:6.1f} s, "
          f"binary {binary.stat().st_size / 1e6:.1f} MB, load average {os.getloadavg()[0]:.2f}", flush=True)
    return {"profile": name, "overrides": overrides, "fetch_s": fetch_s, "build_s": build_s,
            "binary_bytes": binary.stat().st_size, "binary": str(binary)}


def measure(binary: str, args, tmp: Path, label: str) -> dict:
    out = tmp / f"{label}.json"
    argv = [sys.executable, str(Path(__file__).resolve().parent / "loadgen_vs_wrk.py"), "--floor",
            "--engines", "default", "--runs", str(args.runs), "--duration", str(args.duration),
            "--load-bin", binary, "--json-out", str(out),
            "--server-cpu", str(args.server_cpu), "--client-cpu", str(args.client_cpu)]
    log = tmp / f"{label}.log"
    timed(argv, dict(os.environ), f"bench/loadgen_vs_wrk.py for {label}", log)
    s = json.loads(out.read_text())["summary"]
    row = {"vs_floor": s["vs_floor"]["default"]["cpu_ratio_paired"],
           "efficiency_vs_wrk": s["vs_wrk"]["default"]["efficiency_paired"],
           "cpu_us_per_request": s["netarena-load default"]["cpu_us_per_request"],
           "requests_per_s": s["netarena-load default"]["requests_per_s"]}
    print(f"  {label:<16} {row['cpu_us_per_request']:6.2f} µs CPU/req, {row['vs_floor']:.3f}x the floor's (paired), "
          f"{row['efficiency_vs_wrk']:.2f}x wrk's efficiency, {row['requests_per_s']:,.0f} req/s", flush=True)
    return row


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}..{max(values):.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profiles", default=DEFAULT_PROFILES,
                   help=f"profiles to compare, of {', '.join(PROFILES)} (default {DEFAULT_PROFILES})")
    p.add_argument("--sets", type=int, default=3, help="sets of the wrk/floor bench per profile (default 3)")
    p.add_argument("--runs", type=int, default=3, help="runs per tool in each set (default 3)")
    p.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    p.add_argument("--fresh-cargo-home", action="store_true",
                   help="fetch every crate into an empty CARGO_HOME first (a machine that never ran cargo)")
    p.add_argument("--build-only", action="store_true", help="time the builds, measure nothing")
    p.add_argument("--json-out", type=Path, help="also save every figure to this JSON file")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    args = p.parse_args()
    if args.sets < 1 or args.runs < 1 or args.duration < 1:
        p.error("--sets, --runs and --duration must be at least 1")
    args.profiles = benchlib.parse_choices(p, "--profiles", args.profiles, PROFILES)
    return benchlib.run_bench(bench, args, stopped="the builds and any running bench")


def bench(args) -> int:
    benchlib.require_tool("cargo", "install Rust (rustup or apt-get install cargo)")
    state = benchlib.machine_state()
    benchlib.print_machine(state, {"cargo": benchlib.tool_version(["cargo", "--version"]),
                                   "rustc": benchlib.tool_version(["rustc", "--version"])})
    with tempfile.TemporaryDirectory(prefix="netarena-profile-") as tmpdir:
        tmp = Path(tmpdir)
        if not args.build_only:  # what the measuring needs, before minutes of builds: one message, nothing done
            benchlib.require_tool("wrk", "install it with: apt-get install wrk")
            benchlib.require_tool("nginx", "install it with: apt-get install nginx")
            benchlib.build_c(tmp, "http_floor", ("-luring",), hint="it needs liburing: apt-get install liburing-dev")
        builds = {name: build(name, tmp, args.fresh_cargo_home) for name in args.profiles}
        sets: dict[str, list[dict]] = {name: [] for name in args.profiles}
        if not args.build_only:
            for k in range(args.sets):
                order = args.profiles[k % len(args.profiles):] + args.profiles[:k % len(args.profiles)]
                print(f"set {k + 1}/{args.sets}: {', '.join(order)}", flush=True)
                for name in order:
                    sets[name].append(measure(builds[name]["binary"], args, tmp, f"{name}-set{k + 1}"))

    print()
    summary: dict = {}
    base = args.profiles[0]
    for name in args.profiles:
        b, rows = builds[name], sets[name]
        s = {"build_s": b["build_s"], "fetch_s": b["fetch_s"], "binary_bytes": b["binary_bytes"]}
        line = f"{name:<8} compile {b['build_s']:6.1f} s ({b['build_s'] / builds[base]['build_s']:.2f}x {base}'s)"
        if rows:
            vs_floor = [r["vs_floor"] for r in rows]
            s.update(vs_floor=benchlib.median(vs_floor), vs_floor_sets=vs_floor,
                     efficiency_vs_wrk=benchlib.median([r["efficiency_vs_wrk"] for r in rows]),
                     cpu_us_per_request=benchlib.median([r["cpu_us_per_request"] for r in rows]))
            line += (f"; CPU/req {s['vs_floor']:.3f}x the floor's (sets {spread(vs_floor)}), "
                     f"{s['efficiency_vs_wrk']:.2f}x wrk's efficiency")
        summary[name] = s
        print(line)
    if all(sets[n] for n in args.profiles) and len(args.profiles) > 1:
        for name in args.profiles[1:]:
            print(f"{name} against {base}: CPU per request {summary[name]['vs_floor'] / summary[base]['vs_floor']:.3f}x, "
                  f"compile time {summary[name]['build_s'] / summary[base]['build_s']:.2f}x")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "benchmark": "release_profile",
            "config": {"profiles": {n: PROFILES[n][1] for n in args.profiles}, "sets": args.sets, "runs": args.runs,
                       "duration_s": args.duration, "fresh_cargo_home": args.fresh_cargo_home},
            "machine": state, "builds": builds, "sets": sets, "summary": summary}, indent=2) + "\n")
        print(f"saved {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
