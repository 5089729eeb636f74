"""The run: plan the matrix, install, measure in interleaved rounds, store each result as it ends."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from . import __version__, precision, stats
from .config import SERVICE_SCENARIOS, Suite
from .contestants import (Contestant, Installed, InstallError, availability, cache_root, entry_measures,
                          INSTALLED, install_concurrently, install_current, install_estimate_s, install_parts, repo_root,
                          scenario_note)
from .doctor import FD_SPARE
from .errors import ConfigError
from .process import StopRequest, available_cpus, group_members, kill_group, process_start_time
from .scenarios import (STATIC_SET_VERSION, Level, build_static_files, levels_for, registry, static_set_ready,
                        sweep_rates)
from .store import STATUS_FAILED, STATUS_INTERRUPTED, Store, now_iso, row_to_dict

# Per measurement, beyond warm-up and duration: start, readiness, verification, stop (for the estimate).
ESTIMATED_OVERHEAD_S = 1.0
# Steps a find-max search usually measures: doubling from 100 req/s to a few thousand, then bisecting to 5%.
ESTIMATED_FIND_MAX_STEPS = 10
# Only for the time estimate of fixed-size echo floods: a middling echo server on loopback.
ESTIMATED_ECHO_BYTES_PER_S = 100e6
# A contestant that cannot start or answers wrongly will not do better in the next round; later repeats
# of the same (contestant, scenario, level) are recorded as not attempted instead of paying the timeout again.
# Failures that the next repeat of the same level would repeat: it is not attempted, and says why. A level whose
# `requests` were not answered within its time limit (requests_not_reached) would spend the whole limit again.
NO_RETRY_KINDS = ("start_failed", "not_ready", "verify_failed", "requests_not_reached")
# How much of an unexpected exception's traceback is kept with the measurement (or skip) it broke.
TRACEBACK_TAIL_CHARS = 4000


# Lines of a failed install's log printed under its warning (the whole tail is stored with the skip).
INSTALL_LOG_TAIL_LINES = 12


def minutes_seconds(seconds: float) -> str:
    """42.0 s, or 3 min 07 s from a minute on: how phase times and estimates are shown."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def traceback_tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-TRACEBACK_TAIL_CHARS:]


@dataclass(frozen=True)
class Item:
    contestant: str
    scenario: str
    level: Level


@dataclass
class Estimate:
    """A run's time, stated before it starts: its installs (from the cache's state: nothing for a contestant
    installed at its current hash with the parts the plan needs) and its measurements."""

    installs_s: float  # the install phase with `jobs` at once (longest first, each to the least-loaded job)
    measuring_s: float
    jobs: int
    # Per contestant to install: (name, seconds, where the figure comes from); installed ones are left out.
    installs: list[tuple[str, float, str]] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return self.installs_s + self.measuring_s

    def describe(self, longest: int = 3) -> str:
        """'installs 3 min 10 s (5 contestants, 2 at a time; longest: rust-hyper 3 min 00 s (default for rust),
        ...) + measuring ...': the `longest` installs named, with where each figure comes from."""
        if not self.installs:
            installs = "installs: none needed"
        else:
            ranked = sorted(self.installs, key=lambda one: -one[1])
            named = ", ".join(f"{name} {minutes_seconds(s)} ({source})" for name, s, source in ranked[:longest])
            installs = (f"installs {minutes_seconds(self.installs_s)} ({len(self.installs)} contestant(s), "
                        f"{self.jobs} at a time; longest: {named})")
        return f"{installs} + measuring {minutes_seconds(self.measuring_s)}"


def install_phase_s(seconds: list[float], jobs: int) -> float:
    """How long installs of these durations take `jobs` at a time: the longest first, each to the job that
    frees up first (what the pool does, up to the order it is given)."""
    lanes = [0.0] * max(1, jobs)
    for one in sorted(seconds, reverse=True):
        lanes[lanes.index(min(lanes))] += one
    return max(lanes)


