"""Measurement backends: the real one (start the contestant, verify, run netarena-load, stop) and a mock.

A backend turns one planned measurement into one plain record (a dict, stored as it is). The mock one
returns deterministic generator-shaped results without starting anything, for fast CLI tests
(hyperfine's MockExecutor); it is selected with NETARENA_BACKEND=mock or the hidden --backend flag.
"""

from __future__ import annotations

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

from hdrh.histogram import HdrHistogram

from . import stats
from .contestants import Contestant, expand, install, repo_root, tail
from .process import ManagedProcess, free_port, group_members, wait_until_idle
from .scenarios import Level, load_spec, verify
from .server_user import SERVER_LOG_MAX_BYTES, prepare_run_dir
from .store import STATUS_FAILED, STATUS_OK, now_iso

# Extra time the generator gets beyond warm-up + duration + its own request timeout before we kill it.
GENERATOR_GRACE_S = 30.0
# With workers > 1, how long readiness may wait for the server's process tree to go idle (all workers started).
WORKERS_SETTLE_MAX_S = 5.0
STDERR_TAIL_BYTES = 4000


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

    def base_record(self) -> dict:
        return {"contestant": self.contestant.name, "scenario": self.scenario, "level_key": self.level.key,
                "level": self.level.to_dict(), "repeat_index": self.repeat_index}


def _seconds(value: float) -> str:
    return f"{value:g}"


def generator_argv(binary: Path, mode: str, target: str, args: list[str], *, warmup_s: float, duration_s: float,
                   timeout_s: float, cpus: list[int]) -> list[str]:
    # A fixed-size echo flood (--bytes) ends when every connection is done: its bytes are the measurement,
    # so it takes neither a duration nor a warm-up (the caller bounds it by duration_s instead).
    timing = [] if "--bytes" in args else ["--duration", _seconds(duration_s), "--warmup", _seconds(warmup_s)]
    argv = [str(binary), mode, target, *args, *timing, "--timeout", _seconds(timeout_s), "--json"]
    if cpus:
        argv += ["--cpus", ",".join(str(c) for c in cpus)]
    return argv


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def _result_fields(generator: dict) -> dict:
    latency = generator.get("latency") or {}
    return {"requests_per_s": generator["throughput"]["requests_per_s"], "error_rate": stats.error_rate(generator),
            "latency_p50_us": latency.get("p50_us"), "latency_p99_us": latency.get("p99_us")}


