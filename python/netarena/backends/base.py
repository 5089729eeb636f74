"""What every backend shares: the measure request, netarena-load's command line and document, and a
measurement's verdict (failed, conclude), whether it ran on one machine, across hosts or against an external
server."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .. import stats
from ..contestants import Contestant, tail
from ..monitor import restrict_to_window
from ..generator import check_argv
from ..scenarios import Level, registry
from ..store import STATUS_FAILED, STATUS_OK, now_iso


# Extra time the generator gets beyond warm-up + duration + its own request timeout before we kill it.
GENERATOR_GRACE_S = 30.0
STDERR_TAIL_BYTES = 4000
# netarena-load's exit code when its run finished and a --threshold failed (docs/load-generator.md).
GENERATOR_EXIT_THRESHOLD_FAILED = 99


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
    services: object | None = None  # services.ServiceManager of the run, for contestants that `need` one
    # The suite's generator_open_files: each netarena-load process's open-files limit (None: the hard limit).
    generator_open_files: int | None = None
    # The suite's warmup_until_steady (a tolerance) and warmup_max_s: warm up until steady (netarena.warmup),
    # warmup_s being the minimum; None: a fixed warm-up of warmup_s.
    steady_tolerance: float | None = None
    warmup_max_s: float | None = None
    # A profiled repeat: how the contestant is profiled (netarena.profile.ProfilePlan); None: not profiled.
    profile: object | None = None
    # The run's server certificate (tls.RunCertificate) for a level over TLS; None: a cleartext level.
    tls: object | None = None
    # Suite server_per = "level": keep the server running after a measurement that ended well, for the next
    # repeat of the same level (the runner asks only when that comes next); such a repeat is warmed up for
    # reused_warmup_s (Plan.reused_warmup_s: the suite's, or a share of the first repeat's raised warm-up).
    keep_server: bool = False
    reused_warmup_s: float | None = None

    def base_record(self) -> dict:
        return {"contestant": self.contestant.name, "scenario": self.scenario, "level_key": self.level.key,
                "level": self.level.to_dict(), "repeat_index": self.repeat_index}


def generator_time_limit_s(argv: list[str], warmup_s: float, duration_s: float, timeout_s: float) -> float:
    """How long the generator may take before it is killed: the longest its run can take by netarena-load's own
    account (`check`'s longest_s: the warm-up, every phase it may measure, a find-max search's most steps, each
    phase's drain of up to timeout_s), and a grace period. A run that time does not bound (a fixed-size echo
    flood) gets the measurement's warm-up, duration and timeout."""
    checked, _ = check_argv(argv, skip_limits=True)
    longest = (checked or {}).get("longest_s")
    if longest is None:
        longest = warmup_s + duration_s + timeout_s
    return longest + GENERATOR_GRACE_S


def _result_fields(generator: dict) -> dict:
    latency = generator.get("latency") or {}
    return {"requests_per_s": generator["throughput"]["requests_per_s"], "error_rate": stats.error_rate(generator),
            "latency_p50_us": latency.get("p50_us"), "latency_p99_us": latency.get("p99_us")}


def used_services(req: MeasureRequest) -> list[str]:
    """The services this measurement's scenario talks to (a contestant may need one for some scenarios only)."""
    return [n for n in req.contestant.manifest.needs if registry.kind(req.scenario).service == n]


def timeouts(generator: dict | None) -> int:
    by_class = ((generator or {}).get("errors") or {}).get("by_class", {})
    return by_class.get("timeout", 0) + by_class.get("connect_timeout", 0)


def too_slow(argv: list[str]) -> str:
    limit = "a fixed-size echo flood must end within duration_s" if "--bytes" in argv else \
        "warm-up + duration + timeout"
    return f"netarena-load did not finish in time ({limit}) and was killed"


def parse_document(returncode: int, stdout: bytes, stderr: bytes) -> tuple[dict | None, str | None]:
    """A finished netarena-load's document, or why there is none."""
    # 99: the run finished and a --threshold failed; the result is as complete as with 0.
    if returncode not in (0, GENERATOR_EXIT_THRESHOLD_FAILED):
        message = stderr.decode("utf-8", "replace").strip()[-2000:]
        return None, f"netarena-load exited with code {returncode}: {message}"
    try:
        return json.loads(stdout), None
    except ValueError as exc:
        return None, f"netarena-load printed no valid JSON ({exc}): {stdout[:200]!r}"


