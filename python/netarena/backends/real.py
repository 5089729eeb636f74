"""The real backend: start the contestant on this machine, verify it, run netarena-load against it (spread over
several processes when one cannot hold the level), monitor both, stop it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .. import warmup
from ..contestants import QUICK_JIT_OPTIONS, Contestant, expand, install, quick_jit
from ..fixtures import load_mongo_fixture, mongo_fixture_intact
from ..monitor import Monitor, MonitorError
from ..ports import free_port
from ..process import ManagedProcess, group_members, wait_until_idle
from ..profile.jit import remove_perf_maps
from ..profile.sampler import PERF_READY_S, Sampler, generator_sampler
from ..scenarios import accept_queue, load_spec, registry, verify
from ..server_user import SERVER_LOG_MAX_BYTES, prepare_run_dir
from ..services import ServiceError
from ..spread import (READY_MARGIN_S, START_LEAD_S, MergeFailed, is_loopback_host, merge_documents, plan_for,
                      read_ready, share_level)
from ..store import STATUS_OK, file_name_part, now_iso
from ..generator import generator_argv, open_loop
from ..tls import H1, PROTOCOL_ENV, TLS_ENV, RunCertificate, hand_over, tls_placeholders
from .base import (MeasureRequest, conclude, failed, generator_time_limit_s, parse_document, timeouts, too_slow,
                   used_services, window)

# With workers > 1, how long readiness may wait for the server's process tree to go idle (all workers started).
WORKERS_SETTLE_MAX_S = 5.0


def kept_key(req: MeasureRequest) -> tuple:
    """What a kept server serves: the next repeat of the same contestant, scenario and level (its protocol, workers
    and threads among the level's fields)."""
    return req.contestant.name, req.scenario, req.level.key


@dataclass
class KeptServer:
    """A server left running after a repeat for the next repeat of its level (suite server_per = "level")."""
    key: tuple
    contestant: Contestant
    server: ManagedProcess
    port: int
    log_path: Path
    started_by: int  # the repeat index that started it


class RealBackend:
    name = "real"
    makes_run_certificate = True  # a TLS level's server is started with the run's certificate (Runner)

    def __init__(self, generator: Path, on_spawn=lambda proc, role: None, on_reaped=lambda proc: None, user=None,
                 monitor_interval_s: float = 0.25):
        self.generator = generator
        self.on_spawn = on_spawn  # lets the runner record process groups in the store (cleanup after kill -9)
        self.on_reaped = on_reaped
        self.monitor_interval_s = monitor_interval_s
        self.user = user  # server_user.ServerUser the servers run as, or None: netarena's own user
        self._kept: KeptServer | None = None  # the server kept for the next repeat of its level

    # Installs are processes on this machine, each under its own lock: several may run at once.
    concurrent_installs = True
    # A server may be kept between the repeats of a level (suite server_per = "level"); the runner releases the
    # last one (release_kept).
    keeps_servers = True

    def prepare(self, contestant: Contestant, allow_apt: bool, say, parts=()) -> dict:
        return install(contestant, allow_apt=allow_apt, say=say, user=self.user, parts=parts)

    def start_server(self, contestant: Contestant, scenario: str, port: int, workers: int, static_dir: Path,
                     cpus: list[int], log_path: Path, host: str = "127.0.0.1",
                     service_urls: dict[str, str] | None = None, threads: int | None = None,
                     profile_env: dict[str, str] | None = None, tls: RunCertificate | None = None,
                     protocol: str = H1) -> ManagedProcess:
        """Start the contestant's server for `scenario` on `port`; with `tls` (a level over TLS) it gets the run's
        certificate and key as NETARENA_TLS_CERT / NETARENA_TLS_KEY and {tls_cert} / {tls_key} and serves HTTPS,
        without them ("" and unset) cleartext. `protocol` (the level's, tls.PROTOCOLS) is NETARENA_PROTOCOL and
        {protocol}: whether to speak HTTP/2 (h2, h2c). A server serves the one protocol it was started for."""
        values = contestant.placeholders(port=port, workers=workers, static_dir=static_dir, host=host,
                                         threads=threads)
        values.update(tls_placeholders(tls))
        values["protocol"] = protocol
        if tls is not None and self.user is not None:
            hand_over(tls, self.user)
        # Scenarios that use no service get an empty URL for each the contestant could use.
        values.update({f"{name}_url": "" for name in contestant.manifest.needs})
        values.update(service_urls or {})
        argv = [expand(w, values) for w in contestant.command(scenario)]
        env = dict(os.environ)
        for name in TLS_ENV.values():  # never inherited from netarena's own environment
            env.pop(name, None)
        if tls is not None:
            env.update({TLS_ENV[k]: v for k, v in tls_placeholders(tls).items()})
        env[PROTOCOL_ENV] = protocol
        env.update(contestant.java_env())  # the JDK it asks for ([install] java): JAVA_HOME, PATH
        env.update({k: expand(v, values) for k, v in contestant.manifest.start.env.items()})
        env.update(profile_env or {})  # a profiled repeat's server: its JIT's perf map (profile.ENV_BY_RUNTIME)
        if quick_jit(contestant.manifest):  # the tests' setting (contestants.QUICK_JIT_OPTIONS)
            env["JAVA_TOOL_OPTIONS"] = " ".join(filter(None, [env.get("JAVA_TOOL_OPTIONS"), QUICK_JIT_OPTIONS]))
        env["PYTHONUNBUFFERED"] = "1"  # so a crashed Python contestant's last words reach the log
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ written into the contestant's folder
        env["HOME"] = str(prepare_run_dir(contestant.run_dir, self.user))
        proc = ManagedProcess(argv, cwd=contestant.dir, env=env, cpus=cpus, log_path=log_path, user=self.user,
                              max_file_bytes=SERVER_LOG_MAX_BYTES)
        self.on_spawn(proc, f"server:{contestant.name}")
        return proc

    def stop_server(self, contestant: Contestant, proc: ManagedProcess) -> dict:
        pids = [p.pid for p in group_members(proc.pgid)]  # before the stop: a JIT's perf map is named by its pid
        outcome = proc.stop(contestant.manifest.start.stop_signal, contestant.manifest.start.stop_timeout_s)
        self.release(proc)
        remove_perf_maps(pids)
        return outcome.to_dict()

    def release(self, proc: ManagedProcess) -> bool:
        """Forget a process group (on_reaped) only once none of it is left. Called from `finally` blocks too,
        where the stop may have been cut short (a second Ctrl-C): a group still alive keeps its live_processes
        row, so cleanup_orphans kills it later."""
        if group_members(proc.pgid):
            return False
        proc.released = True
        self.on_reaped(proc)
        return True

    def wait_ready(self, proc: ManagedProcess, contestant: Contestant, scenario: str, port: int,
                   static_dir: Path, timeout_s: float, workers: int = 1,
                   threads: int | None = None,
                   service_urls: dict[str, str] | None = None,
                   tls: RunCertificate | None = None,
                   protocol: str = H1) -> tuple[str | None, str | None, dict | None]:
        """(failure_kind, error, verification): port open, then the scenario verified, within ready_timeout_s.

        With several workers, one answering is not all of them listening: a second SO_REUSEPORT worker or a
        second process adopting a shared socket may still be starting, and the load's keep-alive connections,
        opened at once, would all land on the first for the whole measurement. So it then waits, at most
        WORKERS_SETTLE_MAX_S, until the server's process tree is idle, and records how long in `settled`."""
        ready_timeout_s = contestant.manifest.start.ready_timeout_s
        deadline = time.monotonic() + ready_timeout_s
        reason = proc.wait_port(port, ready_timeout_s)
        if reason is not None:
            return ("start_failed" if proc.poll() is not None else "not_ready"), reason, None
        return self.check_running(proc, contestant, scenario, port, static_dir, timeout_s, workers=workers,
                                  threads=threads, service_urls=service_urls, tls=tls, deadline=deadline,
                                  protocol=protocol)

    def check_running(self, proc: ManagedProcess, contestant: Contestant, scenario: str, port: int,
                      static_dir: Path, timeout_s: float, workers: int = 1,
                      threads: int | None = None,
                      service_urls: dict[str, str] | None = None,
                      tls: RunCertificate | None = None,
                      deadline: float | None = None,
                      protocol: str = H1) -> tuple[str | None, str | None, dict | None]:
        """wait_ready's verification, of a server whose port is open: retried while the failure is one a server
        still starting gives, until `deadline` (time.monotonic(); default ready_timeout_s from now). Each attempt
        waits `timeout_s`, and twice as long as the one before once an attempt waited out its whole timeout.
        `netarena verify` also calls it for each further scenario of a server it started for several."""
        ready_timeout_s = contestant.manifest.start.ready_timeout_s
        if deadline is None:
            deadline = time.monotonic() + ready_timeout_s
        attempt_s = timeout_s
        while True:
            attempt_started = time.monotonic()
            result = verify(scenario, port, static_dir, timeout_s=min(attempt_s, max(0.5, deadline - attempt_started)),
                            concurrency_model=contestant.manifest.concurrency_model,
                            nagle_stall=contestant.manifest.nagle_stall.get(scenario),
                            pool=contestant.pool(workers, threads),
                            closes_connections=contestant.manifest.closes_connections is not None,
                            service_urls=service_urls, cafile=tls.cert if tls is not None else None,
                            protocol=protocol)
            if result.ok:
                verification = result.to_dict()
                if workers > 1:
                    waited_s, idle = wait_until_idle(proc.pid, WORKERS_SETTLE_MAX_S)
                    verification["settled"] = {"waited_s": round(waited_s, 3), "idle": idle}
                return None, None, verification
            if proc.poll() is not None:
                return "crashed", f"exited with code {proc.poll()} during verification: {result.reason}", \
                    result.to_dict()
            if not result.retryable:
                return "verify_failed", f"wrong response: {result.reason}", result.to_dict()
            if time.monotonic() >= deadline:
                return "not_ready", (f"no valid response within ready_timeout_s={ready_timeout_s:g} s: "
                                     f"{result.reason}"), result.to_dict()
            if time.monotonic() - attempt_started >= attempt_s:
                # The attempt waited out a whole timeout: the server is there but slow (a first TLS handshake
                # loading its code on a starved host), not absent. Each later attempt waits twice as long, up to
                # the deadline, or one needing more than timeout_s would fail the same way until ready_timeout_s.
                attempt_s *= 2
            time.sleep(0.1)

    def measure(self, req: MeasureRequest, progress=lambda text: None) -> dict:
        record = req.base_record()
        record["started_at"] = now_iso()
        # A server kept by the previous repeat of this level (suite server_per = "level"), or None; any other kept
        # server is stopped first.
        kept = self._take_kept(req)
        server = kept.server if kept is not None else None
        needs = used_services(req)
        try:
            service_urls, failure = self._services_for(req, record, progress)
            if failure is not None:
                return failure
            if kept is not None:
                port, log_path = kept.port, kept.log_path
                record.update(port=port, log_path=str(log_path), server_reused=True)
                # Its warm-up to start.warmup_min_s was the first repeat's; new connections get a shorter one.
                req = dataclasses.replace(req, warmup_s=req.reused_warmup_s if req.reused_warmup_s is not None
                                          else req.warmup_s)
                progress("checking")
                kind, error, verification = self.check_running(
                    server, req.contestant, req.scenario, port, req.static_dir, req.timeout_s,
                    workers=req.level.workers, threads=req.level.threads, service_urls=service_urls, tls=req.tls,
                    protocol=req.level.protocol)
                # The repeat that started the server: its verification's figures (e.g. a start's) are that one's.
                verification = dict(verification or {}, server_started_by_repeat=kept.started_by)
            else:
                port = free_port()
                log_path = req.log_dir / file_name_part(
                    f"{req.contestant.name}.{req.scenario}.{req.level.key}.r{req.repeat_index}.log")
                record.update(port=port, log_path=str(log_path))
                try:
                    server = self.start_server(req.contestant, req.scenario, port, req.level.workers, req.static_dir,
                                               req.server_cpus, log_path, service_urls=service_urls,
                                               threads=req.level.threads,
                                               profile_env=req.profile.env if req.profile is not None else None,
                                               tls=req.tls, protocol=req.level.protocol)
                except OSError as exc:
                    return failed(record, "start_failed", f"cannot start {req.contestant.command(req.scenario)}: "
                                        f"{exc}", None)
                progress("starting")
                kind, error, verification = self.wait_ready(server, req.contestant, req.scenario, port,
                                                            req.static_dir, req.timeout_s, workers=req.level.workers,
                                                            threads=req.level.threads, service_urls=service_urls,
                                                            tls=req.tls, protocol=req.level.protocol)
            record["verification"] = verification
            if kind is not None:
                record["stop"] = self.stop_server(req.contestant, server)
                return failed(record, kind, error, log_path)
            scenario = registry.kind(req.scenario)
            service_url = service_urls.get(f"{scenario.service}_url") if scenario.service else None
            generator, gen_error = self.load(
                record, lambda level: load_spec(req.scenario, level, port, req.static_dir,
                                                cacert=req.tls.cert if req.tls is not None else None),
                server.pid, req, progress, count=lambda: scenario.count_during_load(req.level, service_url))
            died = next((d for d in (req.services.dead(n) for n in needs) if d is not None), None) \
                if needs and req.services is not None else None
            if died is not None:
                record["stop"] = self.stop_server(req.contestant, server)
                record = failed(record, "service_died", str(died), None)
                record["stderr_tail"] = died.stderr_tail
                return record
            crashed_code = server.poll()
            hang = None
            if crashed_code is None and gen_error is None and timeouts(generator):
                progress("checking")
                hang = self.check_answers(req, port)
                record["verification"] = dict(record["verification"] or {}, after_load=hang)
            # Kept for the next repeat only after a load that ended well; its stop is that repeat's (or the last's).
            keep = req.keep_server and req.profile is None and crashed_code is None and gen_error is None \
                and hang is None
            if not keep:
                record["stop"] = self.stop_server(req.contestant, server)
            crashed = None if crashed_code is None else \
                f"the contestant exited with code {crashed_code} while under load"
            result = conclude(record, generator, crashed=crashed, gen_error=gen_error, hang=hang,
                              timeout_s=req.timeout_s, log_path=log_path,
                              during_load=(record["verification"] or {}).get("during_load"))
            if keep and result["status"] == STATUS_OK:
                self._kept = KeptServer(kept_key(req), req.contestant, server, port, log_path,
                                        kept.started_by if kept is not None else req.repeat_index)
                result["stop"] = {"kept_for_next_repeat": True}
            elif keep:
                result["stop"] = self.stop_server(req.contestant, server)
            return result
        finally:
            kept_now = self._kept is not None and self._kept.server is server
            if server is not None and not server.released and not kept_now:
                # Reached on KeyboardInterrupt or an unexpected error: never leave the server behind.
                self._stop_quickly(req.contestant, server)

    def _take_kept(self, req: MeasureRequest) -> KeptServer | None:
        """The server kept for this request's level, still running; None otherwise, after stopping any other."""
        kept, self._kept = self._kept, None
        if kept is None:
            return None
        if kept.key == kept_key(req) and req.profile is None and kept.server.poll() is None:
            return kept
        self._stop_quickly(kept.contestant, kept.server)
        return None

    def release_kept(self) -> dict | None:
        """Stop the server kept for a next repeat that will not come (the run ends, is interrupted, or measures
        something else next); returns its stop's outcome, or None when none was kept."""
        kept, self._kept = self._kept, None
        if kept is None:
            return None
        return self.stop_server(kept.contestant, kept.server)

    def _stop_quickly(self, contestant: Contestant, server: ManagedProcess) -> None:
        pids = [p.pid for p in group_members(server.pgid)]
        try:
            server.stop(contestant.manifest.start.stop_signal, min(contestant.manifest.start.stop_timeout_s, 2.0))
        finally:
            self.release(server)
            remove_perf_maps(pids)

    def load(self, record: dict, spec_for, server_pid: int | None, req: MeasureRequest, progress,
             count=lambda: None) -> tuple:
        """Run netarena-load as `spec_for(level)` (a scenarios.LoadSpec) says while monitoring the server's
        process tree; the command line, the generator's result and the monitor's go into `record`. A level
        beyond one process's open files or one source address's ports is spread over several processes
        (spread.plan_spread) started together and merged into one result. `count()` starts the scenario's count
        of the server's work (Scenario.count_during_load) just before the measured run, after any warm-up
        windows; what it found goes into record["verification"]["during_load"]. Returns (result, error or None)."""
        spec = spec_for(req.level)
        spread = plan_for(req.level.connections, probe=req.level.probe_interval_s is not None,
                          open_files_cap=req.generator_open_files, loopback=loopback_target(spec))
        progress("load")
        if spread.processes == 1 and spread.source_ips[0] is None:
            if req.steady_tolerance is not None and warmup.applies(req.level):
                progress("warm-up")
                record["warmup"] = self.warm_up(spec, server_pid, req)
                # The measurement opens its connections afresh: one window of warm-up for them.
                req = dataclasses.replace(req, warmup_s=warmup.WINDOW_S)
            elif req.keep_server and record.get("server_reused") is None and req.reused_warmup_s is not None \
                    and req.warmup_s > req.reused_warmup_s and warmup.applies(req.level):
                # The first repeat on a server kept for the next ones: the first half of its warm-up on connections
                # that then close, so that it too is measured after the JIT has recompiled what a close
                # invalidates, as the later repeats are (plan.REUSED_WARMUP_SHARE).
                progress("warm-up")
                first = req.warmup_s / 2
                _, error = self._warm_up_load(spec, server_pid, req, first)
                record["warmup"] = {"mode": "split", "closed_after_s": first, "error": error}
                req = dataclasses.replace(req, warmup_s=req.warmup_s - first)
            argv = self._argv(spec, req)
            if req.profile is not None:
                argv += ["--prepare"]  # the profilers' window follows the load's own start (_run_generator)
            record["generator_argv"] = argv
            profile = {} if req.profile is not None else None
            counting = count()
            generator, monitor, gen_error = self._run_generator(argv, server_pid, req, profile)
            if profile is not None:
                record["profile"] = profile
        else:
            if req.profile is not None:
                record["profile"] = {"tool": req.profile.tool, "error": "not profiled: the level is spread over "
                                     "several generator processes, and only one process's window is followed"}
            argvs = []
            for i, share in enumerate(spread.shares):
                # The rates are shared like the connections; the echo probe runs in the first process only.
                level = dataclasses.replace(share_level(req.level, spread.processes, i), connections=share,
                                            probe_interval_s=req.level.probe_interval_s if i == 0 else None)
                argv = self._argv(spec_for(level), req) + ["--prepare"]
                if spread.source_ips[i]:
                    argv += ["--source-ips", spread.source_ips[i]]
                argvs.append(argv)
            record["generator_argv"] = [w for i, a in enumerate(argvs) for w in (f"[process {i + 1}]", *a)]
            counting = count()
            generator, monitor, gen_error = self._run_spread(argvs, server_pid, req, spread.to_dict())
        if counting is not None:  # beside the checks before the load (and after it: check_answers)
            record["verification"] = dict(record.get("verification") or {},
                                          during_load=counting.finish(generator if gen_error is None else None))
        record["generator"] = generator
        record["monitor"] = monitor
        return generator, gen_error

    def warm_up(self, spec, server_pid: int | None, req: MeasureRequest) -> dict:
        """Warm the server up with the measurement's own load in windows until steady (netarena.warmup)."""
        def run_window() -> tuple[float | None, str | None]:
            document, error = self._warm_up_load(spec, server_pid, req, warmup.WINDOW_S)
            if error is not None:
                return None, f"a warm-up window failed: {error}"
            return document["throughput"]["requests_per_s"], None

        return warmup.warm_up(run_window, tolerance=req.steady_tolerance, min_s=req.warmup_s,
                              max_s=req.warmup_max_s if req.warmup_max_s is not None else req.warmup_s)

    def _warm_up_load(self, spec, server_pid: int | None, req: MeasureRequest, seconds: float) -> tuple:
        """One netarena-load run of the measurement's own load for `seconds`, nothing measured after it (its
        connections close at the end): (its document, error or None)."""
        load = dataclasses.replace(req, warmup_s=0.0, duration_s=seconds)
        document, _, error = self._run_generator(self._argv(spec, load), server_pid, load)
        return document, error

    def _argv(self, spec, req: MeasureRequest) -> list[str]:
        return generator_argv(self.generator, spec.mode, spec.target, spec.args, warmup_s=req.warmup_s,
                              duration_s=req.duration_s, timeout_s=req.timeout_s, cpus=req.generator_cpus)

    def _services_for(self, req: MeasureRequest, record: dict, progress) -> tuple[dict[str, str], dict | None]:
        """({name}_url placeholders, None) with every service the contestant needs running and holding its
        fixture (a dead one is started afresh); or (_, the failed record) when one cannot be had."""
        needs = used_services(req)
        urls: dict[str, str] = {}
        if not needs:
            return urls, None
        try:
            if req.services is None:
                raise ServiceError(f"needs {', '.join(needs)} but the run has no backing services")
            progress("database")
            for name in needs:
                running = req.services.ensure(name)
                urls[f"{name}_url"] = registry.get(req.scenario).service_url(req.level, running.url)
                # Each contestant measures against the same data: a previous one may have written into it.
                if name == "mongo" and mongo_fixture_intact(running.url) is not None:  # not a scenario: the service
                    running.fixture.update(load_mongo_fixture(running.url), reloaded=True)  # GridFS's stays
                # What the scenario reads beyond the service's own fixture (gridfs: the bucket's files).
                registry.get(req.scenario).ensure_fixture(running, req.level, req.static_dir,
                                                          getattr(req.services, "say", lambda message: None))
            record["services"] = req.services.records()
        except ServiceError as exc:
            record = failed(record, "service_failed", str(exc), None)
            record["stderr_tail"] = exc.stderr_tail
            return urls, record
        except Exception as exc:  # pymongo errors while checking the fixture: the service is not usable
            return urls, failed(record, "service_failed", f"{type(exc).__name__}: {exc}", None)
        return urls, None

    def check_answers(self, req: MeasureRequest, port: int) -> dict:
        """Does the server still answer once the load is gone? Asked only after requests timed out under load:
        an overloaded server answers again (its timeouts stay an error-rate flag), a hung one does not.

        A pool server (threads, sync processes) may still be working through the connections the load left in
        its accept queue, at the pool's pace (seed 002: 5,000 queued /sleep/1000 for 9 processes), and the fresh
        request waits behind them. When it got no answer but that queue shrank while it waited, the server was
        accepting: it is draining, not hung, and `draining` records the queue before and after."""
        queued, capacity = accept_queue(port)
        result = verify(req.scenario, port, req.static_dir, timeout_s=req.timeout_s, responses_only=True,
                        cafile=req.tls.cert if req.tls is not None else None, protocol=req.level.protocol)
        if result.ok:
            return {"ok": True, "reason": None}
        left, _ = accept_queue(port)
        # The accept queue is first in, first out, and the fresh connection joined it behind the others unless
        # it was full (its SYN dropped): then the same length means one accepted, else only a shorter queue does.
        if queued and (left < queued or (left == queued and queued < capacity)):
            return {"ok": True, "reason": None,
                    "draining": {"queued": queued, "queued_after": left, "fresh_request": result.reason}}
        return {"ok": False, "reason": result.reason}

    def _start_monitor(self, server_pid: int | None, generator_pid: int, req: MeasureRequest):
        """(the Monitor watching the server's and the generator's process trees, None) or (None, why not)."""
        try:
            if server_pid is None:
                raise MonitorError("no server process to watch (an external server whose process was not "
                                   "found: give --pid or --process-name)")
            services = req.services.pids() if req.services is not None and used_services(req) else {}
            return Monitor(server_pid, generator_pid, interval_s=self.monitor_interval_s,
                           services=services).start(), None
        except MonitorError as exc:
            return None, {"error": str(exc)}

    def _run_generator(self, argv: list[str], server_pid: int | None, req: MeasureRequest,
                       profile: dict | None = None):
        """netarena-load as `argv`, the server's tree monitored; with `profile` (a dict to fill), its profiler
        sampling the server's tree during the measured phase (netarena.profile)."""
        gen = ManagedProcess(argv, cpus=req.generator_cpus, capture=True, open_files=req.generator_open_files,
                             stdin_pipe=profile is not None)
        self.on_spawn(gen, "generator")
        monitor = None
        monitor_result = None
        sampler = gen_sampler = None
        before = b""  # the generator's stderr up to READY
        lead_s = 0.0
        try:
            if profile is not None:
                # A profiled repeat runs its generator with --prepare: whatever comes before its load (its start,
                # its first request, learning the response, as long as the server takes to answer it) is over at
                # READY, and the profilers' window is then timed from the start time given to it, not from its
                # spawn. The closed loop warms up from the start time, an open loop did before READY.
                ready_by = time.monotonic() + READY_MARGIN_S + req.warmup_s + req.timeout_s
                _, before, refused = read_ready(gen, ready_by)
                if refused is not None:
                    profile.update({"tool": req.profile.tool, "error": f"not profiled: {refused}"})
                    return None, None, refused
                # The profilers are started first and the start time is chosen once they are ready
                # (sampler.PERF_READY_S): their set-up never eats the window. It goes to the generator before the
                # window is opened; the window is a Unix time, so that opening it shifts nothing.
                sampler = self._start_sampler(server_pid, req)
                gen_sampler = self._start_generator_sampler(gen.pid, req)
                profilers_ready_by = time.monotonic() + PERF_READY_S
                sampler.wait_ready(profilers_ready_by)
                gen_sampler.wait_ready(profilers_ready_by)
                lead_s = START_LEAD_S
                start_ns = time.time_ns() + int(lead_s * 1e9)
                gen.proc.stdin.write(f"{start_ns}\n".encode())
                gen.proc.stdin.flush()  # communicate() closes stdin
                window_start = start_ns / 1e9 + (0.0 if open_loop(argv) else req.warmup_s)
                sampler.open_window(window_start)
                gen_sampler.open_window(window_start)
            monitor, monitor_result = self._start_monitor(server_pid, gen.pid, req)
            stdout, stderr, timed_out = _communicate(
                gen, lead_s + generator_time_limit_s(argv, req.warmup_s, req.duration_s, req.timeout_s))
            stderr = before + stderr
            if timed_out:
                return None, self._stop_monitor(monitor, monitor_result), too_slow(argv)
        finally:
            self._end(gen)
            if sampler is not None:
                if gen.proc.returncode != 0:
                    sampler.abort()  # the load ended early: no measured phase left to sample
                try:
                    profile.update(sampler.finish())
                except Exception as exc:  # reading the samples failed: the profile is lost, never the measurement
                    profile.update({"tool": req.profile.tool, "error": f"reading the profile failed: {exc!r}"})
            if gen_sampler is not None:
                if gen.proc.returncode != 0:
                    gen_sampler.abort()
                try:
                    profile["generator"] = gen_sampler.finish()
                except Exception as exc:  # the same rule for the generator's profile
                    profile["generator"] = {"tool": "perf", "error": f"reading the profile failed: {exc!r}"}
        monitor_result = self._stop_monitor(monitor, monitor_result)
        generator_result, error = parse_document(gen.proc.returncode, stdout, stderr)
        return generator_result, window(monitor_result, generator_result), error

    def _start_sampler(self, server_pid: int | None, req: MeasureRequest) -> Sampler:
        """The profiler of a profiled repeat, started now, its window opened later (Sampler)."""
        workdir = req.log_dir / "profiles" / file_name_part(f"{req.contestant.name}.{req.scenario}.{req.level.key}."
                                                            f"r{req.repeat_index}")
        return Sampler(req.profile, req.contestant, server_pid, duration_s=req.duration_s,
                       workdir=workdir, cpus=req.generator_cpus, on_spawn=self.on_spawn,
                       on_release=self.release).start()

    def _start_generator_sampler(self, generator_pid: int, req: MeasureRequest) -> Sampler:
        """perf on the generator of a profiled repeat, over the server profiler's window (profile.generator_sampler)."""
        workdir = req.log_dir / "profiles" / file_name_part(f"{req.contestant.name}.{req.scenario}.{req.level.key}."
                                                            f"r{req.repeat_index}") / "generator"
        return generator_sampler(generator_pid, duration_s=req.duration_s, workdir=workdir,
                                 cpus=req.generator_cpus, on_spawn=self.on_spawn, on_release=self.release)

    def _end(self, gen: ManagedProcess) -> None:
        """Kill whatever is left of a generator process group, and forget it once it is gone."""
        try:
            if gen.alive:
                gen.kill()
        finally:
            self.release(gen)

    def _run_spread(self, argvs: list[list[str]], server_pid: int | None, req: MeasureRequest, about: dict):
        """Several `netarena-load --prepare` processes: each announces READY, all get one start time, their
        documents are merged (merge_documents). `about` (the Spread, with the start time and the process the
        monitor watches added) goes into the merged document as "spread"."""
        gens: list[ManagedProcess] = []
        monitor, monitor_result = None, None
        try:
            for argv in argvs:
                gen = ManagedProcess(argv, cpus=req.generator_cpus, capture=True, stdin_pipe=True,
                                     open_files=req.generator_open_files)
                self.on_spawn(gen, "generator")
                gens.append(gen)
            # An open loop opens its connections and runs its warm-up before READY.
            ready_by = time.monotonic() + READY_MARGIN_S + req.warmup_s + req.timeout_s
            stderrs = []
            for i, gen in enumerate(gens):
                _, stderr, refused = read_ready(gen, ready_by)
                if refused is not None:
                    return None, None, f"generator process {i + 1} of {len(gens)}: {refused}"
                stderrs.append(stderr)
            # The monitor watches the first process's tree only (it follows one generator); the merged
            # document has every process's own CPU times.
            monitor, monitor_result = self._start_monitor(server_pid, gens[0].pid, req)
            about["monitor_generator"] = "process 1"
            start_ns = time.time_ns() + int(START_LEAD_S * 1e9)
            about["start_ns"] = start_ns
            for gen in gens:
                gen.proc.stdin.write(f"{start_ns}\n".encode())
                gen.proc.stdin.flush()  # communicate() closes stdin
            limit = START_LEAD_S + generator_time_limit_s(argvs[0], req.warmup_s, req.duration_s, req.timeout_s)
            # Read every process at once: one blocked on a full stderr pipe would hold the others' end.
            with ThreadPoolExecutor(len(gens)) as pool:
                outputs = list(pool.map(lambda g: _communicate(g, limit), gens))
        finally:
            for gen in gens:
                self._end(gen)
        monitor_result = self._stop_monitor(monitor, monitor_result)
        parts, errors = [], []
        for i, ((stdout, stderr, timed_out), argv, before) in enumerate(zip(outputs, argvs, stderrs)):
            if timed_out:
                errors.append(f"process {i + 1}: {too_slow(argv)}")
                continue
            document, error = parse_document(gens[i].proc.returncode, stdout, before + stderr)
            if error is not None:
                errors.append(f"process {i + 1}: {error}")
            else:
                parts.append({"host": f"process {i + 1}", "document": document})
        if errors:
            return None, monitor_result, f"{len(errors)} of {len(gens)} generator processes failed: " + \
                "; ".join(errors)
        try:
            generator_result = merge_documents(parts, self.generator)
        except MergeFailed as exc:
            return None, monitor_result, f"merging the {len(parts)} generator processes' results: {exc}"
        generator_result["spread"] = about
        return generator_result, window(monitor_result, generator_result), None

    @staticmethod
    def _stop_monitor(monitor, fallback):
        if monitor is None:
            return fallback
        try:
            return monitor.stop()
        except Exception as exc:  # a monitor failure must not lose the measurement
            return {"error": f"{type(exc).__name__}: {exc}"}


def _communicate(gen: ManagedProcess, timeout_s: float) -> tuple[bytes, bytes, bool]:
    """(stdout, stderr, killed for taking longer than timeout_s) of a generator process."""
    try:
        return (*gen.proc.communicate(timeout=timeout_s), False)
    except subprocess.TimeoutExpired:
        gen.kill()
        return (*gen.proc.communicate(), True)


def loopback_target(spec) -> bool:
    """Whether a LoadSpec's target (host:port, or a URL) is a loopback address."""
    netloc = urlsplit(spec.target).netloc if spec.mode == "http" else spec.target
    return is_loopback_host(netloc.rsplit(":", 1)[0].strip("[]"))
