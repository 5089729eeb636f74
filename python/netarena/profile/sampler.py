"""One profile: a profiler sampling a server's process tree during a measurement's measured phase, in a thread
of its own, bounded in time; its samples as the stored document (docs/store.md, `profile_json`)."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

import psutil

from ..process import ManagedProcess
from . import RATE_HZ, ProfilePlan, tool_missing, tool_path
from .folded import OFF_CPU_EVENT, ON_CPU_EVENT, off_cpu, perf_script_views, py_spy_stacks, summarize, to_text
from .jit import own_jit_symbols, write_perf_maps

# How long a profiler may take beyond its sampling time (attaching, writing its file) before it is stopped, and
# how long `perf script` may take to read a recording.
GRACE_S = 15.0
# What one sample of each view is, as the document says it.
EVENTS = {"perf": "cpu-clock", "py-spy": "the thread holding the GIL, sampled"}
IDLE_EVENTS = {"perf": "context switches: each thread's time from leaving its CPU to coming back, by the stack it "
                       "left with",
               "py-spy": "every thread sampled, less the GIL holder: threads blocked, sleeping or waiting for the GIL"}
PERF_SCRIPT_TIMEOUT_S = 120.0
# perf is started as soon as the generator is READY, with two FIFOs to drive it (--control). netarena asks it
# whether it is ready (`ping`, answered once its events are open on every thread of the tree and it has read their
# memory maps: in a 35% CPU quota that set-up took 1.9 s, so a perf started at a window's start sampled 0.1 s of a
# 2 s window), and only then is the start time given to the generator chosen: perf's set-up never eats the window.
# perf samples from then on, its clock CLOCK_MONOTONIC (-k), and only the window's samples are kept: the measured
# phase, not the warm-up, not the drain (a thread-per-connection server sampled through its drain showed 1 s of load
# in a 2 s window). Its events stay on outside the window because a perf whose events were off (-D -1) until the
# window named a JVM's JIT-compiled frames [unknown]. Threads and processes the tree starts after perf attached (a
# server's threads for its connections, the generator's load threads) are followed: perf's events are inherited.
PERF_READY_S = 30.0
PERF_FIFOS = ("perf.control", "perf.answers")  # in the profile's folder: commands in, answers out


def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def own_code(contestant) -> tuple[list[Path], tuple[str, ...]]:
    """What counts as the contestant's own code: its folder and the shared folders beside it (contestants/_*,
    code the contestants share), and for native and JIT code the symbol prefixes of its own package (Go's main, a
    Rust binary's crate, its Java packages, its Erlang modules)."""
    dirs = [contestant.dir.resolve(), *sorted(p.resolve() for p in contestant.dir.parent.glob("_*") if p.is_dir())]
    manifest = contestant.manifest
    symbols: tuple[str, ...] = ()
    if manifest.language == "go":
        symbols = ("main.",)
    elif manifest.language == "rust":
        executable = Path(manifest.start.command[0]).name
        symbols = (executable.replace("-", "_") + "::", "<" + executable.replace("-", "_") + "::")
    else:  # JVM packages, BEAM modules (V8's frames carry their file: own_dirs)
        symbols = own_jit_symbols(dirs, manifest.runtime)
    return dirs, symbols


class ProfilerNotAnswering(Exception):
    """perf did not answer a command on its control FIFO in time, or exited."""


class Sampler:
    """Samples the process tree of `server_pid` with `plan.tool` for `duration_s` of a window that opens at a Unix
    time given later (the generator's measured phase: its start time, chosen once the profilers are ready, plus
    its warm-up). In order: start() starts perf (py-spy: nothing yet), wait_ready() waits for its set-up,
    open_window(start_unix) says when the window is (perf: the samples kept; py-spy: started at the window's start
    behind a shell's `sleep`). Every profiler process is tracked (on_spawn) like every process of a run from the
    moment it exists. finish() stops perf, waits for the profiler, bounded, and returns the document. A profiler
    that fails or hangs gives a document with `error`, never an exception."""

    def __init__(self, plan: ProfilePlan, contestant, server_pid: int | None, *, duration_s: float,
                 workdir: Path, cpus: list[int] | None, on_spawn=lambda proc, role: None,
                 on_release=lambda proc: None, own: tuple[list[Path], tuple[str, ...]] | None = None,
                 subject: str = "server"):
        self.plan, self.contestant, self.server_pid = plan, contestant, server_pid
        self.own = own  # what counts as own code, when not the contestant's (own_code): the generator's crate
        self.subject = subject  # what is sampled, as the document's errors name it
        self.duration_s = duration_s
        self.start_unix = 0.0  # the window's start, once open_window() gave it
        self.workdir, self.cpus = workdir, cpus
        self.on_spawn, self.on_release = on_spawn, on_release
        # The profiler's processes (py-spy: two, perf: one), each with the file it writes and its log.
        self._procs: list[tuple[ManagedProcess, Path, Path]] = []
        self._aborted = False
        self._deadline = 0.0
        self._control: tuple[int, ...] | list[int] | None = None  # perf's FIFOs, held open: commands in, answers out
        self._monotonic_window = (0.0, 0.0)
        self._py_spy_runs: list[tuple[str, list[str]]] = []
        tool = plan.tool
        self._path = tool_path(tool) if tool else None
        self.document: dict = {"tool": tool, "tool_version": None, "rate_hz": RATE_HZ, "window_s": duration_s,
                               "event": EVENTS.get(tool), "idle_event": IDLE_EVENTS.get(tool), "samples": 0,
                               "idle_samples": 0, "views": {"cpu": "", "idle": None}, "error": None}

    def start(self) -> "Sampler":
        """Start perf (py-spy starts at the window's start: open_window); or, when nothing can be sampled, leave the
        document saying why (finish returns it)."""
        tool, document = self.plan.tool, self.document
        if tool is None:
            self.document = {"unsupported": self.plan.unsupported}
            return self
        missing = tool_missing(tool) or (None if self.server_pid is not None else "no server process to sample")
        if missing is not None:
            document["error"] = missing
            return self
        document["tool_version"] = _version(self._path)
        try:
            server = psutil.Process(self.server_pid)
            pids = sorted({self.server_pid, *(p.pid for p in server.children(recursive=True))})
        except psutil.Error as exc:
            document["error"] = f"the {self.subject}'s process is gone: {exc}"
            return self
        document["pids"] = pids
        self.workdir.mkdir(parents=True, exist_ok=True)
        if tool == "py-spy":
            # --gil: only the thread holding the GIL, the one running Python code: py-spy counts a thread blocked
            # in recv() as running (a threaded server's view was 97% SocketIO.readinto), the GIL's holder is on a
            # CPU. --nonblocking: read the interpreter's memory without pausing it (the server runs on
            # undisturbed, a sample may catch a frame mid-update); --subprocesses: every worker process. A second
            # py-spy samples every thread (--idle) for the off-CPU view (folded.off_cpu).
            common = [self._path, "record", "--pid", str(self.server_pid), "--subprocesses", "--nonblocking",
                      "--rate", str(RATE_HZ), "--duration", f"{max(1, round(self.duration_s))}", "--format", "raw",
                      "--full-filenames", "--output"]
            self._py_spy_runs = [("py-spy.folded", [*common, str(self.workdir / "py-spy.folded"), "--gil"]),
                                 ("py-spy-all.folded", [*common, str(self.workdir / "py-spy-all.folded"), "--idle"])]
            return self
        # On CPU: the software cpu-clock event (a VM exposes no hardware counters), call chains by frame
        # pointers: Go keeps them; code built without them gives shorter stacks, its leaf (self time) still
        # right. Off CPU: every context switch of the server's threads with the call chain it left with, and
        # --switch-events for when each came back (folded.perf_script_views). The FIFOs (PERF_READY_S) are opened
        # read-write here first, so that neither side's open() waits for the other.
        fifos = [self.workdir / name for name in PERF_FIFOS]
        opened: list[int] = []
        self._control = opened  # closed by _close_control whatever was opened, if the second one fails
        try:
            for fifo in fifos:
                fifo.unlink(missing_ok=True)
                os.mkfifo(fifo, 0o600)
                opened.append(os.open(fifo, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC))
            self._control = tuple(opened)
        except OSError as exc:
            self._close_control()
            document["error"] = f"cannot make perf's control FIFOs in {self.workdir}: {exc}"
            return self
        argv = [self._path, "record", "-e", f"{ON_CPU_EVENT}/freq={RATE_HZ}/", "-e", f"{OFF_CPU_EVENT}/period=1/",
                "--switch-events", "-g", "-k", "monotonic", "-p", ",".join(map(str, pids)),
                "--control", f"fifo:{fifos[0]},{fifos[1]}", "-o", str(self.workdir / "perf.data")]
        self._spawn("perf.data", argv)
        return self

    def _spawn(self, out_name: str, argv: list[str]) -> bool:
        """Start one profiler process writing `out_name`, tracked; False (the document saying why) if it cannot."""
        log = self.workdir / f"{Path(out_name).stem}.log"
        try:
            proc = ManagedProcess(argv, cpus=self.cpus, log_path=log)
        except OSError as exc:
            self.abort()
            self.document["error"] = f"cannot start {self.plan.tool}: {exc}"
            return False
        self._procs.append((proc, self.workdir / out_name, log))
        self.on_spawn(proc, "profiler")
        return True

    def wait_ready(self, deadline: float) -> None:
        """Wait, until `deadline` (time.monotonic()), for perf to have its events open on every thread (a `ping`
        answered); a perf that is not ready by then is stopped and the document says so. py-spy: nothing to wait
        for."""
        if self._control is None or not self._procs:
            return
        try:
            self._command("ping", deadline)
        except ProfilerNotAnswering as exc:
            proc, _, log = self._procs[0]
            code = proc.poll()
            self.abort()
            if code is not None:  # it failed: its log says why
                tail = log.read_text(errors="replace")[-400:].strip() if log.is_file() else ""
                self.document["error"] = f"perf exited with code {code} before it was ready to sample: {tail}"
            else:
                self.document["error"] = (f"perf was not ready to sample within {PERF_READY_S:g} s (its set-up: "
                                          f"opening its events on every thread of the {self.subject}, reading their "
                                          f"memory maps): {exc}")

    def open_window(self, start_unix: float) -> None:
        """Sample from `start_unix` (a Unix time, in the future) for duration_s."""
        self.start_unix = start_unix
        # The window on perf's clock (CLOCK_MONOTONIC, time.monotonic()'s), to keep the samples inside it.
        start_monotonic = start_unix - time.time() + time.monotonic()
        self._monotonic_window = (start_monotonic, start_monotonic + self.duration_s)
        if self.document.get("error") is not None or self.plan.tool is None:
            return
        self.document["window_start_unix"] = round(start_unix, 6)
        self._deadline = time.monotonic() + self._left_s() + self.duration_s + GRACE_S
        for out_name, argv in self._py_spy_runs:
            # The shell sleeps until the window's start, then becomes py-spy (exec: one process to track and stop);
            # py-spy samples from its attaching on, for --duration.
            if not self._spawn(out_name, ["sh", "-c", 'sleep "$0" && exec "$@"', f"{self._left_s():.6f}", *argv]):
                return

    def _command(self, command: str, deadline: float) -> None:
        """Send perf one control command and wait, until `deadline` (monotonic), for its answer."""
        control, answers = self._control
        proc = self._procs[0][0]
        try:
            os.write(control, f"{command}\n".encode())
        except OSError as exc:
            raise ProfilerNotAnswering(f"writing {command!r}: {exc}") from exc
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProfilerNotAnswering(f"no answer to {command!r}")
            if not proc.alive:
                raise ProfilerNotAnswering(f"perf exited with code {proc.poll()} before answering {command!r}")
            if select.select([answers], [], [], min(left, 0.1))[0]:
                answer = os.read(answers, 64).decode(errors="replace").strip()
                if answer.startswith("ack"):
                    return
                raise ProfilerNotAnswering(f"perf answered {command!r} with {answer!r}")

    def _close_control(self) -> None:
        """Close and remove perf's control FIFOs, whichever of them exist."""
        for fd in self._control or ():
            os.close(fd)
        self._control = None
        for name in PERF_FIFOS:
            (self.workdir / name).unlink(missing_ok=True)

    def _left_s(self) -> float:
        """The time from now to the window's start (0 once it has begun)."""
        return max(0.0, self.start_unix - time.time())

    def abort(self) -> None:
        """Stop sampling now (the load ended early: no measured phase left to sample)."""
        self._aborted = True
        for proc, _, _ in self._procs:
            if proc.alive:
                proc.kill()

    def finish(self) -> dict:
        """The document, once the profiler is done (perf told to stop: the load is over); stopped if it runs GRACE_S
        past its window."""
        document, tool = self.document, self.plan.tool
        if not self._procs:
            self._close_control()
            return document
        codes = []
        try:
            if self._control is not None and not self._aborted:
                # The measured phase is over (the generator has exited): perf writes out what it holds and exits.
                try:
                    os.write(self._control[0], b"stop\n")
                except OSError:
                    pass
                self._deadline = time.monotonic() + GRACE_S
            for proc, _, _ in self._procs:
                while proc.alive and time.monotonic() < self._deadline:
                    time.sleep(0.05)
                if proc.alive:
                    proc.kill()
                    document["error"] = document["error"] or (
                        f"{tool} was stopped: still running {GRACE_S:g} s after its window" if self.start_unix
                        else f"{tool} was stopped before its window opened")
                codes.append(proc.poll())
            if self._aborted and document["error"] is None:
                document["error"] = f"{tool} was stopped: the load ended before its measured phase did"
        finally:
            self._close_control()
            for proc, _, _ in self._procs:
                proc.close()
                self.on_release(proc)
        (_, out, log), code = self._procs[0], codes[0]
        if not out.is_file() or out.stat().st_size == 0:
            tail = log.read_text(errors="replace")[-400:].strip() if log.is_file() else ""
            document["error"] = document["error"] or f"{tool} exited with code {code} and wrote no samples: {tail}"
            return document
        own_dirs, own_symbols = self.own or own_code(self.contestant)
        try:
            if tool == "py-spy":
                stacks = py_spy_stacks(out.read_text(errors="replace"), own_dirs)
                every_thread = self._procs[1][1]
                idle = (off_cpu(py_spy_stacks(every_thread.read_text(errors="replace"), own_dirs), stacks)
                        if every_thread.is_file() and every_thread.stat().st_size else None)
            else:
                document["perf_maps"] = write_perf_maps(document["pids"])  # JIT frames' names (profile.jit)
                script = subprocess.run([self._path, "script", "-i", str(out), "-F", "pid,tid,time,event,ip,sym,dso",
                                         "--show-switch-events"],
                                        capture_output=True, text=True, timeout=PERF_SCRIPT_TIMEOUT_S)
                if script.returncode != 0:  # e.g. a recording cut short: said, not taken for an idle server
                    raise ValueError(f"perf script exited with code {script.returncode}: "
                                     f"{script.stderr.strip()[-400:]}")
                views = perf_script_views(script.stdout, set(document["pids"]), RATE_HZ, self._monotonic_window)
                stacks, idle = views.cpu, views.idle
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            document["error"] = f"reading {tool}'s samples: {exc}"
            return document
        finally:
            if out.suffix == ".data":
                out.unlink(missing_ok=True)  # raw perf data: the folded stacks keep what the report uses
        document["samples"] = sum(stacks.values())
        document["views"]["cpu"] = to_text(stacks)
        if idle is not None:
            document["idle_samples"] = sum(idle.values())
            document["views"]["idle"] = to_text(idle)
        document.update(summarize(stacks, tool, own_dirs, own_symbols))
        if not stacks and document["error"] is None:
            if code:  # the profiler failed or was killed (a negative code: by that signal), its recording kept
                tail = log.read_text(errors="replace")[-400:].strip() if log.is_file() else ""
                document["error"] = f"{tool} exited with code {code} and caught no samples: {tail}"
            else:
                document["error"] = f"{tool} caught no samples of the {self.subject} running (idle in its window?)"
        return document


# netarena-load's own code in perf's demangled symbols: its crate's functions (and its types' trait impls).
GENERATOR_OWN_SYMBOLS = ("netarena_load::", "<netarena_load::")


def generator_sampler(generator_pid: int, *, duration_s: float, workdir: Path,
                      cpus: list[int] | None, on_spawn=lambda proc, role: None,
                      on_release=lambda proc: None) -> Sampler:
    """A profiled repeat's second profile: the load generator (netarena-load, native code) profiled by perf as a
    native server is (cpu-clock on CPU, context switches off CPU) over the same window as the server, so that a
    generator-bound figure (GEN) says where the generator's time went. Started; its document is stored as the
    profile's `generator`."""
    return Sampler(ProfilePlan("perf"), None, generator_pid, duration_s=duration_s,
                   workdir=workdir, cpus=cpus, on_spawn=on_spawn, on_release=on_release,
                   own=([], GENERATOR_OWN_SYMBOLS), subject="load generator").start()