def window(monitor_result: dict | None, generator: dict | None, clock_offset_s: float = 0.0) -> dict | None:
    """The monitor's samples cut to the generator's measured phase, and to each of its steps when it ran a
    sweep or a find-max search (their server CPU, RSS and context switches, step by step). `clock_offset_s`:
    how far the monitor's host clock is ahead of the generator's (a cluster's server host)."""
    if generator is None or not monitor_result or "error" in monitor_result:
        return monitor_result
    start, end = (datetime.fromisoformat(generator[k]).timestamp() + clock_offset_s for k in ("started_at", "ended_at"))
    steps = []
    for step in generator.get("steps") or []:
        try:
            step_start = datetime.fromisoformat(step["started_at"]).timestamp() + clock_offset_s
            steps.append((step_start, step_start + float(step["duration_s"])))
        except (KeyError, TypeError, ValueError):  # a step document without its times: no window for any step
            steps = []
            break
    return restrict_to_window(monitor_result, start, end, steps)


def failed(record: dict, kind: str, error: str, log_path: Path | None) -> dict:
    """Mark a record failed with its kind and reason; the contestant's log tail when the log is here."""
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


def conclude(record: dict, generator: dict | None, *, crashed: str | None, gen_error: str | None,
             hang: dict | None, timeout_s: float, log_path: Path | None, during_load: dict | None = None) -> dict:
    """The verdict of a measurement whose load has run and whose server is stopped (record["stop"]), on one
    machine, across hosts (backends.cluster) or of an external server (backends.external): crashed (`crashed` says
    how), generator failed, hung, wrong under load (`during_load`: the scenario's count over the load,
    Scenario.count_during_load), nothing answered, or ok."""
    if crashed is not None:
        return failed(record, "crashed", crashed, log_path)
    if gen_error is not None:
        return failed(record, "generator_failed", gen_error, log_path)
    if hang is not None and not hang["ok"]:
        killed = " and ignored its stop signal (stopped with SIGKILL)" if (record.get("stop") or {}).get("killed") \
            else ""
        return failed(record, "hung", (
            f"the server stopped answering: {timeouts(generator)} request(s) timed out under load "
            f"({generator['totals']['requests']} answered), and a fresh request after the load got no "
            f"valid answer within timeout_s={timeout_s:g} s ({hang['reason']}){killed}"), log_path)
    if during_load is not None and not during_load["ok"]:
        return failed(record, "verify_failed", f"during the load: {during_load['reason']}", log_path)
    asked = (generator.get("config") or {}).get("requests")
    if asked and generator["totals"]["responses"] < asked and not generator.get("interrupted"):
        # -n N with duration_s as the time limit: a run that ended by time measured fewer responses than
        # asked, and its time is the limit, not the time N took. Its figures stay with it, marked failed.
        limit = (generator.get("config") or {}).get("duration_s")
        return failed(record, "requests_not_reached", (
            f"{generator['totals']['responses']:,} of the {asked:,} requests asked were answered within the time "
            f"limit (duration_s = {limit:g} s); raise duration_s or lower requests"), log_path)
    record.update(_result_fields(generator))
    record["flags"] = stats.measurement_flags(generator, record.get("stop"))
    # What each request (MiB) cost and how much the machine interfered, over the measured window; a noisy one
    # is flagged here and may be discarded and re-measured by the runner.
    record["cost"] = stats.cost_per_unit(generator, record.get("monitor"))
    found = stats.contention(generator, record.get("monitor"))
    found["noisy"] = stats.noisy_reason(found)
    record["contention"] = found
    if found["noisy"]:
        record["flags"].append(stats.FLAG_NOISY)
    if generator["totals"]["requests"] == 0:
        return failed(record, "no_successful_requests",
                      "no successful request during the measured phase; errors: "
                      + json.dumps({k: v for k, v in generator["errors"]["by_class"].items() if v}), log_path)
    record["status"] = STATUS_OK
    record["ended_at"] = now_iso()
    return record


class StopRun(Exception):
    """A backend's word that the run cannot go on now (netarena.backends.cluster: the server host is gone, too few
    generator hosts are left). The measurement in progress is recorded as interrupted and the run stops like
    on Ctrl-C, so `--resume` continues it once the cause is fixed; the message says what to fix."""
