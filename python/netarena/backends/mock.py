"""The mock backend: deterministic, instant results in netarena-load's document (complete: the generator reads
them back, `netarena-load merge`, and docs/schema/netarena-load.schema.json validates them), starting nothing,
for fast CLI tests (hyperfine's MockExecutor); selected with NETARENA_BACKEND=mock or the hidden --backend flag."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hdrh.histogram import HdrHistogram

from .. import stats
from ..contestants import Contestant
from ..scenarios import registry
from ..store import STATUS_OK, now_iso
from .base import MeasureRequest, _result_fields


class MockBackend:
    """Deterministic, instant results shaped like netarena-load's JSON; starts nothing."""

    name = "mock"
    makes_run_certificate = True  # a TLS level's server is started with the run's certificate (Runner)

    def __init__(self, generator: Path | None = None, **_):
        self.generator = generator

    concurrent_installs = True

    def prepare(self, contestant: Contestant, allow_apt: bool, say, parts=()) -> dict:
        return {"mock": True}

    def measure(self, req: MeasureRequest, progress=lambda text: None) -> dict:
        record = req.base_record()
        record["started_at"] = now_iso()
        seed = int(hashlib.sha256(f"{req.contestant.name}/{req.scenario}/{req.level.key}".encode()).hexdigest()[:8], 16)
        base_rps = 1000 + seed % 9000
        # Repeats differ by -2%, 0, +2%: a stable contestant (CV below the flag threshold).
        rps = base_rps * (1 + 0.02 * ((req.repeat_index % 3) - 1))
        requests = int(rps * req.duration_s)
        hist = HdrHistogram(1, 3_600_000_000, 3)
        latency_us = max(1, int(req.level.connections / rps * 1e6))
        hist.record_value(latency_us, requests)
        hist.record_value(latency_us * 4, max(1, requests // 100))
        generator = _document(req, requests, rps, hist, record["started_at"])
        record.update({"status": STATUS_OK, "generator": generator, "generator_argv": ["(mock)"],
                       "flags": stats.measurement_flags(generator), "ended_at": now_iso()})
        record.update(_result_fields(generator))
        return record


def _latency(hist: HdrHistogram) -> dict:
    return {"count": hist.get_total_count(), "min_us": hist.get_min_value(),
            **{f"p{name}_us": hist.get_value_at_percentile(pct) for name, pct in _PERCENTILES},
            "max_us": hist.get_max_value(), "mean_us": hist.get_mean_value(), "stdev_us": hist.get_stddev(),
            "histogram": {"encoding": "hdrhistogram-v2-deflate-base64", "unit": "us", "lowest_trackable": 1,
                          "highest_trackable": 3_600_000_000, "significant_digits": 3,
                          "data": hist.encode().decode()}}


# errors.by_class: every class of netarena-load's, zero or not (docs/load-generator.md).
_ERROR_CLASSES = ("connect_refused", "connect_timeout", "connect_error", "address_unavailable", "too_many_open_files",
                  "reset", "closed_early", "read_error", "write_error", "timeout", "parse_error", "status",
                  "verification_mismatch", "tls_handshake", "tls_certificate", "h2_rst_stream", "h2_goaway",
                  "h2_protocol")
_PERCENTILES = (("50", 50), ("75", 75), ("90", 90), ("99", 99), ("99_9", 99.9), ("99_99", 99.99))


def _document(req: MeasureRequest, requests: int, rps: float, hist: HdrHistogram, started_at: str) -> dict:
    """A complete netarena-load document of one closed-loop (or echo) run with these figures: one interval as
    long as the run, no errors, no timeline, nothing the figures do not say."""
    echo = not registry.kind(req.scenario).is_http
    latency = _latency(hist)
    connections = req.level.connections
    config = {
        "target": "127.0.0.1:0" if echo else "http://127.0.0.1:0/", "connections": connections, "threads": 1,
        "cpus": list(req.generator_cpus), "duration_s": req.duration_s, "requests": None, "warmup_s": req.warmup_s,
        "timeout_s": req.timeout_s, "close": False, "pipeline": 1, "method": None if echo else "GET",
        "headers": [], "body_bytes": 0, "expect_status": None, "expect_body_size": None,
        "expect_body_sha256": None, "verify_learn": False, "source_ips": [], "interval_s": req.duration_s,
        "hlog": None, "rate": None, "conn_rate": None, "requests_per_conn": None, "arrival": None, "seed": None,
        "steps": None, "step_duration_s": None, "conns_per_step": None, "find_max": False, "slo": None,
        "max_errors": None, "urls_file": None, "url_count": 0 if echo else 1, "url_order": None,
        "prepare": False, "bytes_per_connection": None, "chunk_bytes": 32768 if echo else None,
        "probe_interval_s": None, "io_backend": "epoll", "coalesce_us": 0, "coalesce": "off",
        "io_requested": "epoll", "io_reason": "mock backend: nothing ran",
    }
    return {
        "schema_version": 1, "tool": {"name": "netarena-load", "version": "0.0.0"},
        "mode": "echo" if echo else "http", "command_line": ["netarena-load (mock backend)"], "config": config,
        "started_at": started_at, "ended_at": started_at, "duration_s": req.duration_s, "warmup_s": req.warmup_s,
        "totals": {"requests": requests, "responses": requests, "bytes_sent": 0, "bytes_received": 0,
                   "connections_opened": connections, "errors": 0, "unfinished": 0, "warmup_responses": 0},
        "throughput": {"requests_per_s": rps, "bytes_per_s": 0.0},
        "latency": dict(latency, censored=0),
        "timeline": [], "errors": {"total": 0, "by_class": dict.fromkeys(_ERROR_CLASSES, 0), "status_codes": {},
                                    "examples": []},
        "generator": {"threads": 1, "cpus": list(req.generator_cpus), "cpu_user_s": 0.0, "cpu_sys_s": 0.0,
                      "busy_fraction": 0.5, "busy_fraction_max": 0.5, "run_delay_s": None,
                      "run_delay_fraction_max": None, "busy_counts_run_delay": False, "saturated": False,
                      "batch_wait_max_us": None, "batch_wait_share": None},
        "generator_saturated": False,
        "no_answer": {"connections": 0, "of_connections": connections, "fraction": 0.0, "flag_fraction": 0.05,
                      "flagged": False},
        # the document's echo block (netarena-load's echo mode)
        "echo": {"bytes_per_connection": None, "chunk_bytes": 32768, "connections_completed": 0,  # not a scenario
                 "completion_time_s": None, "verified_bytes": 0, "probe": None} if echo else None,
        "tls": None,  # the mock's runs are http:// or echo
        "latency_corrected": False,
        "intervals": {"interval_s": req.duration_s, "encoding": "hdrhistogram-v2-deflate-base64", "unit": "us",
                      "entries": [{"t_s": 0.0, "count": latency["count"], "p50_us": latency["p50_us"],
                                   "p99_us": latency["p99_us"], "p99_9_us": latency["p99_9_us"],
                                   "max_us": latency["max_us"], "data": latency["histogram"]["data"]}]},
        "open_loop": None, "steps": None, "find_max": None, "interrupted": False, "thresholds": [],
    }
