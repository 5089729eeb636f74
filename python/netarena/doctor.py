"""`netarena doctor`: what this machine's limits mean for a run, and how to raise them.

Every check reports the current value, its consequence in plain numbers, a status and the exact
command that fixes it. Nothing is changed unless ``apply=True`` (root only): then each recommended
sysctl is written to /proc/sys and reported old -> new, and whatever cannot be changed from here
(per-process limits, CPU governors) is listed with the reason.

``apply_profile`` (``--profile NAME``, root only) sets a seed's own kernel settings (PROFILES), after
saving the values it replaces in SAVED_FILE under the cache; ``restore_saved`` (``--restore``) writes
those back and forgets them. A second profile keeps the first one's saved originals, so --restore always
returns to what was there before any profile.
"""

from __future__ import annotations

import ctypes
import datetime
import errno
import json
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

from netarena.envinfo import cpu_governors, read_sysctl, sysctl_path
from netarena.ports import ephemeral_port_range
from netarena.term import styled

# File descriptors a generator process needs besides its connections: stdio, epoll/eventfds per
# thread, the timer and pipes of the runtime.
FD_SPARE = 100
# The largest seed experiment holds 32,768 connections (seed 000); this leaves room for the server.
RECOMMENDED_OPEN_FILES = 65536
RECOMMENDED_NR_OPEN = 1048576
RECOMMENDED_FILE_MAX = 262144
RECOMMENDED_SOMAXCONN = 4096
RECOMMENDED_SYN_BACKLOG = 4096
# Leaves 1024-9999 to servers on fixed ports (an ephemeral port in use blocks a server's bind).
RECOMMENDED_PORT_RANGE = (10000, 65535)
SEED_MAX_CONNECTIONS = 32768
RECOMMENDED_BUFFER_MAX_BYTES = 4 * 1024 * 1024

# The kernel settings the seeds' write-ups set, by the suite that replays each (docs/seeds.md).
PROFILES: dict[str, tuple[tuple[str, str], ...]] = {
    # Seed 000: listen backlogs matching its servers' backlog of 32,768, enough ephemeral ports for 32k client
    # connections, and small default socket buffers so 32k connections do not exhaust memory.
    "seed-000": (("net.core.somaxconn", "32768"), ("net.core.netdev_max_backlog", "32768"),
                 ("net.ipv4.ip_local_port_range", "21000 61000"), ("net.core.rmem_default", "8192"),
                 ("net.core.wmem_default", "8192")),
    # Seed 001: its sysctl.conf lines (the commented-out ones left out, as there).
    "seed-001": (("net.core.somaxconn", "8192"), ("net.ipv4.tcp_max_orphans", "8192"),
                 ("net.ipv4.tcp_max_syn_backlog", "8192"), ("net.core.netdev_max_backlog", "262144"),
                 ("net.ipv4.ip_local_port_range", "1024 65535"), ("fs.file-max", "16777216"),
                 ("fs.pipe-max-size", "134217728")),
}
SAVED_FILE = Path("doctor") / "saved-sysctls.json"  # under contestants.cache_root()

_IO_URING_SETUP_SYSCALL = 425  # same number on every architecture (the unified syscall table)


@dataclass
class Check:
    name: str
    value: str
    meaning: str
    status: str  # "ok" | "warn" | "fail"
    fix: str | None = None
    # The sysctl and value that apply=True writes when the status is not ok.
    sysctl: tuple[str, str] | None = None
    # Why apply=True cannot fix it, when it cannot.
    manual_only: str | None = None


