"""Statistics over repeats: median with its interval, min and max, coefficient of variation, merged latency
histograms.

Never the best run: the figure reported is the median of the repeats. Percentiles come from merging the
repeats' HdrHistograms, never from averaging percentiles. Every median carries one interval, defined once
here (``median_interval``) and used by every output, by the rankings' ties and by the precision loop.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass, field

from hdrh.histogram import HdrHistogram

from .profile import PROFILED

CV_FLAG_THRESHOLD = 0.05  # coefficient of variation above which a result is flagged as unstable
ERROR_RATE_FLAG_THRESHOLD = 0.01  # errors / (successes + errors) above which a measurement is flagged

FLAG_GENERATOR_SATURATED = "generator_saturated"
FLAG_ERROR_RATE = "error_rate_above_1pct"
FLAG_HIGH_CV = "cv_above_5pct"
FLAG_FAILED_REPEATS = "failed_repeats"
FLAG_LEFTOVER = "processes_left_after_stop"
FLAG_STOP_KILLED = "needed_sigkill_to_stop"
FLAG_RATE_NOT_MET = "rate_not_met"  # open loop: the generator could not keep the asked schedule
FLAG_WARMUP_RAISED = "warmup_raised"  # the contestant's start.warmup_min_s exceeded the suite's warm-up
# The suite's apply_warmup_min = false left the warm-up below the contestant's start.warmup_min_s.
FLAG_WARMUP_BELOW_MIN = "warmup_below_min"
# A warm-up until steady (suite warmup_until_steady) reached warmup_max_s without successive windows agreeing.
FLAG_WARMUP_UNSETTLED = "warmup_unsettled"
FLAG_THRESHOLD_FAILED = "threshold_failed"  # a --threshold / suite `thresholds` verdict of the generator failed
# A sizeable share of the connections got no answer at all during the measured phase (netarena-load's
# no_answer.flagged, judged at its NO_ANSWER_FLAG_FRACTION): the figures describe the connections served.
FLAG_NO_ANSWER = "no_answer"
# The machine took CPU time away from the measurement (steal, or the server or the generator waiting for a CPU
# another process held): its throughput says as much about the machine as about the server (see noisy_reason).
FLAG_NOISY = "noisy"
# The repeat ran on a server kept from its level's previous repeat (suite server_per = "level"), not on one of its
# own: the level's interval holds no differences between starts.
FLAG_SERVER_REUSED = "server_reused"

# Noise thresholds (noisy_reason). Steal: the hypervisor's share of all CPUs' time over the measured window, in
# %. Others: the share of a side's (server's or generator's) CPUs that processes other than that side used over
# the window, in % of those CPUs: a competing process where the side was pinned. Not the side's wait for a CPU
# (run delay, recorded beside them): a server with many threads on one CPU waits behind its own threads, which
# is its design, not noise.
NOISY_STEAL_PCT = 5.0
NOISY_OTHERS_PCT = 10.0

# The unit /proc reports CPU time in (utime, stime): it bounds how well a server's CPU over a window is known.
_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# Echo's cost is per MiB echoed (bytes received back by the generator), HTTP's per response.
MIB_BYTES = 1 << 20


# The distribution-free confidence interval of a median needs this many values for 95%: with n values the
# widest order-statistic interval, min–max, covers the median with probability 1 - 2 * 0.5**n (n = 6: 96.9%;
# n = 5: 93.8%). With fewer, the interval shown is min–max and is said not to be a 95% interval.
MEDIAN_CI_CONFIDENCE = 0.95
MEDIAN_CI_MIN_VALUES = 6
INTERVAL_95 = "95% CI"  # MedianInterval.kind of a distribution-free 95% interval
INTERVAL_RANGE = "min–max"  # ... of the range of too few values (not a 95% interval)


@dataclass(frozen=True)
class MedianInterval:
    """The median of some values and its interval: a 95% confidence interval when there are enough values
    (kind INTERVAL_95, ``confidence`` its exact coverage), else their min–max (kind INTERVAL_RANGE)."""

    median: float
    low: float
    high: float
    n: int
    kind: str
    confidence: float | None  # the exact coverage of a INTERVAL_95 interval (>= 0.95); None for a range

    @property
    def relative_half_width(self) -> float | None:
        """The larger side of the interval relative to the median (the interval need not be symmetric): the
        "±N%" a precision target is checked against. None when the median is 0."""
        if not self.median:
            return None
        return max(self.median - self.low, self.high - self.median) / abs(self.median)

    def overlaps(self, other: "MedianInterval") -> bool:
        return self.low <= other.high and other.low <= self.high


def median_interval(values: list[float]) -> MedianInterval | None:
    """The median and its distribution-free confidence interval by order statistics (the binomial method:
    Conover, Practical Nonparametric Statistics, 3rd ed., section 3.2; Hahn & Meeker, Statistical Intervals,
    section 5.2). With n sorted values x(1) <= ... <= x(n), [x(k), x(n+1-k)] covers the true median with
    probability 1 - 2 P(B <= k - 1), B ~ Binomial(n, 1/2), whatever the distribution (continuous values,
    independent repeats); k is the largest that keeps this >= MEDIAN_CI_CONFIDENCE. No such k exists for
    n < MEDIAN_CI_MIN_VALUES: the interval is then min–max, which is not a 95% interval."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    median = statistics.median(ordered)
    if n < MEDIAN_CI_MIN_VALUES:
        return MedianInterval(median, ordered[0], ordered[-1], n, INTERVAL_RANGE, None)
    k, coverage = 1, 1 - 2 * 0.5 ** n
    while True:
        # coverage of [x(k+1), x(n-k)]: 1 - 2 P(B <= k)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        if k + 1 > n - k or 1 - 2 * tail < MEDIAN_CI_CONFIDENCE:
            break
        k, coverage = k + 1, 1 - 2 * tail
    return MedianInterval(median, ordered[k - 1], ordered[n - k], n, INTERVAL_95, coverage)