def _timeouts(generator: dict | None) -> int:
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

    def prepare(self, contestant: Contestant, allow_apt: bool, say) -> dict:
        return install(contestant, allow_apt=allow_apt, say=say, user=self.user)

    def start_server(self, contestant: Contestant, scenario: str, port: int, workers: int, static_dir: Path,
                     cpus: list[int], log_path: Path) -> ManagedProcess:
        values = contestant.placeholders(port=port, workers=workers, static_dir=static_dir)
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
                   static_dir: Path, timeout_s: float, workers: int = 1) -> tuple[str | None, str | None, dict | None]:
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
                            nagle_stall=contestant.manifest.nagle_stall.get(scenario))
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
        try:
            try:
                server = self.start_server(req.contestant, req.scenario, port, req.level.workers, req.static_dir,
                                           req.server_cpus, log_path)
            except OSError as exc:
                return self._failed(record, "start_failed", f"cannot start {req.contestant.command(req.scenario)}: "
                                    f"{exc}", None)
            progress("starting")
            kind, error, verification = self.wait_ready(server, req.contestant, req.scenario, port, req.static_dir,
                                                        req.timeout_s, workers=req.level.workers)
            record["verification"] = verification
            if kind is not None:
                record["stop"] = self.stop_server(req.contestant, server)
                return self._failed(record, kind, error, log_path)
            spec = load_spec(req.scenario, req.level, port, req.static_dir)
            argv = generator_argv(self.generator, spec.mode, spec.target, spec.args, warmup_s=req.warmup_s,
                                  duration_s=req.duration_s, timeout_s=req.timeout_s, cpus=req.generator_cpus)
            record["generator_argv"] = argv
            progress("load")
            generator, monitor, gen_error = self._run_generator(argv, server, req)
            record["generator"] = generator
            record["monitor"] = monitor
            crashed_code = server.poll()
            hang = None
            if crashed_code is None and gen_error is None and _timeouts(generator):
                progress("checking")
                hang = self.check_answers(req, port)
                record["verification"] = dict(record["verification"] or {}, after_load=hang)
            record["stop"] = self.stop_server(req.contestant, server)
            if crashed_code is not None:
                return self._failed(record, "crashed", f"the contestant exited with code {crashed_code} "
                                    "while under load", log_path)
            if gen_error is not None:
                return self._failed(record, "generator_failed", gen_error, log_path)
            if hang is not None and not hang["ok"]:
                killed = " and ignored its stop signal (stopped with SIGKILL)" if record["stop"].get("killed") else ""
                return self._failed(record, "hung", (
                    f"the server stopped answering: {_timeouts(generator)} request(s) timed out under load "
                    f"({generator['totals']['requests']} answered), and a fresh request after the load got no "
                    f"valid answer within timeout_s={req.timeout_s:g} s ({hang['reason']}){killed}"), log_path)
            record.update(_result_fields(generator))
            record["flags"] = stats.measurement_flags(generator, record["stop"])
            if generator["totals"]["requests"] == 0:
                return self._failed(record, "no_successful_requests",
                                    "no successful request during the measured phase; errors: "
                                    + json.dumps({k: v for k, v in generator["errors"]["by_class"].items() if v}),
                                    log_path)
            record["status"] = STATUS_OK
            record["ended_at"] = now_iso()
            return record
        finally:
            if server is not None and not server.released:
                # Reached on KeyboardInterrupt or an unexpected error: never leave the server behind.
                try:
                    server.stop(req.contestant.manifest.start.stop_signal,
                                min(req.contestant.manifest.start.stop_timeout_s, 2.0))
                finally:
                    self.release(server)

    def check_answers(self, req: MeasureRequest, port: int) -> dict:
        """Does the server still answer once the load is gone? Asked only after requests timed out under load:
        an overloaded server answers again (its timeouts stay an error-rate flag), a hung one does not."""
        result = verify(req.scenario, port, req.static_dir, timeout_s=req.timeout_s, responses_only=True)
        return {"ok": result.ok, "reason": None if result.ok else result.reason}

    def _run_generator(self, argv: list[str], server: ManagedProcess, req: MeasureRequest):
        from .monitor import Monitor, MonitorError, restrict_to_window

        gen = ManagedProcess(argv, cpus=req.generator_cpus, capture=True)
        self.on_spawn(gen, "generator")
        monitor = None
        monitor_result = None
        try:
            try:
                monitor = Monitor(server.pid, gen.pid, interval_s=self.monitor_interval_s).start()
            except MonitorError as exc:
                monitor_result = {"error": str(exc)}
            try:
                stdout, stderr = gen.proc.communicate(timeout=req.warmup_s + req.duration_s + req.timeout_s
                                                      + GENERATOR_GRACE_S)
            except subprocess.TimeoutExpired:
                gen.kill()
                stdout, stderr = gen.proc.communicate()
                limit = "a fixed-size echo flood must end within duration_s" if "--bytes" in argv else \
                    "warm-up + duration + timeout"
                return None, self._stop_monitor(monitor, monitor_result), \
                    f"netarena-load did not finish in time ({limit}) and was killed"
        finally:
            try:
                if gen.alive:
                    gen.kill()
            finally:
                self.release(gen)
        monitor_result = self._stop_monitor(monitor, monitor_result)
        if gen.proc.returncode != 0:
            message = stderr.decode("utf-8", "replace").strip()[-2000:]
            return None, monitor_result, f"netarena-load exited with code {gen.proc.returncode}: {message}"
        try:
            generator_result = json.loads(stdout)
        except ValueError as exc:
            return None, monitor_result, f"netarena-load printed no valid JSON ({exc}): {stdout[:200]!r}"
        if monitor_result and "error" not in monitor_result:
            measured = [datetime.fromisoformat(generator_result[k]).timestamp() for k in ("started_at", "ended_at")]
            monitor_result = restrict_to_window(monitor_result, *measured)
        return generator_result, monitor_result, None

    @staticmethod
    def _stop_monitor(monitor, fallback):
        if monitor is None:
            return fallback
        try:
            return monitor.stop()
        except Exception as exc:  # a monitor failure must not lose the measurement
            return {"error": f"{type(exc).__name__}: {exc}"}

    @staticmethod
    def _failed(record: dict, kind: str, error: str, log_path: Path | None) -> dict:
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


class MockBackend:
    """Deterministic, instant results shaped like netarena-load's JSON; starts nothing."""

    name = "mock"

    def __init__(self, generator: Path | None = None, **_):
        self.generator = generator

    def prepare(self, contestant: Contestant, allow_apt: bool, say) -> dict:
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
            "mode": "echo" if req.scenario == "echo" else "http", "command_line": [],
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
            "generator_saturated": False, "echo": None,
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
    raise ValueError(f"unknown backend {name!r} (real | mock)")
