#!/usr/bin/env python3
"""Fuzz netarena-load's HTTP/1.1 response parser, or its HTTP/2 connection, for a fixed number of executions
and print what was run.

Each target (crates/loadgen/fuzz/fuzz_targets/) feeds arbitrary bytes to the code and checks the property
kept in the library: `response_parser` (`http::fuzzing::check_fuzz_input`: no panic, and the same responses,
or an error either way, whether the input arrives in one read or two) and `h2_frames`
(`http2::check_fuzz_input`: a client HTTP/2 connection given a server's bytes never panics, and one read or
two make the same events, replies and connection error). It is built with
libFuzzer's coverage instrumentation by plain cargo, the way cargo-fuzz builds it (`RUSTC_BOOTSTRAP=1` lets
the stable toolchain take the instrumentation flags; nothing is downloaded beyond the crates in the fuzz
crate's Cargo.lock), and run with `-runs=N` from an empty corpus in a temporary folder.

    python3 bench/fuzz_parser.py                 # 10 million executions of response_parser
    python3 bench/fuzz_parser.py --target h2_frames
    python3 bench/fuzz_parser.py --runs 1000000 --max-len 65536

Exit status: 0 when every execution passed, 1 when libFuzzer found a failing input (kept and named), 2 for
a problem you can fix (no cargo, a build error).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import REPO_ROOT, BenchError, require_tool  # noqa: E402

FUZZ_CRATE = REPO_ROOT / "crates" / "loadgen" / "fuzz"
TARGETS = ("response_parser", "h2_frames")
TRIPLE = "x86_64-unknown-linux-gnu"
# cargo-fuzz's instrumentation: libFuzzer's coverage counters and comparison tracing, debug assertions and
# overflow checks on (a parser bug that wraps an integer should be found, not hidden by release mode).
RUSTFLAGS = " ".join([
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "--cfg fuzzing",
    "-Cdebug-assertions",
    "-Coverflow-checks",
])


def build(target_dir: Path, target: str) -> Path:
    require_tool("cargo", "install Rust (rustup or Debian's cargo)")
    # The target triple is given so that RUSTFLAGS reach only the fuzzed code, not build scripts.
    env = dict(os.environ, RUSTFLAGS=RUSTFLAGS, RUSTC_BOOTSTRAP="1")
    result = subprocess.run(["cargo", "build", "--release", "--locked", "--target", TRIPLE, "--target-dir",
                             str(target_dir), "--bin", target], cwd=FUZZ_CRATE, env=env, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise BenchError(f"building the fuzz target failed:\n{result.stderr[-3000:]}")
    return target_dir / TRIPLE / "release" / target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=TARGETS, default=TARGETS[0],
                        help="what to fuzz (default response_parser)")
    parser.add_argument("--runs", type=int, default=10_000_000, help="executions in all (default 10,000,000)")
    parser.add_argument("--max-len", type=int, default=4096, help="longest input in bytes (default 4096)")
    parser.add_argument("--target-dir", default=str(REPO_ROOT / "target" / "fuzz"),
                        help="cargo's build folder (default target/fuzz in this checkout)")
    args = parser.parse_args()
    if args.runs < 1 or args.max_len < 1:
        raise BenchError("--runs and --max-len must be at least 1")

    binary = build(Path(args.target_dir), args.target)
    with tempfile.TemporaryDirectory(prefix="netarena-fuzz-") as work:
        corpus = Path(work) / "corpus"
        corpus.mkdir()
        started = time.monotonic()
        result = subprocess.run([str(binary), f"-runs={args.runs}", f"-max_len={args.max_len}",
                                 f"-artifact_prefix={Path.cwd()}/fuzz-crash-", "-print_final_stats=1",
                                 str(corpus)], capture_output=True, text=True, cwd=work)
        elapsed = time.monotonic() - started
        log = result.stderr
        corpus_files = len(list(corpus.iterdir()))
    done = re.search(r"Done (\d+) runs in (\d+) second", log)
    coverage = re.findall(r"cov: (\d+) ft: (\d+)", log)
    print(f"target: {args.target} (crates/loadgen/fuzz), max input {args.max_len} bytes")
    if result.returncode != 0 or not done:
        crash = re.findall(r"Test unit written to (\S+)", log)
        print(log[-4000:], file=sys.stderr)
        print(f"FAILED after {elapsed:.0f} s" + (f": failing input kept in {crash[-1]}" if crash else ""))
        return 1
    runs = int(done.group(1))
    cov, features = coverage[-1] if coverage else ("?", "?")
    print(f"executions: {runs:,} in {elapsed:.1f} s ({runs / max(elapsed, 1e-9):,.0f}/s), no failure")
    print(f"coverage: {cov} edges, {features} features; corpus grew to {corpus_files} inputs")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
