"""What runs on the hosts: plain functions the orchestrator submits as Dask tasks, each pinned to one worker.

Every one imports only netarena and the standard library, so a host needs netarena installed (the same
version: `worker_facts` lets the orchestrator refuse another one) and nothing else. They coordinate with the
orchestrator through Dask's own Variable and Event, named after the measurement: "<mid>/server" (the
server's port, or why it failed), "<mid>/ready/<host>" (a generator's READY), "<mid>/start" (the start time
per host), "<mid>/loaded" (the load is over: stop the server).
"""

from __future__ import annotations

import http.client
import json
import socket
import tempfile
import time
from pathlib import Path

from .. import __version__
from ..cluster.netns import in_install_netns
from ..contestants import InstallError, cache_root, default_contestants_dir, install, load, tail
from ..envinfo import collect_environment
from ..errors import ConfigError
from ..monitor import Monitor, MonitorError
from ..ports import free_port
from ..process import ManagedProcess, available_cpus
from ..scenarios import STATIC_SET_VERSION, build_static_files, load_spec, registry, static_set_ready
from ..services import ServiceManager, load_all, service_availability
from ..spread import read_ready
from ..generator import GeneratorMissing, find_generator, generator_argv
from ..generator_build import generator_version
from ..store import file_name_part
from .base import GENERATOR_GRACE_S, STDERR_TAIL_BYTES, MeasureRequest, used_services
from .real import RealBackend

# distributed (Dask) is imported inside the tasks that use it: it takes about a second to import, and the
# orchestrator imports this module for the tasks' names only.

# How long a task waits for the orchestrator's next word beyond the measurement's own time before it gives
# up by itself, so that no task (and no server or generator) outlives an orchestrator that vanished.
ORPHAN_GRACE_S = 60.0
STDERR_KEEP_BYTES = 4000


def worker_facts() -> dict:
    """This host as the orchestrator records it: versions, CPUs, limits, clock, environment."""
    try:
        generator = find_generator()
        gen = {"path": str(generator), "version": generator_version(generator)}
    except GeneratorMissing as exc:
        gen = {"path": None, "version": None, "error": str(exc)}
    return {"netarena_version": __version__, "hostname": socket.gethostname(), "cpus": available_cpus(),
            "generator": gen, "time": time.time(), "environment": collect_environment({"generator": gen})}


def clock_probe() -> float:
    return time.time()


def install_task(contestant_name: str, allow_apt: bool, parts: list[str] = ()) -> dict:
    """Install a contestant on this host (the server host), as the single-host run does, with the optional
    install parts the run's plan needs; in the host's install namespace when it has one (a lab host's own has
    no route to the registries)."""
    contestant = load(default_contestants_dir(), [contestant_name])[0]
    return in_install_netns(install, contestant, allow_apt=allow_apt, parts=parts)


# The backing services (databases) of the current run on this host, the server host: kept by this worker
# process across the run's measurements, by run key. Started by the first measurement that needs one (as on
# one machine), stopped with their data by services_stop_task at the run's end (also on Ctrl-C). An
# orchestrator killed with -9 cannot say so: the next run's services_install_task stops what is left, and the
# services die with the worker (parent-death signal) at the latest.
_SERVICES: dict = {}


def services_install_task(run_key: str, needed: list[str], backends: dict[str, str], allow_apt: bool) -> dict:
    """Install what each needed service takes on this host; {provides: None, or why it cannot be had}."""
    for key in [k for k in _SERVICES if k != run_key]:  # a run whose orchestrator vanished
        _SERVICES.pop(key).stop_all()
    manager = _SERVICES.get(run_key)
    if manager is None:
        work_dir = Path(tempfile.gettempdir()) / "netarena-services" / run_key
        # On the server host the services share the server's CPUs: the generators are on other hosts.
        manager = _SERVICES[run_key] = ServiceManager(load_all(), work_dir, available_cpus(), backends=backends)
    unusable: dict[str, str | None] = {}
    for name in needed:
        runnable, reasons = service_availability(manager.services, name, backends.get(name), allow_apt)
        if not runnable:
            unusable[name] = "; ".join(reasons)
            continue
        try:
            in_install_netns(manager.install, name, allow_apt)
            unusable[name] = None
        except (InstallError, ConfigError) as exc:
            unusable[name] = f"install failed: {exc}"
    return {"unusable": unusable, "environment": manager.environment()}


