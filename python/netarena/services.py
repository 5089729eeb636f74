"""Backing services (databases behind the servers): manifests, installation, and their life during a run.

A service is a folder under services/ with a service.toml (schema: ServiceManifest, docs/services.md) and
whatever it builds from. It is installed like a contestant (the same [install] table and code, cached under
NETARENA_CACHE/services/NAME), and started by the orchestrator before the first measurement of a contestant
that `needs` it: own process group, pinned to the services' CPUs, a free loopback port, a fresh data
directory under the run's results directory, ready only once it answers its real protocol, then loaded with
its fixture. One instance serves the whole run; a service found dead is started afresh (new data directory,
fixture reloaded) for the next measurement. Everything stops, and every data directory is removed, when the
run ends, on Ctrl-C, and on the next run after a kill -9 (the process groups are in the store's
live_processes like the contestants', see runner.cleanup_orphans, and stale data directories are removed by
remove_stale_data).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from .config import NAME_PATTERN, Install, Strict, _placeholders, _validate, key_lines, read_toml
from .checkout import repo_root
from .contestants import Contestant, InstallError, availability, cache_root, expand, install, tail
from .errors import ConfigError
from .ports import free_port
from .process import ManagedProcess, child_setup, group_members

SERVICE_MANIFEST = "service.toml"
STDERR_TAIL_BYTES = 4000
# What a service's command, init steps, URL and readiness command may use.
SERVICE_PLACEHOLDERS = ("port", "data_dir", "dir", "env_dir", "build_dir", "uses_url")


class ServiceBackend(Strict):
    """One way to run the service (FerretDB: its PostgreSQL or its SQLite storage)."""

    label: Annotated[str, Field(min_length=1)]
    # Another service started first (e.g. "postgresql"); its URL is {uses_url} here.
    uses: str | None = None
    # Run once in the fresh data directory before the first start (e.g. initdb).
    init: list[Annotated[list[str], Field(min_length=1)]] = []
    command: Annotated[list[str], Field(min_length=1)]


class ServiceStart(Strict):
    stop_signal: Literal["SIGTERM", "SIGINT", "SIGQUIT"] = "SIGTERM"
    stop_timeout_s: Annotated[float, Field(gt=0, le=600)] = 10
    ready_timeout_s: Annotated[float, Field(gt=0, le=600)] = 60
    # The address clients are given; contestants get it as {<provides>_url}.
    url: Annotated[str, Field(min_length=1)]
    # Readiness through the service's own protocol: "mongodb" asks `ping` with pymongo (and then loads the
    # fixture); "command" runs ready_command until it exits 0 (pg_isready for PostgreSQL).
    ready: Literal["mongodb", "command"]
    ready_command: list[str] = []
    # The user the service runs as when the orchestrator is root (PostgreSQL refuses to run as root).
    user_when_root: str | None = None


class ServiceManifest(Strict):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    display_name: Annotated[str, Field(min_length=1)]
    version: Annotated[str, Field(min_length=1)]
    provides: Annotated[str, Field(pattern=NAME_PATTERN)]  # what contestants list in `needs`
    notes: str = ""
    default_backend: str
    backends: dict[str, ServiceBackend]
    install: Install = Install()
    start: ServiceStart


def default_services_dir() -> Path:
    root = repo_root()
    return (root / "services") if root else Path("services").absolute()


@dataclass
class Service(Contestant):
    """A service's manifest and folder: a Contestant as far as install() and availability() are concerned,
    with its own cache folder and placeholders."""

    manifest: ServiceManifest

    @property
    def env_dir(self) -> Path:
        return cache_root() / "services" / self.name

    def placeholders(self, **extra: str) -> dict[str, str]:
        values = {"dir": str(self.dir), "env_dir": str(self.env_dir), "build_dir": str(self.env_dir / "build")}
        values.update({k: str(v) for k, v in extra.items()})
        return values

    def label(self, backend: str) -> str:
        """How results name it: "FerretDB 1.24.2 (PostgreSQL)"."""
        return f"{self.manifest.display_name} {self.manifest.version} ({self.manifest.backends[backend].label})"


def load_service(path: Path) -> ServiceManifest:
    data, text = read_toml(path)
    manifest: ServiceManifest = _validate(ServiceManifest, data, path, text)
    lines = key_lines(text)

    def fail(loc: tuple, message: str) -> None:
        raise ConfigError(message, path=path, line=lines.get(loc), field=".".join(map(str, loc)))

    if manifest.name != path.parent.name:
        fail(("name",), f"'{manifest.name}' must equal the folder name '{path.parent.name}'")
    if manifest.default_backend not in manifest.backends:
        fail(("default_backend",), f"'{manifest.default_backend}' is not one of its [backends.*]: "
             f"{', '.join(manifest.backends)}")
    if manifest.start.ready == "command" and not manifest.start.ready_command:
        fail(("start", "ready_command"), 'required with ready = "command"')
    for name, backend in manifest.backends.items():
        _placeholders(backend.command, SERVICE_PLACEHOLDERS, path, lines, ("backends", name, "command"))
        for index, step in enumerate(backend.init):
            _placeholders(step, SERVICE_PLACEHOLDERS, path, lines, ("backends", name, "init", index))
    _placeholders([manifest.start.url, *manifest.start.ready_command], SERVICE_PLACEHOLDERS, path, lines,
                  ("start",))
    return manifest


def load_all(services_dir: Path | None = None) -> dict[str, Service]:
    """Every service under services_dir, by name."""
    services_dir = services_dir or default_services_dir()
    found: dict[str, Service] = {}
    if services_dir.is_dir():
        for folder in sorted(services_dir.iterdir()):
            if (folder / SERVICE_MANIFEST).is_file():
                found[folder.name] = Service(load_service(folder / SERVICE_MANIFEST), folder.absolute())
    return found


def provider(services: dict[str, Service], provides: str) -> Service:
    for service in services.values():
        if service.manifest.provides == provides:
            return service
    raise ConfigError(f"no service provides '{provides}' (looked in {default_services_dir()}; "
                      f"found: {', '.join(services) or 'none'})")


def chain(services: dict[str, Service], provides: str, backend: str | None) -> list[tuple[Service, str]]:
    """The services to start for `provides`, dependencies first, each with its backend."""
    top = provider(services, provides)
    backend = backend or top.manifest.default_backend
    if backend not in top.manifest.backends:
        raise ConfigError(f"service '{top.name}' has no backend '{backend}' (has: {', '.join(top.manifest.backends)})")
    uses = top.manifest.backends[backend].uses
    below = chain(services, uses, None) if uses else []
    return [*below, (top, backend)]


def service_availability(services: dict[str, Service], provides: str, backend: str | None, allow_apt: bool = True):
    """(runnable, reasons): can everything `provides` needs be installed and built here?"""
    reasons: list[str] = []
    try:
        needed = chain(services, provides, backend)
    except ConfigError as exc:
        return False, [exc.message]
    for service, _ in needed:
        av = availability(service, allow_apt)
        if not av.runnable:
            reasons += [f"{service.manifest.display_name} ({service.name}): {r}" for r in av.reasons]
    return not reasons, reasons


# ----------------------------------------------------------------------------- a run's services


class ServiceError(Exception):
    def __init__(self, message: str, stderr_tail: str = ""):
        super().__init__(message)
        self.stderr_tail = stderr_tail


@dataclass
class Running:
    service: Service
    backend: str
    proc: ManagedProcess
    port: int
    data_dir: Path
    log_path: Path
    url: str
    started_s: float
    fixture: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {"service": self.service.name, "label": self.service.label(self.backend), "backend": self.backend,
                "pid": self.proc.pid, "port": self.port, "url": self.url, "data_dir": str(self.data_dir),
                "log_path": str(self.log_path), "fixture": self.fixture}


def _chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            os.chown(name, entry.pw_uid, entry.pw_gid)


def _reachable_by(path: Path, user: str) -> Path | None:
    """The first parent folder `user` cannot enter (no x bit for it), or None."""
    entry = pwd.getpwnam(user)
    for parent in reversed(path.parents):
        st = parent.stat()
        if st.st_uid == entry.pw_uid:
            ok = st.st_mode & 0o100
        elif st.st_gid == entry.pw_gid:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return parent
    return None


class ServiceManager:
    """The services of one run: started on demand, restarted when dead, all stopped by stop_all()."""

    def __init__(self, services: dict[str, Service], work_dir: Path, cpus: list[int], *, backends: dict[str, str],
                 on_spawn=lambda proc, role: None, on_reaped=lambda proc: None, say=lambda msg: None):
        self.services = services
        self.work_dir = work_dir  # results/services/run-N: every data directory lives below it
        self.cpus = cpus
        self.backends = backends  # provides -> backend chosen by the suite ([services.mongo] backend)
        self.on_spawn = on_spawn
        self.on_reaped = on_reaped
        self.say = say
        self.running: dict[str, Running] = {}  # by service name
        self.starts = 0  # how many instances were started in this run (a restart is a new one)
        self.installed: dict[str, dict] = {}

    def install(self, provides: str, allow_apt: bool) -> dict:
        """Install (build) everything `provides` needs; returns the install records by service name."""
        for service, _ in chain(self.services, provides, self.backends.get(provides)):
            if service.name not in self.installed:
                record = install(service, allow_apt=allow_apt, say=self.say)
                record["version"] = service.manifest.version
                self.installed[service.name] = record
        return self.installed

    def ensure(self, provides: str) -> Running:
        """The running instance for `provides` (started, with its dependencies, if none is alive)."""
        restarted_below = False
        for service, backend in chain(self.services, provides, self.backends.get(provides)):
            current = self.running.get(service.name)
            if current is not None and current.proc.alive and not restarted_below:
                continue
            if current is not None:  # dead, or what it uses was restarted under it: start afresh
                self._stop(self.running.pop(service.name))
            uses = service.manifest.backends[backend].uses
            dependency = self.running[provider(self.services, uses).name] if uses else None
            self.running[service.name] = self._start(service, backend, dependency)
            restarted_below = True
        return self.running[provider(self.services, provides).name]

    def dead(self, provides: str) -> ServiceError | None:
        """None when `provides` and its dependencies are alive; else what died, with its output's tail."""
        for service, _ in chain(self.services, provides, self.backends.get(provides)):
            current = self.running.get(service.name)
            if current is None:
                continue
            code = current.proc.poll()
            if code is not None:
                return ServiceError(f"{current.service.label(current.backend)} ({service.name}, pid "
                                    f"{current.proc.pid}) exited with code {code} during the measurement",
                                    tail(current.log_path, STDERR_TAIL_BYTES))
        return None

    def pids(self) -> dict[str, int]:
        return {name: r.proc.pid for name, r in self.running.items() if r.proc.alive}

    def records(self) -> dict[str, dict]:
        """Per measurement: each running instance (backend, port, pid, data directory) and what it was built from."""
        return {name: dict(r.record(), cpus=self.cpus, install=self._install_versions(name))
                for name, r in self.running.items()}

    def environment(self) -> dict[str, dict]:
        """For the run's environment: every installed service with the backend the run uses and its versions
        (the manifest's, the Debian packages', the Go modules'), so a run is described before any starts."""
        described = {}
        for service in self.services.values():
            if service.name in self.installed:
                backend = self.backends.get(service.manifest.provides) or service.manifest.default_backend
                described[service.name] = {"display_name": service.manifest.display_name,
                                           "provides": service.manifest.provides,
                                           "backend": service.manifest.backends[backend].label
                                           if backend in service.manifest.backends else backend,
                                           "cpus": self.cpus, **self._install_versions(service.name)}
        return described

    def _install_versions(self, name: str) -> dict:
        # What was built and from which versions (the install record, without its file paths).
        keep = ("version", "debian", "tool_versions", "lock_files", "go_modules")
        return {k: v for k, v in self.installed.get(name, {}).items() if k in keep}

    def stop_all(self) -> None:
        # Clients first (FerretDB), then what they use (PostgreSQL): the reverse of the start order.
        for name in reversed(list(self.running)):
            self._stop(self.running.pop(name))
        shutil.rmtree(self.work_dir, ignore_errors=True)

    # -- internals

    def _start(self, service: Service, backend: str, dependency: Running | None) -> Running:
        manifest = service.manifest
        self.starts += 1
        instance = f"{service.name}-{self.starts}"
        data_dir = self.work_dir / instance / "data"
        log_path = self.work_dir.parent / "logs" / f"{self.work_dir.name}.{instance}.log"
        shutil.rmtree(data_dir.parent, ignore_errors=True)
        data_dir.mkdir(parents=True)
        port = free_port()
        values = service.placeholders(port=port, data_dir=data_dir,
                                      uses_url=dependency.url if dependency else "")
        user = manifest.start.user_when_root if os.geteuid() == 0 else None
        if user:
            blocked = _reachable_by(data_dir, user)
            if blocked is not None:
                raise ServiceError(f"{service.name} runs as the '{user}' user (it refuses root), which cannot enter "
                                   f"{blocked}: give the results directory a path '{user}' can reach (e.g. "
                                   f"`chmod o+x {blocked}`, or --results under a world-searchable folder)")
            _chown_tree(data_dir.parent, user)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        spec = manifest.backends[backend]
        for step in spec.init:
            argv = [expand(w, values) for w in step]
            with log_path.open("ab") as out:
                out.write(f"$ {' '.join(argv)}\n".encode())
                out.flush()
                result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        cwd=data_dir.parent, timeout=manifest.start.ready_timeout_s,
                                        preexec_fn=child_setup(None, user))
            if result.returncode != 0:
                raise ServiceError(f"{service.name}: {argv[0]} failed with exit code {result.returncode}",
                                   tail(log_path, STDERR_TAIL_BYTES))
        argv = [expand(w, values) for w in spec.command]
        self.say(f"starting {service.label(backend)} on 127.0.0.1:{port} (CPUs {self.cpus}, data in {data_dir})")
        proc = ManagedProcess(argv, cwd=data_dir.parent, cpus=self.cpus, log_path=log_path, append=True, user=user)
        self.on_spawn(proc, f"service:{service.name}")
        running = Running(service, backend, proc, port, data_dir, log_path, expand(manifest.start.url, values),
                          time.monotonic())
        try:
            self._wait_ready(running, values)
            if manifest.start.ready == "mongodb":
                from .fixtures import load_mongo_fixture

                running.fixture = load_mongo_fixture(running.url)
        except BaseException:
            self._stop(running)
            raise
        return running

    def _wait_ready(self, running: Running, values: dict[str, str]) -> None:
        start = running.service.manifest.start
        deadline = time.monotonic() + start.ready_timeout_s
        last = "not asked yet"
        while True:
            code = running.proc.poll()
            if code is not None:
                raise ServiceError(f"{running.service.label(running.backend)} exited with code {code} before it was "
                                   "ready", tail(running.log_path, STDERR_TAIL_BYTES))
            if start.ready == "mongodb":
                last = _mongo_ping(running.url)
            else:
                argv = [expand(w, values) for w in start.ready_command]
                try:
                    result = subprocess.run(argv, capture_output=True, text=True, timeout=10)
                    last = None if result.returncode == 0 else \
                        f"{argv[0]} exited with {result.returncode}: {(result.stdout + result.stderr).strip()}"
                except (OSError, subprocess.TimeoutExpired) as exc:
                    last = f"{argv[0]}: {exc}"
            if last is None:
                return
            if time.monotonic() >= deadline:
                raise ServiceError(f"{running.service.label(running.backend)} not ready after "
                                   f"{start.ready_timeout_s:g} s (ready_timeout_s): {last}",
                                   tail(running.log_path, STDERR_TAIL_BYTES))
            time.sleep(0.2)

    def _stop(self, running: Running) -> None:
        start = running.service.manifest.start
        try:
            running.proc.stop(start.stop_signal, start.stop_timeout_s)
        finally:
            if not group_members(running.proc.pgid):
                self.on_reaped(running.proc)
            shutil.rmtree(running.data_dir.parent, ignore_errors=True)


def _mongo_ping(url: str) -> str | None:
    """None once the server answers `ping` over the MongoDB wire protocol; else why not."""
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    client = MongoClient(url, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000)
    try:
        client.admin.command("ping")
        return None
    except PyMongoError as exc:
        return f"ping: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        client.close()


def remove_stale_data(results_dir: Path, live_run_ids: set[int]) -> list[Path]:
    """Data directories of runs that are no longer running (left by a kill -9): removed, returned."""
    removed = []
    base = results_dir / "services"
    if not base.is_dir():
        return removed
    for folder in base.iterdir():
        try:
            run_id = int(folder.name.removeprefix("run-"))
        except ValueError:
            continue
        if run_id not in live_run_ids:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


__all__ = ["Service", "ServiceManifest", "ServiceManager", "ServiceError", "InstallError", "load_all",
           "load_service", "chain", "service_availability", "remove_stale_data", "default_services_dir"]
