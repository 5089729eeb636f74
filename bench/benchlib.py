"""Shared plumbing for netarena's own benchmarks (stdlib only, with netarena.ports from this checkout).

Both benchmarks measure a load generator's CPU cost the same way for every tool: the generator runs
as a direct child pinned to one CPU, and its user + system time comes from ``os.wait4``'s rusage for
that child alone. That counts everything the process did (start-up, connecting, the run, printing
the result), identically for netarena-load and wrk.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The orchestrator's stdlib-only modules (the benches run without its virtualenv): one definition for the project
# of which build a netarena-load binary is, and of a server's free port.
sys.path.insert(0, str(REPO_ROOT / "python"))
from netarena.generator_build import generator_version, not_the_release_build  # noqa: E402  (after the path it is found on)
from netarena.ports import free_port  # noqa: E402


class BenchError(Exception):
    """A problem the user can fix; printed as one message, exit status 2."""


def find_load_bin(explicit: str | None) -> Path:
    """--load-bin, then $NETARENA_LOAD, then PATH, then target/release in this checkout."""
    candidates: list[tuple[str, str | None]] = [
        ("--load-bin", explicit),
        ("$NETARENA_LOAD", os.environ.get("NETARENA_LOAD")),
        ("PATH", shutil.which("netarena-load")),
        ("target/release", str(REPO_ROOT / "target" / "release" / "netarena-load")),
    ]
    for source, path in candidates:
        if not path:
            continue
        p = Path(path)
        if p.is_file() and os.access(p, os.X_OK):
            # The benches measure the generator users run: a `make test` build (no fat LTO) costs more per request.
            why_not = not_the_release_build(generator_version(p))
            if why_not:
                raise BenchError(f"{p} (from {source}): {why_not}")
            return p
        if source in ("--load-bin", "$NETARENA_LOAD"):
            raise BenchError(f"{source} points to {path}, which is not an executable file")
    raise BenchError(
        "netarena-load not found (looked at --load-bin, $NETARENA_LOAD, PATH and target/release); "
        "build it with: cargo build --release -p netarena-load"
    )


def require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if not path:
        raise BenchError(f"{name} not found on PATH; {hint}")
    return path


def check_cpus(*cpus: int) -> None:
    available = os.sched_getaffinity(0)
    missing = [c for c in cpus if c not in available]
    if missing:
        raise BenchError(
            f"CPU(s) {missing} are not available to this process (allowed: {sorted(available)}); "
            "choose others with --server-cpu / --client-cpu"
        )
    if len(set(cpus)) != len(cpus):
        raise BenchError(f"server and generator CPUs must differ, got {list(cpus)}")


def wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with status {proc.returncode} before listening on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s} s")


def start_pinned_server(argv: list[str], port: int, cpu: int, log_path: Path, what: str,
                        env: dict | None = None) -> subprocess.Popen:
    """Starts a server pinned to `cpu` in its own process group (stopped with stop_process_group), its
    output in `log_path`, and waits until it listens on 127.0.0.1:`port`; else a BenchError with what it said."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
            start_new_session=True,  # its own process group, so we stop exactly it and its children
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
    try:
        wait_for_port(port, proc, 10.0, what)
    except BenchError as e:
        raise BenchError(f"{e}; {what} said: {log_path.read_text(errors='replace').strip()}")
    return proc


