"""The orchestrator's side of a run across hosts: a backend for runner.Runner like real.RealBackend.

One measurement: the server task starts, verifies and monitors the contestant on the server host and
announces its port; one generator task per live generator host runs netarena-load --prepare with its share
of the connections (and of an open-loop rate) against the server host's address; when every one has
announced READY, one start time (the orchestrator's clock plus each host's estimated offset) goes to all;
their documents are merged exactly (merge_documents: netarena-load merge, run on this host) and the server
stopped. The verdict comes from the same code as on one machine (base.conclude). Hosts are watched while
waiting: a worker that leaves the cluster fails the measurement at once (HostLost), never a hang.
"""

from __future__ import annotations

import time
import uuid

from .. import __version__
from ..cluster import ClusterError, netns
from ..cluster.spec import ClusterSpec, security
from ..contestants import InstallError
from ..generator import GeneratorMissing, find_generator
from ..spread import MergeFailed, merge_documents, share_level, split_evenly
from ..store import now_iso
from . import cluster_tasks as tasks
from .base import GENERATOR_GRACE_S, StopRun, conclude, failed, timeouts, window

# distributed (Dask) is imported where it is used: it takes about a second to import, and only a run across
# hosts needs it.

CONNECT_TIMEOUT_S = 20.0
# The start time is this far after the last READY: long enough for the start message to reach every host.
START_LEAD_S = 1.0
CLOCK_PROBES = 5
POLL_S = 0.25
# How long a worker may take to report its facts (a second on an idle host: versions, CPUs, the environment).
FACTS_TIMEOUT_S = 120.0


class HostLost(Exception):
    """A worker needed by the measurement left the cluster (its process died, or it missed its heartbeats)."""

    def __init__(self, name: str, role: str):
        self.name, self.role = name, role
        super().__init__(f"{role} host {name} left the cluster mid-measurement (its Dask worker is gone)")


class ClusterStop(StopRun):
    """The run cannot go on with this cluster (the server host is gone, too few generator hosts are left)."""


def enter_netns(name: str) -> None:
    """Move this process into a network namespace (the lab's control one); only before any thread starts."""
    netns.enter(f"/var/run/netns/{name}", f"network namespace {name!r}", ": is the lab up? (`netarena lab up`)")


# ----------------------------------------------------------------------------- the backend


class ServerHostServices:
    """The run's backing services as the orchestrator sees them when they run on the server host: a key naming
    them there (tasks._SERVICES), what could not be installed, what was, and stop_all() for the run's end."""

    def __init__(self, backend: "ClusterBackend", key: str):
        self.backend = backend
        self.key = key
        self.unusable: dict[str, str] = {}
        self.described: dict = {}

    def environment(self) -> dict:
        return self.described

    def stop_all(self) -> None:
        if self.backend.client is None:
            return
        try:
            future = self.backend._submit(tasks.services_stop_task, self.backend.spec.server.worker, self.key)
            future.result(timeout=120)
        except Exception as exc:  # the host is gone: its worker's end takes the services with it
            self.backend.say(f"could not stop the services on the server host: {exc}")


