"""The run: install what the plan (netarena.plan) needs, measure it in interleaved rounds through a backend
(netarena.backends), store each result as it ends."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import traceback
from pathlib import Path

import psutil

from . import __version__, precision, stats
from .backends.base import MeasureRequest, StopRun
from .calibration import CALIBRATION_ENV, calibrate
from .config import SERVICE_SCENARIOS
from .contestants import (Contestant, Installed, InstallError, availability, cache_root, install_concurrently,
                          install_current)
from .envinfo import collect_environment
from .errors import ConfigError
from .plan.suite import Item, Plan, minutes_seconds
from .process import StopRequest, available_cpus, group_members, kill_group, process_start_time
from .profile import PROFILED, plan_for as profile_plan_for
from .scenarios import STATIC_SET_VERSION, build_static_files, static_set_ready
from .services import ServiceManager, load_all, service_availability
from .store import STATUS_FAILED, STATUS_INTERRUPTED, Store, now_iso, row_to_dict
from .tls import RUN_CERT_FOLDER, RunCertificate, is_tls, make_run_certificate

# A contestant that cannot start or answers wrongly will not do better in the next round; later repeats
# of the same (contestant, scenario, level) are recorded as not attempted instead of paying the timeout again.
# Failures that the next repeat of the same level would repeat: it is not attempted, and says why. A level whose
# `requests` were not answered within its time limit (requests_not_reached) would spend the whole limit again.
NO_RETRY_KINDS = ("start_failed", "not_ready", "verify_failed", "requests_not_reached")
# How much of an unexpected exception's traceback is kept with the measurement (or skip) it broke.
TRACEBACK_TAIL_CHARS = 4000


# Lines of a failed install's log printed under its warning (the whole tail is stored with the skip).
INSTALL_LOG_TAIL_LINES = 12


def traceback_tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-TRACEBACK_TAIL_CHARS:]


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


def run_log_dir(results_dir: Path, run_id: int) -> Path:
    """Where a run keeps its files: its servers' logs and, while it measures TLS levels, its certificate."""
    return results_dir / "logs" / f"run-{run_id}"