def stop_process_group(proc: subprocess.Popen, first_signal: int = signal.SIGTERM, grace_s: float = 5.0) -> None:
    """Stops a child started with start_new_session=True: its group id is its own pid."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, first_signal)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=grace_s)


@dataclass
class ChildRun:
    argv: list[str]
    exit_status: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_user_s: float
    cpu_sys_s: float

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s


def run_pinned(argv: list[str], cpu: int, timeout_s: float, workdir: Path) -> ChildRun:
    """Runs argv pinned to `cpu`; CPU time from wait4 on exactly this child.

    Output goes to files rather than pipes so that reading it can never stall the child while we
    sit in wait4.
    """
    out_path, err_path = workdir / "child.stdout", workdir / "child.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
        try:
            deadline = started + timeout_s
            while True:
                pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid == proc.pid:
                    break
                if time.monotonic() > deadline:
                    proc.kill()
                    os.wait4(proc.pid, 0)
                    raise BenchError(f"{argv[0]} did not finish within {timeout_s:.0f} s; killed it")
                time.sleep(0.02)
        except BaseException:
            # Ctrl-C or a failure above: never leave a generator running behind us.
            if proc.returncode is None:
                try:
                    proc.kill()
                    os.wait4(proc.pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
            raise
        # Popen must not try to reap it again.
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.monotonic() - started
    return ChildRun(
        argv=argv,
        exit_status=proc.returncode,
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
        wall_s=wall_s,
        cpu_user_s=rusage.ru_utime,
        cpu_sys_s=rusage.ru_stime,
    )


def run_pinned_json(argv: list[str], cpu: int, timeout_s: float, workdir: Path, who: str) -> tuple[ChildRun, dict]:
    """run_pinned for a tool that prints one JSON document: a non-zero exit or no JSON is a BenchError
    naming `who` and what it printed."""
    run = run_pinned(argv, cpu, timeout_s, workdir)
    return run, json_result(run, who)


def json_result(run: ChildRun, who: str) -> dict:
    """The JSON document a finished run printed; a non-zero exit or no JSON is a BenchError naming `who`."""
    if run.exit_status != 0:
        raise BenchError(f"{who} exited {run.exit_status}: {run.stderr.strip()[:2000]}")
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError as e:
        raise BenchError(f"{who} printed no JSON result ({e}): {run.stdout[:500]!r}")


def probe_load(load_bin: Path, url: str, flags: list[str], cpu: int, workdir: Path) -> tuple[str | None, dict | None]:
    """One request with these netarena-load flags: (why they cannot run here, None) when it refuses them
    (exit 2, e.g. io_uring disabled), else (None, its JSON document, whose config says which engine ran);
    any other failure is a BenchError with what it printed."""
    run = run_pinned([str(load_bin), "http", url, "-n", "1", "--json", *flags], cpu, 60, workdir)
    if run.exit_status == 2:
        return run.stderr.strip()[:500], None
    return None, json_result(run, f"netarena-load {' '.join(flags) or '(default flags)'}")


def machine_state() -> dict:
    """What a reader needs to judge the numbers: the machine and how busy it was."""
    cpu_model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": cpu_model,
        "online_cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_1_5_15": list(os.getloadavg()),
    }


def print_machine(state: dict, versions: dict, reference: str = "") -> None:
    """The header every benchmark prints first: the machine, how busy it was, and the tools' versions."""
    print(f"machine: {state['cpu_model']}, {state['online_cpus']} CPUs, kernel {state['kernel']}, "
          f"load average {state['loadavg_1_5_15']}")
    print(f"tools: {versions}" + (f"; reference: {reference}" if reference else ""))


def add_common_args(p, quick_help: str) -> None:
    """The options every benchmark takes: --quick, --load-bin, --json-out, --server-cpu, --client-cpu."""
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--load-bin", help="netarena-load binary (else $NETARENA_LOAD, PATH, target/release)")
    p.add_argument("--json-out", type=Path, help="also save every figure to this JSON file")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)


# The netarena-load configurations a bench measures against a reference tool (its --engines picks among them), each
# by name: the same names in every bench.
LOAD_ENGINES = {
    # netarena-load's default (--io auto): what a user gets without options; the result names the engine.
    "default": [],
    "epoll": ["--io", "epoll"],
    "uring": ["--io", "uring"],
    # io_uring, waiting for more completions up to 5% of the fastest recent latency (<= 50 µs).
    "uring-auto": ["--io", "uring", "--coalesce-us", "auto"],
}