def interval_note() -> str:
    """How every output explains its intervals (one sentence, the same everywhere)."""
    return (f"interval = {INTERVAL_95} of the median (order statistics) from {MEDIAN_CI_MIN_VALUES} repeats; "
            f"with fewer, the repeats' {INTERVAL_RANGE} (not a 95% interval)")


def error_rate(generator: dict) -> float:
    """errors / (successes + errors). Requests still in flight at the end (totals.unfinished) are in neither:
    a healthy closed loop ends with one in flight per connection, so counting them would charge every short
    run with errors; a server that leaves connections waiting is flagged by FLAG_NO_ANSWER instead, and their
    waits are in the latency histogram as censored lower bounds."""
    ok = generator["totals"]["requests"]
    errors = generator["errors"]["total"]
    return errors / (ok + errors) if ok + errors else 1.0


def failed_thresholds(generator: dict | None) -> list[dict]:
    """The generator's threshold verdicts that failed (its result's `thresholds`, one per --threshold)."""
    return [t for t in ((generator or {}).get("thresholds") or []) if not t.get("pass")]


def measurement_flags(generator: dict | None, stop: dict | None = None) -> list[str]:
    flags = []
    if generator is not None:
        if generator.get("generator_saturated") or generator.get("generator", {}).get("saturated"):
            flags.append(FLAG_GENERATOR_SATURATED)
        if error_rate(generator) > ERROR_RATE_FLAG_THRESHOLD:
            flags.append(FLAG_ERROR_RATE)
        if (generator.get("open_loop") or {}).get("rate_not_met"):
            flags.append(FLAG_RATE_NOT_MET)
        if failed_thresholds(generator):
            flags.append(FLAG_THRESHOLD_FAILED)
        if (generator.get("no_answer") or {}).get("flagged"):
            flags.append(FLAG_NO_ANSWER)
    if stop:
        if stop.get("leftover") or stop.get("escaped"):
            flags.append(FLAG_LEFTOVER)
        if stop.get("killed"):
            flags.append(FLAG_STOP_KILLED)
    return flags


