"""One load spread over several netarena-load processes, and their documents merged into one.

A level may need more connections than one process may open (its open-files limit) or than one source
address has ephemeral ports to one target. `plan_spread` decides, per level, how many generator processes
share it and which loopback source addresses each binds to (`--source-ips`, a range of its own per process,
since processes sharing an address would share its ports). Every process runs with `--prepare` and gets
one start time, so they measure the same phase; `merge_documents` makes one result of their documents
exactly (counts summed, histograms merged). Across hosts (netarena.cluster) the same split and merge serve
the generator hosts. docs/load-generator.md ("Levels beyond one process") describes it for users.
"""

from __future__ import annotations

import copy
import ipaddress
import math
import os
import resource
import select
import time
from dataclasses import dataclass

from . import stats
from .doctor import FD_SPARE, port_range_size
from .errors import ConfigError

# Source addresses for spread connections: 127.0.1.1 to 127.0.1.254 (all of 127.0.0.0/8 reaches the
# loopback interface, no configuration needed); distinct from 127.0.0.1, which verification and probes use.
SOURCE_NET = "127.0.1."
SOURCE_ADDRESSES = 254
# How long the generator processes may take, together, to print READY (they check and, for the
# closed loop and echo, open nothing before it; an open loop opens its connections and runs its warm-up first).
READY_MARGIN_S = 30.0
# The start time is this far after the last READY: every process reads it well before it comes.
START_LEAD_S = 0.5


@dataclass(frozen=True)
class Spread:
    """How a level's connections are shared among generator processes."""

    shares: tuple[int, ...]  # connections per process
    source_ips: tuple[str | None, ...]  # --source-ips of each process, None: the default (127.0.0.1)
    open_files: int  # the open-files limit each process has
    ports: int | None  # ephemeral ports per source address (None: unknown)
    reason: str | None  # why the level is spread, None when one process takes it as it is

    @property
    def processes(self) -> int:
        return len(self.shares)

    def to_dict(self) -> dict:
        return {"processes": self.processes, "shares": list(self.shares), "source_ips": list(self.source_ips),
                "open_files": self.open_files, "ports_per_address": self.ports, "reason": self.reason}


def open_files_hard_limit() -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 2**31 if hard == resource.RLIM_INFINITY else hard


def generator_open_files(cap: int | None) -> int:
    """The open-files limit a generator process gets: the hard limit netarena-load raises its soft one to,
    or the suite's generator_open_files when that is lower (it is then set on the process at start)."""
    hard = open_files_hard_limit()
    return hard if cap is None else min(cap, hard)


def is_loopback_host(host: str) -> bool:
    """Whether a target host is on loopback, where the 127.0.1.x source addresses reach it."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _address_range(first: int, count: int) -> str:
    if count == 1:
        return f"{SOURCE_NET}{first}"
    return f"{SOURCE_NET}{first}-{SOURCE_NET}{first + count - 1}"


def plan_spread(connections: int, *, probe: bool, open_files: int, ports: int | None, loopback: bool) -> Spread:
    """The processes and source addresses a level of `connections` needs.

    Each process holds at most open_files - FD_SPARE connections (what netarena-load keeps for itself
    fits in FD_SPARE); the first one also runs the echo probe, if any. When all the connections (and the
    probe) do not fit in one source address's ephemeral ports, every process gets loopback addresses of its
    own, as many as its share needs. ConfigError when no spread can hold the level here."""
    per_process = open_files - FD_SPARE
    if per_process < 1:
        raise ConfigError(f"a generator process may open {open_files} files, fewer than the {FD_SPARE} "
                          "netarena-load keeps for itself: raise the open-files limit (`netarena doctor`)")
    extra = 1 if probe else 0
    count = math.ceil((connections + extra) / per_process)
    shares = [split_evenly(connections + extra, count, i) for i in range(count)]
    shares[0] -= extra  # the probe's socket counts against the first process's descriptors
    reasons = []
    if count > 1:
        reasons.append(f"{connections:,} connections are more than one generator process may hold "
                       f"(open-files limit {open_files:,}, {FD_SPARE} kept: {per_process:,} each)")
    source_ips: list[str | None] = [None] * count
    if ports is not None and connections + extra > ports:
        if not loopback:
            raise ConfigError(f"{connections:,} connections to one target are more than the {ports:,} ephemeral "
                              "ports of this machine's address, and the target is not on loopback, where netarena "
                              "spreads them over 127.0.1.x: widen net.ipv4.ip_local_port_range (`netarena doctor`)")
        first = 1
        for i, share in enumerate(shares):
            need = max(1, math.ceil((share + (extra if i == 0 else 0)) / ports))
            if first + need - 1 > SOURCE_ADDRESSES:
                raise ConfigError(f"{connections:,} connections need more than {SOURCE_ADDRESSES} source addresses "
                                  f"of {ports:,} ephemeral ports each: widen net.ipv4.ip_local_port_range")
            source_ips[i] = _address_range(first, need)
            first += need
        reasons.append(f"{connections:,} connections are more than the {ports:,} ephemeral ports of one source "
                       f"address (net.ipv4.ip_local_port_range): spread over {_address_range(1, first - 1)}")
    return Spread(tuple(shares), tuple(source_ips), open_files, ports, "; ".join(reasons) or None)


def plan_for(connections: int, *, probe: bool, open_files_cap: int | None, loopback: bool = True) -> Spread:
    """plan_spread with this machine's limits (see generator_open_files and the ephemeral port range)."""
    return plan_spread(connections, probe=probe, open_files=generator_open_files(open_files_cap),
                       ports=port_range_size(), loopback=loopback)


