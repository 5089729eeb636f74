"""Calibration taken in the same run, before its first measurement: two fixed yardsticks of this machine at
this moment, so a run's figures can also be read relative to them (docs/reports.md, "Calibration").

- cpu: `netarena-load calibrate cpu`, a fixed CPU-bound loop in native code, pinned to the server's first
  CPU, in µs per unit. Native and not Python: a Python loop's time moves with the interpreter's version,
  build and allocator as much as with the machine, and the point is one figure that moves only with the
  machine.
- reference pair: `netarena-load calibrate serve` (a fixed HTTP/1.1 server built into the generator, on the
  server CPUs) loaded by netarena-load itself (on the generator CPUs) for a fixed, short time, giving
  requests/s and the CPU µs each request cost the server and the generator. The server is netarena's own
  so it exists wherever netarena-load does and is the same code on every host (nginx's version and build
  would follow the distribution, and nginx may be missing).

Each part that fails is recorded with why (``error``) instead of its figures: calibration is context, and a
run is not lost for it. Bounded: about CPU_UNITS units of a few ms each plus REFERENCE_SAMPLES × REFERENCE_DURATION_S.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from statistics import median

from .backends.base import GENERATOR_GRACE_S, parse_document
from .generator import calibrate_cpu, generator_argv
from .ports import free_port
from .process import ManagedProcess, tree_cpu_s

# `netarena run --no-calibration` as an environment variable (0 leaves the calibration out, 1 takes it): the tests
# set 0 (tests/conftest.py), where about ninety short runs would each spend about 3 s and 5 CPU seconds
# (bench/calibration_cost.py) on a yardstick that only the tests of the calibration read; those set 1.
CALIBRATION_ENV = "NETARENA_CALIBRATION"
# Units of the fixed CPU loop (netarena-load's default; the median is the figure).
CPU_UNITS = 25
# The reference pair: a closed loop of REFERENCE_CONNECTIONS keep-alive connections on one generator thread for
# REFERENCE_DURATION_S, no warm-up (the reference server is native code with nothing to warm but its
# threads, and without a warm-up the server's CPU counted from before the load to after it covers exactly the
# requests the generator counts), REFERENCE_SAMPLES times on one server start; the figures are the samples'
# medians. One 2 s sample swung by 30% between runs on a VM with a noisy neighbour: the median of five keeps
# one disturbed half-second from moving the yardstick every figure is divided by, in about the same time (a
# half-second at this server's speed is tens of thousands of requests).
REFERENCE_CONNECTIONS = 16
REFERENCE_DURATION_S = 0.5
REFERENCE_SAMPLES = 5
REFERENCE_TIMEOUT_S = 5.0
# Waiting for the reference server's port: generous for a slow or starved machine, only a hang bound.
REFERENCE_READY_S = 30.0


def cpu_loop(generator: Path, cpus: list[int]) -> dict:
    """The fixed CPU loop's figures (µs per unit, the unit's version) on the first of `cpus`."""
    figures = calibrate_cpu(generator, (cpus[:1] or [None])[0], CPU_UNITS)
    return figures if "error" in figures else {**figures, "cpu": (cpus[:1] or [None])[0]}


def reference_pair(generator: Path, server_cpus: list[int], generator_cpus: list[int], on_spawn=None,
                   on_reaped=None) -> dict:
    """netarena-load against the reference server, REFERENCE_SAMPLES times: requests/s and CPU µs per request of
    each side (each the samples' median), with every sample's figures."""
    port = free_port()
    server = ManagedProcess([str(generator), "calibrate", "serve", "--listen", f"127.0.0.1:{port}"],
                            cpus=server_cpus or None)
    if on_spawn:
        on_spawn(server, "calibration-server")
    samples = []
    try:
        not_ready = server.wait_port(port, REFERENCE_READY_S)
        if not_ready:
            return {"error": f"reference server: {not_ready}"}
        # --quiet: the one load netarena runs quietly (tests/fixtures/broken_generator.sh tells it by that).
        argv = generator_argv(generator, "http", f"http://127.0.0.1:{port}/hello",
                              ["-c", str(REFERENCE_CONNECTIONS), "-t", "1", "--expect-status", "200", "--quiet"],
                              warmup_s=0, duration_s=REFERENCE_DURATION_S, timeout_s=REFERENCE_TIMEOUT_S,
                              cpus=generator_cpus[:1])
        for _ in range(REFERENCE_SAMPLES):
            server_cpu_before_s = tree_cpu_s(server.pid)
            try:
                done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                                      timeout=REFERENCE_DURATION_S + REFERENCE_TIMEOUT_S + GENERATOR_GRACE_S)
            except subprocess.TimeoutExpired:
                return {"error": "the reference client did not finish in time"}
            server_cpu_s = tree_cpu_s(server.pid) - server_cpu_before_s
            doc, why = parse_document(done.returncode, done.stdout, done.stderr)
            if doc is None:
                return {"error": f"reference client: {why}"}
            sample = sample_figures(doc, server_cpu_s)
            if "error" in sample:
                return sample
            samples.append(sample)
    finally:
        server.stop("SIGTERM", timeout_s=5)
        if on_reaped:
            on_reaped(server)
    return reference_figures(samples)


def sample_figures(doc: dict, server_cpu_s: float) -> dict:
    """One sample's figures from the generator's document and the server's CPU seconds meanwhile."""
    responses = doc["totals"]["responses"]
    if not responses:
        return {"error": "the reference client completed no request"}
    generator = doc["generator"]
    return {
        "duration_s": doc["duration_s"],
        "responses": responses,
        "errors": doc["errors"]["total"],
        "rps": round(responses / doc["duration_s"], 1),
        "server_cpu_us_per_req": round(server_cpu_s * 1e6 / responses, 3),
        "generator_cpu_us_per_req": round((generator["cpu_user_s"] + generator["cpu_sys_s"]) * 1e6 / responses, 3),
        "generator_io": doc["config"].get("io_backend"),
    }


def reference_figures(samples: list[dict]) -> dict:
    """The reference pair's figures: each the median of the samples', counts summed, and the samples themselves
    (their spread says how steady the machine was meanwhile)."""
    def figure(name: str) -> float:
        return round(median(s[name] for s in samples), 3)

    return {
        "connections": REFERENCE_CONNECTIONS,
        "duration_s": round(sum(s["duration_s"] for s in samples), 3),
        "responses": sum(s["responses"] for s in samples),
        "errors": sum(s["errors"] for s in samples),
        "rps": round(median(s["rps"] for s in samples), 1),
        "server_cpu_us_per_req": figure("server_cpu_us_per_req"),
        "generator_cpu_us_per_req": figure("generator_cpu_us_per_req"),
        "generator_io": samples[0]["generator_io"],
        "samples": [{k: s[k] for k in ("rps", "server_cpu_us_per_req", "generator_cpu_us_per_req")} for s in samples],
    }


def calibrate(generator: Path, server_cpus: list[int], generator_cpus: list[int], on_spawn=None,
              on_reaped=None) -> dict:
    """Both yardsticks, one after the other (never together: each must have its CPUs to itself)."""
    return {
        "cpu_loop": cpu_loop(generator, server_cpus),
        "reference": reference_pair(generator, server_cpus, generator_cpus, on_spawn, on_reaped),
    }
