"""netarena-load as a program: where it is, the command line of a run, and what it says of a command line
without running it (`netarena-load check`, docs/load-generator.md "Checking a run").

The generator owns the rules of its options (which go together, their ranges, the threshold expressions): the
orchestrator asks it instead of repeating them, so a suite entry is refused for the reason a run would be.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

from .checkout import repo_root
from .ports import free_port
from .scenarios import registry
from .scenarios.levels import Level
from .scenarios.load import level_options
from .tls import is_tls

# How long `netarena-load check` may take: it parses, probes io_uring and reads limits; nothing is sent.
CHECK_TIMEOUT_S = 30


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


@functools.lru_cache(maxsize=None)
def supports_https(binary: Path) -> bool:
    """Whether this netarena-load speaks https:// (its http mode takes --cacert): a level over TLS needs it."""
    try:
        out = subprocess.run([str(binary), "http", "--help"], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--cacert" in out.stdout


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


# The flags that make a netarena-load run an open loop (a rate, rate steps, a find-max search).
OPEN_LOOP_FLAGS = frozenset({"--rate", "--conn-rate", "--steps", "--find-max"})


def open_loop(argv: list[str]) -> bool:
    """Whether a generator command line (as generator_argv builds it) runs an open loop: with --prepare such a
    run opens its connections and warms up before READY, a closed loop or an echo flood after the start time."""
    return not OPEN_LOOP_FLAGS.isdisjoint(argv)


def check_argv(argv: list[str], *, skip_limits: bool = False) -> tuple[dict | None, str | None]:
    """netarena-load's verdict on a run's command line (as generator_argv builds it), sending nothing: (the
    check's JSON, None) when it would run, (None, its reason) when it would refuse. `skip_limits` leaves out the
    open-files and port limits (a level beyond one process is split over several, each with its own)."""
    binary, rest = argv[0], argv[1:]
    command = [binary, "check", *(["--skip-limits"] if skip_limits else []), *rest]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"could not run {binary} check: {exc}"
    if out.returncode == 2:
        lines = out.stderr.strip().splitlines()
        reason = lines[-1] if lines else "netarena-load refused it (exit 2)"
        return None, reason.removeprefix("netarena-load: ")
    if out.returncode != 0:
        return None, f"{binary} check exited with code {out.returncode}: {out.stderr.strip()[-500:]}"
    return json.loads(out.stdout), None


# A placeholder server for a level's check: `check` connects to nothing, but the target must be loopback.
_CHECK_HOST = "127.0.0.1:9"


def level_check_argv(binary: Path, scenario: str, level: Level, *, warmup_s: float, duration_s: float,
                     timeout_s: float) -> list[str]:
    """The command line of a level's load as far as the suite decides it (its options, timing and timeout, a
    placeholder server), for check_argv: what netarena-load says of a level before any server exists. The thread
    count is the plan's (generator_threads capped to the generator's CPUs where it runs): one here."""
    mode, options = level_options(scenario, dataclasses.replace(level, generator_threads=1))
    target = f"http://{_CHECK_HOST}/" if registry.get(scenario).is_http else _CHECK_HOST
    if is_tls(level.protocol):
        # As the load will run: https://, any certificate (the run's own is made later), so that an option of
        # TLS alone (--tls-resume) is checked too.
        target, options = f"https://{_CHECK_HOST}/", [*options, "--insecure"]
    return generator_argv(binary, mode, target, options, warmup_s=warmup_s, duration_s=duration_s,
                          timeout_s=timeout_s, cpus=[])


@functools.lru_cache(maxsize=None)
def sweep_rates(steps: str) -> tuple[float, ...]:
    """The rates of `--steps LOW:HIGH:STEP` as netarena-load computes them (its check's config.steps): the
    plan's estimate of a sweep asks the generator instead of repeating its arithmetic."""
    argv = [str(find_generator()), "http", f"http://{_CHECK_HOST}/", "--conn-rate", steps.split(":")[0],
            "--steps", steps, "--conns-per-step", "1"]
    checked, refused = check_argv(argv, skip_limits=True)
    if checked is None:
        raise ValueError(f"netarena-load refuses --steps {steps}: {refused}")
    return tuple(checked["config"]["steps"])


def check_thresholds(binary: Path, expressions: list[str]) -> str | None:
    """netarena-load's own verdict on --threshold expressions, before anything starts: None when it accepts them
    all, else its message (the rule is the generator's alone)."""
    if not expressions:
        return None
    argv = [str(binary), "http", f"http://127.0.0.1:{free_port()}/", "-c", "1"]
    for expression in expressions:
        argv += ["--threshold", expression]
    _, refused = check_argv(argv)
    return refused


# The longest `netarena-load calibrate cpu` may take: its units are a few ms each.
CALIBRATE_CPU_TIMEOUT_S = 60.0


def calibrate_cpu(binary: Path, cpu: int | None, units: int) -> dict:
    """netarena-load's fixed CPU loop, `units` units pinned to `cpu`: its figures (µs per unit: the median, the
    fastest and the slowest unit; the unit's version), or {"error": why}. The one way netarena times it (the
    run's calibration, doctor's CPU speed check)."""
    argv = [str(binary), "calibrate", "cpu", "--units", str(units)]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=CALIBRATE_CPU_TIMEOUT_S,
                              preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None)
    except subprocess.TimeoutExpired:
        return {"error": f"netarena-load calibrate cpu did not finish in {CALIBRATE_CPU_TIMEOUT_S:g} s"}
    except OSError as exc:
        return {"error": f"cannot run netarena-load calibrate cpu: {exc}"}
    if done.returncode != 0:
        return {"error": f"netarena-load calibrate cpu exited with code {done.returncode}: "
                         f"{done.stderr.decode('utf-8', 'replace').strip()[-500:]}"}
    try:
        return json.loads(done.stdout)
    except ValueError as exc:
        return {"error": f"netarena-load calibrate cpu printed no valid JSON ({exc})"}
