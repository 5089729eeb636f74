"""One load spread over several netarena-load processes, and their documents merged into one.

A level may need more connections than one process may open (its open-files limit) or than one source
address has ephemeral ports to one target. `plan_spread` decides, per level, how many generator processes
share it and which loopback source addresses each binds to (`--source-ips`, a range of its own per process,
since processes sharing an address would share its ports). Every process runs with `--prepare` and gets
one start time, so they measure the same phase; `merge_documents` has `netarena-load merge` make one result
of their documents (the generator owns its document and every rule of merging it: counts summed, histograms
merged; docs/load-generator.md, "Merging results") and adds only what the orchestrator knows, each part's
host and CPUs, under "hosts". Across hosts (netarena.cluster) the same split and merge serve the generator
hosts. docs/load-generator.md ("Levels beyond one process") describes it for users.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import resource
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

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


class MergeFailed(Exception):
    """netarena-load merge refused the parts' documents or could not run; the message says why."""


# Generous: merging reads a few documents and their histograms, well under a second each.
MERGE_TIMEOUT_S = 120.0


def merge_documents(parts: list[dict], generator: Path) -> dict:
    """One netarena-load document from the parts' ones (each {"host": label, "document": ...}, plus "hostname"
    and "cpus" across hosts), made by the generator itself: `netarena-load merge --label HOST ... FILE...`
    (docs/load-generator.md, "Merging results": every block's rule is the generator's, the orchestrator knows
    none of its fields). What only the orchestrator knows is added under "hosts": each part's host, hostname,
    CPUs, CPU times, saturation and own document. MergeFailed when the generator refuses the parts."""
    docs = [p["document"] for p in parts]
    with tempfile.TemporaryDirectory(prefix="netarena-merge-") as folder:
        argv = [str(generator), "merge"]
        files = []
        for i, (part, doc) in enumerate(zip(parts, docs)):
            path = Path(folder) / f"part-{i + 1}.json"
            path.write_text(json.dumps(doc))
            argv += ["--label", str(part["host"])]
            files.append(str(path))
        try:
            out = subprocess.run(argv + files, capture_output=True, text=True, timeout=MERGE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MergeFailed(f"could not run {generator} merge: {exc}") from None
    if out.returncode != 0:
        raise MergeFailed(f"netarena-load merge exited with code {out.returncode}: "
                          f"{out.stderr.strip()[-2000:]}")
    merged = json.loads(out.stdout)
    merged["hosts"] = [{"host": p["host"], "hostname": p.get("hostname"), "cpus": p.get("cpus"),
                        "cpu_user_s": (d.get("generator") or {}).get("cpu_user_s"),
                        "cpu_sys_s": (d.get("generator") or {}).get("cpu_sys_s"),
                        "saturated": bool((d.get("generator") or {}).get("saturated") or d.get("generator_saturated")),
                        "requests": d["totals"]["requests"], "document": d} for p, d in zip(parts, docs)]
    return merged
