"""Child processes of a run: each in its own process group, pinned, and never left behind."""

from __future__ import annotations

import ctypes
import os
import pwd
import resource
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


_PR_SET_PDEATHSIG = 1
# Every child this netarena process starts carries RUN_TOKEN twice, both inherited by its own children: in its
# environment (RUN_TOKEN_VAR) and as an open file descriptor on a deleted file named TOKEN_FILE_PREFIX + token.
# Cleanup signals a process only when /proc/PID/environ or /proc/PID/fd shows it, so a results store, which
# anyone can edit, cannot make netarena kill a stranger's processes. The descriptor is there because servers
# that set their process title (nginx, uwsgi) overwrite the memory /proc/PID/environ reads. One token per
# netarena process, recorded with each process group in the store's live_processes table.
RUN_TOKEN_VAR = "NETARENA_RUN_TOKEN"
RUN_TOKEN = secrets.token_hex(16)
TOKEN_FILE_PREFIX = "netarena-token-"
_token_fd: int | None = None


def _token_descriptor() -> int:
    """The descriptor children inherit: a file created, opened and deleted at once (nothing is left on disk;
    /proc/PID/fd still shows its name, with " (deleted)")."""
    global _token_fd
    if _token_fd is None:
        path = Path(tempfile.gettempdir()) / f"{TOKEN_FILE_PREFIX}{RUN_TOKEN}"
        _token_fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400)
        os.unlink(path)
    return _token_fd
_libc = ctypes.CDLL(None, use_errno=True)
_libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.signal.restype = ctypes.c_void_p
_SIG_DFL = 0
_SIG_IGN = 1
# The signals netarena stops a process with (a manifest's stop_signal; SIGKILL cannot be ignored).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
# How long the processes of a group SIGKILL hit may take to be gone (see ManagedProcess._sigkill_group_and_reap).
KILL_SETTLE_S = 2.0


