"""The mock backend: deterministic, instant results shaped like netarena-load's document, starting nothing, for
fast CLI tests (hyperfine's MockExecutor); selected with NETARENA_BACKEND=mock or the hidden --backend flag."""

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
        generator = {
            "schema_version": 1, "tool": {"name": "netarena-load (mock backend)", "version": "0"},
            "mode": "http" if registry.kind(req.scenario).is_http else "echo", "command_line": [],
            "config": {"connections": req.level.connections, "duration_s": req.duration_s},
            "started_at": record["started_at"], "ended_at": record["started_at"], "duration_s": req.duration_s,
            "warmup_s": req.warmup_s,
            "totals": {"requests": requests, "responses": requests, "bytes_sent": 0, "bytes_received": 0,
                       "connections_opened": req.level.connections, "errors": 0},
            "throughput": {"requests_per_s": rps, "bytes_per_s": 0.0},
            "latency": {"count": hist.get_total_count(), "p50_us": hist.get_value_at_percentile(50),
                        "p99_us": hist.get_value_at_percentile(99), "max_us": hist.get_max_value(),
                        "histogram": {"encoding": "hdrhistogram-v2-deflate-base64", "unit": "us",
                                      "lowest_trackable": 1, "highest_trackable": 3_600_000_000,
                                      "significant_digits": 3, "data": hist.encode().decode()}},
            "timeline": [], "errors": {"total": 0, "by_class": {}, "status_codes": {}, "examples": []},
            "generator": {"threads": 1, "cpus": req.generator_cpus, "busy_fraction": 0.5,
                          "busy_fraction_max": 0.5, "saturated": False},
            "generator_saturated": False, "echo": None,  # not a scenario: the generator result's field
        }
        record.update({"status": STATUS_OK, "generator": generator, "generator_argv": ["(mock)"],
                       "flags": stats.measurement_flags(generator), "ended_at": now_iso()})
        record.update(_result_fields(generator))
        return record