def cost_per_unit(generator: dict | None, monitor: dict | None) -> dict | None:
    """What one unit of work cost over the measured phase: per response (HTTP) or per MiB echoed (echo), the
    server's CPU µs (user, system), its voluntary and involuntary context switches, and the generator's CPU µs.
    The one definition every output uses; stored with each measurement (its `cost`).

    Units are the generator's responses (echo: bytes received back) in its measured window. The server's
    deltas are the monitor's, restricted to that window (monitor.restrict_to_window): they span the first to
    the last sample inside it, up to one sampling interval short at each end, so the units are scaled to that
    span (units x span / window), which assumes a steady rate inside the window. The error this leaves is the
    rate's change across the missing ends (at most 2 intervals of the window: 0.5 s of 3 s at the default
    0.25 s) plus the CPU counters' clock tick: user and system time are each read in ticks (1/SC_CLK_TCK s,
    10 ms), so their sum over the span is known to within 2 ticks, given per unit as
    `server_cpu_resolution_us` (a server that used 1 s of CPU for 10,000 requests: 100 µs ± 2 µs; a starved
    one that used 20 ms: no better than ± 100%). The generator's CPU is its own, read by each load thread at
    the start and the end of the same window: exact.

    A sweep or a find-max search (several rates on one server start) also gets `steps`: the same figures for
    each step over its own window (_step_cost).

    None when the generator served nothing; the server fields are None when the monitor has no window (too
    short a measurement, an external server not watched)."""
    if not generator:
        return None
    totals = generator.get("totals") or {}
    echo = generator.get("mode") == "echo"  # not a scenario: netarena-load's mode
    units = (totals.get("bytes_received") or 0) / MIB_BYTES if echo else (totals.get("responses") or 0)
    duration_s = generator.get("duration_s") or 0
    if units <= 0 or duration_s <= 0:
        return None
    gen = generator.get("generator") or {}
    out: dict = {"unit": "MiB" if echo else "request", "units": round(units, 3),
                 "generator_cpu_us": None, "server_cpu_user_us": None, "server_cpu_sys_us": None,
                 "server_cpu_us": None, "server_ctx_voluntary": None, "server_ctx_involuntary": None,
                 "server_cpu_resolution_us": None, "window_s": None}
    if gen.get("cpu_user_s") is not None and gen.get("cpu_sys_s") is not None:
        out["generator_cpu_us"] = round(1e6 * (gen["cpu_user_s"] + gen["cpu_sys_s"]) / units, 3)
    summary = (monitor or {}).get("summary") or {}
    window = summary.get("window") or {}
    server = summary.get("server") or {}
    if window.get("measured_only") and server.get("cpu_user_s") is not None:
        span_s = window["end_s"] - window["start_s"]
        if span_s > 0:
            in_span = _units_in_span(units, span_s, duration_s)
            out.update(window_s=round(span_s, 4),
                       server_cpu_user_us=round(1e6 * server["cpu_user_s"] / in_span, 3),
                       server_cpu_sys_us=round(1e6 * server["cpu_sys_s"] / in_span, 3),
                       server_cpu_us=round(1e6 * (server["cpu_user_s"] + server["cpu_sys_s"]) / in_span, 3),
                       server_ctx_voluntary=round(server["ctx_voluntary"] / in_span, 4),
                       server_ctx_involuntary=round(server["ctx_involuntary"] / in_span, 4),
                       server_cpu_resolution_us=round(2e6 / _CLOCK_TICKS_PER_S / in_span, 3))
    if summary.get("steps") is not None and generator.get("steps"):
        out["steps"] = [_step_cost(doc, tree) for doc, tree in zip(generator["steps"], summary["steps"])]
    return out


def _units_in_span(units: float, span_s: float, duration_s: float) -> float:
    """The units served in the monitor's span of a window that lasted duration_s: the span is up to a sampling
    interval short at each end, so the units are scaled to it, assuming a steady rate inside the window."""
    return units * min(1.0, span_s / duration_s)