def parse_choices(p, option: str, text: str, allowed) -> list[str]:
    """A comma-separated list of names given to `option`, each one of `allowed`; else the parser's usage error."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        p.error(f"{option}: unknown {', '.join(unknown) or '(none given)'}; choose among {', '.join(allowed)}")
    return names


def tool_version(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    text = (p.stdout + p.stderr).strip().splitlines()
    return text[0].strip() if text else "unknown"


def build_c(tmp: Path, name: str, libs: tuple[str, ...] = (), hint: str = "") -> Path:
    """Compiles bench/<name>.c into tmp at every run, so the figures never come from a stale binary.

    `libs` are linker flags (e.g. "-luring"); `hint` says how to install what they need, for the error."""
    cc = require_tool("cc", "install a C compiler with: apt-get install gcc")
    exe = tmp / name
    p = subprocess.run([cc, "-O2", "-Wall", "-o", str(exe), str(Path(__file__).resolve().parent / f"{name}.c"),
                        *libs], capture_output=True, text=True)
    if p.returncode != 0:
        raise BenchError(f"compiling bench/{name}.c failed{' (' + hint + ')' if hint else ''}:\n{p.stderr}")
    return exe


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def median_of_ratios(pairs: list[tuple[float, float]]) -> tuple[float | None, int]:
    """The median of numerator / denominator over the rounds that give a finite ratio, and how many did.

    Each pair is one round's two runs, measured back to back: the machine's drift between rounds cancels
    out, which a ratio of two medians does not do. (None, 0) where no round gives a ratio."""
    ratios = [n / d for n, d in pairs if math.isfinite(n) and math.isfinite(d) and d > 0]
    return (median(ratios) if ratios else None), len(ratios)


def ratio_text(value: float | None, digits: int = 3, unit: str = "") -> str:
    """A ratio for a summary line; "n/a" where no run could give one."""
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


# The head of a suite the benchmarks that run `netarena run` generate: their repeats, timing and CPUs, every
# repeat counted (noisy_retries = 0: none replaced); each adds its own sections and [[measure]] entries.
SUITE_HEAD = """name = "{name}"
contestants = {contestants}
repeat = {repeats}
warmup_s = {warmup}
duration_s = {duration}
timeout_s = 5
noisy_retries = 0

[cpus]
server = [{server_cpu}]
generator = [{client_cpu}]
"""


def suite_head(name: str, args, contestants: list[str]) -> str:
    return SUITE_HEAD.format(name=name, contestants=json.dumps(contestants), repeats=args.repeats,
                             warmup=args.warmup, duration=args.duration, server_cpu=args.server_cpu,
                             client_cpu=args.client_cpu)


def add_run_args(p, contestants: str, repeats: int, duration_s: float, warmup_s: float, connections: int) -> None:
    """The options of a benchmark that runs `netarena run`: which contestants, how many repeats of how long."""
    p.add_argument("--contestants", default=contestants, help=f"default {contestants}")
    p.add_argument("--repeats", type=int, default=repeats)
    p.add_argument("--duration", type=float, default=duration_s, help="measured seconds per repeat")
    p.add_argument("--warmup", type=float, default=warmup_s)
    p.add_argument("--connections", type=int, default=connections)


def netarena(args: list[str], timeout_s: float, env: dict | None = None, what: str = "netarena") \
        -> subprocess.CompletedProcess:
    """`python -m netarena ARGS` of this checkout; a BenchError unless it exits 0 or 99 (a threshold failed)."""
    done = subprocess.run([sys.executable, "-m", "netarena", *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=REPO_ROOT, env=env)
    if done.returncode not in (0, 99):
        raise BenchError(f"{what} exited {done.returncode}: {(done.stderr.strip() or done.stdout.strip())[-2000:]}")
    return done


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_bench(bench, args, stopped: str) -> int:
    """Run `bench(args)`: a BenchError is one message and exit 2, Ctrl-C says what was stopped (`stopped`). SIGTERM
    (`kill`, a timeout) stops it as Ctrl-C does: the servers it started run in process groups of their own, so
    without the `finally` blocks that stop them they would outlive it."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return bench(args)
    except BenchError as e:
        fail(str(e))
    except KeyboardInterrupt:
        print(f"interrupted; {stopped} were stopped", file=sys.stderr)
        return 130
    return 1


def nginx_requests(port: int, path: str) -> int:
    """nginx's stub_status request counter at `path` (this status request included), over HTTP/1.1."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    # "Active connections: N \nserver accepts handled requests\n A H R \n..."
    return int(text.splitlines()[2].split()[2])


def cpu_figures(run: ChildRun, requests: int) -> dict:
    """CPU figures of a generator's run; the benches compute cpu_us_per_request from the server's own count."""
    return {
        "cpu_user_s": run.cpu_user_s,
        "cpu_sys_s": run.cpu_sys_s,
        "cpu_s": run.cpu_s,
        "wall_s": run.wall_s,
        "cpu_us_per_request_self_counted": run.cpu_s / requests * 1e6 if requests else math.inf,
    }


def paired_ratio(results: list[dict], tool: str, reference: str, key: str, reference_over_tool: bool) -> tuple[float | None, int]:
    """The median over the rounds of `key`'s ratio between `tool`'s run and `reference`'s run of the same round."""
    by_run = {r["run"]: r for r in results if r["tool"] == reference}
    pairs = [(by_run[r["run"]][key], r[key]) if reference_over_tool else (r[key], by_run[r["run"]][key])
             for r in results if r["tool"] == tool and r["run"] in by_run]
    return median_of_ratios(pairs)
