"""A suite's plan: one round of (contestant, scenario, level) items, what is skipped and why, and the time it
is expected to take. Built before anything starts; the runner measures it in interleaved rounds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..config import SERVICE_SCENARIOS, Suite
from ..contestants import (INSTALLED, Contestant, entry_measures, install_estimate_s, install_parts,
                           longest_chains_first, next_install, scenario_note, shared_build_folder)
from ..doctor import FD_SPARE
from ..generator import sweep_rates
from ..scenarios import Level, levels_for, registry
from ..tls import is_tls


# Per measurement, beyond warm-up and duration: start, readiness, verification, stop (for the estimate).
ESTIMATED_OVERHEAD_S = 1.0
# Per measurement on a server kept from the previous repeat (suite server_per = "level"): its verification and
# the generator's start.
ESTIMATED_REUSED_OVERHEAD_S = 0.3
# A repeat on a kept server warms up for at least this share of the warm-up its level's first repeat had (the
# contestant's start.warmup_min_s, where that raised it). A JIT runtime needs it: the previous repeat's connections
# closing is code the JIT had not seen, and it recompiles what that invalidated under the next load. Measured on
# 2-core hosts, hello at 50 connections after a 6-12 s first warm-up, with the suite's 0.5 s instead: the first
# repeat after a close served 30-70% less (Vert.x 56k req/s against 158-188k, Netty 104k against 152-162k, Spring
# WebFlux 18k then 32k against 41-46k); with 2 s every repeat was within 8% of the first.
REUSED_WARMUP_SHARE = 0.25


# Steps a find-max search usually measures: doubling from 100 req/s to a few thousand, then bisecting to 5%.
ESTIMATED_FIND_MAX_STEPS = 10


# Only for the time estimate of fixed-size echo floods: a middling echo server on loopback.
ESTIMATED_ECHO_BYTES_PER_S = 100e6


def minutes_seconds(seconds: float) -> str:
    """42.0 s, or 3 min 07 s from a minute on: how phase times and estimates are shown."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


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


def install_phase_s(installs: list[tuple[float, object]], jobs: int) -> float:
    """How long installs of these (seconds, shared build folder or None) take `jobs` at a time, as
    contestants.install_concurrently runs them: the longest chain first (contestants.longest_chains_first), each
    to the job that frees up first, except that an install waits while another builds into its shared folder
    (contestants.next_install)."""
    pending = longest_chains_first(installs, seconds=lambda one: one[0], folder=lambda one: one[1])
    running: list[tuple[float, tuple[float, object]]] = []  # (when it ends, the install)
    now = 0.0
    while pending or running:
        while len(running) < max(1, jobs):
            chosen = next_install(pending, [one for _, one in running], folder=lambda one: one[1])
            if chosen is None:
                break
            pending.remove(chosen)
            running.append((now + chosen[0], chosen))
        ending = min(running, key=lambda end_and_one: end_and_one[0])
        running.remove(ending)
        now = ending[0]
    return now


