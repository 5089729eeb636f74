"""Environment fingerprint stored with every run: enough to know whether two runs are comparable.

``collect()`` never raises on a missing file or tool (the value is ``None``) and finishes in about
``TOOL_TIMEOUT_S`` even when every tool hangs: external version commands run in parallel, each killed
(with its children) after ``TOOL_TIMEOUT_S``.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

import netarena

from .checkout import repo_root

TOOL_TIMEOUT_S = 1.5
# git status walks the checkout: seconds on a slow host with a busy disk, where 1.5 s lost the commit once.
GIT_TIMEOUT_S = 15
# How long the steal sample at the start of a run watches /proc/stat: run beside the version commands, so
# within the TOOL_TIMEOUT_S that collect() takes anyway.
STEAL_SAMPLE_S = 1.0

# The kernel settings that change what a network benchmark can do or how it behaves.
SYSCTLS = (
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_fin_timeout",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.netdev_max_backlog",
    "fs.file-max",
    "fs.nr_open",
    "kernel.io_uring_disabled",
    # The rest of those the seeds set or list as "of interest" (None where this kernel has no such file); not
    # fs.file-nr, also listed, which counts the open files of the moment rather than setting anything.
    "net.ipv4.tcp_max_orphans",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_low_latency",
    "net.ipv4.tcp_window_scaling",
    "net.core.optmem_max",
    "fs.pipe-max-size",
)

_ERLANG_VERSION = (
    '{ok,V}=file:read_file(filename:join([code:root_dir(),"releases",'
    'erlang:system_info(otp_release),"OTP_VERSION"])),io:put_chars(V),halt().'
)

# name -> (argv after the executable, how many output lines make the version, exit codes that mean ok)
RUNTIMES: dict[str, tuple[list[str], int, tuple[int, ...]]] = {
    "python3": (["--version"], 1, (0,)),
    "pypy3": (["--version"], 2, (0,)),  # line 2 carries the PyPy version, line 1 the Python one
    "node": (["--version"], 1, (0,)),
    "go": (["version"], 1, (0,)),
    "erl": (["-noshell", "-eval", _ERLANG_VERSION], 1, (0,)),
    "ruby": (["--version"], 1, (0,)),
    "java": (["-version"], 1, (0,)),
    "nginx": (["-v"], 1, (0,)),
    "wrk": (["-v"], 1, (0, 1)),  # exits 1 after printing its version
    # Build tools of compiled contestants (rust-hyper, java-netty, play-scala): the build decides the binary.
    "rustc": (["--version"], 1, (0,)),
    "cargo": (["--version"], 1, (0,)),
    "mvn": (["-B", "-v"], 1, (0,)),
    "sbt": (["--script-version"], 1, (0,)),  # the launcher script's version, without starting a JVM
    "npm": (["--version"], 1, (0,)),
}


def read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctl(name: str) -> str | None:
    """The value as `sysctl -n` prints it (fields separated by one space), or None."""
    raw = read_text(sysctl_path(name))
    return " ".join(raw.split()) if raw is not None else None


def _cpu_model() -> str | None:
    return cpuinfo_field("model name", "Processor", "cpu model")


def cpuinfo_field(*keys: str) -> str | None:
    """The first /proc/cpuinfo line's value whose key is one of `keys` (the first CPU's), or None."""
    text = read_text("/proc/cpuinfo")
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in keys:
            return value.strip()
    return None


def cpu_flags() -> dict[str, Any] | None:
    """The first CPU's feature flags, sorted, with a short hash of them: two hosts with equal hashes offer
    the same instructions, which the hash says at a glance and the list explains when it does not."""
    raw = cpuinfo_field("flags", "Features")  # x86 says flags, arm64 Features
    if raw is None:
        return None
    flags = sorted(set(raw.split()))
    digest = hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16]
    return {"sha256_16": digest, "count": len(flags), "list": flags}


def cpu_mhz() -> dict[str, float] | None:
    """The clock the kernel reports now, per the first CPU and averaged over all (MHz), where visible:
    cpufreq's scaling_cur_freq, else /proc/cpuinfo's "cpu MHz" (on many VMs the host's nominal clock)."""
    values = []
    for path in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
        khz = read_text(path)
        if khz and khz.isdigit():
            values.append(int(khz) / 1000)
    source = "cpufreq"
    if not values:
        text = read_text("/proc/cpuinfo") or ""
        values = [float(v) for k, _, v in (line.partition(":") for line in text.splitlines())
                  if k.strip() == "cpu MHz" and _is_number(v.strip())]
        source = "cpuinfo"
    if not values:
        return None
    return {"first": round(values[0], 1), "mean": round(sum(values) / len(values), 1), "source": source}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def mitigations() -> dict[str, str] | None:
    """/sys/devices/system/cpu/vulnerabilities: each issue the kernel knows and what it does about it
    ("Not affected", "Mitigation: ...", "Vulnerable"); mitigations can cost a syscall-heavy server much."""
    found = {path.name: read_text(path) for path in
             sorted(Path("/sys/devices/system/cpu/vulnerabilities").glob("*"))}
    return {name: value for name, value in found.items() if value is not None} or None


def clocksource() -> str | None:
    """The kernel's clock (tsc, kvm-clock, hpet...): a slow one makes every timestamp cost a system call."""
    return read_text("/sys/devices/system/clocksource/clocksource0/current_clocksource")


def steal_sample(interval_s: float = STEAL_SAMPLE_S) -> dict[str, float] | None:
    """Share of the machine's CPU time the hypervisor gave to others over `interval_s` now, in percent of all
    CPUs (from /proc/stat), or None where the kernel does not count steal. At the run's start: a host that
    is already busy elsewhere says so before any figure is measured on it."""
    try:
        before = psutil.cpu_times()
        time.sleep(interval_s)
        after = psutil.cpu_times()
    except OSError:
        return None
    if not hasattr(before, "steal"):
        return None
    total = sum(after) - sum(before)
    if total <= 0:
        return None
    return {"pct": round(100 * (after.steal - before.steal) / total, 2), "interval_s": interval_s}


def _hypervisor() -> bool | None:
    text = read_text("/proc/cpuinfo")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return " hypervisor" in line
    return None


def cpu_governors() -> dict[str, str] | None:
    """cpuN -> scaling governor, or None where cpufreq is not exposed (VMs, containers)."""
    governors = {}
    for path in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
        value = read_text(path)
        if value is not None:
            governors[path.parent.parent.name] = value
    return governors or None


def _distro() -> dict[str, str] | None:
    text = read_text("/etc/os-release")
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value.strip().strip('"')
    return {k: fields[k] for k in ("PRETTY_NAME", "ID", "VERSION_ID") if k in fields} or None


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _first_lines(text: str, count: int) -> str | None:
    text = _ANSI_ESCAPE.sub("", text)  # mvn colours its banner even in batch mode
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[:count])[:200] or None


