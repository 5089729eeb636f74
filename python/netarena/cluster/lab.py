"""A cluster on one machine: network namespaces joined by a bridge, a Dask scheduler and one worker in each.

Layout (`netarena lab up --hosts N`, as root): a control namespace NAME-ctl holds the bridge br0 with
198.18.0.1/24 and the scheduler; host i gets namespace NAME-h<i> with 198.18.0.<10+i>/24 on a veth into
the bridge and one worker named h<i>. h1 is the server host, the others generator hosts. 198.18.0.0/15 is
reserved for benchmark networks (RFC 2544); here its addresses exist only inside these namespaces, which have
no route anywhere else, so no packet can leave them. Each namespace has its own loopback, so on a host
"127.0.0.1" is that host itself: the generators target the server host's 198.18 address.

The machine's CPUs are split: about half to the server host, the rest shared by the generator hosts (each
worker's affinity, which the tasks inherit). Everything created is written to DIR/lab.json as it is made,
so `netarena lab down` (also run on Ctrl-C or any failure during `up`) removes exactly that: processes,
then namespaces (which takes their links and bridge with them).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import ClusterError
from .netns import INSTALL_NETNS_ENV
from ..process import StopRequest

SUBNET_PREFIX = "198.18.0"
CTL_ADDRESS = f"{SUBNET_PREFIX}.1"
SCHEDULER_PORT = 8786
MAX_HOSTS = 200
DEFAULT_NAME = "nalab"
HEARTBEAT_TIMEOUT_S = 10.0
REGISTER_TIMEOUT_S = 90.0
STATE_FILE = "lab.json"


def host_address(index: int) -> str:
    return f"{SUBNET_PREFIX}.{10 + index}"


def split_cpus(cpus: list[int], hosts: int) -> list[list[int]]:
    """Host 1 (the server) gets the first half of the CPUs (at least one); the generator hosts share the rest
    round-robin (sharing a CPU when there are more hosts than CPUs left)."""
    server = cpus[: max(1, len(cpus) // 2)]
    rest = cpus[len(server):] or cpus[-1:]
    generators = [[] for _ in range(hosts - 1)]
    for i, cpu in enumerate(rest * max(1, -(-(hosts - 1) // len(rest)))):
        if i < len(rest) or not generators[i % (hosts - 1)]:
            generators[i % (hosts - 1)].append(cpu)
    return [server, *[sorted(set(g)) for g in generators]]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise ClusterError(f"`ip {' '.join(args)}` failed: {out.stderr.strip()}")
    return out


def check_can_build() -> None:
    if os.geteuid() != 0:
        raise ClusterError("the lab needs root (it creates network namespaces): run `netarena lab up` as root, or "
                           "use real hosts (docs/many-machines.md)")
    if shutil.which("ip") is None:
        raise ClusterError("`ip` (iproute2) not found: apt-get install iproute2")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        raise ClusterError(f"`ip netns` does not work here: {probe.stderr.strip()}")


def namespaces_of(name: str, hosts: int) -> list[str]:
    return [f"{name}-ctl", *(f"{name}-h{i}" for i in range(1, hosts + 1))]


def existing_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


class _State:
    def __init__(self, folder: Path, name: str):
        self.path = folder / STATE_FILE
        self.data = {"name": name, "namespaces": [], "processes": []}

    def add(self, key: str, value) -> None:
        self.data[key].append(value)
        self.save()

    def save(self) -> None:
        # Whole or not at all: `down` must always read every namespace and process recorded so far.
        partial = self.path.with_name(self.path.name + ".part")
        partial.write_text(json.dumps(self.data, indent=2))
        os.replace(partial, self.path)


def _spawn(state: _State, netns: str, argv: list[str], log: Path, role: str, cpus: list[int] | None,
           env: dict, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    def setup() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(["ip", "netns", "exec", netns, *argv], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=setup, env=env,
                                pass_fds=pass_fds)
    state.add("processes", {"pid": proc.pid, "role": role, "netns": netns, "log": str(log)})
    return proc


def up(folder: Path, hosts: int, name: str = DEFAULT_NAME, say=lambda text: None,
       heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S) -> Path:
    """Build the lab; returns the cluster file. On any failure or Ctrl-C, removes what it made and re-raises.

    Under `netarena lab up` a Ctrl-C only sets StopRequest (its `remember` handler): every step (an `ip`
    command, a process started) finishes whole, and the build stops at the next `StopRequest.check()`."""
    from .certs import make_certs

    if not 2 <= hosts <= MAX_HOSTS:
        raise ClusterError(f"--hosts {hosts}: a lab has one server host and at least one generator host (2..{MAX_HOSTS})")
    check_can_build()
    folder = Path(folder).absolute()
    if (folder / STATE_FILE).exists():
        raise ClusterError(f"{folder / STATE_FILE} exists: a lab is up there; `netarena lab down --dir {folder}` first")
    clash = set(namespaces_of(name, hosts)) & existing_namespaces()
    if clash:
        raise ClusterError(f"network namespace(s) {', '.join(sorted(clash))} already exist: another lab named "
                           f"{name!r} is up; take it down or pass --name")
    from ..process import available_cpus

    folder.mkdir(parents=True, exist_ok=True)
    state = _State(folder, name)
    state.save()
    try:
        def ip(*args: str) -> None:
            _ip(*args)
            StopRequest.check()

        def spawn(*args) -> None:
            _spawn(*args)
            StopRequest.check()

        certs = folder / "certs"
        make_certs(certs, force=True)
        StopRequest.check()
        ctl = f"{name}-ctl"
        # Recorded before it is made: a Ctrl-C landing while `ip` runs must not leave an unrecorded namespace
        # (down skips the ones that do not exist).
        state.add("namespaces", ctl)
        ip("netns", "add", ctl)
        ip("-n", ctl, "link", "set", "lo", "up")
        ip("-n", ctl, "link", "add", "br0", "type", "bridge")
        ip("-n", ctl, "addr", "add", f"{CTL_ADDRESS}/24", "dev", "br0")
        ip("-n", ctl, "link", "set", "br0", "up")
        for i in range(1, hosts + 1):
            ns = f"{name}-h{i}"
            state.add("namespaces", ns)
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
            # Both ends are created inside namespaces: nothing appears in the machine's own one.
            ip("-n", ctl, "link", "add", f"vh{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("-n", ctl, "link", "set", f"vh{i}", "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"{host_address(i)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
        env = dict(os.environ)
        # The scheduler gives up on a worker that missed its heartbeats this long (a host that vanished).
        env["DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL"] = f"{heartbeat_timeout_s:g}s"
        tls = ["--tls-ca-file", str(certs / "ca.pem")]
        spawn(state, ctl, [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", CTL_ADDRESS,
                            "--port", str(SCHEDULER_PORT), "--no-dashboard", *tls,
                            "--tls-cert", str(certs / "scheduler.pem"), "--tls-key", str(certs / "scheduler.key")],
               folder / "logs" / "scheduler.log", "scheduler", None, env)
        cpu_sets = split_cpus(available_cpus(), hosts)
        logs = []
        # The hosts' namespaces have no route out, but a host installs what it runs from the registries, as a
        # real one does: each worker holds this machine's own namespace open (`ip netns exec` keeps the
        # descriptor) and runs its installs there (netns.in_install_netns); servers and generators stay in
        # the host's.
        machine_netns = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            worker_env = dict(env, **{INSTALL_NETNS_ENV: f"/proc/self/fd/{machine_netns}"})
            for i in range(1, hosts + 1):
                log = folder / "logs" / f"h{i}.log"
                logs.append(log)
                spawn(state, f"{name}-h{i}", worker_argv(f"tls://{CTL_ADDRESS}:{SCHEDULER_PORT}", f"h{i}",
                                                          host_address(i), certs, folder / "work" / f"h{i}"),
                       log, f"worker h{i}", cpu_sets[i - 1], worker_env, (machine_netns,))
        finally:
            os.close(machine_netns)
        _wait_registered(logs, REGISTER_TIMEOUT_S)
        cluster_file = folder / "cluster.toml"
        generators = ", ".join(f'"h{i}"' for i in range(2, hosts + 1))
        cluster_file.write_text(
            f"# Written by `netarena lab up --hosts {hosts}` (docs/many-machines.md). CPUs: "
            + "; ".join(f"h{i} {cpus}" for i, cpus in enumerate(cpu_sets, 1)) + "\n"
            f'scheduler = "tls://{CTL_ADDRESS}:{SCHEDULER_PORT}"\n'
            f'netns = "{ctl}"\n'
            f"heartbeat_timeout_s = {heartbeat_timeout_s:g}\n\n"
            '[tls]\nca = "certs/ca.pem"\ncert = "certs/client.pem"\nkey = "certs/client.key"\n\n'
            f'[server]\nworker = "h1"\naddress = "{host_address(1)}"\n\n'
            f"[generators]\nworkers = [{generators}]\n")
        StopRequest.check()
        say(f"lab {name!r} up: {hosts} hosts ({', '.join(namespaces_of(name, hosts))}); cluster file {cluster_file}")
        return cluster_file
    except BaseException:
        down(folder, say=say)
        raise


def worker_argv(scheduler: str, name: str, address: str, certs: Path, workdir: Path) -> list[str]:
    """A worker as the lab starts it (docs/many-machines.md shows the same command for real hosts). It imports
    netarena's tasks before it registers (--preload): imported by the first task instead, on the worker's event
    loop, they held its heartbeats back for as long as the import took."""
    return [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--name", name, "--nthreads", "4",
            "--no-nanny", "--preload", "netarena.backends.cluster_tasks",
            "--host", address, "--death-timeout", "60", "--local-directory", str(workdir),
            "--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "worker.pem"),
            "--tls-key", str(certs / "worker.key")]


def _wait_registered(logs: list[Path], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(logs)
    while pending:
        pending = [log for log in pending if "Registered to:" not in log.read_text(errors="replace")]
        if not pending:
            return
        if time.monotonic() > deadline:
            tails = "; ".join(f"{log.name}: {log.read_text(errors='replace')[-300:]!r}" for log in pending)
            raise ClusterError(f"worker(s) did not register with the scheduler within {timeout_s:g} s: {tails}")
        StopRequest.check()
        time.sleep(0.3)


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        gone, alive = psutil.wait_procs(procs, timeout=5)
        procs = alive
        if not procs:
            return


def down(folder: Path, say=lambda text: None) -> bool:
    """Remove what `up` recorded in folder/lab.json: its processes, anything else running in its namespaces,
    the namespaces. False when there was no lab there."""
    path = Path(folder).absolute() / STATE_FILE
    if not path.exists():
        return False
    try:
        data = json.loads(path.read_text() or "{}")
    except ValueError:
        data = {}
    for proc in reversed(data.get("processes", [])):
        _kill_tree(proc["pid"])
    present = existing_namespaces()
    for ns in reversed(data.get("namespaces", [])):
        if ns not in present:
            continue
        # Servers and generators the workers started live in these namespaces too; nothing may outlive the lab.
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30).stdout.split()
        for pid in pids:
            _kill_tree(int(pid))
        _ip("netns", "del", ns, check=False)
    path.unlink()
    path.with_name(path.name + ".part").unlink(missing_ok=True)
    say(f"lab {data.get('name', '?')!r} down: {len(data.get('processes', []))} process(es) stopped, "
        f"{len(data.get('namespaces', []))} namespace(s) removed")
    return True