def services_stop_task(run_key: str) -> bool:
    """Stop the run's services on this host and remove their data; False when there were none."""
    manager = _SERVICES.pop(run_key, None)
    if manager is None:
        return False
    manager.stop_all()
    return True


def _static_dir() -> Path:
    static_dir = cache_root() / "static" / f"v{STATIC_SET_VERSION}"
    static_dir.mkdir(parents=True, exist_ok=True)
    if not static_set_ready(static_dir):
        build_static_files(static_dir)
    return static_dir


def _read_status(port: int, path: str | None, timeout_s: float) -> str | None:
    if not path:
        return None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode("utf-8", "replace")
    except OSError as exc:
        return f"error: {exc}"
    finally:
        conn.close()


# How long the server task waits, once the load is over, for the orchestrator's merged generator document.
MERGED_DOCUMENT_WAIT_S = 10.0


def _merged_document(mid: str) -> dict | None:
    """The generator hosts' merged document of measurement `mid` (the orchestrator's "<mid>/generator"), or None
    when the load failed or was cut short (the orchestrator then sets none, or None)."""
    from distributed import Variable

    try:
        return Variable(f"{mid}/generator").get(timeout=MERGED_DOCUMENT_WAIT_S)
    except TimeoutError:
        return None


def server_task(mid: str, contestant_name: str, scenario: str, level, repeat_index: int, warmup_s: float,
                duration_s: float, timeout_s: float, log_dir: str, wait_s: float, run_key: str | None = None) -> dict:
    """Start, verify and monitor the contestant here, listening on every address; stop it once the
    orchestrator sets "<mid>/loaded" (or wait_s passed). Returns the server side of the record."""
    from distributed import Event, Variable

    contestant = load(default_contestants_dir(), [contestant_name])[0]
    cpus = available_cpus()
    req = MeasureRequest(contestant, scenario, level, repeat_index, warmup_s, duration_s, timeout_s, cpus, [],
                         _static_dir(), Path(log_dir), services=_SERVICES.get(run_key))
    backend = RealBackend(generator=None)
    port = free_port()
    log_path = req.log_dir / file_name_part(f"{contestant.name}.{scenario}.{level.key}.r{repeat_index}.log")
    out: dict = {"host": socket.gethostname(), "port": port, "log_path": str(log_path), "server_cpus": cpus}
    announce = Variable(f"{mid}/server")
    server = None
    needs = used_services(req)
    try:
        # The same steps as on one machine: each needed service running and holding its fixture.
        service_record: dict = {}
        service_urls, failure = backend._services_for(req, service_record, progress=lambda text: None)
        out["services"] = service_record.get("services")
        if failure is not None:
            out["failure"] = (failure["failure_kind"], failure["error"])
            out["stderr_tail"] = failure.get("stderr_tail")
            announce.set({"failed": True})
            return out
        try:
            server = backend.start_server(contestant, scenario, port, level.workers, req.static_dir, cpus,
                                          log_path, host="0.0.0.0", threads=level.threads, service_urls=service_urls,
                                          protocol=level.protocol)
        except OSError as exc:
            out["failure"] = ("start_failed", f"cannot start {contestant.command(scenario)}: {exc}")
            announce.set({"failed": True})
            return out
        kind, error, verification = backend.wait_ready(server, contestant, scenario, port, req.static_dir,
                                                       timeout_s, workers=level.workers, threads=level.threads,
                                                       service_urls=service_urls, protocol=level.protocol)
        out["verification"] = verification
        if kind is not None:
            out["stop"] = backend.stop_server(contestant, server)
            out["failure"] = (kind, error)
            out["stderr_tail"] = tail(log_path, STDERR_TAIL_BYTES)
            announce.set({"failed": True})
            return out
        status_path = contestant.manifest.start.status_path
        before = _read_status(port, status_path, timeout_s)
        monitor, monitor_result = None, None
        try:
            monitor = Monitor(server.pid, services=req.services.pids() if needs else None).start()
        except MonitorError as exc:
            monitor_result = {"error": str(exc)}
        # The scenario's count of the server's work over the load (its queries), here beside the database, as
        # on one machine: started just before the generators are let loose, judged against their merged
        # document, which the orchestrator hands over before it says the load is over.
        kind_of = registry.kind(scenario)
        counting = kind_of.count_during_load(
            level, service_urls.get(f"{kind_of.service}_url") if kind_of.service else None)
        announce.set({"port": port})
        Event(f"{mid}/loaded").wait(timeout=wait_s)
        if counting is not None:
            out["during_load"] = counting.finish(_merged_document(mid))
        out["crashed_code"] = server.poll()
        died = next((d for d in (req.services.dead(n) for n in needs) if d is not None), None) if needs else None
        if died is not None:
            out["service_died"] = (str(died), died.stderr_tail)
        after = _read_status(port, status_path, timeout_s)
        if monitor is not None:
            monitor_result = RealBackend._stop_monitor(monitor, monitor_result)
        out["monitor"] = monitor_result
        if status_path:
            out["server_status"] = {"path": status_path, "before": before, "after": after}
        if out["crashed_code"] is None:
            # As on one machine: does it still answer once the load is gone (the orchestrator uses it only
            # when requests timed out under load)?
            out["after_load"] = backend.check_answers(req, port)
        out["stop"] = backend.stop_server(contestant, server)
        out["stderr_tail"] = tail(log_path, STDERR_TAIL_BYTES)
        return out
    finally:
        if server is not None and not server.released:
            try:
                server.stop(contestant.manifest.start.stop_signal, min(contestant.manifest.start.stop_timeout_s, 2.0))
            finally:
                backend.release(server)