def read_ready(gen, deadline: float) -> tuple[int | None, bytes, str | None]:
    """Wait for a `netarena-load --prepare` process (process.ManagedProcess, stderr a pipe) to print
    `READY <unix_ns>`: (its time, the stderr read so far, None), or (None, stderr, why not) when it exits
    first or the deadline passes."""
    stderr = b""
    while True:
        if gen.poll() is not None:
            stderr += gen.proc.stderr.read()
            return None, stderr, (f"netarena-load exited with code {gen.poll()} before READY: "
                                  + stderr.decode("utf-8", "replace").strip()[-2000:])
        if time.monotonic() > deadline:
            return None, stderr, "netarena-load announced no READY in time"
        readable, _, _ = select.select([gen.proc.stderr], [], [], 0.2)
        if readable:
            stderr += os.read(gen.proc.stderr.fileno(), 65536)
            for line in stderr.split(b"\n")[:-1]:  # whole lines only: a chunk may end mid-line
                if line.startswith(b"READY "):
                    return int(line.split()[1]), stderr, None


def split_evenly(total: int, parts: int, index: int) -> int:
    """Part `index` of `total` (connections, -n requests) shared among generator processes or hosts: the first
    total % parts get one more. The orchestrator's own rule: inside each process netarena-load shares its part
    among its threads by its rule, and nothing depends on the two agreeing."""
    return total // parts + (1 if index < total % parts else 0)


def share_level(level, hosts: int, index: int):
    """Host `index`'s part of a level: its share of the connections and of an open-loop rate (both totals)."""
    import dataclasses

    params = dict(level.params)
    for key in ("rate", "conn_rate"):
        if params.get(key):
            params[key] = params[key] / hosts
    # requests = N (-n) is a total too: the shares add up to N, the merged result answers for all of them.
    requests = None if level.requests is None else split_evenly(level.requests, hosts, index)
    return dataclasses.replace(level, connections=split_evenly(level.connections, hosts, index),
                               params=tuple(sorted(params.items())), requests=requests)


# ----------------------------------------------------------------------------- merging


_LATENCY_FIELDS = (("min_us", None), ("p50_us", 50), ("p75_us", 75), ("p90_us", 90), ("p99_us", 99),
                   ("p99_9_us", 99.9), ("p99_99_us", 99.99))


def _merged_latency(docs: list[dict], path: tuple[str, ...]) -> dict | None:
    """The latency block at `path` of every document, from their histograms merged (stats.merge_histograms)."""
    parts = []
    for doc in docs:
        block = doc
        for key in path:
            block = (block or {}).get(key)
        if block:
            parts.append({"latency": block})
    if not parts:
        return None
    merged = stats.merge_histograms(parts)
    out = copy.deepcopy(parts[0]["latency"])
    if merged is None:
        return out
    out["count"] = merged.get_total_count()
    for name, pct in _LATENCY_FIELDS:
        out[name] = merged.get_min_value() if pct is None else merged.get_value_at_percentile(pct)
    out["max_us"] = merged.get_max_value()
    out["mean_us"] = merged.get_mean_value()
    out["stdev_us"] = merged.get_stddev()
    out["histogram"]["data"] = merged.encode().decode()
    return out