@dataclass
class Plan:
    suite: Suite
    contestants: list[Contestant]
    items: list[Item]  # one round; every repeat runs the whole round (A B C A B C, never A A A)
    skips: list[tuple[str, str | None, str | None, str]] = field(default_factory=list)
    # What the plan changed from the suite and the run's output must say (a capped generator_threads).
    notices: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.items) * self.suite.repeat

    def timing(self, item: Item) -> tuple[float, float]:
        """(warm-up, duration) of an item: its [[measure]] entry's own, else the suite's; the warm-up raised to
        the contestant's start.warmup_min_s (a fixed-size echo flood has no warm-up to raise)."""
        level = item.level
        warmup = self.suite.warmup_s if level.warmup_s is None else level.warmup_s
        duration = self.suite.duration_s if level.duration_s is None else level.duration_s
        if not level.param("bytes"):
            warmup = max(warmup, self.warmup_min_s(item.contestant))
        return warmup, duration

    def warmup_min_s(self, contestant: str) -> float:
        return next(c.manifest.start.warmup_min_s for c in self.contestants if c.name == contestant)

    def warmup_raised(self, item: Item) -> bool:
        suite_warmup = self.suite.warmup_s if item.level.warmup_s is None else item.level.warmup_s
        return self.timing(item)[0] > suite_warmup

    def item_estimate_s(self, item: Item) -> float:
        """How long one measurement of an item is expected to take, its overhead included."""
        warmup, duration = self.timing(item)
        flood_bytes = item.level.param("bytes")
        if flood_bytes:  # a fixed-size echo flood ends when its bytes are echoed; duration is only its limit
            expected = min(duration, item.level.connections * flood_bytes / ESTIMATED_ECHO_BYTES_PER_S)
        elif item.level.find_max_slo is not None:  # a search measures steps of `duration` until it brackets
            expected = warmup + ESTIMATED_FIND_MAX_STEPS * duration
        elif item.level.param("conn_rate_steps"):  # each step: its connections at its rate (drains not counted)
            n = item.level.param("conns_per_step")
            expected = warmup + sum(n / rate for rate in sweep_rates(item.level.param("conn_rate_steps")))
        else:
            expected = warmup + duration
        return expected + ESTIMATED_OVERHEAD_S

    def estimate_s(self) -> float:
        one_round = sum(self.item_estimate_s(i) for i in self.items)
        return one_round * self.suite.repeat

    def estimate(self, jobs: int, installs: bool = True) -> Estimate:
        """The measurements' time and, with `installs` (contestants installed on this machine), what installing
        the planned contestants would take now, `jobs` at a time."""
        todo = []
        if installs:
            for contestant in self.contestants:
                if any(i.contestant == contestant.name for i in self.items):
                    seconds, source = install_estimate_s(contestant, self.install_parts(contestant))
                    if source != INSTALLED:
                        todo.append((contestant.name, seconds, source))
        return Estimate(install_phase_s([s for _, s, _ in todo], jobs), self.estimate_s(), jobs, todo)

    def install_parts(self, contestant: Contestant) -> list[str]:
        """The contestant's optional install parts that the planned scenarios need (a database driver only
        where a mongo or gridfs level is planned)."""
        return install_parts(contestant, {i.scenario for i in self.items if i.contestant == contestant.name})

    def rounds(self):
        for repeat_index in range(self.suite.repeat):
            for item in self.items:
                yield repeat_index, item

    def needed_services(self) -> list[str]:
        """The services (e.g. "mongo") that some planned measurement's contestant needs."""
        return list(dict.fromkeys(SERVICE_SCENARIOS[i.scenario] for i in self.items if i.scenario in SERVICE_SCENARIOS))

    def needs_static(self) -> bool:
        """Whether a planned measurement reads the static file set: the scenarios with `static_set` (static, gridfs)
        always, and any scenario a contestant's manifest says it serves from the set (serves_from_static_set:
        nginx's bytes)."""
        from_set = {c.name: set(c.manifest.serves_from_static_set) for c in self.contestants}
        return any(registry.kind(i.scenario).static_set or i.scenario in from_set.get(i.contestant, ())
                   for i in self.items)


