"""Measurement backends: the real one (start the contestant, verify, run netarena-load, stop) and a mock.

A backend turns one planned measurement into one plain record (a dict, stored as it is). The mock one
returns deterministic generator-shaped results without starting anything, for fast CLI tests
(hyperfine's MockExecutor); it is selected with NETARENA_BACKEND=mock or the hidden --backend flag.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from hdrh.histogram import HdrHistogram

from . import stats, warmup
from .scenarios import registry
from .contestants import Contestant, expand, install, repo_root, tail
from .ports import free_port
from .process import ManagedProcess, group_members, wait_until_idle
from .scenarios import Level, accept_queue, load_spec, verify
from .server_user import SERVER_LOG_MAX_BYTES, prepare_run_dir
from .spread import (READY_MARGIN_S, START_LEAD_S, is_loopback_host, merge_documents, plan_for, read_ready,
                     share_level)
from .store import STATUS_FAILED, STATUS_OK, now_iso

# Extra time the generator gets beyond warm-up + duration + its own request timeout before we kill it.
GENERATOR_GRACE_S = 30.0
# With workers > 1, how long readiness may wait for the server's process tree to go idle (all workers started).
WORKERS_SETTLE_MAX_S = 5.0
STDERR_TAIL_BYTES = 4000
# netarena-load's exit code when its run finished and a --threshold failed (docs/load-generator.md).
GENERATOR_EXIT_THRESHOLD_FAILED = 99


class GeneratorMissing(Exception):
    pass


def find_generator() -> Path:
    """netarena-load: $NETARENA_LOAD, else this checkout's target/release, else PATH."""
    explicit = os.environ.get("NETARENA_LOAD")
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise GeneratorMissing(f"NETARENA_LOAD={explicit} is not an executable file")
        return path
    root = repo_root()
    if root is not None:
        built = root / "target" / "release" / "netarena-load"
        if built.is_file() and os.access(built, os.X_OK):
            return built
    found = shutil.which("netarena-load")
    if found:
        return Path(found)
    raise GeneratorMissing("netarena-load not found: build it with `cargo build --release -p netarena-load` "
                           "(from the repository root) or install netarena with `pip install .`")


def generator_version(path: Path) -> str | None:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def check_thresholds(binary: Path, expressions: list[str]) -> str | None:
    """netarena-load's own verdict on --threshold expressions, before anything starts: None when it accepts them
    all, else its message. It parses them with the rest of its command line and exits 2 on a bad one before any
    load; accepted, the probe is one connection attempt for a millisecond to a port nothing listens on."""
    if not expressions:
        return None
    argv = [str(binary), "http", f"http://127.0.0.1:{free_port()}/", "-c", "1", "--duration", "1ms",
            "--timeout", "100ms", "--json"]
    for expression in expressions:
        argv += ["--threshold", expression]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not run {binary} to check the thresholds: {exc}"
    if out.returncode == 2:
        return out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "netarena-load refused them (exit 2)"
    return None


@dataclass
class MeasureRequest:
    contestant: Contestant
    scenario: str
    level: Level
    repeat_index: int
    warmup_s: float
    duration_s: float
    timeout_s: float
    server_cpus: list[int]
    generator_cpus: list[int]
    static_dir: Path
    log_dir: Path
    services: object | None = None  # services.ServiceManager of the run, for contestants that `need` one
    # The suite's generator_open_files: each netarena-load process's open-files limit (None: the hard limit).
    generator_open_files: int | None = None
    # The suite's warmup_until_steady (a tolerance) and warmup_max_s: warm up until steady (netarena.warmup),
    # warmup_s being the minimum; None: a fixed warm-up of warmup_s.
    steady_tolerance: float | None = None
    warmup_max_s: float | None = None

    def base_record(self) -> dict:
        return {"contestant": self.contestant.name, "scenario": self.scenario, "level_key": self.level.key,
                "level": self.level.to_dict(), "repeat_index": self.repeat_index}