class Runner:
    def __init__(self, store: Store, backend, ui, *, allow_apt: bool = True, install_jobs: int = 1,
                 calibration: bool = True):
        self.store = store
        self.calibration = calibration  # False: --no-calibration (calibration.CALIBRATION_ENV)
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

    def release_kept(self) -> None:
        """Stop a server the backend kept for a next repeat (suite server_per = "level") that will not come."""
        release = getattr(self.backend, "release_kept", None)
        if release is not None:
            release()

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
                             jobs, done, plan.install_parts)
        return unusable

    def calibrate(self, run_id: int, server_cpus: list[int], generator_cpus: list[int]) -> None:
        """The run's calibration (netarena.calibration) on its own CPUs, once per run (a resumed run keeps the
        first): after the installs, which would disturb it, before the first measurement. Only where the
        server runs on this machine with the real generator; a run across hosts or the mock backend records
        why there is none."""
        run = self.store.run(run_id)
        if run is not None and "calibration" in json.loads(run["environment_json"] or "{}"):
            return
        if not self.calibration:
            self.store.add_to_run_environment(run_id, "calibration", {
                "skipped": f"not taken: --no-calibration ({CALIBRATION_ENV}=0)"})
            return
        generator = getattr(self.backend, "generator", None)
        if self.backend.name != "real" or generator is None:
            self.store.add_to_run_environment(run_id, "calibration", {
                "skipped": f"the {self.backend.name} backend: calibration runs only with the server on this "
                           "machine (the real backend)"})
            return
        self.ui.info("calibrating: a fixed CPU loop and the reference server (a few seconds)")
        figures = calibrate(Path(generator), server_cpus, generator_cpus, self.track, self.untrack)
        self.store.add_to_run_environment(run_id, "calibration", figures)
        for part, value in figures.items():
            if "error" in value:
                self.ui.warn(f"calibration {part}: {value['error']}")

    def prepare_services(self, plan: Plan, results_dir: Path, cpus: list[int]) -> None:
        """Install (build) the services the plan needs; one that cannot be had makes its contestants skip
        with the reason (self.unusable_services)."""
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
        # One server certificate for every TLS level of the run, kept with the run's logs while it measures and
        # removed when it ends, so no key outlives the run (a resumed run makes a new one).
        certificate = make_run_certificate(run_log_dir(results_dir, run_id) / RUN_CERT_FOLDER) \
            if plan.needs_tls() and self.backend.makes_run_certificate else None
        try:
            self._measure(plan, run_id, results_dir, server_cpus, generator_cpus, static_dir, unusable, certificate)
        finally:
            self.phase_s["measuring"] = time.monotonic() - measuring_started
            if certificate is not None:
                certificate.remove()

    def _measure(self, plan: Plan, run_id: int, results_dir: Path, server_cpus: list[int], generator_cpus: list[int],
                 static_dir: Path, unusable: dict[str, str], certificate: RunCertificate | None = None):
        by_name = {c.name: c for c in plan.contestants}
        done = self.store.done_keys(run_id)
        failed_before: dict[tuple, str] = {}
        for row in self.store.measurements(run_id):
            if row["failure_kind"] in NO_RETRY_KINDS:
                failed_before[(row["contestant"], row["scenario"], row["level_key"])] = \
                    f"#{row['repeat_index'] + 1} failed ({row['failure_kind']}): {row['error']}"
        log_dir = run_log_dir(results_dir, run_id)
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
        for row in self.store.measurements(run_id):
            key = (row["contestant"], row["scenario"], row["level_key"])
            retries[key] = retries.get(key, 0) + (1 if row["discarded"] and row["discarded"] != PROFILED else 0)
        next_index = self._next_free_indexes(run_id, plan.suite.repeat)
        # What the plan still has to measure (a repeat after its item's previous one reuses that server when the
        # suite keeps one per level).
        remaining_s = sum(plan.item_estimate_s(i, reused=plan.server_per_level and n > 0 and todo[n - 1][1] == i)
                          for n, (_, i) in enumerate(todo))

        def measure(repeat_index: int, item: Item, profile=None, keep_server: bool = False) -> None:
            """Measure one repeat of an item; `keep_server`: the next measurement is this item's next repeat, on the
            same server (suite server_per = "level")."""
            nonlocal remaining_s
            remaining_s = max(0.0, remaining_s - plan.item_estimate_s(item, reused=reusing.get(item, False)))
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
                                     plan.suite.warmup_max_s, profile=profile,
                                     tls=certificate if is_tls(item.level.protocol) else None,
                                     keep_server=keep_server, reused_warmup_s=plan.reused_warmup_s(item))
            while True:
                record = self._measure_one(run_id, request, item, base)
                reusing[item] = keep_server and record["status"] == "ok"
                if record.get("server_reused"):
                    record["flags"] = [*(record.get("flags") or []), stats.FLAG_SERVER_REUSED]
                if profile is not None:
                    # A profiled repeat is never in a figure (its profiler may have slowed the server): kept
                    # apart, its throughput compared with the unprofiled repeats' in the report.
                    record["discarded"] = PROFILED
                    if record["status"] == "ok" and record.get("profile") is None:
                        record["profile"] = {"tool": profile.tool, "error": "this backend takes no profiles"}
                    break
                if plan.warmup_raised(item):
                    record["flags"] = [*(record.get("flags") or []), stats.FLAG_WARMUP_RAISED]
                if plan.warmup_below_min(item):
                    record["flags"] = [*(record.get("flags") or []), stats.FLAG_WARMUP_BELOW_MIN]
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

        # Suite server_per = "level": one server serves an item's repeats, which plan.rounds() puts back to back.
        keeps = plan.server_per_level and getattr(self.backend, "keeps_servers", True)
        if plan.server_per_level and not keeps:
            self.ui.warn(f"server_per = \"level\" is not followed by the {self.backend.name} backend: every repeat "
                         "starts its own server")
        reusing: dict[Item, bool] = {}  # whether the item's next repeat is expected on a kept server (estimates)
        self.ui.start_progress(len(todo), already_done=len(done))
        try:
            for position, (repeat_index, item) in enumerate(todo):
                next_item = todo[position + 1][1] if position + 1 < len(todo) else None
                measure(repeat_index, item, keep_server=keeps and next_item == item)
        finally:
            self.release_kept()
        self.ui.end_progress()
        target = precision.settings(plan.suite)
        if target is not None:
            self._until_precise(plan, run_id, runnable, target, measuring_since, failed_before, measure)
        if plan.suite.profile:
            self._profiled_repeats(plan, run_id, runnable, failed_before, measure)

    def _next_free_indexes(self, run_id: int, first: int) -> dict[tuple, int]:
        """Per (contestant, scenario, level) stored, the repeat index after its last one (at least `first`): where
        a repeat beyond the planned rounds goes (a noisy one's replacement, a profiled one)."""
        found: dict[tuple, int] = {}
        for row in self.store.measurements(run_id):
            key = (row["contestant"], row["scenario"], row["level_key"])
            found[key] = max(found.get(key, first), row["repeat_index"] + 1)
        return found

    def _profiled_repeats(self, plan: Plan, run_id: int, runnable: list[Item], failed_before: dict, measure) -> None:
        """One more repeat of every level, sampled by the contestant's profiler (netarena.profile), after all the
        others (the precision loop's too): under the next free repeat index, stored with `discarded` = PROFILED.
        A resumed run skips the levels profiled already."""
        profiled = {(r["contestant"], r["scenario"], r["level_key"]) for r in self.store.measurements(run_id)
                    if r["discarded"] == PROFILED}
        next_index = self._next_free_indexes(run_id, plan.suite.repeat)
        todo = [i for i in runnable if (key := (i.contestant, i.scenario, i.level.key)) not in profiled
                and key not in failed_before]
        if not todo:
            return
        plans = {c.name: profile_plan_for(c.manifest) for c in plan.contestants}
        self.ui.info(f"profiles: one more repeat of {len(todo)} level(s), sampled and kept out of the figures")
        self.ui.start_progress(len(todo))
        for item in todo:
            measure(next_index.get((item.contestant, item.scenario, item.level.key), plan.suite.repeat), item,
                    profile=plans[item.contestant])
        self.ui.end_progress()

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
        planned=plan.total, netarena_version=__version__,
        git_sha=(environment.get("netarena", {}).get("git") or {}).get("sha"),
        orchestrator_start_time=psutil.Process().create_time())
