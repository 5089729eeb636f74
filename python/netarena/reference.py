"""Figures relative to the run's reference pair (netarena.calibration): one definition for the report, the
exports and compare.

A contestant's requests/s divided by the reference's, and its server CPU µs per request divided by the
reference server's, both measured in the same run on the same CPUs. What they remove is the part of a
machine's speed that moves the reference as much as the contestant (clock, steal, mitigations, the
kernel's cost per system call); what they keep is how the contestant does against a fixed yardstick. How
well they carry from one host to another: docs/reports.md, "Calibration".
"""

from __future__ import annotations

from .stats import cost_per_unit


def reference_of(environment: dict | None) -> dict | None:
    """The run's reference-pair figures (rps, server_cpu_us_per_req, ...), or None when the run has none
    (no calibration: an older run, another backend, or the reference failed)."""
    reference = ((environment or {}).get("calibration") or {}).get("reference") or {}
    return reference if reference.get("rps") else None


def server_cpu_us_per_req(generator: dict | None, monitor: dict | None) -> float | None:
    """One measurement's server CPU (user + system, the measured phase) in µs per response: the cost per request
    of netarena.stats.cost_per_unit, its one definition; None for echo (its cost is per MiB) or without samples."""
    cost = cost_per_unit(generator, monitor) or {}
    return cost.get("server_cpu_us") if cost.get("unit") == "request" else None


def ratio(value: float | None, reference_value: float | None) -> float | None:
    """value / reference_value, or None when either is missing (or the reference is 0)."""
    if value is None or not reference_value:
        return None
    return value / reference_value


def fingerprint(environment: dict | None) -> dict:
    """What says whether two runs ran on the same machine: its host name, and what makes a machine's kind (CPU
    model, its flags' hash, logical cores, kernel release, the mitigations)."""
    env = environment or {}
    cpu = env.get("cpu") or {}
    return {
        "hostname": env.get("hostname"),
        "cpu_model": cpu.get("model"),
        "cpu_flags": (cpu.get("flags") or {}).get("sha256_16"),
        "logical_cores": cpu.get("logical_cores"),
        "kernel": (env.get("kernel") or {}).get("release"),
        "mitigations": cpu.get("mitigations"),
    }


def machine_differences(a: dict | None, b: dict | None) -> list[str]:
    """The fingerprint's fields that differ between two runs' environments (empty: the same kind of machine).
    A field neither run recorded (an older run) does not count as a difference."""
    fa, fb = fingerprint(a), fingerprint(b)
    return [name for name in fa if fa[name] is not None and fb[name] is not None and fa[name] != fb[name]]