# The counters of the echo and open-loop blocks (summed over hosts); their other fields are settings, the
# same on every host, and are taken from the first.
_ECHO_COUNTERS = ("connections_completed", "verified_bytes")
_OPEN_LOOP_COUNTERS = ("asked_rate_per_s", "achieved_rate_per_s", "intended", "started", "late", "dropped",
                       "dropped_overflow", "dropped_unsent", "spin_wait_s")
_CONN_RATE_COUNTERS = ("started", "completed", "ended_early", "failed")


def _sum_numbers(blocks: list[dict], keys=None) -> dict:
    """The first block with `keys` (default: every number in it) summed over all blocks."""
    out = copy.deepcopy(blocks[0])
    for key, value in blocks[0].items():
        if keys is not None and key not in keys:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = sum((b.get(key) or 0) for b in blocks)
    return out


def _merged_intervals(docs: list[dict]) -> dict | None:
    """Every document's per-interval histograms merged interval by interval. The parts started together
    (--prepare and one start time), so interval i covers the same span of every part."""
    blocks = [d.get("intervals") for d in docs]
    if not blocks or not all(b and b.get("entries") is not None for b in blocks):
        return None
    settings = (docs[0].get("latency") or {}).get("histogram") or {}
    out = copy.deepcopy(blocks[0])
    out["entries"] = []
    for index in range(max(len(b["entries"]) for b in blocks)):
        entries = [b["entries"][index] for b in blocks if index < len(b["entries"])]
        merged = stats.merge_histograms([{"latency": {"histogram": dict(settings, data=e["data"])}}
                                         for e in entries if e.get("data")])
        entry = {"t_s": entries[0]["t_s"], "count": sum(e["count"] for e in entries)}
        if merged is None or not merged.get_total_count():
            entry.update(p50_us=0, p99_us=0, p99_9_us=0, max_us=0, data=entries[0].get("data", ""))
        else:
            entry.update(p50_us=merged.get_value_at_percentile(50), p99_us=merged.get_value_at_percentile(99),
                         p99_9_us=merged.get_value_at_percentile(99.9), max_us=merged.get_max_value(),
                         data=merged.encode().decode())
        out["entries"].append(entry)
    return out


def _merged_timeline(docs: list[dict]) -> list[dict]:
    """The per-second timelines summed second by second (the parts started together, as above)."""
    timelines = [d.get("timeline") or [] for d in docs]
    merged = []
    for index in range(max((len(t) for t in timelines), default=0)):
        seconds = [t[index] for t in timelines if index < len(t)]
        merged.append({"t_s": seconds[0]["t_s"],
                       **{key: sum(s[key] for s in seconds) for key in ("requests", "bytes_received", "errors")}})
    return merged


def _merged_generator(docs: list[dict]) -> dict:
    """The generator block over every part: CPU times and CPU waits summed, the busy fraction a mean weighted by
    threads (its definition), the busiest thread's figures the maximum, saturated when any part was. Each part's
    CPUs stay in its own document (under "hosts"): CPU numbers of different hosts do not add up to a set."""
    gens = [d.get("generator") or {} for d in docs]
    threads = sum(g.get("threads") or 0 for g in gens)
    run_delays = [g.get("run_delay_s") for g in gens]
    fractions = [g.get("run_delay_fraction_max") for g in gens]
    return {
        "threads": threads, "cpus": [],
        "cpu_user_s": sum(g.get("cpu_user_s") or 0 for g in gens),
        "cpu_sys_s": sum(g.get("cpu_sys_s") or 0 for g in gens),
        "busy_fraction": _thread_weighted([(g.get("busy_fraction"), g.get("threads") or 0) for g in gens]) or 0.0,
        "busy_fraction_max": max((g.get("busy_fraction_max") or 0) for g in gens),
        "run_delay_s": None if None in run_delays else sum(run_delays),
        "run_delay_fraction_max": None if None in fractions else max(fractions),
        "busy_counts_run_delay": all(g.get("busy_counts_run_delay") for g in gens),
        "saturated": any(g.get("saturated") for g in gens),
        "batch_wait_max_us": max((g["batch_wait_max_us"] for g in gens if g.get("batch_wait_max_us") is not None),
                                 default=None),
        # Each host's share weighted by its threads: every thread measured the same phase.
        "batch_wait_share": _thread_weighted([(g.get("batch_wait_share"), g.get("threads") or 0) for g in gens]),
    }


def _thread_weighted(values: list[tuple[float | None, int]]) -> float | None:
    """The mean of per-host values weighted by each host's threads, over the hosts that have a value; None if none."""
    known = [(v, n) for v, n in values if v is not None]
    total = sum(n for _, n in known)
    return sum(v * n for v, n in known) / total if total else None