def _seconds(value: float) -> str:
    return f"{value:g}"


def generator_argv(binary: Path, mode: str, target: str, args: list[str], *, warmup_s: float, duration_s: float,
                   timeout_s: float, cpus: list[int]) -> list[str]:
    # A fixed-size echo flood (--bytes) ends when every connection is done: its bytes are the measurement,
    # so it takes neither a duration nor a warm-up (the caller bounds it by duration_s instead).
    # A find-max search measures steps of duration_s each, as many as it needs (FIND_MAX_MAX_STEPS at most).
    if "--bytes" in args:
        timing = []
    elif "--conns-per-step" in args:  # each step lasts its connections / its rate: no length to give
        timing = ["--warmup", _seconds(warmup_s)]
    elif "--find-max" in args:
        timing = ["--step-duration", _seconds(duration_s), "--warmup", _seconds(warmup_s)]
    else:
        timing = ["--duration", _seconds(duration_s), "--warmup", _seconds(warmup_s)]
    argv = [str(binary), mode, target, *args, *timing, "--timeout", _seconds(timeout_s), "--json"]
    if cpus:
        argv += ["--cpus", ",".join(str(c) for c in cpus)]
    return argv


# netarena-load's FIND_MAX_MAX_STEPS (crates/loadgen/src/load/open_run.rs): a search measures at most this many steps.
FIND_MAX_MAX_STEPS = 40


def generator_time_limit_s(argv: list[str], warmup_s: float, duration_s: float, timeout_s: float) -> float:
    """How long the generator may take before it is killed: its warm-up, its measured time (a find-max search:
    every step it may measure, each followed by a drain of up to timeout_s) and a grace period."""
    if "--find-max" in argv:
        return warmup_s + FIND_MAX_MAX_STEPS * (duration_s + timeout_s) + GENERATOR_GRACE_S
    if "--conns-per-step" in argv:
        return warmup_s + sweep_seconds(argv, timeout_s) + GENERATOR_GRACE_S
    return warmup_s + duration_s + timeout_s + GENERATOR_GRACE_S


def sweep_seconds(argv: list[str], timeout_s: float) -> float:
    """The longest a --steps --conns-per-step sweep takes: each step's N connections at its rate, then a drain
    of up to timeout_s."""
    from .scenarios import sweep_rates

    n = int(argv[argv.index("--conns-per-step") + 1])
    return sum(n / rate + timeout_s for rate in sweep_rates(argv[argv.index("--steps") + 1]))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def _result_fields(generator: dict) -> dict:
    latency = generator.get("latency") or {}
    return {"requests_per_s": generator["throughput"]["requests_per_s"], "error_rate": stats.error_rate(generator),
            "latency_p50_us": latency.get("p50_us"), "latency_p99_us": latency.get("p99_us")}


def used_services(req: MeasureRequest) -> list[str]:
    """The services this measurement's scenario talks to (a contestant may need one for some scenarios only)."""
    return [n for n in req.contestant.manifest.needs if registry.kind(req.scenario).service == n]


def timeouts(generator: dict | None) -> int:
    by_class = ((generator or {}).get("errors") or {}).get("by_class", {})
    return by_class.get("timeout", 0) + by_class.get("connect_timeout", 0)