def server_cannot_hold(contestant: Contestant, level: Level, open_files: int) -> str | None:
    """Why a contestant's server cannot hold a level's connections with `open_files` descriptors per process
    (servers start with their soft limit raised to the hard one: process.child_setup), or None when it can.

    One process holds them all unless the contestant's {workers} are processes (workers.processes), which
    share them; the shares are taken as even (the kernel's or the server's balance may be worse, and a worker
    running out of descriptors then shows as errors of that measurement)."""
    processes = level.workers if contestant.manifest.workers.processes else 1
    per_process = open_files - FD_SPARE
    held = -(-(level.connections + (1 if level.probe_interval_s else 0)) // processes)
    if held <= per_process:
        return None
    shape = (f"{processes} worker processes share them ({held:,} each)" if processes > 1 else
             "they all land in one server process" + (
                 f" (its {level.workers} workers are threads or schedulers of one process)" if level.workers > 1
                 else ""))
    return (f"cannot hold {level.connections:,} connections here: {shape}, and one process may open "
            f"{open_files:,} files (the open-files hard limit; {FD_SPARE} kept for the server itself); "
            "raise the hard limit (`netarena doctor`)"
            + (" or measure it with more workers" if contestant.manifest.workers.processes else ""))


def cap_generator_threads(level: Level, generator_cpus: list[int] | None) -> Level:
    """A level asking more generator threads than the generator has CPUs runs with one thread per CPU: the
    others would only take turns on the same CPUs, and the figures would measure that. The number asked stays
    in the level (generator_threads_asked, stored with every measurement) and Plan.notices says it."""
    if not generator_cpus or level.generator_threads <= len(generator_cpus):
        return level
    return dataclasses.replace(level, generator_threads=len(generator_cpus),
                               generator_threads_asked=level.generator_threads)


def build_plan(suite: Suite, contestants: list[Contestant], scenario_filter: list[str] | None = None,
               server_open_files: int | None = None, generator_cpus: list[int] | None = None) -> Plan:
    """One round of (contestant, scenario, level) items and what is skipped, with why. `server_open_files`:
    the open-files limit servers get here (None: not checked, e.g. servers on other hosts). `generator_cpus`:
    the generator's CPUs here, which cap generator_threads (None: not capped, e.g. generators on other hosts)."""
    plan = Plan(suite, contestants, [])
    for contestant in contestants:
        for entry in suite.measure:
            if scenario_filter and entry.scenario not in scenario_filter:
                continue
            if not entry_measures(entry, contestant.name):
                continue
            reason = scenario_note(contestant, entry.scenario)
            if reason is not None:
                skip = (contestant.name, entry.scenario, None, f"does not implement {entry.scenario}: {reason}")
                if skip not in plan.skips:
                    plan.skips.append(skip)
                continue
            for level in levels_for(entry):
                level = cap_generator_threads(level, generator_cpus)
                if level.generator_threads_asked is not None:
                    notice = (f"{entry.scenario} {level.key}: generator_threads = {level.generator_threads_asked} "
                              f"capped to {level.generator_threads}, the generator's CPUs here ({generator_cpus}); "
                              "the number asked is stored with the level")
                    if notice not in plan.notices:
                        plan.notices.append(notice)
                if level.workers > 1 and not contestant.manifest.workers.supported:
                    plan.skips.append((contestant.name, entry.scenario, level.key,
                                       "runs a single worker only (workers.supported = false)"))
                    continue
                if level.threads is not None and not contestant.manifest.threads.supported:
                    plan.skips.append((contestant.name, entry.scenario, level.key,
                                       "has no thread pool to size (threads.supported = false)"))
                    continue
                cannot = None if server_open_files is None else \
                    server_cannot_hold(contestant, level, server_open_files)
                if cannot is not None:
                    plan.skips.append((contestant.name, entry.scenario, level.key, cannot))
                    continue
                item = Item(contestant.name, entry.scenario, level)
                if item not in plan.items:
                    plan.items.append(item)
    # Interleave contestants inside a round too: for each (scenario, level) every contestant in turn.
    order = {c.name: i for i, c in enumerate(contestants)}
    first_seen: dict[tuple, int] = {}
    for index, item in enumerate(plan.items):
        first_seen.setdefault((item.scenario, item.level.key), index)
    plan.items.sort(key=lambda i: (first_seen[(i.scenario, i.level.key)], order[i.contestant]))
    return plan


def resolve_cpus(server: list[int] | None, generator: list[int] | None) -> tuple[list[int], list[int], str | None]:
    """Server and generator CPU sets (disjoint unless only one CPU is available) and a warning, if any."""
    available = available_cpus()
    if server is None and generator is None:
        if len(available) >= 2:
            return [available[0]], [available[1]], None
        return [available[0]], [available[0]], (
            f"only one CPU ({available[0]}) is available: the server and the generator share it, so every "
            "figure includes the generator's own cost")
    if server is None or generator is None:
        raise ConfigError("give both --server-cpus and --generator-cpus (or neither, for the default split)")
    for name, cpus in (("--server-cpus", server), ("--generator-cpus", generator)):
        unknown = [c for c in cpus if c not in available]
        if unknown:
            raise ConfigError(f"{name}: CPU(s) {unknown} not available to this process (available: {available})")
    if set(server) & set(generator):
        raise ConfigError(f"--server-cpus {server} and --generator-cpus {generator} overlap; disjoint sets keep "
                          "the generator from measuring itself")
    return list(server), list(generator), None


def git_sha() -> str | None:
    root = repo_root()
    if root is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def collect_environment(extra: dict) -> dict:
    try:
        from .envinfo import collect
    except ImportError as exc:
        return {"error": f"netarena.envinfo unavailable: {exc}", **extra}
    try:
        return collect(extra=extra)
    except Exception as exc:  # the fingerprint is context, not a reason to lose the run
        return {"error": f"envinfo.collect failed: {type(exc).__name__}: {exc}", **extra}


def orchestrator_alive(run) -> bool:
    pid, started = run["orchestrator_pid"], run["orchestrator_start_time"]
    if not pid or pid == os.getpid():
        return False
    now = process_start_time(pid)
    return now is not None and started is not None and abs(now - started) < 1.0


def cleanup_orphans(store: Store, say) -> None:
    """Kill process groups left by runs whose orchestrator died (kill -9): nothing may outlive a run."""
    runs = {r["id"]: r for r in store.runs()}
    for row in store.live_processes():
        run = runs.get(row["run_id"])
        if run is not None and orchestrator_alive(run):
            continue
        found = kill_group(row["pgid"], row["leader_start_time"], row["token"])
        if found:
            say(f"killed {len(found)} process(es) left by run {row['run_id']} ({row['role']}, process group "
                f"{row['pgid']})")
        store.remove_live_process(row["run_id"], row["pgid"])


class Interrupted(Exception):
    pass


class StopRun(Exception):
    """A backend's word that the run cannot go on now (netarena.cluster: the server host is gone, too few
    generator hosts are left). The measurement in progress is recorded as interrupted and the run stops like
    on Ctrl-C, so `--resume` continues it once the cause is fixed; the message says what to fix."""


class Runner:
    def __init__(self, store: Store, backend, ui, *, allow_apt: bool = True, install_jobs: int = 1):
        self.store = store
        self.backend = backend
        self.ui = ui
        self.allow_apt = allow_apt
        self.install_jobs = install_jobs
        # Seconds per phase of this process's part of the run ("installs", "measuring"), as they end.
        self.phase_s: dict[str, float] = {}
        self.run_id: int | None = None
        self.services = None  # services.ServiceManager while a run that needs one executes
        self.unusable_services: dict[str, str] = {}  # service -> why it cannot be had here

    def track(self, proc, role: str) -> None:
        self.store.add_live_process(self.run_id, proc.pgid, proc.start_time, role, proc.token)

    def untrack(self, proc) -> None:
        self.store.remove_live_process(self.run_id, proc.pgid)

    def stop_leftovers(self) -> None:
        """Kill every process group of this run still registered (after a measurement failed unexpectedly, its
        server or generator may be left behind)."""
        for row in self.store.live_processes(self.run_id):
            kill_group(row["pgid"], row["leader_start_time"], row["token"])
            if not group_members(row["pgid"]):
                self.store.remove_live_process(self.run_id, row["pgid"])

    def prepare(self, plan: Plan) -> dict[str, str]:
        """Install what the plan needs (each contestant with the optional parts its planned scenarios need),
        self.install_jobs at once where the backend allows it; returns {contestant: reason} for the ones that
        cannot run. A failing install skips its contestant alone, with its log's tail; the others go on.
        One line per contestant as it ends, with its time; what the installs print goes to their logs."""
        unusable: dict[str, str] = {}
        wanted = {i.contestant for i in plan.items}
        real = self.backend.name == "real"
        todo: list[Contestant] = []
        for contestant in plan.contestants:
            manifest = contestant.manifest.model_dump(mode="json")
            if contestant.name not in wanted:
                self.store.record_contestant(self.run_id, contestant.name, manifest, None, "skipped")
                continue
            av = availability(contestant, self.allow_apt, plan.install_parts(contestant)) if real else None
            if av is not None and not av.runnable:
                unusable[contestant.name] = av.summary
                self.store.record_contestant(self.run_id, contestant.name, manifest, None, "skipped")
                self.store.record_skip(self.run_id, contestant.name, f"cannot run here: {av.summary}")
                self.ui.warn(f"{contestant.name}: skipped: {av.summary}")
                continue
            todo.append(contestant)
        # The cluster's backend talks to its server host one request at a time: its installs stay in turn.
        jobs = self.install_jobs if getattr(self.backend, "concurrent_installs", False) else 1
        fresh = {c.name for c in todo if not real or not install_current(c, plan.install_parts(c))}
        if real and fresh:
            self.ui.info(f"installing {len(fresh)} contestant(s), {min(jobs, len(fresh))} at a time: "
                         f"{', '.join(sorted(fresh))} (output: {cache_root() / 'envs'}/NAME/install.log)")

        def done(result: Installed) -> None:
            contestant, exc = result.contestant, result.error
            manifest = contestant.manifest.model_dump(mode="json")
            took = minutes_seconds(result.seconds)
            if isinstance(exc, StopRun):
                raise exc
            if isinstance(exc, InstallError):
                unusable[contestant.name] = str(exc)
                self.store.record_contestant(self.run_id, contestant.name, manifest, None, "skipped")
                self.store.record_skip(self.run_id, contestant.name, f"install failed: {exc}", detail=exc.output_tail)
                lines = exc.output_tail.splitlines()[-INSTALL_LOG_TAIL_LINES:]
                self.ui.warn(f"{contestant.name}: install failed after {took}, skipped: {exc}"
                             + "".join(f"\n  | {line}" for line in lines))
            elif exc is not None:  # a bug or an unforeseen failure: lose this contestant, not the run
                reason = f"internal error while installing: {type(exc).__name__}: {exc}"
                unusable[contestant.name] = reason
                self.store.record_contestant(self.run_id, contestant.name, manifest, None, "skipped")
                self.store.record_skip(self.run_id, contestant.name, reason, detail=traceback_tail(exc))
                self.ui.warn(f"{contestant.name}: {reason}; skipped (traceback stored with the run)")
            else:
                self.store.record_contestant(self.run_id, contestant.name, manifest, result.record, "ready")
                if contestant.name in fresh and real:
                    parts = plan.install_parts(contestant)
                    self.ui.info(f"{contestant.name}: installed in {took}"
                                 + (f" (with {', '.join(parts)})" if parts else ""))

        # One at a time, what an install says is shown as it happens (the cluster's "installing on the server
        # host"); several at once, it would interleave: it stays in each contestant's install log.
        say = self.ui.info if jobs == 1 else (lambda message: None)
        install_concurrently(todo, lambda c: self.backend.prepare(c, self.allow_apt, say, plan.install_parts(c)),
                             jobs, done)
        return unusable

    def calibrate(self, run_id: int, server_cpus: list[int], generator_cpus: list[int]) -> None:
        """The run's calibration (netarena.calibration) on its own CPUs, once per run (a resumed run keeps the
        first): after the installs, which would disturb it, before the first measurement. Only where the
        server runs on this machine with the real generator; a run across hosts or the mock backend records
        why there is none."""
        run = self.store.run(run_id)
        if run is not None and "calibration" in json.loads(run["environment_json"] or "{}"):
            return
        generator = getattr(self.backend, "generator", None)
        if self.backend.name != "real" or generator is None:
            self.store.add_to_run_environment(run_id, "calibration", {
                "skipped": f"the {self.backend.name} backend: calibration runs only with the server on this "
                           "machine (the real backend)"})
            return
        from .calibration import calibrate

        self.ui.info("calibrating: a fixed CPU loop and the reference server (a few seconds)")
        figures = calibrate(Path(generator), server_cpus, generator_cpus, self.track, self.untrack)
        self.store.add_to_run_environment(run_id, "calibration", figures)
        for part, value in figures.items():
            if "error" in value:
                self.ui.warn(f"calibration {part}: {value['error']}")

    def prepare_services(self, plan: Plan, results_dir: Path, cpus: list[int]) -> None:
        """Install (build) the services the plan needs; one that cannot be had makes its contestants skip
        with the reason (self.unusable_services)."""
        from .services import ServiceManager, load_all, service_availability

        self.unusable_services: dict[str, str] = {}
        needed = plan.needed_services()
        backends = {name: options.backend for name, options in plan.suite.services.items() if options.backend}
        if needed and hasattr(self.backend, "prepare_services"):  # across hosts: on the server host, by its worker
            self.services = self.backend.prepare_services(needed, backends, self.allow_apt)
            self.unusable_services = dict(self.services.unusable)
            if self.services.environment():
                self.store.add_to_run_environment(self.run_id, "services", self.services.environment())
            return
        if not needed or self.backend.name != "real":
            return
        self.services = ServiceManager(load_all(), results_dir / "services" / f"run-{self.run_id}", cpus,
                                       backends=backends, on_spawn=self.track, on_reaped=self.untrack,
                                       say=self.ui.info)
        for name in needed:
            runnable, reasons = service_availability(self.services.services, name, backends.get(name),
                                                     self.allow_apt)
            if not runnable:
                self.unusable_services[name] = "; ".join(reasons)
                continue
            try:
                self.services.install(name, self.allow_apt)
            except (InstallError, ConfigError) as exc:
                self.unusable_services[name] = f"install failed: {exc}"
                continue
        if self.services.installed:  # which database, on which backend, built from what: recorded once per run
            self.store.add_to_run_environment(self.run_id, "services", self.services.environment())

    def execute(self, plan: Plan, run_id: int, results_dir: Path, server_cpus: list[int], generator_cpus: list[int]):
        self.run_id = run_id
        service_cpus = (plan.suite.cpus.services if plan.suite.cpus and plan.suite.cpus.services else None) \
            or generator_cpus
        try:
            started = time.monotonic()
            self.prepare_services(plan, results_dir, service_cpus)
            self._execute(plan, run_id, results_dir, server_cpus, generator_cpus, started)
        finally:
            # Also on Ctrl-C: the databases stop and their data directories go with them.
            if self.services is not None:
                self.services.stop_all()

    def _execute(self, plan: Plan, run_id: int, results_dir: Path, server_cpus: list[int], generator_cpus: list[int],
                 started: float):
        for contestant, scenario, level_key, reason in plan.skips:
            self.store.record_skip(run_id, contestant, reason, scenario=scenario, level_key=level_key)
        unusable = self.prepare(plan)
        self.calibrate(run_id, server_cpus, generator_cpus)
        static_dir = cache_root() / "static" / f"v{STATIC_SET_VERSION}"
        static_dir.mkdir(parents=True, exist_ok=True)
        if plan.needs_static() and not static_set_ready(static_dir):
            self.ui.info(f"generating the static file set in {static_dir} (once; reused afterwards)")
            build_static_files(static_dir)
        # Every install (services, contestants, the static set) has ended before the first measurement: an
        # install's CPU would be in its figures.
        self.phase_s["installs"] = time.monotonic() - started
        measuring_started = time.monotonic()
        try:
            self._measure(plan, run_id, results_dir, server_cpus, generator_cpus, static_dir, unusable)
        finally:
            self.phase_s["measuring"] = time.monotonic() - measuring_started

    def _measure(self, plan: Plan, run_id: int, results_dir: Path, server_cpus: list[int], generator_cpus: list[int],
                 static_dir: Path, unusable: dict[str, str]):
        from .backend import MeasureRequest

        by_name = {c.name: c for c in plan.contestants}
        done = self.store.done_keys(run_id)
        failed_before: dict[tuple, str] = {}
        for row in self.store.measurements(run_id):
            if row["failure_kind"] in NO_RETRY_KINDS:
                failed_before[(row["contestant"], row["scenario"], row["level_key"])] = \
                    f"#{row['repeat_index'] + 1} failed ({row['failure_kind']}): {row['error']}"
        log_dir = results_dir / "logs" / f"run-{run_id}"
        # Scenarios whose service cannot be had here are skipped with the reason; the contestant's others run.
        for contestant in plan.contestants:
            for scenario in sorted({i.scenario for i in plan.items if i.contestant == contestant.name}):
                service = SERVICE_SCENARIOS.get(scenario)
                if service in self.unusable_services and contestant.name not in unusable:
                    reason = f"needs the {service} service, which cannot run here: {self.unusable_services[service]}"
                    self.store.record_skip(run_id, contestant.name, reason, scenario=scenario)
                    self.ui.warn(f"{contestant.name} {scenario}: skipped: {reason}")
        runnable = [i for i in plan.items if i.contestant not in unusable
                    and SERVICE_SCENARIOS.get(i.scenario) not in self.unusable_services]
        todo = [(r, i) for r, i in plan.rounds() if i in runnable and (i.contestant, i.scenario, i.level.key, r)
                not in done]
        measuring_since = time.monotonic()  # the precision loop's time budget counts from here
        # Re-measuring noisy measurements: how many each group has taken, and the next free repeat index (beyond
        # the suite's repeats), both from what is stored so a resumed run goes on counting.
        retries: dict[tuple, int] = {}
        next_index: dict[tuple, int] = {}
        for row in self.store.measurements(run_id):
            key = (row["contestant"], row["scenario"], row["level_key"])
            retries[key] = retries.get(key, 0) + (1 if row["discarded"] else 0)
            next_index[key] = max(next_index.get(key, plan.suite.repeat), row["repeat_index"] + 1)
        remaining_s = sum(plan.item_estimate_s(i) for _, i in todo)  # what the plan still has to measure

        def measure(repeat_index: int, item: Item) -> None:
            nonlocal remaining_s
            remaining_s = max(0.0, remaining_s - plan.item_estimate_s(item))
            if StopRequest.requested:
                raise Interrupted()
            group = (item.contestant, item.scenario, item.level.key)
            base = {"contestant": item.contestant, "scenario": item.scenario, "level_key": item.level.key,
                    "level": item.level.to_dict(), "repeat_index": repeat_index}
            if group in failed_before:
                at = now_iso()
                record = dict(base, status=STATUS_FAILED, failure_kind="not_attempted", started_at=at, ended_at=at,
                              error=f"not retried: {failed_before[group]}")
                self.store.record_measurement(run_id, record)
                self.ui.measured(record)
                return
            request = MeasureRequest(by_name[item.contestant], item.scenario, item.level, repeat_index,
                                     *plan.timing(item), plan.suite.timeout_s, server_cpus,
                                     generator_cpus, static_dir, log_dir, self.services,
                                     plan.suite.generator_open_files, plan.suite.warmup_until_steady,
                                     plan.suite.warmup_max_s)
            while True:
                record = self._measure_one(run_id, request, item, base)
                if plan.warmup_raised(item):
                    record["flags"] = [*(record.get("flags") or []), stats.FLAG_WARMUP_RAISED]
                if (record.get("warmup") or {}).get("settled") is False:
                    record["flags"] = [*(record.get("flags") or []), stats.FLAG_WARMUP_UNSETTLED]
                noisy = (record.get("contention") or {}).get("noisy") if record["status"] == "ok" else None
                # Re-measuring spends time the plan did not count: only a suite with a time budget says how much
                # it may spend, so without one a noisy measurement is kept and badged.
                within_budget = plan.suite.time_budget_s is not None and (
                    time.monotonic() - measuring_since + plan.item_estimate_s(item) + remaining_s
                    <= plan.suite.time_budget_s)
                if not noisy or retries.get(group, 0) >= plan.suite.noisy_retries or not within_budget \
                        or StopRequest.requested:
                    break  # kept: a noisy one left in is badged (FLAG_NOISY), never silently averaged in
                # Stored, but out of every figure; the same (contestant, scenario, level) is measured again
                # under the next free repeat index.
                record["discarded"] = f"noisy ({noisy})"
                self.store.record_measurement(run_id, record)
                self.ui.warn(f"{item.contestant} {item.scenario} {item.level.key} #{request.repeat_index + 1}: "
                             f"discarded as noisy ({noisy}); measuring it again")
                retries[group] = retries.get(group, 0) + 1
                index = next_index.get(group, plan.suite.repeat)
                next_index[group] = index + 1
                request = dataclasses.replace(request, repeat_index=index)
                base = dict(base, repeat_index=index)
            self.store.record_measurement(run_id, record)
            if StopRequest.requested:  # the signal's exception was swallowed during the measurement
                self.ui.measured(record)
                raise Interrupted()
            if record.get("failure_kind") in NO_RETRY_KINDS:
                failed_before[group] = f"#{repeat_index + 1} failed ({record['failure_kind']}): {record['error']}"
            self.ui.measured(record)

        self.ui.start_progress(len(todo), already_done=len(done))
        for repeat_index, item in todo:
            measure(repeat_index, item)
        self.ui.end_progress()
        target = precision.settings(plan.suite)
        if target is not None:
            self._until_precise(plan, run_id, runnable, target, measuring_since, failed_before, measure)

    def _until_precise(self, plan: Plan, run_id: int, runnable: list[Item], target: tuple, since: float,
                       failed_before: dict, measure) -> None:
        """The precision loop (netarena.precision): after the minimum rounds, further interleaved rounds of only
        the groups whose interval is still wider than the target, until each is precise or a budget runs out."""
        fraction, repeat_max, budget_s = target
        repeat_index = plan.suite.repeat
        while True:
            rows = [row_to_dict(r) for r in self.store.measurements(run_id)]
            attempts: dict[tuple, int] = {}
            for row in rows:
                if row["status"] != STATUS_INTERRUPTED:
                    key = (row["contestant"], row["scenario"], row["level_key"])
                    attempts[key] = attempts.get(key, 0) + 1
            width = {(s.contestant, s.scenario, s.level_key): s.requests_per_s_ci_relative
                     for s in stats.summarize(rows)}
            wanting = [i for i in runnable if (key := (i.contestant, i.scenario, i.level.key)) not in failed_before
                       and precision.wants_more(width.get(key), attempts.get(key, 0), fraction, repeat_max)]
            if not wanting:
                return
            # A resumed run may have measured this round of some groups already.
            done = self.store.done_keys(run_id)
            this_round = [i for i in wanting if (i.contestant, i.scenario, i.level.key, repeat_index) not in done]
            if this_round:
                if budget_s is not None and time.monotonic() - since >= budget_s:
                    self.ui.info(f"precision: the time budget ({budget_s:g} s) is spent; {len(wanting)} group(s) "
                                 f"stay wider than ±{fraction:.1%}")
                    return
                self.ui.info(f"precision: round {repeat_index + 1} for {len(this_round)} group(s) whose interval is "
                             f"wider than ±{fraction:.1%}")
                self.ui.start_progress(len(this_round))
                for item in this_round:
                    if budget_s is not None and time.monotonic() - since >= budget_s:
                        break
                    measure(repeat_index, item)
                self.ui.end_progress()
            repeat_index += 1

    def _measure_one(self, run_id: int, request, item: Item, base: dict) -> dict:
        """One measurement by the backend, as a record; an interruption is stored as such and raised."""
        self.ui.measuring(item, request.repeat_index)
        started = now_iso()
        try:
            return self.backend.measure(request, progress=self.ui.phase)
        except KeyboardInterrupt:
            at = now_iso()
            self.store.record_measurement(run_id, dict(base, status=STATUS_INTERRUPTED, started_at=started,
                                                       ended_at=at, error="interrupted (Ctrl-C / SIGTERM)"))
            raise Interrupted() from None
        except StopRun as exc:
            self.store.record_measurement(run_id, dict(base, status=STATUS_INTERRUPTED, started_at=started,
                                                       ended_at=now_iso(), error=str(exc)))
            raise
        except Exception as exc:  # a bug or an unforeseen failure: lose this measurement, not the run
            self.stop_leftovers()
            return dict(base, status=STATUS_FAILED, failure_kind="internal_error", started_at=started,
                        ended_at=now_iso(), error=f"internal error: {type(exc).__name__}: {exc}",
                        stderr_tail=traceback_tail(exc), flags=[])


def new_run(store: Store, plan: Plan, *, suite_path: str | None, args: dict, backend_name: str,
            server_cpus: list[int], generator_cpus: list[int], generator_path: str | None,
            generator_version: str | None, cluster: dict | None = None) -> int:
    extra = {"server_cpus": server_cpus, "generator_cpus": generator_cpus,
             "generator": {"path": generator_path, "version": generator_version}, "backend": backend_name}
    if cluster is not None:  # the hosts of a run across hosts, each with its environment and clock offset
        extra["cluster"] = cluster
    environment = collect_environment(extra)
    return store.create_run(
        suite_name=plan.suite.name, suite_path=suite_path, suite=plan.suite.model_dump(mode="json"), args=args,
        backend=backend_name, server_cpus=server_cpus, generator_cpus=generator_cpus, environment=environment,
        planned=plan.total, netarena_version=__version__, git_sha=git_sha(),
        orchestrator_start_time=psutil.Process().create_time())