class ClusterBackend:
    name = "cluster"
    makes_run_certificate = True  # a TLS level's server is started with the run's certificate (Runner)
    # Each repeat's server is started and stopped by one task on the server host: none is kept between repeats
    # (a suite's server_per = "level" is not followed; the run says so).
    keeps_servers = False

    def __init__(self, spec: ClusterSpec, base, say=lambda text: None):
        self.spec = spec
        self.base = base
        self.say = say
        self.client = None
        self.addresses: dict[str, str] = {}  # worker name -> address, as checked at connect
        self.offsets: dict[str, float] = {}  # worker name -> clock offset (worker - orchestrator), seconds
        self.lost: set[str] = set()

    # -- connecting and checking

    def connect(self) -> "ClusterBackend":
        from distributed import Client

        if self.spec.netns:
            enter_netns(self.spec.netns)
        try:
            self.client = Client(self.spec.scheduler, security=security(self.spec, self.base),
                                 timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the scheduler {self.spec.scheduler} with the cluster file's TLS "
                               f"files: {exc}") from None
        return self

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def workers(self) -> dict[str, str]:
        """name -> address of the workers connected now, asked of the scheduler itself. Not through
        Client.scheduler_info(): it returns the client's shared cache, which the client's own periodic refresh
        overwrites with a summary that has no per-worker entries, so a refresh landing in between made every
        worker look gone (a run stopped with "server host ... left the cluster" while that host worked)."""
        info = self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]
        return {str(w.get("name")): addr for addr, w in info.items()}

    def _run_on(self, name: str, fn, *args):
        """fn(*args) on the worker's event loop (Client.run): only for what takes no time (a clock reading), as
        the worker sends no heartbeat while it runs."""
        try:
            return self.client.run(fn, *args, workers=[self.addresses[name]])[self.addresses[name]]
        except OSError as exc:  # distributed's CommClosedError among them: the worker left or was dropped
            raise ClusterError(f"worker {name} did not answer ({type(exc).__name__}: {exc}): is it still "
                               f"connected to {self.spec.scheduler}?") from None

    def _facts(self, name: str) -> dict:
        """worker_facts on one of the worker's threads, not on its event loop: run there (Client.run) its second
        or more of work stopped the worker's heartbeats, and on a starved host the scheduler dropped the worker
        for it."""
        future = self._submit(tasks.worker_facts, name)
        try:
            return future.result(timeout=FACTS_TIMEOUT_S)
        except OSError as exc:  # TimeoutError and distributed's CommClosedError among them
            future.cancel()
            raise ClusterError(f"worker {name} did not report its facts within {FACTS_TIMEOUT_S:g} s "
                               f"({type(exc).__name__}: {exc}): is it still connected to {self.spec.scheduler}?") \
                from None

    def check(self, wait_s: float = 30.0) -> dict:
        """Every named worker present, the same netarena on each, the clocks' offsets. Returns what is recorded
        with the run (environment.cluster); ClusterError naming the problem otherwise."""
        wanted = [self.spec.server.worker, *self.spec.generators.workers]
        deadline = time.monotonic() + wait_s
        while True:
            present = self.workers()
            missing = [n for n in wanted if n not in present]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if missing:
            raise ClusterError(f"worker(s) {', '.join(missing)} not connected to {self.spec.scheduler} (connected: "
                               f"{', '.join(sorted(present)) or 'none'}); start them with the cluster's TLS files")
        self.addresses = {n: present[n] for n in wanted}
        hosts = []
        for name in wanted:
            facts = self._facts(name)
            if facts["netarena_version"] != __version__:
                raise ClusterError(f"worker {name} runs netarena {facts['netarena_version']}, this orchestrator "
                                   f"runs netarena {__version__}: install the same version on every host")
            if not facts["generator"].get("path"):
                raise ClusterError(f"worker {name}: {facts['generator'].get('error')}")
            self.offsets[name] = self._offset(name)
            role = "server" if name == self.spec.server.worker else "generator"
            hosts.append({"name": name, "role": role, "address": self.addresses[name],
                          "clock_offset_s": self.offsets[name], **facts})
        return {"scheduler": self.spec.scheduler, "server_address": self.spec.server.address, "hosts": hosts,
                "clock_offset_method": f"best of {CLOCK_PROBES} round trips: worker time - midpoint of the "
                                       "orchestrator's send and receive"}

    def _offset(self, name: str) -> float:
        best = None
        for _ in range(CLOCK_PROBES):
            t0 = time.time()
            remote = self._run_on(name, tasks.clock_probe)
            t1 = time.time()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, remote - (t0 + t1) / 2)
        return best[1]

    # -- waiting while watching the hosts

    def _watch(self, needed: dict[str, str]) -> None:
        present = set(self.workers())
        for name, role in needed.items():
            if name not in present:
                self.lost.add(name)
                raise HostLost(name, role)

    def _wait_futures(self, futures: list, deadline: float, needed: dict[str, str]) -> None:
        while not all(f.done() for f in futures):
            time.sleep(POLL_S)
            self._watch(needed)
            if time.monotonic() > deadline:
                raise TimeoutError("the hosts did not finish within the measurement's time limit")

    def _wait_variable(self, name: str, deadline: float, needed: dict[str, str], futures: list):
        from distributed import Variable

        var = Variable(name, client=self.client)
        while True:
            try:
                return var.get(timeout=POLL_S)
            except TimeoutError:
                pass
            for f in futures:
                if f.status in ("error", "cancelled"):
                    raise RuntimeError(f"a task failed on a host: {f.exception()!r}")
            self._watch(needed)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no word from the hosts within the time limit ({name})")

    def _submit(self, fn, name: str, *args):
        return self.client.submit(fn, *args, workers=[self.addresses[name]], allow_other_workers=False,
                                  pure=False, retries=0)

    # -- the Runner's interface

    def live_generators(self) -> list[str]:
        present = set(self.workers())
        return [n for n in self.spec.generators.workers if n in present and n not in self.lost]

    def ensure_usable(self) -> list[str]:
        present = set(self.workers())
        if self.spec.server.worker not in present:
            raise ClusterStop(f"the server host {self.spec.server.worker} is gone from the cluster; bring it back, "
                              "then continue with `netarena run --resume`")
        gens = self.live_generators()
        if len(gens) < self.spec.generators.min_hosts:
            raise ClusterStop(f"{len(gens)} generator host(s) left ({', '.join(gens) or 'none'}), fewer than "
                              f"generators.min_hosts = {self.spec.generators.min_hosts}; bring the others back, "
                              "then continue with `netarena run --resume`")
        return gens

    def prepare(self, contestant, allow_apt: bool, say, parts=()) -> dict:
        self.ensure_usable()
        start = contestant.manifest.start
        if not any("{host}" in word for word in [*(start.command or []), *(start.echo_command or [])]):
            raise InstallError("cannot be loaded from other hosts: its start command has no {host}, so it listens "
                               "on 127.0.0.1 only (docs/contestant-manifest.md)")
        say(f"{contestant.name}: installing on the server host {self.spec.server.worker}")
        future = self._submit(tasks.install_task, self.spec.server.worker, contestant.name, allow_apt,
                              list(parts))
        try:
            self._wait_futures([future], time.monotonic() + 3600, {self.spec.server.worker: "server"})
        except HostLost as exc:
            raise ClusterStop(str(exc)) from None
        if future.status == "error":
            exc = future.exception()
            if isinstance(exc, InstallError):
                raise exc
            raise InstallError(f"on the server host {self.spec.server.worker}: {type(exc).__name__}: {exc}")
        return {"host": self.spec.server.worker, **future.result()}

    def prepare_services(self, needed: list[str], backends: dict[str, str], allow_apt: bool) -> "ServerHostServices":
        """Install the run's backing services on the server host, where they run beside the contestant (the
        generators are elsewhere); they start with the first measurement that needs them."""
        services = ServerHostServices(self, f"run-{uuid.uuid4().hex[:12]}")
        future = self._submit(tasks.services_install_task, self.spec.server.worker, services.key, needed, backends,
                              allow_apt)
        try:
            self._wait_futures([future], time.monotonic() + 3600, {self.spec.server.worker: "server"})
        except HostLost as exc:
            raise ClusterStop(str(exc)) from None
        out = future.result()
        services.unusable = {name: why for name, why in out["unusable"].items() if why}
        services.described = out["environment"]
        return services

    def measure(self, req, progress=lambda text: None) -> dict:
        from distributed import Event, Variable

        gens = self.ensure_usable()
        record = req.base_record()
        record["started_at"] = now_iso()
        mid = f"netarena-{uuid.uuid4().hex[:12]}"
        server_name = self.spec.server.worker
        budget = req.warmup_s + req.duration_s + req.timeout_s + GENERATOR_GRACE_S
        ready_s = req.contestant.manifest.start.ready_timeout_s + 30
        wait_s = ready_s + budget + tasks.ORPHAN_GRACE_S
        loaded = Event(f"{mid}/loaded", client=self.client)
        start_var = Variable(f"{mid}/start", client=self.client)
        needed = {server_name: "server"}
        server_f = self._submit(tasks.server_task, server_name, mid, req.contestant.name, req.scenario, req.level,
                                req.repeat_index, req.warmup_s, req.duration_s, req.timeout_s, str(req.log_dir), wait_s,
                                getattr(req.services, "key", None))
        gen_fs: dict = {}
        try:
            progress("starting")
            announced = self._wait_variable(f"{mid}/server", time.monotonic() + ready_s, needed, [server_f])
            if announced.get("failed"):
                self._wait_futures([server_f], time.monotonic() + 60, needed)
                out = server_f.result()
                self._server_fields(record, out)
                kind, error = out["failure"]
                record = failed(record, kind, f"on the server host {server_name}: {error}", None)
                record["stderr_tail"] = out.get("stderr_tail")
                return record
            port = announced["port"]
            hosts = [g for g in gens if split_evenly(req.level.connections, len(gens), gens.index(g)) > 0]
            for i, name in enumerate(hosts):
                level = share_level(req.level, len(hosts), i)
                gen_fs[name] = self._submit(tasks.generator_task, name, mid, name, req.scenario, level,
                                            self.spec.server.address, port, req.warmup_s, req.duration_s,
                                            req.timeout_s, self.spec.generators.source_ips.get(name), wait_s)
                needed[name] = "generator"
            progress("connecting")
            ready_by = time.monotonic() + ready_s + req.warmup_s + req.timeout_s
            readies = {name: self._wait_variable(f"{mid}/ready/{name}", ready_by, needed, [server_f, *gen_fs.values()])
                       for name in hosts}
            refused = {n: r["failed"] for n, r in readies.items() if r.get("failed")}
            if refused:
                start_var.set({"abort": "another generator host failed before the start"})
                loaded.set()
                self._wait_futures([server_f, *gen_fs.values()], time.monotonic() + 60, needed)
                self._server_fields(record, server_f.result())
                return failed(record, "generator_failed", "; ".join(f"{n}: {m}" for n, m in refused.items()), None)
            start = time.time() + START_LEAD_S
            # Each host's own clock: the barrier needs the offsets, the merged counts and histograms do not.
            start_var.set({name: int((start + self.offsets.get(name, 0.0)) * 1e9) for name in hosts})
            progress("load")
            self._wait_futures(list(gen_fs.values()), time.monotonic() + START_LEAD_S + budget + 30, needed)
            # Merged before the server host hears the load is over: its count of the server's work over the load
            # (the queries, beside the database) is judged against the merged document.
            parts = [f.result() for f in gen_fs.values()]
            generator, errors = self._merged(parts)
            Variable(f"{mid}/generator", client=self.client).set(generator)
            loaded.set()
            self._wait_futures([server_f], time.monotonic() + 120, needed)
        except HostLost as exc:
            start_var.set({"abort": str(exc)})
            loaded.set()
            self.client.cancel(list(gen_fs.values()))
            if exc.role == "server":
                self.client.cancel([server_f])
                raise ClusterStop(f"{exc}; bring it back, then continue with `netarena run --resume`") from None
            try:
                self._wait_futures([server_f], time.monotonic() + 60, {server_name: "server"})
                self._server_fields(record, server_f.result())
            except HostLost as lost:
                raise ClusterStop(f"{lost}; bring it back, then continue with `netarena run --resume`") from None
            record["failure_kind"] = "host_lost"
            return failed(record, "host_lost", str(exc), None)
        except BaseException:  # Ctrl-C or a failure here: generators still waiting for their start give up
            start_var.set({"abort": "the orchestrator stopped this measurement"})
            raise
        finally:
            loaded.set()
            self._forget(mid, [*gen_fs])
        out = server_f.result()
        self._server_fields(record, out)
        record["generator_argv"] = [w for p in parts for w in (f"[{p['host']}]", *p["argv"])]
        record["generator"] = generator
        if generator is not None and isinstance(record.get("monitor"), dict) and "error" not in record["monitor"]:
            status = record["monitor"].pop("server_status", None)
            # The server host's samples are in its clock: shift the windows by its offset.
            record["monitor"] = window(record["monitor"], generator, self.offsets.get(server_name, 0.0))
            if status is not None:
                record["monitor"]["server_status"] = status
        if out.get("service_died"):
            error, service_tail = out["service_died"]
            record = failed(record, "service_died", f"on the server host {server_name}: {error}", None)
            record["stderr_tail"] = service_tail
            return record
        hang = out.get("after_load") if generator is not None and timeouts(generator) else None
        if hang is not None:
            record["verification"] = dict(record.get("verification") or {}, after_load=hang)
        if out.get("during_load") is not None:
            record["verification"] = dict(record.get("verification") or {}, during_load=out["during_load"])
        crashed_code = out.get("crashed_code")
        crashed = None if crashed_code is None else f"the contestant exited with code {crashed_code} while under load"
        record = conclude(record, generator, crashed=crashed,
                          gen_error="; ".join(errors) or None, hang=hang, timeout_s=req.timeout_s, log_path=None,
                          during_load=out.get("during_load"))
        if record["status"] != "ok":
            record["stderr_tail"] = out.get("stderr_tail")
        return record

    @staticmethod
    def _merged(parts: list[dict]) -> tuple[dict | None, list[str]]:
        """The generator hosts' results merged into one document (on this, the control host, by its
        netarena-load), and the errors that left none."""
        errors = [f"{p['host']}: {p['error']}" for p in parts if p.get("error")]
        if errors:
            return None, errors
        try:
            return merge_documents(parts, find_generator()), []
        except (MergeFailed, GeneratorMissing) as exc:
            return None, [f"merging the generator hosts' results: {exc}"]

    @staticmethod
    def _server_fields(record: dict, out: dict) -> None:
        for key in ("port", "log_path", "verification", "stop", "services"):
            if key in out:
                record[key] = out[key]
        monitor = out.get("monitor")
        if out.get("server_status"):
            monitor = dict(monitor or {}, server_status=out["server_status"])
        if monitor is not None:
            record["monitor"] = monitor

    def _forget(self, mid: str, hosts: list[str]) -> None:
        from distributed import Event, Variable

        for name in ["server", "start", "generator", *(f"ready/{h}" for h in hosts)]:
            try:
                Variable(f"{mid}/{name}", client=self.client).delete()
            except Exception:  # cleanup of scheduler state only; never the reason a measurement fails
                pass
        try:
            Event(f"{mid}/loaded", client=self.client).clear()
        except Exception:
            pass