class RealBackend:
    name = "real"

    def __init__(self, generator: Path, on_spawn=lambda proc, role: None, on_reaped=lambda proc: None, user=None,
                 monitor_interval_s: float = 0.25):
        self.generator = generator
        self.on_spawn = on_spawn  # lets the runner record process groups in the store (cleanup after kill -9)
        self.on_reaped = on_reaped
        self.monitor_interval_s = monitor_interval_s
        self.user = user  # server_user.ServerUser the servers run as, or None: netarena's own user

    # Installs are processes on this machine, each under its own lock: several may run at once.
    concurrent_installs = True

    def prepare(self, contestant: Contestant, allow_apt: bool, say, parts=()) -> dict:
        return install(contestant, allow_apt=allow_apt, say=say, user=self.user, parts=parts)

    def start_server(self, contestant: Contestant, scenario: str, port: int, workers: int, static_dir: Path,
                     cpus: list[int], log_path: Path, host: str = "127.0.0.1",
                     service_urls: dict[str, str] | None = None, threads: int | None = None) -> ManagedProcess:
        values = contestant.placeholders(port=port, workers=workers, static_dir=static_dir, host=host,
                                         threads=threads)
        # Scenarios that use no service get an empty URL for each the contestant could use.
        values.update({f"{name}_url": "" for name in contestant.manifest.needs})
        values.update(service_urls or {})
        argv = [expand(w, values) for w in contestant.command(scenario)]
        env = dict(os.environ)
        env.update({k: expand(v, values) for k, v in contestant.manifest.start.env.items()})
        env["PYTHONUNBUFFERED"] = "1"  # so a crashed Python contestant's last words reach the log
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ written into the contestant's folder
        env["HOME"] = str(prepare_run_dir(contestant.run_dir, self.user))
        proc = ManagedProcess(argv, cwd=contestant.dir, env=env, cpus=cpus, log_path=log_path, user=self.user,
                              max_file_bytes=SERVER_LOG_MAX_BYTES)
        self.on_spawn(proc, f"server:{contestant.name}")
        return proc

    def stop_server(self, contestant: Contestant, proc: ManagedProcess) -> dict:
        outcome = proc.stop(contestant.manifest.start.stop_signal, contestant.manifest.start.stop_timeout_s)
        self.release(proc)
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
                   threads: int | None = None) -> tuple[str | None, str | None, dict | None]:
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
        while True:
            result = verify(scenario, port, static_dir, timeout_s=min(timeout_s, max(0.5, deadline - time.monotonic())),
                            concurrency_model=contestant.manifest.concurrency_model,
                            nagle_stall=contestant.manifest.nagle_stall.get(scenario),
                            pool=contestant.pool(workers, threads),
                            closes_connections=contestant.manifest.closes_connections is not None)
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
            time.sleep(0.1)

    def measure(self, req: MeasureRequest, progress=lambda text: None) -> dict:
        record = req.base_record()
        record["started_at"] = now_iso()
        port = free_port()
        record["port"] = port
        log_path = req.log_dir / _safe(f"{req.contestant.name}.{req.scenario}.{req.level.key}.r{req.repeat_index}.log")
        record["log_path"] = str(log_path)
        server = None
        needs = used_services(req)
        try:
            service_urls, failure = self._services_for(req, record, progress)
            if failure is not None:
                return failure
            try:
                server = self.start_server(req.contestant, req.scenario, port, req.level.workers, req.static_dir,
                                           req.server_cpus, log_path, service_urls=service_urls,
                                           threads=req.level.threads)
            except OSError as exc:
                return failed(record, "start_failed", f"cannot start {req.contestant.command(req.scenario)}: "
                                    f"{exc}", None)
            progress("starting")
            kind, error, verification = self.wait_ready(server, req.contestant, req.scenario, port, req.static_dir,
                                                        req.timeout_s, workers=req.level.workers,
                                                        threads=req.level.threads)
            record["verification"] = verification
            if kind is not None:
                record["stop"] = self.stop_server(req.contestant, server)
                return failed(record, kind, error, log_path)
            generator, gen_error = self.load(
                record, lambda level: load_spec(req.scenario, level, port, req.static_dir), server.pid, req, progress)
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
            record["stop"] = self.stop_server(req.contestant, server)
            crashed = None if crashed_code is None else \
                f"the contestant exited with code {crashed_code} while under load"
            return conclude(record, generator, crashed=crashed, gen_error=gen_error, hang=hang,
                            timeout_s=req.timeout_s, log_path=log_path)
        finally:
            if server is not None and not server.released:
                # Reached on KeyboardInterrupt or an unexpected error: never leave the server behind.
                try:
                    server.stop(req.contestant.manifest.start.stop_signal,
                                min(req.contestant.manifest.start.stop_timeout_s, 2.0))
                finally:
                    self.release(server)

    def load(self, record: dict, spec_for, server_pid: int | None, req: MeasureRequest, progress) -> tuple:
        """Run netarena-load as `spec_for(level)` (a scenarios.LoadSpec) says while monitoring the server's
        process tree; the command line, the generator's result and the monitor's go into `record`. A level
        beyond one process's open files or one source address's ports is spread over several processes
        (spread.plan_spread) started together and merged into one result. Returns (result, error or None)."""
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
            argv = self._argv(spec, req)
            record["generator_argv"] = argv
            generator, monitor, gen_error = self._run_generator(argv, server_pid, req)
        else:
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
            generator, monitor, gen_error = self._run_spread(argvs, server_pid, req, spread.to_dict())
        record["generator"] = generator
        record["monitor"] = monitor
        return generator, gen_error

    def warm_up(self, spec, server_pid: int | None, req: MeasureRequest) -> dict:
        """Warm the server up with the measurement's own load in windows until steady (netarena.warmup)."""
        window_req = dataclasses.replace(req, warmup_s=0.0, duration_s=warmup.WINDOW_S)

        def run_window() -> tuple[float | None, str | None]:
            document, _, error = self._run_generator(self._argv(spec, window_req), server_pid, window_req)
            if error is not None:
                return None, f"a warm-up window failed: {error}"
            return document["throughput"]["requests_per_s"], None

        return warmup.warm_up(run_window, tolerance=req.steady_tolerance, min_s=req.warmup_s,
                              max_s=req.warmup_max_s if req.warmup_max_s is not None else req.warmup_s)

    def _argv(self, spec, req: MeasureRequest) -> list[str]:
        return generator_argv(self.generator, spec.mode, spec.target, spec.args, warmup_s=req.warmup_s,
                              duration_s=req.duration_s, timeout_s=req.timeout_s, cpus=req.generator_cpus)

    def _services_for(self, req: MeasureRequest, record: dict, progress) -> tuple[dict[str, str], dict | None]:
        """({name}_url placeholders, None) with every service the contestant needs running and holding its
        fixture (a dead one is started afresh); or (_, the failed record) when one cannot be had."""
        from .fixtures import load_mongo_fixture, mongo_fixture_intact
        from .services import ServiceError

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
                urls[f"{name}_url"] = running.url
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
        result = verify(req.scenario, port, req.static_dir, timeout_s=req.timeout_s, responses_only=True)
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
        from .monitor import Monitor, MonitorError

        try:
            if server_pid is None:
                raise MonitorError("no server process to watch (an external server whose process was not "
                                   "found: give --pid or --process-name)")
            services = req.services.pids() if req.services is not None and used_services(req) else {}
            return Monitor(server_pid, generator_pid, interval_s=self.monitor_interval_s,
                           services=services).start(), None
        except MonitorError as exc:
            return None, {"error": str(exc)}

    def _run_generator(self, argv: list[str], server_pid: int | None, req: MeasureRequest):
        gen = ManagedProcess(argv, cpus=req.generator_cpus, capture=True, open_files=req.generator_open_files)
        self.on_spawn(gen, "generator")
        monitor = None
        monitor_result = None
        try:
            monitor, monitor_result = self._start_monitor(server_pid, gen.pid, req)
            stdout, stderr, timed_out = _communicate(
                gen, generator_time_limit_s(argv, req.warmup_s, req.duration_s, req.timeout_s))
            if timed_out:
                return None, self._stop_monitor(monitor, monitor_result), too_slow(argv)
        finally:
            self._end(gen)
        monitor_result = self._stop_monitor(monitor, monitor_result)
        generator_result, error = parse_document(gen.proc.returncode, stdout, stderr)
        return generator_result, window(monitor_result, generator_result), error

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
        from concurrent.futures import ThreadPoolExecutor

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
        generator_result = merge_documents(parts)
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


