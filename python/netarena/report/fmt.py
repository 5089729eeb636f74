"""Number formatting shared by the terminal and the HTML renderers, so both print the same figures."""

from __future__ import annotations

from ..scenarios import registry


def rps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def rps_range(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    return f"{low:,.0f}–{high:,.0f}"


def rps_short(value: float | None) -> str:
    """Three significant digits with a k/M suffix: narrow enough for a 100-column terminal table."""
    if value is None:
        return "-"
    for suffix, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            scaled = value / scale
            return f"{scaled:.2f}{suffix}" if scaled < 10 else f"{scaled:.1f}{suffix}" if scaled < 100 \
                else f"{scaled:.0f}{suffix}"
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def us(value: float | None) -> str:
    """A latency in microseconds, in the unit that keeps it short (µs below 1 ms, ms below 10 s, else s)."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f}µs"
    if value < 10_000_000:
        ms = value / 1000
        return f"{ms:.2f}ms" if ms < 10 else f"{ms:.1f}ms" if ms < 100 else f"{ms:.0f}ms"
    return f"{value / 1e6:.1f}s"


def pct(fraction: float | None, digits: int = 2) -> str:
    return "-" if fraction is None else f"{100 * fraction:.{digits}f}%"


def cpu_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def cpu_capacity(pct_of_capacity: float | None, cpus: list[int]) -> str:
    """CPU in % of the CPUs a process was allowed on, naming how many ("98% of 1 CPU")."""
    if pct_of_capacity is None:
        return "-"
    if not cpus:
        return f"{pct_of_capacity:.0f}% of a core"
    return f"{pct_of_capacity:.0f}% of {len(cpus)} CPU" + ("s" if len(cpus) > 1 else "")


def mb_per_s(bytes_per_s: float | None) -> str:
    """Megabytes (10^6, as network rates are counted) per second."""
    if bytes_per_s is None:
        return "-"
    mb = bytes_per_s / 1e6
    return f"{mb:.1f}" if mb >= 10 else f"{mb:.2f}" if mb >= 0.1 else f"{mb:.3f}"


def size_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f}{unit}" if value < 10 * scale else f"{value / scale:.0f}{unit}"
    return f"{value:.0f}B"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def ids(values: list[int]) -> str:
    return " ".join(f"#{i}" for i in values) or "-"


def throughput_unit(scenario: str) -> str:
    # The scenario's own (the echo flood counts echoed chunks, not HTTP requests: docs/load-generator.md).
    return registry.kind(scenario).throughput_unit


def cpu_per(scenario: str, short: bool = False) -> str:
    """What the server's CPU time is given per: a request, or for the echo flood a MiB echoed."""
    kind = registry.kind(scenario)
    return kind.cost_unit_short if short else kind.cost_unit


def measured(verdict: dict) -> str:
    """A threshold verdict's measured value in its unit (netarena-load's `thresholds[].unit`)."""
    value, unit = verdict.get("measured"), verdict.get("unit")
    if value is None:
        return "nothing to judge"
    if unit == "us":
        return us(value)
    if unit == "fraction":
        return pct(value, 3)
    if unit == "per_s":
        return f"{value:,.0f}/s"
    if unit == "bytes_per_s":
        return f"{size_bytes(value)}/s"
    return f"{value:,.0f}" if unit == "count" else f"{value:g}"


def cpu_us(value: float | None) -> str:
    """CPU time per request (or per MiB) in three significant digits: 4.27µs, 42.7µs, 427µs, 4.27ms."""
    if value is None:
        return "-"
    if value >= 1000:
        return us(value)
    return f"{value:.2f}µs" if value < 10 else f"{value:.1f}µs" if value < 100 else f"{value:.0f}µs"


def per_unit(value: float | None) -> str:
    """A count per request (or per MiB), e.g. context switches: 0.0123, 1.23, 123."""
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def cost_unit(unit: str | None) -> str:
    """What the cost columns are per: "req", or "MiB" for echo."""
    return "MiB" if unit == "MiB" else "req"


def times_reference(value: float | None) -> str:
    """A figure relative to the run's reference pair: 0.42× reads "0.42 times the reference's"."""
    return "-" if value is None else f"{value:.3g}×"


def calibration_pairs(environment: dict) -> list[tuple[str, str]]:
    """The machine fingerprint and the run's calibration as (label, text) pairs, for the environment sections of
    the HTML page and the terminal: what the figures of this run should be read against."""
    env = environment or {}
    cpu = env.get("cpu") or {}
    pairs = []
    flags, mhz, steal = cpu.get("flags"), cpu.get("mhz"), env.get("steal_at_start")
    if flags:
        pairs.append(("CPU flags", f"{flags['count']} flags, hash {flags['sha256_16']}"))
    if mhz:
        pairs.append(("CPU clock", f"{mhz['mean']:,.0f} MHz ({mhz['source']})"))
    if env.get("clocksource"):
        pairs.append(("clock source", env["clocksource"]))
    mitigations = cpu.get("mitigations") or {}
    if mitigations:
        vulnerable = sorted(name for name, state in mitigations.items() if state.startswith("Vulnerable"))
        mitigated = sum(1 for state in mitigations.values() if state.startswith("Mitigation"))
        pairs.append(("mitigations", f"{mitigated} mitigated, {len(vulnerable)} vulnerable"
                      + (f" ({', '.join(vulnerable)})" if vulnerable else "") + f" of {len(mitigations)} known"))
    if steal:
        pairs.append(("steal at start", f"{steal['pct']:.1f}% over {steal['interval_s']:g} s"))
    calibration = env.get("calibration") or {}
    if calibration.get("skipped"):
        pairs.append(("calibration", f"none: {calibration['skipped']}"))
    loop = calibration.get("cpu_loop") or {}
    if loop.get("error"):
        pairs.append(("calibration: CPU loop", f"failed: {loop['error']}"))
    elif loop:
        pairs.append(("calibration: CPU loop", f"{loop['us_per_unit']:,.0f} µs per unit (v{loop['unit_version']}, "
                      f"median of {loop['units']}; fastest {loop['us_per_unit_min']:,.0f}) on CPU {loop['cpu']}"))
    reference = calibration.get("reference") or {}
    if reference.get("error"):
        pairs.append(("calibration: reference pair", f"failed: {reference['error']}"))
    elif reference:
        pairs.append(("calibration: reference pair",
                      f"{reference['rps']:,.0f} req/s; server {reference['server_cpu_us_per_req']:.2f} µs CPU/req, "
                      f"generator {reference['generator_cpu_us_per_req']:.2f} µs CPU/req "
                      f"({reference['connections']} connections, median of {len(reference.get('samples') or [1])} "
                      f"samples over {reference['duration_s']:g} s, {reference['generator_io']})"))
    return pairs