def _step_cost(step: dict, tree: dict) -> dict:
    """One step of a sweep or a find-max search (its own rate, on the same server start): the server's CPU
    (user, system, and in % of one core, like top), peak RSS and context switches over the monitor's samples
    inside the step (monitor.restrict_to_window), and its CPU per response scaled to that span as
    cost_per_unit does for the whole phase; {"reason": ...} when the step held too few samples."""
    if "reason" in tree:
        return {"reason": tree["reason"]}
    span_s = tree["end_s"] - tree["start_s"]
    responses = (step.get("totals") or {}).get("responses") or 0
    duration_s = step.get("duration_s") or 0
    in_span = _units_in_span(responses, span_s, duration_s) if duration_s > 0 and span_s > 0 else 0
    cpu_s = tree["cpu_user_s"] + tree["cpu_sys_s"]
    return {"window_s": round(span_s, 4), "server_cpu_user_s": tree["cpu_user_s"], "server_cpu_sys_s": tree["cpu_sys_s"],
            "server_cpu_pct": tree["cpu_pct_mean"], "server_rss_peak_bytes": tree["rss_peak_bytes"],
            "server_ctx_voluntary": tree["ctx_voluntary"], "server_ctx_involuntary": tree["ctx_involuntary"],
            "server_cpu_us": round(1e6 * cpu_s / in_span, 3) if in_span > 0 else None,
            "server_ctx_per_request": (round((tree["ctx_voluntary"] + tree["ctx_involuntary"]) / in_span, 4)
                                       if in_span > 0 else None)}


def _wait_share(run_delay_s: float | None, cpu_s: float | None) -> float | None:
    if run_delay_s is None or cpu_s is None or run_delay_s + cpu_s <= 0:
        return None
    return round(run_delay_s / (run_delay_s + cpu_s), 4)


def _others_pct(task_pct: list | None, cpus: list[int], own_pct: float | None) -> float | None:
    """% of `cpus` used by processes other than a side whose own CPU (in % of one core) is `own_pct`: the CPUs'
    process time (user + nice + system, never interrupts or steal: softirq work for the side's sockets is not
    another process) minus the side's own, per CPU of the set."""
    if not task_pct or not cpus or own_pct is None or any(c >= len(task_pct) or task_pct[c] is None for c in cpus):
        return None
    return round(max(0.0, sum(task_pct[c] for c in cpus) - own_pct) / len(cpus), 2)


def contention(generator: dict | None, monitor: dict | None) -> dict:
    """The machine's interference over the measured window: CPU steal (system-wide, % of all CPUs' time), the share
    of each side's CPUs that other processes used (server: its tree's CPU from the monitor; generator: its load
    threads' CPU from its own document, which covers every generator process of a spread level), and each side's
    wait for a CPU (run_delay summed over its threads; the server's from the monitor, the generator's from its
    document) with its wait share, run delay / (run delay + CPU time): recorded, not judged (see NOISY_OTHERS_PCT)."""
    summary = (monitor or {}).get("summary") or {}
    measured = (summary.get("window") or {}).get("measured_only")
    server = (summary.get("server") or {}) if measured else {}
    system = (summary.get("system") or {}) if measured else {}
    allowed = (monitor or {}).get("cpus_allowed") or {}
    gen = (generator or {}).get("generator") or {}
    gen_cpu_s = gen["cpu_user_s"] + gen["cpu_sys_s"] if gen.get("cpu_user_s") is not None else None
    server_cpu_s = server["cpu_user_s"] + server["cpu_sys_s"] if server.get("cpu_user_s") is not None else None
    duration_s = (generator or {}).get("duration_s") or 0
    gen_pct = 100.0 * gen_cpu_s / duration_s if gen_cpu_s is not None and duration_s > 0 else None
    task_pct = system.get("per_cpu_task_pct_mean")
    server_cpus, gen_cpus = allowed.get("server") or [], allowed.get("generator") or []

    def with_services(own_pct: float | None, cpus: list[int]) -> float | None:
        """A side's own CPU plus that of the backing services pinned inside its CPUs (a database runs on the
        generator's CPUs by default): part of the measurement, not others."""
        if own_pct is None:
            return None
        services = summary.get("services") or {}
        return own_pct + sum((services.get(name) or {}).get("cpu_pct_mean") or 0.0
                             for name, on in (allowed.get("services") or {}).items() if on and set(on) <= set(cpus))

    return {
        "steal_pct": system.get("cpu_steal_pct_mean"),
        "server_cpus_others_pct": _others_pct(task_pct, server_cpus,
                                              with_services(server.get("cpu_pct_mean"), server_cpus)),
        "generator_cpus_others_pct": _others_pct(task_pct, gen_cpus, with_services(gen_pct, gen_cpus)),
        "server_run_delay_s": server.get("run_delay_s"),
        "server_wait_share": _wait_share(server.get("run_delay_s"), server_cpu_s),
        "generator_run_delay_s": gen.get("run_delay_s"),
        "generator_wait_share": _wait_share(gen.get("run_delay_s"), gen_cpu_s),
    }