def _int_sysctl(name: str) -> int | None:
    value = read_sysctl(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _triple_sysctl(name: str) -> list[int] | None:
    value = read_sysctl(name)
    try:
        return [int(v) for v in value.split()] if value else None
    except ValueError:
        return None


def _open_files_limits() -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = 2**31
    return (unlimited if soft == resource.RLIM_INFINITY else soft,
            unlimited if hard == resource.RLIM_INFINITY else hard)


def port_range_size() -> int | None:
    ports = ephemeral_port_range()
    return ports[1] - ports[0] + 1 if ports else None


def max_connections() -> int:
    """Most concurrent client connections one generator process can hold here, to one target.

    Bounded by the open-files hard limit (any process may raise its soft limit to it; whoever starts
    netarena-load must do so) minus ``FD_SPARE``, and by the ephemeral ports of one source address.
    More needs several generator processes and/or ``netarena-load --source-ips``.
    """
    _, hard = _open_files_limits()
    by_fds = max(0, hard - FD_SPARE)
    ports = port_range_size()
    return min(by_fds, ports) if ports is not None else by_fds


def _fmt(n: int) -> str:
    return f"{n:,}"


def _check_open_files() -> Check:
    soft, hard = _open_files_limits()
    meaning = (
        f"open files hard limit {_fmt(hard)}: at most ~{_fmt(max(0, hard - FD_SPARE))} concurrent "
        f"connections per generator process; the server process needs its own."
    )
    if soft < hard:
        meaning += (f" The soft limit {_fmt(soft)} applies until a process raises it (no privilege "
                    f"needed up to the hard limit).")
    if hard >= RECOMMENDED_OPEN_FILES:
        status = "ok"
    elif hard >= 4096:
        status = "warn"
        meaning += f" Below {_fmt(RECOMMENDED_OPEN_FILES)}: seed 000's {_fmt(SEED_MAX_CONNECTIONS)}-connection runs need more."
    else:
        status = "fail"
        meaning += " Too low for runs of a few thousand connections."
    n = RECOMMENDED_OPEN_FILES
    return Check(
        name="open files (process)",
        value=f"soft {soft} / hard {hard}",
        meaning=meaning,
        status=status,
        fix=(f"ulimit -n {n} (as root, in the shell that starts netarena); permanent: "
             f"'* - nofile {n}' in /etc/security/limits.conf; containers: --ulimit nofile={n}:{n}"),
        manual_only="a per-process limit, inherited from the shell or container that started netarena",
    )


def _check_nr_open_file_max() -> Check:
    nr_open = _int_sysctl("fs.nr_open")
    file_max = _int_sysctl("fs.file-max")
    if nr_open is None or file_max is None:
        return Check("fs.nr_open / file-max", "unreadable", "cannot read /proc/sys/fs", "warn")
    meaning = (f"no process can have a hard open-files limit above fs.nr_open {_fmt(nr_open)}; the whole "
               f"machine can hold {_fmt(file_max)} open files (server + generator each hold one per connection).")
    status, sysctl, fix = "ok", None, None
    if nr_open < RECOMMENDED_OPEN_FILES:
        status = "warn"
        sysctl = ("fs.nr_open", str(RECOMMENDED_NR_OPEN))
        fix = f"sysctl -w fs.nr_open={RECOMMENDED_NR_OPEN}"
    elif file_max < RECOMMENDED_FILE_MAX:
        status = "warn"
        sysctl = ("fs.file-max", str(RECOMMENDED_FILE_MAX))
        fix = f"sysctl -w fs.file-max={RECOMMENDED_FILE_MAX}"
    return Check("fs.nr_open / file-max", f"{nr_open} / {file_max}", meaning, status, fix, sysctl)


def _check_min_sysctl(name: str, recommended: int, meaning_of) -> Check:
    value = _int_sysctl(name)
    if value is None:
        return Check(name, "unreadable", f"cannot read {sysctl_path(name)}", "warn")
    ok = value >= recommended
    return Check(
        name=name,
        value=str(value),
        meaning=meaning_of(value),
        status="ok" if ok else "warn",
        fix=None if ok else f"sysctl -w {name}={recommended}",
        sysctl=None if ok else (name, str(recommended)),
    )


def _check_somaxconn() -> Check:
    return _check_min_sysctl(
        "net.core.somaxconn", RECOMMENDED_SOMAXCONN,
        lambda v: (f"a listen backlog is capped at {_fmt(v)}: a server asking for 1,024 gets "
                   f"{_fmt(min(1024, v))}; a burst of connects beyond the backlog is dropped or reset."),
    )


def _check_syn_backlog() -> Check:
    cookies = _int_sysctl("net.ipv4.tcp_syncookies")
    return _check_min_sysctl(
        "net.ipv4.tcp_max_syn_backlog", RECOMMENDED_SYN_BACKLOG,
        lambda v: (f"{_fmt(v)} half-open connections queue per listener; beyond that "
                   + ("SYN cookies take over (tcp_syncookies=1), losing TCP options."
                      if cookies == 1 else "SYNs are dropped and the client retries after 1 s.")),
    )


def _check_port_range() -> Check:
    ports = ephemeral_port_range()
    name = "net.ipv4.ip_local_port_range"
    if not ports:
        return Check(name, "unreadable", f"cannot read {sysctl_path(name)}", "warn")
    low, high = ports
    count = high - low + 1
    meaning = (f"ephemeral ports {low}–{high}: {_fmt(count)} connections per source address to one "
               f"target; use netarena-load --source-ips for more. Closed connections hold their port "
               f"in TIME_WAIT for 60 s.")
    ok = count >= SEED_MAX_CONNECTIONS
    rec = f"{RECOMMENDED_PORT_RANGE[0]} {RECOMMENDED_PORT_RANGE[1]}"
    if not ok:
        meaning += f" Fewer than seed 000's {_fmt(SEED_MAX_CONNECTIONS)} connections."
    return Check(name, f"{low} {high}", meaning, "ok" if ok else "warn",
                 None if ok else f'sysctl -w {name}="{rec}"', None if ok else (name, rec))


def _check_tw_reuse() -> Check:
    name = "net.ipv4.tcp_tw_reuse"
    value = _int_sysctl(name)
    if value is None:
        return Check(name, "unreadable", f"cannot read {sysctl_path(name)}", "warn")
    count = port_range_size() or 0
    meanings = {
        0: (f"ports in TIME_WAIT are not reused: connection-per-request scenarios (--close) run out of "
            f"ports after ~{_fmt(count)} connections in 60 s (~{_fmt(count // 60)}/s sustained) per source address."),
        1: "ports in TIME_WAIT are reused for new outgoing connections: --close scenarios do not run out.",
        2: "ports in TIME_WAIT are reused on loopback only, which is all netarena uses: fine.",
    }
    ok = value in (1, 2)
    return Check(name, str(value), meanings.get(value, f"unknown value {value}"), "ok" if ok else "warn",
                 None if ok else f"sysctl -w {name}=1", None if ok else (name, "1"))


def _check_buffers() -> list[Check]:
    checks = []
    for name in ("net.core.rmem_max", "net.core.wmem_max"):
        direction = "receive" if "rmem" in name else "send"
        checks.append(_check_min_sysctl(
            name, RECOMMENDED_BUFFER_MAX_BYTES,
            lambda v, d=direction: f"a socket can ask for a {d} buffer (SO_{'RCV' if d == 'receive' else 'SND'}BUF) of at most {_fmt(v)} bytes.",
        ))
    for name in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        values = _triple_sysctl(name)
        if not values or len(values) != 3:
            checks.append(Check(name, "unreadable", f"cannot read {sysctl_path(name)}", "warn"))
            continue
        low, default, high = values
        per_32k = default * SEED_MAX_CONNECTIONS
        meaning = (f"TCP {'receive' if 'rmem' in name else 'send'} buffers start at {_fmt(default)} bytes "
                   f"and autotune up to {_fmt(high)}; {_fmt(SEED_MAX_CONNECTIONS)} connections at the "
                   f"default could pin up to {per_32k / 2**30:.1f} GiB.")
        ok = high >= RECOMMENDED_BUFFER_MAX_BYTES
        rec = f"{low} {default} {RECOMMENDED_BUFFER_MAX_BYTES}"
        checks.append(Check(name, " ".join(map(str, values)), meaning, "ok" if ok else "warn",
                            None if ok else f'sysctl -w {name}="{rec}"', None if ok else (name, rec)))
    return checks


def _siblings(cpu: int) -> str | None:
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _check_cpus() -> list[Check]:
    available = sorted(os.sched_getaffinity(0))
    logical = os.cpu_count() or len(available)
    cores = {_siblings(c) for c in available}
    cores.discard(None)
    if len(available) < 2:
        split = Check("CPU split", f"{len(available)} of {logical}",
                      "only one CPU available: server and generator would share it, and results would "
                      "measure their contention, not the server.", "fail",
                      "run on a machine (or with a cpuset) giving this process at least 2 CPUs")
    elif cores and len(cores) < 2:
        split = Check("CPU split", f"CPUs {available}",
                      "server and generator can get separate CPUs, but they are SMT siblings of one core "
                      "and share its execution units.", "warn",
                      "give netarena CPUs on two physical cores (taskset/cpuset)")
    else:
        split = Check("CPU split", f"CPUs {available}",
                      f"{len(available)} CPUs available: the server and the generator get disjoint CPU sets "
                      f"(e.g. server on CPU {available[0]}, generator on CPU {available[-1]}).", "ok")

    governors = cpu_governors()
    if governors is None:
        governor = Check("CPU governor", "not exposed",
                         "no cpufreq in /sys (typical of VMs/containers): the host decides clock speed; "
                         "expect run-to-run variation, hence repeats and medians.", "warn",
                         "nothing to do from inside; on the host: cpupower frequency-set -g performance",
                         manual_only="no cpufreq interface here")
    else:
        kinds = sorted(set(governors.values()))
        ok = kinds == ["performance"]
        governor = Check("CPU governor", ", ".join(kinds),
                         "all CPUs run at full speed." if ok else
                         "clock speed follows load: the first seconds of a run and lightly loaded CPUs run "
                         "slower, which skews comparisons.",
                         "ok" if ok else "warn",
                         None if ok else "cpupower frequency-set -g performance "
                         "(or echo performance > /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
                         manual_only=None if ok else "not a sysctl; netarena does not change CPU frequency policy")
    return [split, governor]


def io_uring_usable() -> tuple[bool, str]:
    """Whether io_uring_setup works for this process, by calling it (seccomp can block it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        return False, f"cannot load libc: {exc}"
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(_IO_URING_SETUP_SYSCALL, 1, params)
    if fd >= 0:
        os.close(fd)
        return True, "io_uring_setup succeeded"
    err = ctypes.get_errno()
    return False, f"io_uring_setup failed: {errno.errorcode.get(err, err)} ({os.strerror(err)})"


def _check_io_uring() -> Check:
    disabled = _int_sysctl("kernel.io_uring_disabled")
    usable, detail = io_uring_usable()
    meanings = {0: "enabled for all processes", 1: "restricted to the kernel.io_uring_group group",
                2: "disabled for everyone"}
    value = "no sysctl" if disabled is None else str(disabled)
    sysctl_part = (f"kernel.io_uring_disabled={disabled}: {meanings.get(disabled, 'unknown')}; "
                   if disabled is not None else "")
    if usable:
        return Check("io_uring", value, sysctl_part + "a test ring was created: io_uring contestants can run.", "ok")
    return Check("io_uring", value,
                 sysctl_part + f"{detail}: io_uring contestants cannot run here.", "warn",
                 "sysctl -w kernel.io_uring_disabled=0" if disabled else
                 "allow io_uring_setup/enter/register in the container's seccomp profile",
                 ("kernel.io_uring_disabled", "0") if disabled else None,
                 manual_only=None if disabled else "blocked outside the kernel's sysctl (seccomp or kernel build)")


# How long doctor watches the machine's CPU steal, and how many timer wake-ups it times (each TIMER_SLEEP_S).
STEAL_SAMPLE_S = 1.0
TIMER_SAMPLES = 200
TIMER_SLEEP_S = 0.001
# Above this wake-up lateness p99 a timer-paced sender misses its schedule: netarena-load's open loop flags a
# send lag p99 above 1 ms as rate_not_met.
TIMER_LATE_P99_WARN_US = 1000.0


def machine_steal_pct(seconds: float = STEAL_SAMPLE_S) -> float | None:
    """CPU steal over `seconds`: the hypervisor's share of all CPUs' time (/proc/stat), as the run's monitor
    summarizes it per measurement; None when no clock tick passed."""
    before = psutil.cpu_times()
    time.sleep(seconds)
    after = psutil.cpu_times()
    delta = {name: max(0.0, getattr(after, name) - getattr(before, name)) for name in after._fields}
    total = sum(delta[name] for name in delta if name not in ("guest", "guest_nice"))  # already in user/nice
    return 100.0 * delta.get("steal", 0.0) / total if total > 0 else None


def timer_lateness_us(samples: int = TIMER_SAMPLES, sleep_s: float = TIMER_SLEEP_S) -> tuple[float, float]:
    """(p50, p99) in µs of how late a sleep of `sleep_s` wakes up: the timer slack, the scheduler's wake-up
    latency and any CPU steal at that moment, plus Python's own overhead (tens of µs, so an upper bound)."""
    late = []
    for _ in range(samples):
        start = time.perf_counter()
        time.sleep(sleep_s)
        late.append((time.perf_counter() - start - sleep_s) * 1e6)
    late.sort()
    return late[len(late) // 2], late[min(len(late) - 1, int(0.99 * len(late)))]


# The CPU speed check: units of netarena-load's fixed CPU loop (about 5 ms each on a 2.5 GHz core, so about
# 1 s a CPU) on each CPU a default run uses, and how far the median unit may be from the fastest before the
# check warns.
STEADINESS_UNITS = 200
STEADINESS_WARN_PCT = 3.0


def _check_cpu_speed() -> list[Check]:
    """Does a CPU run the same instructions at the same speed from one moment to the next? Steal counts only
    the time the hypervisor took the CPU away; a host can also slow a CPU it leaves running (a busy sibling
    hyperthread, a lower clock, a neighbour's cache traffic), which no counter in the VM shows. The fixed
    loop's units, timed back to back, show it: their median against their fastest."""
    from .generator import GeneratorMissing, calibrate_cpu, find_generator

    try:
        generator = find_generator()
    except GeneratorMissing as exc:
        return [Check("CPU speed", "not measured", f"netarena-load is needed for this check: {exc}", "warn",
                      "make setup (builds netarena-load)")]
    available = sorted(os.sched_getaffinity(0))
    cpus = [available[0], available[1]] if len(available) >= 2 else available[:1]  # a run's server, generator
    figures, worst = [], 0.0
    for cpu in cpus:
        found = calibrate_cpu(generator, cpu, STEADINESS_UNITS)
        if found.get("error") or not found.get("us_per_unit_min"):
            return [Check("CPU speed", "not measured", f"the fixed CPU loop failed on CPU {cpu}: "
                          f"{found.get('error', 'no figures')}", "warn",
                          manual_only="see the error; the check is context, runs work without it")]
        above = 100.0 * (found["us_per_unit"] / found["us_per_unit_min"] - 1)
        slowest = 100.0 * (found["us_per_unit_max"] / found["us_per_unit_min"] - 1)
        worst = max(worst, above)
        figures.append(f"CPU {cpu}: median +{above:.1f}%, slowest +{slowest:.0f}%")
    unsteady = worst > STEADINESS_WARN_PCT
    return [Check(
        "CPU speed", "; ".join(figures),
        f"{STEADINESS_UNITS} units of a fixed CPU loop, back to back on each CPU a run uses, against the fastest "
        "unit: " + (
            f"the median unit ran {worst:.1f}% slower than the fastest while the loop had its CPU (steal does not "
            "count this): the host runs this VM's CPUs at a varying speed. A CPU-bound server's throughput, and "
            "its CPU time per request, vary from repeat to repeat by at least as much; intervals narrower than "
            "that need many repeats (--precision) or a steadier host." if unsteady else
            f"steady within {STEADINESS_WARN_PCT:g}% at the median: the CPUs ran the same work at the same speed "
            "while this check ran (a host's speed can change later: the run's calibration records it again)."),
        "warn" if unsteady else "ok",
        "a host with dedicated physical cores (no busy sibling hyperthreads), or more repeats" if unsteady else None,
        manual_only="the host's, not a setting of this machine" if unsteady else None)]


def _check_generator_build() -> Check:
    """Which build of netarena-load a run here would use: the release build is the measured one."""
    from .generator import GeneratorMissing, find_generator
    from .generator_build import generator_version, not_the_release_build

    try:
        generator = find_generator()
    except GeneratorMissing as exc:
        return Check("load generator", "not found", str(exc), "warn", "make setup (builds netarena-load)")
    says = generator_version(generator) or "no --version"
    why_not = not_the_release_build(says)
    if why_not:
        return Check("load generator", f"{says} at {generator}", why_not + ".", "warn", "make setup")
    return Check("load generator", f"{says} at {generator}",
                 "the generator runs use; its CPU per request is what bench/loadgen_vs_wrk.py measures.", "ok")


def _check_noise() -> list[Check]:
    """The machine's noise before a run: CPU steal now, and how late a timer wakes up."""
    from .stats import NOISY_STEAL_PCT

    steal = machine_steal_pct()
    if steal is None:
        steal_check = Check("CPU steal", "unknown", "no clock tick passed while sampling /proc/stat.", "warn",
                            manual_only="nothing to change; run doctor again")
    else:
        noisy = steal > NOISY_STEAL_PCT
        steal_check = Check(
            "CPU steal", f"{steal:.1f}% over {STEAL_SAMPLE_S:g} s",
            (f"the hypervisor ran something else for {steal:.1f}% of this VM's CPU time: throughput will vary "
             f"with it; measurements above {NOISY_STEAL_PCT:g}% are badged NOISY and re-measured (CPU per request "
             "still holds)." if noisy else
             f"the hypervisor took {steal:.1f}% of the CPU time (measurements are called noisy above "
             f"{NOISY_STEAL_PCT:g}%)."), "warn" if noisy else "ok",
            "a dedicated or less loaded host (bare metal, dedicated vCPUs)" if noisy else None,
            manual_only="steal is the host's, not a setting of this machine" if noisy else None)
    p50_us, p99_us = timer_lateness_us()
    late = p99_us > TIMER_LATE_P99_WARN_US
    timer_check = Check(
        "timer noise", f"late p50 {p50_us:.0f} µs, p99 {p99_us:.0f} µs",
        f"{TIMER_SAMPLES} sleeps of {TIMER_SLEEP_S * 1e3:g} ms woke up this late (timer slack, wake-up latency, "
        "steal, Python's overhead): " + (
            f"above {TIMER_LATE_P99_WARN_US:g} µs at p99 an open-loop level cannot keep its schedule (RATE badge) "
            "unless the generator busy-polls (--spin-us)." if late else
            "fine for open-loop levels."), "warn" if late else "ok",
        "a quieter machine, or CPUs nothing else runs on" if late else None,
        manual_only="the machine's load and the host's scheduling, not a setting" if late else None)
    return [steal_check, timer_check]


def collect_checks() -> list[Check]:
    return [
        _check_open_files(),
        _check_nr_open_file_max(),
        _check_somaxconn(),
        _check_syn_backlog(),
        _check_port_range(),
        _check_tw_reuse(),
        *_check_buffers(),
        *_check_cpus(),
        _check_io_uring(),
        _check_generator_build(),
        *_check_noise(),
        *_check_cpu_speed(),
    ]


_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def _render(checks: list[Check], console: Console) -> None:
    table = Table(title="netarena doctor", show_lines=True, expand=False)
    table.add_column("check", max_width=20, overflow="fold")
    table.add_column("value", max_width=16, overflow="fold")
    table.add_column("status", width=6)
    table.add_column("what it means / how to raise it", ratio=1, overflow="fold")
    for check in checks:
        text = styled(check.meaning)
        if check.fix and check.status != "ok":
            text = styled(check.meaning, "\n", ("fix:", "bold"), " ", check.fix)
        table.add_row(check.name, check.value, styled((check.status, _STYLE[check.status])), text)
    console.print(table)
    console.print(f"One generator process can hold at most {_fmt(max_connections())} concurrent connections "
                  f"to one target here (open files and ephemeral ports of one source address); a run spreads a "
                  f"larger level over several processes and source addresses.")


def _write_sysctl(name: str, value: str) -> str | None:
    """Write a sysctl; returns the error message, or None when the value reads back as written."""
    try:
        sysctl_path(name).write_text(value + "\n")
    except OSError as exc:
        return exc.strerror or str(exc)
    now = read_sysctl(name)
    if now != " ".join(value.split()):
        return f"kernel kept {now!r}"
    return None


def can_raise_open_files_hard_limit(target: int) -> bool:
    """Whether this process may raise its hard open-files limit to target (tried in a child)."""
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _apply(checks: list[Check], console: Console) -> int:
    failures = 0
    console.print(styled(("Applying recommended changes", "bold")))
    for check in checks:
        if check.status == "ok":
            continue
        if check.sysctl is not None:
            name, value = check.sysctl
            old = read_sysctl(name)
            error = _write_sysctl(name, value)
            if error is None:
                console.print(f"  changed {name}: {old} → {read_sysctl(name)}")
            else:
                failures += 1
                console.print(styled("  ", ("could not change", "red"), f" {name} ({old} → {value}): {error}"))
        else:
            reason = check.manual_only or "no automatic fix"
            if check.name == "open files (process)":
                _, hard = _open_files_limits()
                if can_raise_open_files_hard_limit(RECOMMENDED_OPEN_FILES):
                    reason += "; root may raise it here (up to fs.nr_open), so the command below works"
                else:
                    reason += (f"; this process may not raise its hard limit above {hard} (EPERM: the "
                               f"container or its runtime forbids it), so only the container's "
                               f"settings can change it")
            console.print(styled("  ", ("not changed", "yellow"), f" {check.name}: {reason}."
                                 + (f" Run: {check.fix}" if check.fix else "")))
    console.print("  sysctl changes last until reboot; to keep them, put them in /etc/sysctl.d/90-netarena.conf.")
    return failures


def run_doctor(apply: bool, console: Console) -> int:
    """Print the checks; with apply=True (root) write the recommended sysctls.

    Returns 0 when nothing fails, 1 when a check fails or a change could not be made, 2 when
    apply=True is asked without root.
    """
    if apply and os.geteuid() != 0:
        console.print(styled(("netarena doctor --apply needs root", "red"), " (it writes /proc/sys). Run it with "
                             "sudo, or run without --apply to only see the checks and the commands."))
        return 2
    checks = collect_checks()
    _render(checks, console)
    apply_failures = 0
    if apply:
        apply_failures = _apply(checks, console)
        checks = collect_checks()
        remaining = ", ".join(f"{c.name} {c.status}" for c in checks if c.status != "ok")
        console.print(styled(("After applying:", "bold"), " " + (remaining or "all checks ok")))
    return 1 if apply_failures or any(c.status == "fail" for c in checks) else 0


# ----------------------------------------------------------------------------- seed profiles


def saved_path() -> Path:
    from netarena.contestants import cache_root

    return cache_root() / SAVED_FILE


def _needs_root(what: str, console: Console) -> int | None:
    if os.geteuid() == 0:
        return None
    console.print(styled((f"netarena doctor {what} needs root", "red"), " (it writes /proc/sys). Run it with sudo."))
    return 2


def apply_profile(name: str, console: Console) -> int:
    """Set a seed's sysctls (PROFILES[name]), saving the values replaced first. All or nothing: when one
    cannot be written, those already written are put back. Returns 0, 1 (a write failed) or 2 (not root)."""
    refused = _needs_root(f"--profile {name}", console)
    if refused is not None:
        return refused
    settings = PROFILES[name]
    path = saved_path()
    saved = json.loads(path.read_text()) if path.is_file() else \
        {"saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(), "profiles": [], "values": {}}
    missing = [n for n, _ in settings if read_sysctl(n) is None]
    if missing:
        console.print(styled(("cannot apply", "red"), f" {name}: {', '.join(missing)} not readable here "
                             "(a network namespace has no host-wide settings); nothing changed"))
        return 1
    for sysctl, _ in settings:
        saved["values"].setdefault(sysctl, read_sysctl(sysctl))  # the first profile's originals stay
    saved["profiles"] = [*saved["profiles"], name]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1) + "\n")
    done: list[tuple[str, str]] = []
    for sysctl, value in settings:
        old = read_sysctl(sysctl)
        error = _write_sysctl(sysctl, value)
        if error is not None:
            for back, previous in reversed(done):
                _write_sysctl(back, previous)
            console.print(styled(("could not change", "red"), f" {sysctl} ({old} → {value}): {error}; the "
                                 f"{len(done)} changed before it were put back"))
            return 1
        done.append((sysctl, old))
        console.print(f"  set {sysctl}: {old} → {read_sysctl(sysctl)}")
    console.print(f"profile {name} applied; the values it replaced are saved in {path}: `netarena doctor "
                  "--restore` puts them back (sysctl changes also end at reboot)")
    return 0


def restore_saved(console: Console) -> int:
    """Write back the values apply_profile saved and forget them. Returns 0, 1 (a write failed: those are
    kept in the file), or 2 (not root, or nothing saved)."""
    refused = _needs_root("--restore", console)
    if refused is not None:
        return refused
    path = saved_path()
    if not path.is_file():
        console.print(styled(("nothing to restore", "red"), f": no saved values in {path}; only `netarena "
                             "doctor --profile NAME` saves them (with the same NETARENA_CACHE)"))
        return 2
    saved = json.loads(path.read_text())
    failed: dict[str, str] = {}
    for sysctl, value in saved["values"].items():
        now = read_sysctl(sysctl)
        error = _write_sysctl(sysctl, value)
        if error is None:
            console.print(f"  restored {sysctl}: {now} → {read_sysctl(sysctl)}")
        else:
            failed[sysctl] = value
            console.print(styled("  ", ("could not restore", "red"), f" {sysctl} ({now} → {value}): {error}"))
    if failed:
        path.write_text(json.dumps(dict(saved, values=failed), indent=1) + "\n")
        return 1
    path.unlink()
    console.print(f"restored the values saved before {', '.join(saved['profiles'])}")
    return 0