def too_slow(argv: list[str]) -> str:
    limit = "a fixed-size echo flood must end within duration_s" if "--bytes" in argv else \
        "warm-up + duration + timeout"
    return f"netarena-load did not finish in time ({limit}) and was killed"


def parse_document(returncode: int, stdout: bytes, stderr: bytes) -> tuple[dict | None, str | None]:
    """A finished netarena-load's document, or why there is none."""
    # 99: the run finished and a --threshold failed; the result is as complete as with 0.
    if returncode not in (0, GENERATOR_EXIT_THRESHOLD_FAILED):
        message = stderr.decode("utf-8", "replace").strip()[-2000:]
        return None, f"netarena-load exited with code {returncode}: {message}"
    try:
        return json.loads(stdout), None
    except ValueError as exc:
        return None, f"netarena-load printed no valid JSON ({exc}): {stdout[:200]!r}"


def window(monitor_result: dict | None, generator: dict | None) -> dict | None:
    """The monitor's samples cut to the generator's measured phase."""
    from .monitor import restrict_to_window

    if generator is None or not monitor_result or "error" in monitor_result:
        return monitor_result
    measured = [datetime.fromisoformat(generator[k]).timestamp() for k in ("started_at", "ended_at")]
    return restrict_to_window(monitor_result, *measured)