def generator_task(mid: str, host: str, scenario: str, level, address: str, port: int, warmup_s: float,
                   duration_s: float, timeout_s: float, source_ips: str | None, wait_s: float) -> dict:
    """netarena-load --prepare against address:port with this host's share of the connections (in `level`):
    READY is announced as "<mid>/ready/<host>", the start time read from "<mid>/start". Returns its document."""
    from distributed import Variable

    cpus = available_cpus()
    spec = load_spec(scenario, level, port, _static_dir(), host=address)
    argv = generator_argv(find_generator(), spec.mode, spec.target, spec.args, warmup_s=warmup_s,
                          duration_s=duration_s, timeout_s=timeout_s, cpus=cpus)
    # --allow-target: the server host of the cluster file is the only target this generator may load.
    argv += ["--prepare", "--allow-target", address]
    if source_ips:
        argv += ["--source-ips", source_ips]
    out: dict = {"host": host, "hostname": socket.gethostname(), "argv": argv, "cpus": cpus}
    gen = ManagedProcess(argv, cpus=cpus, capture=True, stdin_pipe=True)
    try:
        ready_ns, stderr, refused = read_ready(gen, time.monotonic() + wait_s)
        if refused is not None:
            out["error"] = refused
            Variable(f"{mid}/ready/{host}").set({"failed": out["error"]})
            return out
        Variable(f"{mid}/ready/{host}").set({"ready_ns": ready_ns, "time": time.time()})
        start = Variable(f"{mid}/start").get(timeout=wait_s)
        if host not in start:  # the orchestrator gave up on this measurement
            out["error"] = start.get("abort", "the measurement was abandoned before its start")
            return out
        gen.proc.stdin.write(f"{start[host]}\n".encode())
        gen.proc.stdin.flush()  # communicate() closes stdin
        stdout, rest = gen.proc.communicate(timeout=warmup_s + duration_s + timeout_s + GENERATOR_GRACE_S)
        stderr += rest
        out["exit_code"] = gen.proc.returncode
        out["stderr_tail"] = stderr.decode("utf-8", "replace")[-STDERR_KEEP_BYTES:]
        if gen.proc.returncode != 0:
            out["error"] = f"netarena-load exited with code {gen.proc.returncode}: " + out["stderr_tail"].strip()[-2000:]
            return out
        try:
            out["document"] = json.loads(stdout)
        except ValueError as exc:
            out["error"] = f"netarena-load printed no valid JSON ({exc}): {stdout[:200]!r}"
        return out
    finally:
        if gen.alive:
            gen.kill()