def noisy_reason(found: dict) -> str | None:
    """Why a measurement's figures are the machine's as much as the server's (a `contention` dict), or None.
    Every reason past its threshold is named, with its value, e.g. "steal 14%, others used 31% of the server's
    CPUs"."""
    reasons = []
    if (found.get("steal_pct") or 0) > NOISY_STEAL_PCT:
        reasons.append(f"steal {found['steal_pct']:.0f}%")
    for side in ("server", "generator"):
        others = found.get(f"{side}_cpus_others_pct")
        if others is not None and others > NOISY_OTHERS_PCT:
            reasons.append(f"others used {others:.0f}% of the {side}'s CPUs")
    return ", ".join(reasons) or None


def merge_histograms(generators: list[dict], key: str = "latency") -> HdrHistogram | None:
    merged = None
    for gen in generators:
        hist = ((gen.get(key) or {}).get("histogram") or {})
        data = hist.get("data")
        if not data:
            continue
        if merged is None:
            merged = HdrHistogram(hist.get("lowest_trackable", 1), hist.get("highest_trackable", 3_600_000_000),
                                  hist.get("significant_digits", 3))
        merged.decode_and_add(data)
    return merged


def mean_stdev(hist: HdrHistogram) -> tuple[float, float] | None:
    """Mean and (population) standard deviation of a histogram, each value taken at the middle of its bucket as
    HdrHistogram's own get_mean_value / get_stddev do; one pass over the counts array instead of hdrh's
    recorded-value iterator, which is pure Python per bucket and took seconds per histogram."""
    total = hist.get_total_count()
    if not total:
        return None
    values: list[tuple[float, int]] = []
    counts = hist.counts
    for index in range(hist.counts_len):
        count = counts[index]
        if count:
            low = hist.get_value_from_index(index)
            values.append((hist.get_lowest_equivalent_value(low) + (hist._hdr_size_of_equiv_value_range(low) >> 1),
                           count))
    mean = sum(v * n for v, n in values) / total
    variance = sum((v - mean) ** 2 * n for v, n in values) / total
    return mean, variance ** 0.5