def loopback_target(spec) -> bool:
    """Whether a LoadSpec's target (host:port, or a URL) is a loopback address."""
    netloc = urlsplit(spec.target).netloc if spec.mode == "http" else spec.target
    return is_loopback_host(netloc.rsplit(":", 1)[0].strip("[]"))


def failed(record: dict, kind: str, error: str, log_path: Path | None) -> dict:
    """Mark a record failed with its kind and reason; the contestant's log tail when the log is here."""
    record["status"] = STATUS_FAILED
    record["failure_kind"] = kind
    record["error"] = error
    if log_path is not None:
        record["stderr_tail"] = tail(log_path, STDERR_TAIL_BYTES)
    if record.get("generator"):
        record.update(_result_fields(record["generator"]))
        record["flags"] = stats.measurement_flags(record["generator"], record.get("stop"))
    else:
        record["flags"] = stats.measurement_flags(None, record.get("stop"))
    record["ended_at"] = now_iso()
    return record


def conclude(record: dict, generator: dict | None, *, crashed: str | None, gen_error: str | None,
             hang: dict | None, timeout_s: float, log_path: Path | None) -> dict:
    """The verdict of a measurement whose load has run and whose server is stopped (record["stop"]), on one
    machine, across hosts (netarena.cluster) or of an external server (netarena.external): crashed (`crashed` says
    how), generator failed, hung, nothing answered, or ok."""
    if crashed is not None:
        return failed(record, "crashed", crashed, log_path)
    if gen_error is not None:
        return failed(record, "generator_failed", gen_error, log_path)
    if hang is not None and not hang["ok"]:
        killed = " and ignored its stop signal (stopped with SIGKILL)" if (record.get("stop") or {}).get("killed") \
            else ""
        return failed(record, "hung", (
            f"the server stopped answering: {timeouts(generator)} request(s) timed out under load "
            f"({generator['totals']['requests']} answered), and a fresh request after the load got no "
            f"valid answer within timeout_s={timeout_s:g} s ({hang['reason']}){killed}"), log_path)
    asked = (generator.get("config") or {}).get("requests")
    if asked and generator["totals"]["responses"] < asked and not generator.get("interrupted"):
        # -n N with duration_s as the time limit: a run that ended by time measured fewer responses than
        # asked, and its time is the limit, not the time N took. Its figures stay with it, marked failed.
        limit = (generator.get("config") or {}).get("duration_s")
        return failed(record, "requests_not_reached", (
            f"{generator['totals']['responses']:,} of the {asked:,} requests asked were answered within the time "
            f"limit (duration_s = {limit:g} s); raise duration_s or lower requests"), log_path)
    record.update(_result_fields(generator))
    record["flags"] = stats.measurement_flags(generator, record.get("stop"))
    # What each request (MiB) cost and how much the machine interfered, over the measured window; a noisy one
    # is flagged here and may be discarded and re-measured by the runner.
    record["cost"] = stats.cost_per_unit(generator, record.get("monitor"))
    found = stats.contention(generator, record.get("monitor"))
    found["noisy"] = stats.noisy_reason(found)
    record["contention"] = found
    if found["noisy"]:
        record["flags"].append(stats.FLAG_NOISY)
    if generator["totals"]["requests"] == 0:
        return failed(record, "no_successful_requests",
                      "no successful request during the measured phase; errors: "
                      + json.dumps({k: v for k, v in generator["errors"]["by_class"].items() if v}), log_path)
    record["status"] = STATUS_OK
    record["ended_at"] = now_iso()
    return record