@dataclass
class Plan:
    suite: Suite
    contestants: list[Contestant]
    # One round; every repeat runs the whole round (A B C A B C), unless the suite keeps one server per level
    # (server_per = "level": A A A B B B, see rounds()).
    items: list[Item]
    skips: list[tuple[str, str | None, str | None, str]] = field(default_factory=list)
    # What the plan changed from the suite and the run's output must say (a capped generator_threads).
    notices: list[str] = field(default_factory=list)

    @property
    def repeats(self) -> int:
        """Measurements of each item: the suite's repeats, and one more profiled (netarena.profile)."""
        return self.suite.repeat + (1 if self.suite.profile else 0)

    @property
    def total(self) -> int:
        return len(self.items) * self.repeats

    def timing(self, item: Item) -> tuple[float, float]:
        """(warm-up, duration) of an item: its [[measure]] entry's own, else the suite's; the warm-up raised to
        the contestant's start.warmup_min_s (a fixed-size echo flood has no warm-up to raise) unless the suite
        says apply_warmup_min = false."""
        level = item.level
        warmup = self.suite.warmup_s if level.warmup_s is None else level.warmup_s
        duration = self.suite.duration_s if level.duration_s is None else level.duration_s
        if not level.param("bytes") and self.suite.apply_warmup_min:
            warmup = max(warmup, self.warmup_min_s(item.contestant))
        return warmup, duration

    def warmup_min_s(self, contestant: str) -> float:
        return next(c.manifest.start.warmup_min_s for c in self.contestants if c.name == contestant)

    def warmup_raised(self, item: Item) -> bool:
        suite_warmup = self.suite.warmup_s if item.level.warmup_s is None else item.level.warmup_s
        return self.timing(item)[0] > suite_warmup

    def warmup_below_min(self, item: Item) -> bool:
        """The item is warmed up less than its contestant's start.warmup_min_s (apply_warmup_min = false)."""
        return not item.level.param("bytes") and self.timing(item)[0] < self.warmup_min_s(item.contestant)

    @property
    def server_per_level(self) -> bool:
        """Whether one server serves all of a level's repeats (the suite's server_per = "level")."""
        return self.suite.server_per == "level"

    def reused_warmup_s(self, item: Item) -> float:
        """The warm-up of a repeat on a server kept from the previous one: the suite's (or the entry's), raised to
        REUSED_WARMUP_SHARE of its first repeat's (start.warmup_min_s, which that one has had in full)."""
        own = self.suite.warmup_s if item.level.warmup_s is None else item.level.warmup_s
        return max(own, REUSED_WARMUP_SHARE * self.timing(item)[0])

    def item_estimate_s(self, item: Item, reused: bool = False) -> float:
        """How long one measurement of an item is expected to take, its overhead included; `reused`: on a server
        kept from the previous repeat (no start, a warm-up of the suite's own length)."""
        warmup, duration = self.timing(item)
        if reused:
            warmup = min(warmup, self.reused_warmup_s(item))
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
        return expected + (ESTIMATED_REUSED_OVERHEAD_S if reused else ESTIMATED_OVERHEAD_S)

    def estimate_s(self) -> float:
        one_round = sum(self.item_estimate_s(i) for i in self.items)
        if not self.server_per_level:
            return one_round * self.repeats
        # The first repeat starts and warms the server up, the others reuse it; a profiled repeat starts its own.
        reused_round = sum(self.item_estimate_s(i, reused=True) for i in self.items)
        return one_round * (self.repeats - self.suite.repeat + 1) + reused_round * (self.suite.repeat - 1)

    def estimate(self, jobs: int, installs: bool = True) -> Estimate:
        """The measurements' time and, with `installs` (contestants installed on this machine), what installing
        the planned contestants would take now, `jobs` at a time."""
        todo = []
        if installs:
            for contestant in self.contestants:
                if any(i.contestant == contestant.name for i in self.items):
                    seconds, source = install_estimate_s(contestant, self.install_parts(contestant))
                    if source != INSTALLED:
                        todo.append((contestant, seconds, source))
        return Estimate(install_phase_s([(s, shared_build_folder(c)) for c, s, _ in todo], jobs), self.estimate_s(),
                        jobs, [(c.name, s, source) for c, s, source in todo])

    def install_parts(self, contestant: Contestant) -> list[str]:
        """The contestant's optional install parts that the planned levels need (a database driver only where a
        mongo or gridfs level is planned, a TLS or HTTP/2 build only where a level over it is)."""
        return install_parts(contestant, {(i.scenario, i.level.protocol) for i in self.items
                                          if i.contestant == contestant.name})

    def rounds(self):
        """(repeat index, item) in the order measured: interleaved rounds (A B C A B C), or with server_per =
        "level" each item's repeats back to back (A A A B B B), so that one server can serve them."""
        if self.server_per_level:
            for item in self.items:
                for repeat_index in range(self.suite.repeat):
                    yield repeat_index, item
            return
        for repeat_index in range(self.suite.repeat):
            for item in self.items:
                yield repeat_index, item

    def needed_services(self) -> list[str]:
        """The services (e.g. "mongo") that some planned measurement's contestant needs."""
        return list(dict.fromkeys(SERVICE_SCENARIOS[i.scenario] for i in self.items if i.scenario in SERVICE_SCENARIOS))

    def needs_tls(self) -> bool:
        """Whether a planned measurement is over TLS: the run then makes its server certificate."""
        return any(is_tls(i.level.protocol) for i in self.items)

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
                if level.protocol not in contestant.manifest.protocols:
                    plan.skips.append((contestant.name, entry.scenario, level.key,
                                       f"does not serve {level.protocol} (its protocols: "
                                       f"{', '.join(contestant.manifest.protocols)})"))
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