@dataclass
class GroupSummary:
    """One (contestant, scenario, level) across its repeats."""

    contestant: str
    scenario: str
    level_key: str
    repeats_ok: int
    repeats_failed: int
    requests_per_s_median: float | None = None
    requests_per_s_min: float | None = None
    requests_per_s_max: float | None = None
    cv: float | None = None  # sample stdev / mean of requests_per_s over the ok repeats
    # The median's interval (median_interval): its bounds, its kind (INTERVAL_95 or INTERVAL_RANGE) and the
    # larger side relative to the median (what --precision is checked against).
    requests_per_s_ci_low: float | None = None
    requests_per_s_ci_high: float | None = None
    requests_per_s_ci_kind: str | None = None
    requests_per_s_ci_relative: float | None = None
    latency_p50_us: float | None = None  # from the merged histogram
    latency_p99_us: float | None = None
    latency_p99_9_us: float | None = None
    latency_max_us: float | None = None
    error_rate_median: float | None = None
    # Summed over the ok repeats: requests still in flight at the end (their waits are censored lower
    # bounds inside the percentiles above), and connections that got no answer during the measured phase.
    unfinished: int = 0
    latency_censored: int = 0
    unanswered_connections: int = 0
    server_cpu_s_median: float | None = None
    server_rss_peak_bytes: int | None = None
    # Cost per unit of work (cost_per_unit), median of the ok repeats; the unit is "request" or "MiB" (echo).
    cost_unit: str | None = None
    server_cpu_us_median: float | None = None
    server_cpu_us_cv: float | None = None  # sample stdev / mean of server_cpu_us over the ok repeats
    server_cpu_user_us_median: float | None = None
    server_cpu_sys_us_median: float | None = None
    server_ctx_voluntary_median: float | None = None
    server_ctx_involuntary_median: float | None = None
    generator_cpu_us_median: float | None = None
    # The worst interference any counted repeat saw (contention): steal %, others' use of each side's CPUs (%),
    # and each side's wait share.
    steal_pct_max: float | None = None
    server_cpus_others_pct_max: float | None = None
    generator_cpus_others_pct_max: float | None = None
    server_wait_share_max: float | None = None
    generator_wait_share_max: float | None = None
    # Measurements kept out of every figure (their `discarded` reason, e.g. noisy and re-measured); a profiled
    # repeat (netarena.profile) is out of them by design, not as noise: counted on its own.
    discarded: int = 0
    discarded_reasons: list[str] = field(default_factory=list)
    profiled_ids: list[int] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(rows: list[dict]) -> list[GroupSummary]:
    """rows: measurement dicts as store.row_to_dict returns them (decoded *_json columns)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["status"] == "interrupted":
            continue
        groups.setdefault((row["contestant"], row["scenario"], row["level_key"]), []).append(row)
    out = []
    for (contestant, scenario, level_key), all_members in groups.items():
        discarded = [m for m in all_members if m.get("discarded") and m["discarded"] != PROFILED]
        members = [m for m in all_members if not m.get("discarded")]
        ok = [m for m in members if m["status"] == "ok" and m.get("generator")]
        failed = [m for m in members if m["status"] != "ok"]
        summary = GroupSummary(contestant, scenario, level_key, len(ok), len(failed))
        summary.discarded = len(discarded)
        summary.discarded_reasons = [f"#{m['repeat_index'] + 1}: {m['discarded']}" for m in discarded]
        summary.profiled_ids = [m["id"] for m in all_members if m.get("discarded") == PROFILED]
        summary.failures = [f"#{m['repeat_index'] + 1}: {m.get('failure_kind')}: {m.get('error')}" for m in failed]
        flags: set[str] = set()
        for m in members:
            flags.update(m.get("flags") or [])
        if failed:
            flags.add(FLAG_FAILED_REPEATS)
        if ok:
            rps = [m["generator"]["throughput"]["requests_per_s"] for m in ok]
            summary.requests_per_s_median = statistics.median(rps)
            summary.requests_per_s_min = min(rps)
            summary.requests_per_s_max = max(rps)
            interval = median_interval(rps)
            summary.requests_per_s_ci_low, summary.requests_per_s_ci_high = interval.low, interval.high
            summary.requests_per_s_ci_kind = interval.kind
            summary.requests_per_s_ci_relative = interval.relative_half_width
            if len(rps) >= 2 and statistics.mean(rps) > 0:
                summary.cv = statistics.stdev(rps) / statistics.mean(rps)
                if summary.cv > CV_FLAG_THRESHOLD:
                    flags.add(FLAG_HIGH_CV)
            summary.error_rate_median = statistics.median(error_rate(m["generator"]) for m in ok)
            # Results from before these fields existed have none: 0, as they reported.
            summary.unfinished = sum(int(m["generator"]["totals"].get("unfinished") or 0) for m in ok)
            summary.latency_censored = sum(int((m["generator"].get("latency") or {}).get("censored") or 0)
                                           for m in ok)
            summary.unanswered_connections = sum(int((m["generator"].get("no_answer") or {}).get("connections") or 0)
                                                 for m in ok)
            merged = merge_histograms([m["generator"] for m in ok])
            if merged is not None and merged.get_total_count():
                summary.latency_p50_us = merged.get_value_at_percentile(50)
                summary.latency_p99_us = merged.get_value_at_percentile(99)
                summary.latency_p99_9_us = merged.get_value_at_percentile(99.9)
                summary.latency_max_us = merged.get_max_value()
            cpu = [_server_cpu_s(m.get("monitor")) for m in ok]
            cpu = [c for c in cpu if c is not None]
            if cpu:
                summary.server_cpu_s_median = statistics.median(cpu)
            rss = [_server_rss_peak(m.get("monitor")) for m in ok]
            rss = [r for r in rss if r is not None]
            if rss:
                summary.server_rss_peak_bytes = max(rss)
            _summarize_cost(summary, ok)
        summary.flags = sorted(flags)
        out.append(summary)
    return out


def measurement_cost(m: dict) -> dict | None:
    """A stored measurement's cost per unit: as recorded, else (a record from before it was) computed from its
    generator and monitor documents by the same definition."""
    return m["cost"] if m.get("cost") is not None else cost_per_unit(m.get("generator"), m.get("monitor"))


def measurement_contention(m: dict) -> dict:
    return m["contention"] if m.get("contention") is not None else contention(m.get("generator"), m.get("monitor"))


def _summarize_cost(summary: GroupSummary, ok: list[dict]) -> None:
    costs = [c for c in (measurement_cost(m) for m in ok) if c is not None]
    if costs:
        summary.cost_unit = costs[0]["unit"]

    def median_of(key: str) -> float | None:
        values = [c[key] for c in costs if c.get(key) is not None]
        return statistics.median(values) if values else None

    summary.server_cpu_us_median = median_of("server_cpu_us")
    summary.server_cpu_user_us_median = median_of("server_cpu_user_us")
    summary.server_cpu_sys_us_median = median_of("server_cpu_sys_us")
    summary.server_ctx_voluntary_median = median_of("server_ctx_voluntary")
    summary.server_ctx_involuntary_median = median_of("server_ctx_involuntary")
    summary.generator_cpu_us_median = median_of("generator_cpu_us")
    server_cpu = [c["server_cpu_us"] for c in costs if c.get("server_cpu_us") is not None]
    if len(server_cpu) >= 2 and statistics.mean(server_cpu) > 0:
        summary.server_cpu_us_cv = statistics.stdev(server_cpu) / statistics.mean(server_cpu)
    found = [measurement_contention(m) for m in ok]

    def worst(key: str) -> float | None:
        values = [f[key] for f in found if f.get(key) is not None]
        return max(values) if values else None

    summary.steal_pct_max = worst("steal_pct")
    summary.server_cpus_others_pct_max = worst("server_cpus_others_pct")
    summary.generator_cpus_others_pct_max = worst("generator_cpus_others_pct")
    summary.server_wait_share_max = worst("server_wait_share")
    summary.generator_wait_share_max = worst("generator_wait_share")


def _server_summary(monitor: dict | None) -> dict:
    if not monitor:
        return {}
    summary = monitor.get("summary") or {}
    return summary.get("server") or {}


def _server_cpu_s(monitor: dict | None) -> float | None:
    server = _server_summary(monitor)
    user, system = server.get("cpu_user_s"), server.get("cpu_sys_s")
    if user is None or system is None:
        return None
    return user + system


def _server_rss_peak(monitor: dict | None) -> int | None:
    server = _server_summary(monitor)
    value = server.get("rss_peak_bytes")
    return int(value) if value is not None else None
