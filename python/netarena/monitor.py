"""Resource monitor: samples the server's and the generator's process trees and system counters.

A background thread wakes every ``interval_s`` and records, for each watched process tree (the root
and every descendant, including processes forked later and processes reparented away from the tree
after we first saw them), cumulative CPU user/system seconds, summed RSS, process/thread/fd counts and
cumulative context switches, cumulative time its threads spent runnable but waiting for a CPU (``run_delay_s``,
the second field of /proc/PID/task/TID/schedstat), and the CPUs its processes were allowed to run on
(``cpus_allowed``); and system-wide (seed 000's vmstat table) context switches/s, interrupts/s, CPU
user/system/idle/iowait/steal % and each CPU's busy % and process % (user + nice + system: what processes used
it, for stats.contention's others on a side's CPUs).

Reading each thread's schedstat beside its status file adds one small read per thread per sample to the cost
below (bench/monitor_cost.py measures it).

Process counters are read straight from /proc rather than through psutil.Process because the cost
budget (< 1% of a core at 250 ms) and correctness both need it:

- psutil's ``num_ctx_switches`` reads /proc/PID/status, which counts the *main thread only*; a
  multi-threaded server (Go, the JVM, a thread pool) would show a fraction of its switches. We sum
  /proc/PID/task/TID/status over the live threads instead.
- Finding descendants with psutil rereads /proc/*/stat for every process on the machine every
  sample. A process's parent only changes when it is reparented (to init or a subreaper, i.e. out
  of the tree, and such processes stay tracked by PID), so we read the parent of each PID once and
  keep it until the PID disappears from /proc.
- On Linux >= 6.2, ``stat("/proc/PID/fd").st_size`` is the number of open fds, which is O(1) where
  listing a directory of 20,000 sockets is not.

System counters come from psutil (``cpu_times(percpu=True)``, ``cpu_stats``), i.e. /proc/stat.

CPU of processes that exit is kept: a process reaped by its parent inside the tree shows up in the
parent's cutime/cstime (the kernel adds it on wait), so per process we count own + children's time.
A process whose parent is gone (reaped outside the tree) keeps the last value we saw. A final guard
keeps every cumulative total from ever going backwards (e.g. a child auto-reaped with SIGCHLD
ignored, whose time the kernel does not add to the parent): the drop is added back as an offset.
Honest limits: CPU a process used after our last sample and before an unwaited exit is lost, and so
are the context switches and run delay of threads that exited (the kernel does not expose them in /proc).

RSS is summed over processes, so pages shared by forked workers are counted once per worker (an
upper bound on real memory use; PSS would be exact but costs a page-table walk per process).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE_BYTES = os.sysconf("SC_PAGE_SIZE")
# Larger than /proc/PID/stat and /proc/PID/task/TID/status (about 1.5 KiB), so one read(2) gets all of it.
_PROC_READ_BYTES = 16384


class MonitorError(RuntimeError):
    pass


@dataclass
class _Stat:
    """The fields of /proc/PID/stat that we use (man 5 proc numbering in comments)."""

    state: str
    ppid: int
    utime_ticks: int  # 14
    stime_ticks: int  # 15
    cutime_ticks: int  # 16: waited-for children, recursively
    cstime_ticks: int  # 17
    num_threads: int  # 20
    starttime_ticks: int  # 22: with the PID, identifies a process across PID reuse
    rss_pages: int  # 24


def _read_proc(path: str) -> bytes | None:
    """A small /proc file in one read(2). Raw os calls: a Python file object (open, buffer, close) costs
    about twice as much, and the sampler reads one status file per thread every interval."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # vanished (ENOENT/ESRCH) or not ours to read
        return None
    try:
        return os.read(fd, _PROC_READ_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_stat(pid: int) -> _Stat | None:
    raw = _read_proc(f"/proc/{pid}/stat")
    if raw is None:
        return None
    # comm (field 2) may contain spaces and ')', so split after the last ')'.
    rest = raw[raw.rfind(b")") + 2 :].split()
    try:
        return _Stat(
            state=rest[0].decode(),
            ppid=int(rest[1]),
            utime_ticks=int(rest[11]),
            stime_ticks=int(rest[12]),
            cutime_ticks=int(rest[13]),
            cstime_ticks=int(rest[14]),
            num_threads=int(rest[17]),
            starttime_ticks=int(rest[19]),
            rss_pages=int(rest[21]),
        )
    except (IndexError, ValueError):
        return None


def _read_threads(pid: int, num_threads: int) -> tuple[int, int, int]:
    """Voluntary and involuntary switches, and run delay in ns (time runnable but waiting for a CPU), summed over
    the process's live threads. Run delay is the second field of schedstat, kept per thread like the switches
    (/proc/PID/schedstat is the main thread's only); 0 on a kernel without scheduler statistics
    (CONFIG_SCHED_INFO off), where the file is missing."""
    voluntary = involuntary = run_delay_ns = 0
    if num_threads == 1:
        # /proc/PID/status is the main thread's, i.e. all of a single-threaded process: no task listing.
        dirs = [f"/proc/{pid}"]
    else:
        try:
            dirs = [f"/proc/{pid}/task/{tid}" for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return 0, 0, 0
    for path in dirs:
        text = _read_proc(path + "/status")
        if text is None:
            continue  # thread exited between listing and reading
        try:
            i = text.index(b"\nvoluntary_ctxt_switches:") + 25
            j = text.index(b"\nnonvoluntary_ctxt_switches:") + 28
            voluntary += int(text[i : text.index(b"\n", i)])
            involuntary += int(text[j : text.index(b"\n", j)])
        except ValueError:
            pass  # a kernel without these lines: leave the counts at what we have
        schedstat = _read_proc(path + "/schedstat")
        if schedstat is not None:
            fields = schedstat.split()
            if len(fields) >= 2:
                run_delay_ns += int(fields[1])
    return voluntary, involuntary, run_delay_ns


def _count_fds(pid: int) -> int:
    path = f"/proc/{pid}/fd"
    try:
        size = os.stat(path).st_size
        if size > 0:
            return size
        return len(os.listdir(path))  # kernels before 6.2 report st_size 0
    except OSError:
        return 0


@dataclass
class _Proc:
    starttime_ticks: int
    ppid: int
    cpu_user_ticks: int = 0  # own + waited-for children
    cpu_sys_ticks: int = 0
    ctx_voluntary: int = 0
    ctx_involuntary: int = 0
    run_delay_ns: int = 0


@dataclass
class _Tree:
    """One watched process tree and the accounting that keeps its totals cumulative."""

    root_pid: int
    tracked: dict[int, _Proc] = field(default_factory=dict)
    # Values of processes that vanished and whose time the kernel did not hand to a tracked parent.
    gone_user_ticks: int = 0
    gone_sys_ticks: int = 0
    gone_voluntary: int = 0
    gone_involuntary: int = 0
    gone_run_delay_ns: int = 0
    # Added back whenever a raw total would go down (see module docstring).
    offsets: dict[str, int] = field(
        default_factory=lambda: {"user": 0, "sys": 0, "vol": 0, "invol": 0, "delay": 0}
    )
    previous: dict[str, int] = field(
        default_factory=lambda: {"user": 0, "sys": 0, "vol": 0, "invol": 0, "delay": 0}
    )
    started: bool = False
    # CPUs any process of the tree was allowed to run on, read once per process when first seen: the record
    # that the pinning (server and generator CPU sets) held for the processes actually measured.
    cpus_allowed: set[int] = field(default_factory=set)

    def _track(self, pid: int, st: _Stat) -> None:
        self.tracked[pid] = _Proc(st.starttime_ticks, st.ppid)
        try:
            self.cpus_allowed.update(os.sched_getaffinity(pid))
        except OSError:  # exited already
            pass

    def sample(self, t_s: float, children_of: dict[int, list[int]], stat_cache: dict[int, _Stat]) -> dict:
        vanished: list[tuple[int, _Proc]] = []
        alive: dict[int, _Stat] = {}
        for pid, proc in list(self.tracked.items()):
            st = stat_cache.get(pid) or _read_stat(pid)
            if st is None or st.starttime_ticks != proc.starttime_ticks:
                vanished.append((pid, proc))
                del self.tracked[pid]
            else:
                stat_cache[pid] = st
                alive[pid] = st

        # Discover new descendants of the root and of every tracked process.
        if not self.started:
            st = _read_stat(self.root_pid)
            if st is not None:
                self._track(self.root_pid, st)
                alive[self.root_pid] = st
            self.started = True
        frontier = list(alive)
        while frontier:
            pid = frontier.pop()
            for child in children_of.get(pid, ()):
                if child in alive:
                    continue
                st = stat_cache.get(child) or _read_stat(child)
                if st is None or st.ppid != pid:
                    continue
                stat_cache[child] = st
                alive[child] = st
                self._track(child, st)
                frontier.append(child)

        vanished_by_pid = {pid: proc for pid, proc in vanished}
        for pid, proc in vanished:
            # Reaped by a live tracked ancestor (through parents that vanished in the same interval):
            # its time is now in that ancestor's cutime/cstime. If nobody waited for it, the
            # monotonic guard below catches the drop.
            ancestor, seen = proc.ppid, {pid}
            while ancestor in vanished_by_pid and ancestor not in seen:
                seen.add(ancestor)
                ancestor = vanished_by_pid[ancestor].ppid
            if ancestor not in alive:
                self.gone_user_ticks += proc.cpu_user_ticks
                self.gone_sys_ticks += proc.cpu_sys_ticks
            # Context switches and run delay are never handed to the parent.
            self.gone_voluntary += proc.ctx_voluntary
            self.gone_involuntary += proc.ctx_involuntary
            self.gone_run_delay_ns += proc.run_delay_ns

        user = self.gone_user_ticks
        sys_ = self.gone_sys_ticks
        vol = self.gone_voluntary
        invol = self.gone_involuntary
        delay = self.gone_run_delay_ns
        rss_pages = threads = fds = 0
        for pid, st in alive.items():
            proc = self.tracked[pid]
            proc.ppid = st.ppid
            proc.cpu_user_ticks = st.utime_ticks + st.cutime_ticks
            proc.cpu_sys_ticks = st.stime_ticks + st.cstime_ticks
            user += proc.cpu_user_ticks
            sys_ += proc.cpu_sys_ticks
            rss_pages += st.rss_pages
            threads += st.num_threads
            if st.state != "Z":
                proc.ctx_voluntary, proc.ctx_involuntary, proc.run_delay_ns = _read_threads(pid, st.num_threads)
                fds += _count_fds(pid)
            vol += proc.ctx_voluntary
            invol += proc.ctx_involuntary
            delay += proc.run_delay_ns

        totals = {}
        for name, raw in (("user", user), ("sys", sys_), ("vol", vol), ("invol", invol), ("delay", delay)):
            value = raw + self.offsets[name]
            if value < self.previous[name]:
                self.offsets[name] += self.previous[name] - value
                value = self.previous[name]
            self.previous[name] = value
            totals[name] = value

        return {
            "t_s": round(t_s, 4),
            "cpu_user_s": totals["user"] / _CLOCK_TICKS_PER_S,
            "cpu_sys_s": totals["sys"] / _CLOCK_TICKS_PER_S,
            "rss_bytes": rss_pages * _PAGE_SIZE_BYTES,
            "processes": len(alive),
            "threads": threads,
            "fds": fds,
            "ctx_voluntary": totals["vol"],
            "ctx_involuntary": totals["invol"],
            "run_delay_s": totals["delay"] / 1e9,
        }


class _ParentIndex:
    """PID -> parent PID for every process on the machine, updated incrementally.

    Only PIDs new since the last sample have their /proc/PID/stat read (see module docstring).
    """

    def __init__(self) -> None:
        self._ppid: dict[int, int] = {}

    def refresh(self, stat_cache: dict[int, _Stat]) -> dict[int, list[int]]:
        current: set[int] = set()
        for name in os.listdir("/proc"):
            if name.isdigit():
                current.add(int(name))
        for pid in list(self._ppid):
            if pid not in current:
                del self._ppid[pid]
        for pid in current:
            if pid not in self._ppid:
                st = _read_stat(pid)
                if st is not None:
                    self._ppid[pid] = st.ppid
                    stat_cache[pid] = st
        children_of: dict[int, list[int]] = {}
        for pid, ppid in self._ppid.items():
            children_of.setdefault(ppid, []).append(pid)
        return children_of

    def update(self, pid: int, ppid: int) -> None:
        self._ppid[pid] = ppid


_SYSTEM_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _cpu_row(t: Any) -> dict[str, float]:
    return {name: getattr(t, name, 0.0) for name in _SYSTEM_FIELDS}


class _SystemSampler:
    def __init__(self, min_interval_s: float) -> None:
        self._previous: tuple[float, list[dict[str, float]], Any] | None = None
        # The final sample (at stop) can come right after a regular one; tick-granular counters
        # over a few ms are noise, so such a short interval is not reported.
        self._min_interval_s = min_interval_s

    def sample(self, t_s: float) -> dict | None:
        if self._previous is not None and t_s - self._previous[0] < self._min_interval_s:
            return None
        per_cpu = [_cpu_row(t) for t in psutil.cpu_times(percpu=True)]
        stats = psutil.cpu_stats()
        previous, self._previous = self._previous, (t_s, per_cpu, stats)
        if previous is None:
            return None
        prev_t_s, prev_per_cpu, prev_stats = previous
        dt_s = t_s - prev_t_s

        def share(delta: dict[str, float], names: tuple[str, ...]) -> float | None:
            total = sum(delta.values())
            if total <= 0:
                return None  # no clock tick in the interval (USER_HZ is 100): no information
            return round(100.0 * sum(delta[n] for n in names) / total, 2)

        deltas = [
            {n: max(0.0, now[n] - before[n]) for n in _SYSTEM_FIELDS}
            for now, before in zip(per_cpu, prev_per_cpu)
        ]
        whole = {n: sum(d[n] for d in deltas) for n in _SYSTEM_FIELDS}
        # vmstat's columns: "us" includes nice, "sy" includes hard and soft interrupts.
        return {
            "t_s": round(t_s, 4),
            "ctx_switches_per_s": round((stats.ctx_switches - prev_stats.ctx_switches) / dt_s, 1),
            "interrupts_per_s": round((stats.interrupts - prev_stats.interrupts) / dt_s, 1),
            "cpu_user_pct": share(whole, ("user", "nice")),
            "cpu_sys_pct": share(whole, ("system", "irq", "softirq")),
            "cpu_idle_pct": share(whole, ("idle",)),
            "cpu_iowait_pct": share(whole, ("iowait",)),
            "cpu_steal_pct": share(whole, ("steal",)),
            "per_cpu_busy_pct": [
                share(d, ("user", "nice", "system", "irq", "softirq", "steal")) for d in deltas
            ],
            # Each CPU's time in processes (user, nice, system), without interrupts and steal: what the processes
            # on it used, comparable with the watched trees' own CPU (stats.contention: others on their CPUs).
            "per_cpu_task_pct": [share(d, ("user", "nice", "system")) for d in deltas],
        }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_tree(samples: list[dict]) -> dict | None:
    """Window totals (last sample minus first) and peaks/means of one tree's samples."""
    if not samples:
        return None
    first, last = samples[0], samples[-1]
    elapsed_s = last["t_s"] - first["t_s"]
    user_s = last["cpu_user_s"] - first["cpu_user_s"]
    sys_s = last["cpu_sys_s"] - first["cpu_sys_s"]
    return {
        "cpu_user_s": round(user_s, 3),
        "cpu_sys_s": round(sys_s, 3),
        # Percent of one core, like top: 200 means two cores fully busy.
        "cpu_pct_mean": round(100.0 * (user_s + sys_s) / elapsed_s, 2) if elapsed_s > 0 else None,
        "rss_peak_bytes": max(s["rss_bytes"] for s in samples),
        "rss_mean_bytes": int(_mean([s["rss_bytes"] for s in samples])),
        "threads_peak": max(s["threads"] for s in samples),
        "fds_peak": max(s["fds"] for s in samples),
        "ctx_voluntary": last["ctx_voluntary"] - first["ctx_voluntary"],
        "ctx_involuntary": last["ctx_involuntary"] - first["ctx_involuntary"],
        "processes_peak": max(s["processes"] for s in samples),
        # Seconds its threads (summed) were runnable but waited for a CPU; None in records made before the
        # monitor sampled it.
        "run_delay_s": round(last["run_delay_s"] - first["run_delay_s"], 6) if "run_delay_s" in last else None,
    }


def summarize_system(samples: list[dict]) -> dict | None:
    if not samples:
        return None

    def known_mean(values: list[float | None]) -> float | None:
        m = _mean([v for v in values if v is not None])
        return round(m, 2) if m is not None else None

    def mean(key: str) -> float | None:
        return known_mean([s[key] for s in samples])

    cpu_count = len(samples[0]["per_cpu_busy_pct"])
    return {
        "ctx_switches_per_s_mean": mean("ctx_switches_per_s"),
        "interrupts_per_s_mean": mean("interrupts_per_s"),
        "cpu_user_pct_mean": mean("cpu_user_pct"),
        "cpu_sys_pct_mean": mean("cpu_sys_pct"),
        "cpu_idle_pct_mean": mean("cpu_idle_pct"),
        "cpu_iowait_pct_mean": mean("cpu_iowait_pct"),
        # Time the hypervisor ran something else while a virtual CPU wanted to run, % of all CPUs' time.
        "cpu_steal_pct_mean": mean("cpu_steal_pct"),
        "per_cpu_busy_pct_mean": [
            known_mean([s["per_cpu_busy_pct"][i] for s in samples]) for i in range(cpu_count)
        ],
        # None in records made before the monitor sampled it.
        "per_cpu_task_pct_mean": [
            known_mean([s["per_cpu_task_pct"][i] for s in samples]) for i in range(cpu_count)
        ] if "per_cpu_task_pct" in samples[0] else None,
    }


def restrict_to_window(result: dict, start_unix: float, end_unix: float,
                       steps: list[tuple[float, float]] = ()) -> dict:
    """Recompute ``result["summary"]`` over the samples taken between two wall-clock instants (the
    generator's measured phase), so warm-up and start-up do not dilute CPU, context switches or peaks.

    Samples lie on a grid of ``interval_s``, so the window used is the span of the samples inside
    [start, end]: slightly shorter than the measured phase, never longer; rates are computed over that span.
    The whole-monitoring summary is kept as ``summary_whole``. With fewer than two samples inside, the
    result is returned unchanged and ``summary["window"]`` says why.

    ``steps``, the wall-clock windows of a sweep's or a find-max search's steps (one server start, many
    rates), give ``summary["steps"]``: the server tree's summary over each step's own samples, with the span
    it covers (``start_s``, ``end_s``), or the reason there is none (a step shorter than two sampling
    intervals).
    """
    origin = result.get("started_at_unix")
    if origin is None or "summary" not in result:
        return result

    def inside(samples: list[dict], start: float, end: float) -> list[dict]:
        return [x for x in samples if start - origin <= x["t_s"] <= end - origin]

    server = inside(result["server"], start_unix, end_unix)
    generator = inside(result["generator"], start_unix, end_unix)
    system = inside(result["system"], start_unix, end_unix)
    out = dict(result, summary_whole=result["summary"])
    if len(server) < 2:
        out["summary"] = dict(result["summary"], window={
            "measured_only": False, "reason": f"{len(server)} sample(s) fell inside the measured phase"})
        return out
    out["summary"] = dict(result["summary"], server=summarize_tree(server), generator=summarize_tree(generator),
                          system=summarize_system(system) if system else result["summary"]["system"],
                          services={name: summarize_tree(inside(samples, start_unix, end_unix))
                                    for name, samples in (result.get("services") or {}).items()},
                          window={"measured_only": True, "start_s": server[0]["t_s"], "end_s": server[-1]["t_s"]})
    if steps:
        per_step = []
        for start, end in steps:
            own = inside(result["server"], start, end)
            per_step.append(dict(summarize_tree(own), start_s=own[0]["t_s"], end_s=own[-1]["t_s"]) if len(own) >= 2
                            else {"reason": f"{len(own)} sample(s) fell inside the step"})
        out["summary"]["steps"] = per_step
    return out


class Monitor:
    """Samples the server's (and optionally the generator's) process tree in a background thread.

    Use as ``with Monitor(pid) as m: ...`` then ``m.result``, or ``start()`` / ``stop()``.
    """

    def __init__(self, server_pid: int, generator_pid: int | None = None, interval_s: float = 0.25,
                 services: dict[str, int] | None = None):
        if interval_s <= 0:
            raise MonitorError(f"interval_s must be > 0 (got {interval_s})")
        if not os.path.isdir("/proc/self/task"):
            raise MonitorError("the monitor reads /proc and needs Linux")
        self.interval_s = interval_s
        self._server = _Tree(server_pid)
        self._generator = _Tree(generator_pid) if generator_pid is not None else None
        # Backing services (a database behind the server), each its own tree: the server's CPU and the
        # database's side by side say which one was saturated.
        self._services = {name: _Tree(pid) for name, pid in (services or {}).items()}
        self._service_samples: dict[str, list[dict]] = {name: [] for name in self._services}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._server_samples: list[dict] = []
        self._generator_samples: list[dict] = []
        self._system_samples: list[dict] = []
        self._parents = _ParentIndex()
        self._system = _SystemSampler(min_interval_s=interval_s / 2)
        self._monitor_cpu_s = 0.0
        self._error: BaseException | None = None
        self._start_monotonic = 0.0
        self._stop_monotonic = 0.0
        self.result: dict | None = None

    def watch_generator(self, generator_pid: int) -> None:
        """Start watching a generator launched after the monitor (e.g. after warm-up checks)."""
        with self._lock:
            if self._generator is not None:
                raise MonitorError("a generator process is already being watched")
            self._generator = _Tree(generator_pid)

    def start(self) -> "Monitor":
        if self._thread is not None:
            raise MonitorError("Monitor.start() called twice")
        if not psutil.pid_exists(self._server.root_pid):
            raise MonitorError(f"server process {self._server.root_pid} does not exist")
        self._start_monotonic = time.monotonic()
        self._start_unix = time.time()  # maps sample times onto the generator's wall-clock stamps
        self._thread = threading.Thread(target=self._run, name="netarena-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        if self._thread is None:
            raise MonitorError("Monitor.stop() called before start()")
        if self.result is not None:
            return self.result
        self._stop_event.set()
        self._thread.join()
        if self._error is not None:
            raise MonitorError(f"the sampler thread failed: {self._error!r}") from self._error
        wall_s = self._stop_monotonic - self._start_monotonic
        self.result = {
            "interval_s": self.interval_s,
            "started_at_unix": self._start_unix,
            "server": self._server_samples,
            "generator": self._generator_samples,
            "system": self._system_samples,
            "services": self._service_samples,
            "cpus_allowed": {"server": sorted(self._server.cpus_allowed),
                             "generator": sorted(self._generator.cpus_allowed) if self._generator else None,
                             **({"services": {n: sorted(t.cpus_allowed) for n, t in self._services.items()}}
                                if self._services else {})},
            "summary": {
                "server": summarize_tree(self._server_samples),
                "generator": summarize_tree(self._generator_samples),
                "system": summarize_system(self._system_samples),
                "services": {name: summarize_tree(samples) for name, samples in self._service_samples.items()},
                "duration_s": round(wall_s, 4),
                "samples": len(self._server_samples),
                "monitor_cpu_s": round(self._monitor_cpu_s, 6),
                "monitor_cpu_pct": round(100.0 * self._monitor_cpu_s / wall_s, 4) if wall_s > 0 else None,
            },
        }
        return self.result

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _sample_once(self) -> None:
        t_s = time.monotonic() - self._start_monotonic
        stat_cache: dict[int, _Stat] = {}
        children_of = self._parents.refresh(stat_cache)
        with self._lock:
            trees = [(self._server, self._server_samples)]
            if self._generator is not None:
                trees.append((self._generator, self._generator_samples))
            trees += [(tree, self._service_samples[name]) for name, tree in self._services.items()]
        for tree, samples in trees:
            samples.append(tree.sample(t_s, children_of, stat_cache))
            for pid, proc in tree.tracked.items():
                self._parents.update(pid, proc.ppid)
        system = self._system.sample(t_s)
        if system is not None:
            self._system_samples.append(system)

    def _run(self) -> None:
        cpu_start_s = time.thread_time()
        try:
            next_s = self._start_monotonic
            while True:
                self._sample_once()
                if self._stop_event.is_set():
                    break  # the sample just taken is the final one, at stop time
                # A fixed grid, so sample times do not drift by the sampling cost; after a late
                # sample, skip grid points closer than half an interval (a 2 ms interval would
                # turn tick-granular counters into noise).
                now_s = time.monotonic()
                next_s += self.interval_s
                while next_s - now_s < self.interval_s / 2:
                    next_s += self.interval_s
                self._stop_event.wait(next_s - now_s)
        except BaseException as exc:  # surfaced by stop(); a dead sampler must not look like data
            self._error = exc
        finally:
            self._stop_monotonic = time.monotonic()
            self._monitor_cpu_s = time.thread_time() - cpu_start_s