class MockBackend:
    """Deterministic, instant results shaped like netarena-load's JSON; starts nothing."""

    name = "mock"

    def __init__(self, generator: Path | None = None, **_):
        self.generator = generator

    concurrent_installs = True

    def prepare(self, contestant: Contestant, allow_apt: bool, say, parts=()) -> dict:
        return {"mock": True}

    def measure(self, req: MeasureRequest, progress=lambda text: None) -> dict:
        record = req.base_record()
        record["started_at"] = now_iso()
        seed = int(hashlib.sha256(f"{req.contestant.name}/{req.scenario}/{req.level.key}".encode()).hexdigest()[:8], 16)
        base_rps = 1000 + seed % 9000
        # Repeats differ by -2%, 0, +2%: a stable contestant (CV below the flag threshold).
        rps = base_rps * (1 + 0.02 * ((req.repeat_index % 3) - 1))
        requests = int(rps * req.duration_s)
        hist = HdrHistogram(1, 3_600_000_000, 3)
        latency_us = max(1, int(req.level.connections / rps * 1e6))
        hist.record_value(latency_us, requests)
        hist.record_value(latency_us * 4, max(1, requests // 100))
        generator = {
            "schema_version": 1, "tool": {"name": "netarena-load (mock backend)", "version": "0"},
            "mode": "http" if registry.kind(req.scenario).is_http else "echo", "command_line": [],
            "config": {"connections": req.level.connections, "duration_s": req.duration_s},
            "started_at": record["started_at"], "ended_at": record["started_at"], "duration_s": req.duration_s,
            "warmup_s": req.warmup_s,
            "totals": {"requests": requests, "responses": requests, "bytes_sent": 0, "bytes_received": 0,
                       "connections_opened": req.level.connections, "errors": 0},
            "throughput": {"requests_per_s": rps, "bytes_per_s": 0.0},
            "latency": {"count": hist.get_total_count(), "p50_us": hist.get_value_at_percentile(50),
                        "p99_us": hist.get_value_at_percentile(99), "max_us": hist.get_max_value(),
                        "histogram": {"encoding": "hdrhistogram-v2-deflate-base64", "unit": "us",
                                      "lowest_trackable": 1, "highest_trackable": 3_600_000_000,
                                      "significant_digits": 3, "data": hist.encode().decode()}},
            "timeline": [], "errors": {"total": 0, "by_class": {}, "status_codes": {}, "examples": []},
            "generator": {"threads": 1, "cpus": req.generator_cpus, "busy_fraction": 0.5,
                          "busy_fraction_max": 0.5, "saturated": False},
            "generator_saturated": False, "echo": None,  # not a scenario: the generator result's field
        }
        record.update({"status": STATUS_OK, "generator": generator, "generator_argv": ["(mock)"],
                       "flags": stats.measurement_flags(generator), "ended_at": now_iso()})
        record.update(_result_fields(generator))
        return record


def make_backend(name: str, **kwargs):
    if name == "mock":
        return MockBackend(**kwargs)
    if name == "real":
        return RealBackend(**kwargs)
    if name == "external":
        from .external import ExternalBackend

        return ExternalBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r} (real | mock | external)")