class StopRequest:
    """Ctrl-C or SIGTERM, remembered.

    The KeyboardInterrupt a signal raises can be swallowed when it lands in code that ignores exceptions
    (seen: logging's at-fork handler while subprocess forks a server, "Exception ignored in ..."), and one
    raised while a child such as `ip netns add` runs kills that child half-way. So the flag is what counts:
    `handler` remembers and raises (the runner also checks the flag between measurements), `remember` only
    remembers, for code made of short steps that must each finish whole and that calls `check` between them.
    """

    requested = False

    @classmethod
    def handler(cls, signum, frame):
        cls.requested = True
        raise KeyboardInterrupt()

    @classmethod
    def remember(cls, signum, frame):
        cls.requested = True

    @classmethod
    def check(cls) -> None:
        if cls.requested:
            raise KeyboardInterrupt()


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def child_setup(cpus: list[int] | None, user=None, max_file_bytes: int | None = None,
                open_files: int | None = None):
    """In the child before exec: the stop signals' default action, the open-files limit, the file-size limit, the user (a server_user.ServerUser,
    or a user name such as "postgres", which refuses to run as root), the CPUs, and the parent-death signal,
    last because a change of user clears it.

    The open-files limit: by default the soft limit is raised to the hard one (a server holding thousands of
    connections must not stop at a shell's soft 1,024; any process may raise its own up to the hard limit,
    but not every server does); `open_files` sets both to that number instead (a generator given a lower
    limit by the suite, spread.generator_open_files)."""
    parent = os.getpid()  # the process forking the child: setup runs in the child, after the fork
    if isinstance(user, str):
        entry = pwd.getpwnam(user)
        uid, gid = entry.pw_uid, entry.pw_gid
    elif user is not None:
        uid, gid = user.uid, user.gid

    def setup() -> None:
        # An ignored signal stays ignored across exec: netarena started from a shell without job control
        # (a script's `netarena run &`, nohup, some CI runners) has SIGINT and SIGQUIT ignored, and a server
        # inheriting that would sit through its stop signal until stop_timeout_s and SIGKILL.
        for sig in STOP_SIGNALS:
            _libc.signal(sig, _SIG_DFL)
        if open_files is None:
            open_files_now = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        else:
            open_files_now = open_files
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files_now, open_files_now))
        if max_file_bytes is not None:
            # Past the limit a write fails with EFBIG; ignored, SIGXFSZ would kill the server instead.
            _libc.signal(signal.SIGXFSZ, _SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
        if user is not None:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        if cpus:
            os.sched_setaffinity(0, cpus)
        # If the orchestrator dies without cleaning up (kill -9), the kernel kills the direct child.
        # Set after the user switch: changing credentials clears the parent-death signal.
        # Its own children are found later through the process group recorded in the store.
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # A parent killed between the fork and the line above sends no signal: the child, already
        # re-parented, would exec and outlive the run, unrecorded in the store (the fork has not returned
        # in the parent). Then do what the signal would have done.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
    return setup


def process_start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes whose process group is pgid."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and all its descendants (0 for those already gone)."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return total
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def wait_until_idle(pid: int, max_s: float, interval_s: float = 0.1, idle_cores: float = 0.05) -> tuple[float, bool]:
    """Wait until a process tree uses under `idle_cores` of a core over `interval_s` (a worker still starting
    up runs its imports or JIT; an idle one waits in accept). Returns (seconds waited, idle reached)."""
    started = time.monotonic()
    before = tree_cpu_s(pid)
    while True:
        time.sleep(interval_s)
        now = tree_cpu_s(pid)
        if now - before < idle_cores * interval_s:
            return time.monotonic() - started, True
        if time.monotonic() - started >= max_s:
            return time.monotonic() - started, False
        before = now


def describe(proc: psutil.Process) -> dict:
    try:
        return {"pid": proc.pid, "name": proc.name(), "cmdline": proc.cmdline()[:8]}
    except psutil.Error:
        return {"pid": proc.pid}


def carries_token(pid: int, token: str) -> bool:
    """Whether the process holds `token`: RUN_TOKEN_VAR=token in its environment (as it was exec'd), or an open
    descriptor on the token file."""
    try:
        if f"{RUN_TOKEN_VAR}={token}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            return True
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to read
        return False
    name = f"/{TOKEN_FILE_PREFIX}{token}"
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.removesuffix(" (deleted)").endswith(name):
            return True
    return False


def kill_group(pgid: int, leader_start_time: float | None, token: str | None) -> list[dict]:
    """SIGKILL what is left of a process group netarena started (e.g. after the orchestrator was killed).

    Only what is proven ours is signalled: the recorded start time must be known (NULL never matches) and,
    while the group leader lives, be its start time (else the PID was reused); then each member must carry
    `token` in its environment. A stranger's processes in a group of that number are left alone.
    """
    if leader_start_time is None or not token:
        return []
    now = process_start_time(pgid)
    if now is not None and abs(now - leader_start_time) > 1.0:
        return []
    members = [p for p in group_members(pgid) if carries_token(p.pid, token)]
    found = [describe(p) for p in members]
    for proc in members:
        try:
            proc.kill()
        except psutil.Error:
            pass
    if members:
        psutil.wait_procs(members, timeout=5)
    return found


@dataclass
class StopOutcome:
    signal: str
    exit_code: int | None
    stopped_in_s: float
    killed: bool  # the stop signal was not enough: SIGKILL went to the group
    leftover: list[dict] = field(default_factory=list)  # processes still there after SIGKILL (should be [])
    escaped: list[dict] = field(default_factory=list)  # descendants that had left the group, killed too

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class ManagedProcess:
    """A child in its own session/process group, its output in a log file, pinned to `cpus`."""

    def __init__(self, argv: list[str], *, cwd: Path | None = None, env: dict | None = None,
                 cpus: list[int] | None = None, log_path: Path | None = None, capture: bool = False,
                 stdin_pipe: bool = False, append: bool = False, user=None,
                 max_file_bytes: int | None = None, open_files: int | None = None):
        self.argv = argv
        self.log_path = log_path
        self._log = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = log_path.open("ab" if append else "wb")
        env = dict(os.environ if env is None else env)
        env[RUN_TOKEN_VAR] = self.token = RUN_TOKEN
        out = subprocess.PIPE if capture else (self._log or subprocess.DEVNULL)
        err = subprocess.PIPE if capture else (subprocess.STDOUT if self._log else subprocess.DEVNULL)
        self.proc = subprocess.Popen(
            # stdin_pipe: netarena-load --prepare reads its start time there.
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True, preexec_fn=child_setup(cpus, user, max_file_bytes, open_files), close_fds=True,
            pass_fds=(_token_descriptor(),))
        self.pid = self.proc.pid
        self.pgid = self.proc.pid
        self.start_time = process_start_time(self.pid)
        self.started_monotonic = time.monotonic()
        self.released = False  # set by the backend once the group is confirmed empty and forgotten

    def poll(self) -> int | None:
        return self.proc.poll()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_port(self, port: int, timeout_s: float) -> str | None:
        """None once the port accepts connections; else why not (exited, or the deadline passed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                return f"exited with code {code} before accepting connections on port {port}"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return None
            except OSError:
                pass
            if time.monotonic() >= deadline:
                return f"port {port} not accepting connections after {timeout_s:g} s (ready_timeout_s)"
            time.sleep(0.05)

    def _descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []

    def stop(self, sig_name: str = "SIGTERM", timeout_s: float = 5.0) -> StopOutcome:
        started = time.monotonic()
        # Descendants that called setsid() are not in our group any more; remember them now.
        snapshot = [p for p in self._descendants() if _pgid(p.pid) not in (None, self.pgid)]
        killed = False
        if self.proc.poll() is None or group_members(self.pgid):
            try:
                os.killpg(self.pgid, getattr(signal, sig_name))
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                self.proc.poll()
                if self.proc.returncode is not None and not group_members(self.pgid):
                    break
                time.sleep(0.02)
            else:
                killed = True
                self._sigkill_group_and_reap()
        self._reap()
        leftover = [describe(p) for p in group_members(self.pgid)]
        if leftover:
            kill_group(self.pgid, self.start_time, self.token)
        # A descendant in a session of its own may end by itself once the server has gone, a moment later (the
        # Erlang VM's erl_child_setup does when the VM exits), and a slow host makes the moment longer: under a CPU
        # quota of 35% one was still there when the VM had been reaped. Each gets until the stop's deadline, and
        # KILL_SETTLE_S at least, before it counts as escaped and is killed.
        settle_until = max(started + timeout_s, time.monotonic() + KILL_SETTLE_S)
        while any(_running(proc) for proc in snapshot) and time.monotonic() < settle_until:
            time.sleep(0.02)
        escaped = []
        for proc in snapshot:
            if _running(proc):
                try:
                    escaped.append(describe(proc))
                    proc.kill()
                except psutil.Error:
                    pass
        self.close()
        return StopOutcome(sig_name, self.proc.returncode, round(time.monotonic() - started, 3), killed,
                           leftover, escaped)

    def kill(self) -> None:
        self._sigkill_group_and_reap()
        self.close()

    def _sigkill_group_and_reap(self) -> None:
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap()
        # A process SIGKILL hit is still listed until the kernel has torn it down (its command line already
        # gone), which takes a slow host a while: a stubborn fixture's second process was seen so under a CPU
        # quota of 35%. What is still there after KILL_SETTLE_S survived SIGKILL: a leftover.
        deadline = time.monotonic() + KILL_SETTLE_S
        while group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _running(proc: psutil.Process) -> bool:
    """Whether the process is there and not a zombie (an ended one its parent has not reaped yet)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None