def tool_version(executable: str, args: list[str], lines: int = 1, ok_exit_codes: tuple[int, ...] = (0,)) -> str | None:
    """First line(s) of a tool's version output (stdout, else stderr), or None if absent/failed/hung."""
    path = shutil.which(executable)
    if path is None:
        return None
    try:
        # Own session so a timeout kills the whole group: a wrapper script's children would
        # otherwise hold the pipes open and make communicate() wait for them.
        proc = subprocess.Popen(
            [path, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        stdout, stderr = proc.communicate(timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return None
    if proc.returncode not in ok_exit_codes:
        return None  # e.g. a shim that prints "command not found"-like errors
    return _first_lines(stdout, lines) or _first_lines(stderr, lines)


def _git_checkout() -> Path | None:
    """The checkout this package runs from, if it runs from a git clone of it (not from site-packages)."""
    root = repo_root()
    return root if root is not None and (root / ".git").exists() else None


def git_revision() -> dict[str, Any] | None:
    """The checkout's commit and whether its files differ from it (None: not known, e.g. git took too long)."""
    root = _git_checkout()
    if root is None or shutil.which("git") is None:
        return None

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                  timeout=GIT_TIMEOUT_S, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None

    sha = (git("rev-parse", "HEAD") or "").strip()
    if not sha:
        return None
    # Read-only: a plain status refreshes the index under .git/index.lock, and one stopped by the timeout leaves
    # that lock behind, failing the user's next commit.
    status = git("--no-optional-locks", "status", "--porcelain")
    return {"sha": sha, "dirty": None if status is None else bool(status.strip())}


def load_generator_path() -> str | None:
    """netarena-load on PATH (the installed package), else the release build of this checkout."""
    found = shutil.which("netarena-load")
    if found:
        return found
    root = repo_root()
    if root is not None:
        built = root / "target" / "release" / "netarena-load"
        if built.is_file() and os.access(built, os.X_OK):
            return str(built)
    return None


def _load_generator() -> dict[str, str | None]:
    path = load_generator_path()
    version = tool_version(path, ["--version"]) if path else None
    return {"path": path, "version": version}


def _open_files_limit() -> dict[str, int | None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def finite(value: int) -> int | None:
        return None if value == resource.RLIM_INFINITY else value

    return {"soft": finite(soft), "hard": finite(hard)}


def collect(extra: dict | None = None) -> dict:
    started_s = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(RUNTIMES) + 3) as pool:
        runtime_futures = {
            name: pool.submit(tool_version, name, args, lines, ok_codes)
            for name, (args, lines, ok_codes) in RUNTIMES.items()
        }
        git_future = pool.submit(git_revision)
        load_future = pool.submit(_load_generator)
        steal_future = pool.submit(steal_sample)

        uname = platform.uname()
        memory = psutil.virtual_memory()
        swap = psutil.swap_memory()
        try:
            available_cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            available_cpus = None
        info: dict[str, Any] = {
            "collected_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "hostname": socket.gethostname(),
            "cpu": {
                "model": _cpu_model(),
                "logical_cores": psutil.cpu_count(logical=True),
                "physical_cores": psutil.cpu_count(logical=False),
                "available_cpus": available_cpus,
                "governors": cpu_governors(),
                "hypervisor": _hypervisor(),
                "flags": cpu_flags(),
                "mhz": cpu_mhz(),
                "mitigations": mitigations(),
            },
            "memory": {"total_bytes": memory.total, "swap_total_bytes": swap.total},
            "kernel": {"system": uname.system, "release": uname.release, "version": uname.version,
                       "machine": uname.machine},
            "clocksource": clocksource(),
            "distro": _distro(),
            "sysctls": {name: read_sysctl(name) for name in SYSCTLS},
            "limits": {"open_files": _open_files_limit()},
            "python": {
                "version": platform.python_version(),
                "implementation": platform.python_implementation(),
                "executable": sys.executable,
            },
        }
        info["netarena"] = {"version": netarena.__version__, "git": git_future.result()}
        info["netarena_load"] = load_future.result()
        info["runtimes"] = {name: future.result() for name, future in runtime_futures.items()}
        info["steal_at_start"] = steal_future.result()
    info["collect_s"] = round(time.monotonic() - started_s, 3)
    if extra:
        info.update(extra)
    return info


def collect_environment(extra: dict) -> dict:
    """collect(extra), or the error that kept it from being collected with `extra`."""
    try:
        return collect(extra=extra)
    except Exception as exc:  # the fingerprint is context, not a reason to lose the run
        return {"error": f"envinfo.collect failed: {type(exc).__name__}: {exc}", **extra}