def merge_documents(parts: list[dict]) -> dict:
    """One netarena-load document from the generator hosts' ones: counts and byte totals summed, rates summed
    (every host measured the same phase, started together), latencies from the merged HdrHistograms, errors
    summed by class, the generator flagged saturated when any host was. Each host's own document, CPU and
    flags are kept under "hosts"."""
    docs = [p["document"] for p in parts]
    merged = copy.deepcopy(docs[0])
    merged["totals"] = _sum_numbers([d["totals"] for d in docs])
    merged["throughput"] = _sum_numbers([d["throughput"] for d in docs])
    merged["latency"] = _merged_latency(docs, ("latency",))
    errors = {"total": sum(d["errors"]["total"] for d in docs), "by_class": {}, "status_codes": {}, "examples": []}
    for d in docs:
        for group in ("by_class", "status_codes"):
            for key, count in (d["errors"].get(group) or {}).items():
                errors[group][key] = errors[group].get(key, 0) + count
        errors["examples"] += d["errors"].get("examples") or []
    errors["examples"] = errors["examples"][:10]
    merged["errors"] = errors
    merged["generator"] = _merged_generator(docs)
    answers = [d["no_answer"] for d in docs if d.get("no_answer")]
    if answers:  # connections that never got an answer, over every part; flagged on the merged fraction
        waiting, of = sum(a["connections"] for a in answers), sum(a["of_connections"] for a in answers)
        merged["no_answer"] = dict(answers[0], connections=waiting, of_connections=of,
                                   fraction=waiting / of if of else 0.0)
        merged["no_answer"]["flagged"] = waiting > 0 and merged["no_answer"]["fraction"] >= answers[0]["flag_fraction"]
    merged["generator_saturated"] = any(d.get("generator_saturated") or (d.get("generator") or {}).get("saturated")
                                        for d in docs)
    merged["started_at"] = min(d["started_at"] for d in docs)
    merged["ended_at"] = max(d["ended_at"] for d in docs)
    merged["duration_s"] = max(d["duration_s"] for d in docs)
    merged["config"] = dict(merged["config"], connections=sum(d["config"]["connections"] for d in docs))
    if merged["config"].get("requests") is not None:  # -n N was shared like the connections
        merged["config"]["requests"] = sum(d["config"].get("requests") or 0 for d in docs)
    if merged.get("echo"):
        merged["echo"] = _sum_numbers([d["echo"] for d in docs], _ECHO_COUNTERS)
        times = [d["echo"].get("completion_time_s") for d in docs]
        merged["echo"]["completion_time_s"] = None if None in times else max(times)
        probes = [d["echo"]["probe"] for d in docs if d["echo"].get("probe")]
        if probes:  # every host probes on its own: attempts and errors summed, latencies merged
            merged["echo"]["probe"] = _sum_numbers(probes, ("attempts", "completed", "errors"))
            merged["echo"]["probe"]["latency"] = _merged_latency(docs, ("echo", "probe", "latency"))
    if merged.get("open_loop"):
        loops = [d["open_loop"] for d in docs]
        ol = _sum_numbers(loops, _OPEN_LOOP_COUNTERS)
        if ol.get("connections"):
            ol["connections"] = _sum_numbers([o["connections"] for o in loops], _CONN_RATE_COUNTERS)
            ol["connections"]["lifetime"] = _merged_latency(docs, ("open_loop", "connections", "lifetime"))
        ol["rate_not_met"] = any(o.get("rate_not_met") for o in loops)
        ol["rate_not_met_reasons"] = [f"{p['host']}: {r}" for p, o in zip(parts, loops)
                                      for r in o.get("rate_not_met_reasons") or []]
        for key in ("latency_uncorrected", "schedule_lag"):
            ol[key] = _merged_latency(docs, ("open_loop", key))
        merged["open_loop"] = ol
    merged["timeline"] = _merged_timeline(docs)
    merged["intervals"] = _merged_intervals(docs)
    merged["hosts"] = [{"host": p["host"], "hostname": p.get("hostname"), "cpus": p.get("cpus"),
                        "cpu_user_s": (d.get("generator") or {}).get("cpu_user_s"),
                        "cpu_sys_s": (d.get("generator") or {}).get("cpu_sys_s"),
                        "saturated": bool((d.get("generator") or {}).get("saturated") or d.get("generator_saturated")),
                        "requests": d["totals"]["requests"], "document": d} for p, d in zip(parts, docs)]
    return merged
