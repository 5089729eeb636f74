"""Hand-built runs for the report tests, written through the real store API (netarena.store.Store).

The generator documents are shaped like netarena-load's --json output (docs/load-generator.md), with
real HdrHistograms encoded the way the generator encodes them; the monitor documents are shaped like
netarena.monitor.Monitor.stop(). Every figure is chosen so the tests know what the report must say.
What the code under test would decide (a generator's `saturated`, a measurement's flags and error rate)
is written here by hand, never computed with that code: a wrong decision in it must show in the tests.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from netarena.store import Store

ERROR_CLASSES = ("connect_refused", "connect_timeout", "connect_error", "address_unavailable", "too_many_open_files", "reset",
                 "closed_early", "read_error", "write_error", "timeout", "parse_error", "status",
                 "verification_mismatch", "tls_handshake", "tls_certificate", "h2_rst_stream", "h2_goaway",
                 "h2_protocol")


def histogram(values_us: dict[int, int]) -> HdrHistogram:
    hist = HdrHistogram(1, 3_600_000_000, 3)
    for value, count in values_us.items():
        hist.record_value(value, count)
    return hist


def latency_doc(values_us: dict[int, int]) -> dict:
    hist = histogram(values_us)
    return {"count": hist.get_total_count(), "min_us": hist.get_min_value(),
            "p50_us": hist.get_value_at_percentile(50), "p99_us": hist.get_value_at_percentile(99),
            "p99_9_us": hist.get_value_at_percentile(99.9), "max_us": hist.get_max_value(),
            # Exact from the recorded values: hdrh's own mean/stdev iterate the histogram slowly in pure Python.
            "mean_us": sum(v * n for v, n in values_us.items()) / sum(values_us.values()), "stdev_us": 0.0,
            "histogram": {"encoding": "hdrhistogram-v2-deflate-base64", "unit": "us", "lowest_trackable": 1,
                          "highest_trackable": 3_600_000_000, "significant_digits": 3,
                          "data": hist.encode().decode()}}


def generator_doc(*, rps: float, latency_us: dict[int, int], duration_s: float = 2.0, errors: dict | None = None,
                  busy_fraction: float = 0.5, saturated: bool = False, mode: str = "http", connections: int = 10,
                  echo: dict | None = None, argv: list[str] | None = None, unfinished: int = 0) -> dict:
    requests = int(rps * duration_s)
    by_class = {name: 0 for name in ERROR_CLASSES}
    by_class.update(errors or {})
    total_errors = sum(by_class.values())
    return {
        "schema_version": 1, "tool": {"name": "netarena-load", "version": "0.1.0"}, "mode": mode,
        "command_line": argv or ["netarena-load", mode, "127.0.0.1:1", "-c", str(connections), "--json"],
        "config": {"target": "http://127.0.0.1:1/hello", "connections": connections, "threads": 1, "cpus": [1],
                   "duration_s": duration_s},
        "started_at": "2026-11-22T10:00:00Z", "ended_at": "2026-11-22T10:00:02Z", "duration_s": duration_s,
        "warmup_s": 0.0,
        "totals": {"requests": requests, "responses": requests + by_class["status"], "bytes_sent": 0,
                   "bytes_received": 0, "connections_opened": connections, "errors": total_errors,
                   "unfinished": unfinished, "warmup_responses": 0},
        "throughput": {"requests_per_s": rps, "bytes_per_s": 0.0},
        "latency": latency_doc(latency_us),
        "timeline": [{"t_s": float(t + 1), "requests": int(rps), "bytes_received": 0, "errors": 0}
                     for t in range(int(duration_s))],
        "intervals": {"interval_s": 1.0, "encoding": "hdrhistogram-v2-deflate-base64", "unit": "us",
                      "entries": [{"t_s": float(t), "count": int(rps), "p50_us": min(latency_us),
                                   "p99_us": max(latency_us), "p99_9_us": max(latency_us), "max_us": max(latency_us),
                                   "data": ""} for t in range(int(duration_s))]},
        "errors": {"total": total_errors, "by_class": by_class,
                   "status_codes": {"503": by_class["status"]} if by_class["status"] else {},
                   "examples": ["status 503 from GET /hello (expected 2xx/3xx)"] if by_class["status"] else []},
        "generator": {"threads": 1, "cpus": [1], "cpu_user_s": 0.2, "cpu_sys_s": 0.8, "busy_fraction": busy_fraction,
                      "busy_fraction_max": busy_fraction,
                      "saturated": saturated},
        "generator_saturated": saturated,
        "echo": echo,
    }


def monitor_doc(*, cpu_pct: float, rss_bytes: int, samples: int = 8, interval_s: float = 0.25) -> dict:
    server, system = [], []
    for i in range(samples):
        t_s = i * interval_s
        used_s = cpu_pct / 100 * t_s
        server.append({"t_s": t_s, "cpu_user_s": round(used_s * 0.6, 4), "cpu_sys_s": round(used_s * 0.4, 4),
                       "rss_bytes": rss_bytes - (samples - 1 - i) * 4096, "processes": 1, "threads": 2, "fds": 20,
                       "ctx_voluntary": 500 * i, "ctx_involuntary": 40 * i, "run_delay_s": 0.001 * i})
        if i:
            system.append({"t_s": t_s, "ctx_switches_per_s": 12000.0 + 100 * i, "interrupts_per_s": 3000.0,
                           "cpu_user_pct": 45.0, "cpu_sys_pct": 40.0, "cpu_idle_pct": 15.0, "cpu_iowait_pct": 0.0,
                           "cpu_steal_pct": 0.0, "per_cpu_busy_pct": [cpu_pct, 80.0],
                           "per_cpu_task_pct": [cpu_pct, 70.0]})
    from netarena.monitor import summarize_system, summarize_tree
    return {"interval_s": interval_s, "server": server, "generator": [], "system": system,
            "cpus_allowed": {"server": [0], "generator": [1]},
            "summary": {"server": summarize_tree(server), "generator": None, "system": summarize_system(system),
                        "duration_s": (samples - 1) * interval_s, "samples": samples, "monitor_cpu_s": 0.001,
                        "monitor_cpu_pct": 0.05,
                        # As monitor.restrict_to_window leaves it: the samples span (samples - 1) intervals of the
                        # generator's measured phase (its duration_s), so costs are per that span's responses.
                        "window": {"measured_only": True, "start_s": 0.0, "end_s": (samples - 1) * interval_s}}}


ENVIRONMENT = {
    "hostname": "testbox", "cpu": {"model": "Test CPU 3000", "logical_cores": 2, "physical_cores": 2,
                                   "available_cpus": [0, 1]},
    "memory": {"total_bytes": 24 << 30}, "kernel": {"system": "Linux", "release": "6.1.0-test", "machine": "x86_64"},
    "sysctls": {"net.core.somaxconn": "4096"}, "limits": {"open_files": {"soft": 20000, "hard": 20000}},
    "python": {"version": "3.11.2"}, "runtimes": {"python3": "Python 3.11.2"},
    "server_cpus": [0], "generator_cpus": [1], "generator": {"path": "/x/netarena-load", "version": "0.1.0"},
}

# Bytes each connection of the echo flood sends: seed 000's two sizes (suites/seeds/seed-000-echo-flood.toml).
ECHO_BYTES = (32768, 524288)

# The end of a failed install's log, as the runner stores it in skipped.detail.
INSTALL_LOG_TAIL = ("Collecting fw==9.9\nERROR: Could not find a version that satisfies the requirement fw==9.9\n"
                    "ERROR: No matching distribution found for fw==9.9 <not markup>")

MANIFEST = {"display_name": "{name} server", "language": "python", "runtime": "cpython", "framework": "fw",
            "framework_version": "1.0", "concurrency_model": "event-loop"}


# Two languages and three models, for the report's filter: alpha and gamma python (an event loop, threads),
# beta go (goroutines); delta and epsilon keep MANIFEST's python event loop.
LANGUAGE_AND_MODEL = {"beta": {"language": "go", "runtime": "go", "concurrency_model": "goroutines"},
                      "gamma": {"concurrency_model": "threads"}}


# beta's repeats: (requests/s, 503 answers); with its 3 resets, errors / (requests + errors) by hand:
# 634 / 12,634, 845 / 16,845 and 1,055 / 21,055, each above the 1% that flags a measurement.
BETA_REPEATS = {0: (6000.0, 631), 1: (8000.0, 842), 2: (10000.0, 1052)}
BETA_ERROR_RATES = {0: 634 / 12634, 1: 845 / 16845, 2: 1055 / 21055}


def _record(store: Store, run_id: int, *, contestant: str, scenario: str, connections: int, repeat: int,
            generator: dict | None = None, monitor: dict | None = None, status: str = "ok",
            failure_kind: str | None = None, error: str | None = None, stop: dict | None = None,
            level_extra: dict | None = None, params: dict | None = None, error_rate: float | None = None,
            flags: tuple[str, ...] = (), discarded: str | None = None, profile: dict | None = None) -> int:
    level = {"connections": connections, "workers": 1, "params": params or {}, **(level_extra or {})}
    # As scenarios.Level.key spells it: connections, workers, then the params.
    level_key = ",".join([f"c={connections}", "w=1", *(f"{k}={v}" for k, v in sorted((params or {}).items()))])
    if level.get("protocol", "h1") != "h1":
        level_key += f",protocol={level['protocol']}"  # last but for find_max, which these runs never have
    record = {"contestant": contestant, "scenario": scenario, "level_key": level_key, "level": level,
              "repeat_index": repeat, "status": status, "failure_kind": failure_kind, "error": error,
              "started_at": "2026-11-22T10:00:00Z", "ended_at": "2026-11-22T10:00:03Z", "stop": stop,
              "generator": generator, "monitor": monitor}
    if generator is not None:
        record["generator_argv"] = generator["command_line"]
        record["requests_per_s"] = generator["throughput"]["requests_per_s"]
        record["error_rate"] = error_rate
        record["latency_p50_us"] = generator["latency"]["p50_us"]
        record["latency_p99_us"] = generator["latency"]["p99_us"]
    record["flags"] = list(flags)
    record["discarded"] = discarded
    record["profile"] = profile
    return store.record_measurement(run_id, record)


# alpha's hello at c=10 measured once more, on a noisy machine, and discarded: its 1,000 req/s must be in no figure.
DISCARDED_REASON = "noisy (steal 14%)"


def populate_run(store: Store, *, speedup: float = 1.0, suite_name: str = "report-test", repeats: int = 3) -> int:
    """One run: alpha (fast, steady), beta (unstable, 5% errors), gamma (generator-bound at c=100, one crash),
    delta (fails verification), epsilon (skipped for echo), zeta (its install failed); hello at c=10 and c=100,
    echo floods of 32 KiB and 512 KiB per connection at c=10 and c=100, each with a client-delay probe.
    ``speedup`` multiplies alpha's throughput (and divides its latency), for compare. ``repeats`` beyond 3
    repeat the first three's figures (repeat 3 is repeat 0's, and so on)."""
    run_id = store.create_run(suite_name=suite_name, suite_path=None, suite={"name": suite_name, "repeat": repeats},
                              args={"argv": ["netarena", "run", suite_name]}, backend="real", server_cpus=[0],
                              generator_cpus=[1], environment=ENVIRONMENT, planned=40, netarena_version="0.1.0",
                              git_sha="abc123", orchestrator_start_time=None)
    for name in ("alpha", "beta", "gamma", "delta", "epsilon"):
        manifest = {k: (v.format(name=name) if isinstance(v, str) else v) for k, v in MANIFEST.items()}
        manifest.update(LANGUAGE_AND_MODEL.get(name, {}))
        store.record_contestant(run_id, name, {"name": name, **manifest}, {"pip_freeze": ["fw==1.0"]}, "ready")
    store.record_skip(run_id, "epsilon", "does not implement echo: it only speaks HTTP", scenario="echo")
    store.record_skip(run_id, "zeta", "install failed: pip install exited with status 1", detail=INSTALL_LOG_TAIL)
    for repeat in range(repeats):
        shape = repeat % 3  # which of the three figures of each contestant this repeat has
        for connections in (10, 100):
            scale = connections / 10
            # alpha: steady (repeats within +-1%), fastest.
            rps = 20000 * speedup * (1 + 0.01 * (shape - 1)) * (1.5 if connections == 100 else 1)
            base_us = int(400 * scale / speedup)
            _record(store, run_id, contestant="alpha", scenario="hello", connections=connections, repeat=repeat,
                    generator=generator_doc(rps=rps, connections=connections,
                                            latency_us={base_us: 9800, base_us * 3: 190, base_us * 10: 10}),
                    monitor=monitor_doc(cpu_pct=95, rss_bytes=30 << 20), error_rate=0.0)
            # beta: CV well above 5% (6,000, 8,000 and 10,000 req/s over 2 s), about 5% of requests answered 503.
            rps, status_errors = BETA_REPEATS[shape]
            _record(store, run_id, contestant="beta", scenario="hello", connections=connections, repeat=repeat,
                    generator=generator_doc(rps=rps, connections=connections,
                                            latency_us={int(1200 * scale): 9000, int(9000 * scale): 1000},
                                            errors={"status": status_errors, "reset": 3}),
                    monitor=monitor_doc(cpu_pct=99, rss_bytes=55 << 20), error_rate=BETA_ERROR_RATES[shape],
                    flags=("error_rate_above_1pct",))
            # gamma: generator-bound at c=100; its second repeat at c=10 crashed.
            if connections == 10 and repeat == 1:
                _record(store, run_id, contestant="gamma", scenario="hello", connections=connections,
                        repeat=repeat, status="failed", failure_kind="crashed",
                        error="the contestant exited with code 3 while under load")
            else:
                _record(store, run_id, contestant="gamma", scenario="hello", connections=connections,
                        repeat=repeat, generator=generator_doc(
                            rps=12000 + 100 * shape, connections=connections,
                            busy_fraction=0.95 if connections == 100 else 0.6, saturated=connections == 100,
                            latency_us={int(700 * scale): 9900, int(2000 * scale): 100}),
                        monitor=monitor_doc(cpu_pct=60, rss_bytes=12 << 20), error_rate=0.0,
                        flags=("generator_saturated",) if connections == 100 else ())
            # delta: wrong responses, never measured.
            _record(store, run_id, contestant="delta", scenario="hello", connections=connections, repeat=repeat,
                    status="failed", failure_kind="verify_failed" if repeat == 0 else "not_attempted",
                    error="wrong response: body 'Hello' (5 bytes), expected 'Hello, World!' (13 bytes)")
            # echo flood, fixed bytes (two sizes, like seed 000): alpha finishes faster than gamma; both with a
            # client-delay probe. The 512 KiB flood takes 16x as long as the 32 KiB one.
            for bytes_per in ECHO_BYTES:
                size_scale = bytes_per / ECHO_BYTES[0]
                for name, seconds in (("alpha", 0.05 * scale / speedup), ("gamma", 0.12 * scale)):
                    seconds *= size_scale
                    completion_s = seconds * (1 + 0.02 * (shape - 1))
                    chunks = connections * int(size_scale)
                    probe = {"interval_s": 0.01, "attempts": 5, "completed": 5, "errors": 0,
                             "latency": latency_doc({int(seconds * 1e6 / 4): 4, int(seconds * 1e6 / 2): 1})}
                    echo = {"bytes_per_connection": bytes_per, "chunk_bytes": 32768,
                            "connections_completed": connections, "completion_time_s": completion_s,
                            "verified_bytes": bytes_per * connections, "probe": probe}
                    _record(store, run_id, contestant=name, scenario="echo", connections=connections, repeat=repeat,
                            params={"bytes": bytes_per},
                            generator=generator_doc(rps=chunks / completion_s, connections=connections, mode="echo",
                                                    duration_s=completion_s,
                                                    latency_us={int(completion_s * 1e6 / 2): chunks}, echo=echo),
                            monitor=monitor_doc(cpu_pct=70, rss_bytes=20 << 20), error_rate=0.0)
    _record(store, run_id, contestant="alpha", scenario="hello", connections=10, repeat=3,
            generator=generator_doc(rps=1000.0, connections=10, latency_us={5000: 1000}),
            monitor=monitor_doc(cpu_pct=10, rss_bytes=30 << 20), error_rate=0.0, flags=("noisy",),
            discarded=DISCARDED_REASON)
    store.set_run_status(run_id, "complete")
    return run_id


def populate_hostile_run(store: Store, text: str) -> int:
    """One run where everything a contestant, a suite or the machine supplies is `text`: the suite's name (the
    page title), a contestant's name (tables, chart titles and legends) and display name, a failed
    measurement's error, a skip's reason and its log (the install's stderr), the environment's hostname and a
    runtime's version. The report must show it as text and never run it."""
    environment = dict(ENVIRONMENT, hostname=text, runtimes={"python3": text})
    run_id = store.create_run(suite_name=text, suite_path=None, suite={"name": text, "repeat": 2},
                              args={"argv": ["netarena", "run", text]}, backend="real", server_cpus=[0],
                              generator_cpus=[1], environment=environment, planned=3, netarena_version="0.1.0",
                              git_sha="abc123", orchestrator_start_time=None)
    store.record_contestant(run_id, text, {"name": text, **MANIFEST, "display_name": text}, None, "ready")
    store.record_skip(run_id, "other", text, detail=text)
    for repeat in range(2):
        _record(store, run_id, contestant=text, scenario="hello", connections=10, repeat=repeat,
                generator=generator_doc(rps=1000 + repeat, connections=10, latency_us={500: 99, 900: 1},
                                        errors={"status": 20}),
                monitor=monitor_doc(cpu_pct=50, rss_bytes=10 << 20), error_rate=20 / (2 * (1000 + repeat) + 20))
    _record(store, run_id, contestant=text, scenario="hello", connections=10, repeat=2, status="failed",
            failure_kind="crashed", error=text)
    store.set_run_status(run_id, "complete")
    return run_id
