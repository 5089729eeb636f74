"""Renderers from the store to bytes: pure functions of what is stored (never of a live run)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from . import stats
from .profile import PROFILED
from .reference import ratio, reference_of
from .store import Store, row_to_dict

CSV_COLUMNS = ["run_id", "measurement_id", "contestant", "scenario", "level_key", "connections", "workers",
               "repeat_index", "status", "failure_kind", "requests_per_s", "error_rate", "latency_p50_us",
               "latency_p99_us", "errors_total", "unfinished", "no_answer_connections", "generator_busy_fraction", "generator_busy_fraction_max", "generator_saturated",
               "server_cpu_user_s", "server_cpu_sys_s", "server_rss_peak_bytes",
               # stats.cost_per_unit: per request, or per MiB echoed (cost_unit), over the measured phase
               "cost_unit", "server_cpu_us_per_unit", "server_cpu_user_us_per_unit", "server_cpu_sys_us_per_unit",
               "server_ctx_voluntary_per_unit", "server_ctx_involuntary_per_unit", "generator_cpu_us_per_unit",
               # stats.contention over the measured phase, and why the measurement is out of the figures (if it is)
               "steal_pct", "server_cpus_others_pct", "generator_cpus_others_pct", "server_wait_share",
               "generator_wait_share", "noisy", "discarded",
               # the figures relative to the run's reference pair (netarena.reference)
               "requests_per_s_vs_reference", "server_cpu_per_req_vs_reference",
               "flags", "error", "started_at", "ended_at"]
# CSV column -> stats.cost_per_unit key
_COST_COLUMNS = {"server_cpu_us_per_unit": "server_cpu_us", "server_cpu_user_us_per_unit": "server_cpu_user_us",
                 "server_cpu_sys_us_per_unit": "server_cpu_sys_us",
                 "server_ctx_voluntary_per_unit": "server_ctx_voluntary",
                 "server_ctx_involuntary_per_unit": "server_ctx_involuntary",
                 "generator_cpu_us_per_unit": "generator_cpu_us"}


def run_summary(store: Store, run_id: int) -> dict:
    """The run, its per-(contestant, scenario, level) statistics and its skips; no raw series."""
    run = row_to_dict(store.run(run_id))
    rows = [row_to_dict(r) for r in store.measurements(run_id)]
    groups = stats.summarize(rows)
    statuses = [r["status"] for r in rows]
    discarded = [r for r in rows if r.get("discarded") and r["discarded"] != PROFILED]
    return {
        "store": str(store.path),
        "run": {k: run[k] for k in ("id", "suite_name", "suite_path", "status", "started_at", "ended_at",
                                    "netarena_version", "git_sha", "backend", "server_cpus", "generator_cpus")},
        "measurements": {"planned": run["planned_measurements"], "ok": statuses.count("ok"),
                         "failed": statuses.count("failed"), "interrupted": statuses.count("interrupted"),
                         "threshold_failed": sum(1 for r in rows if stats.FLAG_THRESHOLD_FAILED in (r["flags"] or [])),
                         # kept out of every figure (counted in ok/failed above too), each with why; the
                         # profiled repeats apart (out of the figures by design, stats.GroupSummary)
                         "discarded": len(discarded),
                         "discarded_reasons": [f"{r['contestant']} {r['scenario']} {r['level_key']} "
                                               f"#{r['repeat_index'] + 1}: {r['discarded']}" for r in discarded],
                         "profiled": [r["id"] for r in rows if r.get("discarded") == PROFILED]},
        "groups": [g.to_dict() for g in groups],
        "skipped": [{k: s[k] for k in ("contestant", "scenario", "level_key", "reason")} for s in store.skipped(run_id)],
    }


def export_json(store: Store, run_id: int) -> str:
    """Everything stored about the run: run row (environment included), contestants, skips, measurements
    (generator JSON with histograms and monitor series) and the summary statistics."""
    run = row_to_dict(store.run(run_id))
    contestants = [row_to_dict(r) for r in store.db.execute(
        "SELECT * FROM contestants WHERE run_id=? ORDER BY name", (run_id,)).fetchall()]
    document = {
        "netarena_export_version": 1,
        "run": run,
        "contestants": contestants,
        "skipped": [dict(s) for s in store.skipped(run_id)],
        "measurements": [row_to_dict(r) for r in store.measurements(run_id)],
        "summary": run_summary(store, run_id)["groups"],
    }
    return json.dumps(document, indent=2, default=str) + "\n"


def export_csv(store: Store, run_id: int) -> str:
    """One row per measurement; the *_vs_reference columns relative to the run's reference pair (empty when the
    run has no calibration)."""
    reference = reference_of(row_to_dict(store.run(run_id)).get("environment")) or {}
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in store.measurements(run_id):
        m = row_to_dict(row)
        gen = m.get("generator") or {}
        server = ((m.get("monitor") or {}).get("summary") or {}).get("server") or {}
        cost = stats.measurement_cost(m) or {}
        found = stats.measurement_contention(m) if m.get("generator") else {}
        writer.writerow({
            "run_id": run_id, "measurement_id": m["id"], "contestant": m["contestant"], "scenario": m["scenario"],
            "level_key": m["level_key"], "connections": m["connections"], "workers": m["workers"],
            "repeat_index": m["repeat_index"], "status": m["status"], "failure_kind": m["failure_kind"],
            "requests_per_s": m["requests_per_s"], "error_rate": m["error_rate"],
            "latency_p50_us": m["latency_p50_us"], "latency_p99_us": m["latency_p99_us"],
            "errors_total": (gen.get("errors") or {}).get("total"),
            "unfinished": (gen.get("totals") or {}).get("unfinished"),
            "no_answer_connections": (gen.get("no_answer") or {}).get("connections"),
            "generator_busy_fraction": (gen.get("generator") or {}).get("busy_fraction"),
            "generator_busy_fraction_max": (gen.get("generator") or {}).get("busy_fraction_max"),
            "generator_saturated": gen.get("generator_saturated"),
            "server_cpu_user_s": server.get("cpu_user_s"), "server_cpu_sys_s": server.get("cpu_sys_s"),
            "server_rss_peak_bytes": server.get("rss_peak_bytes"), "cost_unit": cost.get("unit"),
            **{column: cost.get(key) for column, key in _COST_COLUMNS.items()},
            "steal_pct": found.get("steal_pct"), "server_cpus_others_pct": found.get("server_cpus_others_pct"),
            "generator_cpus_others_pct": found.get("generator_cpus_others_pct"),
            "server_wait_share": found.get("server_wait_share"),
            "generator_wait_share": found.get("generator_wait_share"),
            "noisy": found.get("noisy") or stats.noisy_reason(found) if found else None,
            "requests_per_s_vs_reference": ratio(m["requests_per_s"], reference.get("rps")),
            "server_cpu_per_req_vs_reference": ratio(cost.get("server_cpu_us") if cost.get("unit") == "request"
                                                     else None, reference.get("server_cpu_us_per_req")),
            "discarded": m.get("discarded"), "flags": " ".join(m.get("flags") or []),
            "error": m["error"], "started_at": m["started_at"], "ended_at": m["ended_at"],
        })
    return out.getvalue()


def write_folded(files: dict[str, str], folder: Path) -> list[Path]:
    """Write export --folded's files (report.profiles.folded_files) into folder, made if missing. All or nothing:
    every file goes beside its name first and is renamed into place only when all are written, so a failure
    (a full disk, a folder not writable) leaves none of them, and no half-made folder."""
    made = not folder.exists()
    temporary: list[tuple[Path, Path]] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            final = folder / name
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            temporary.append((tmp, final))
            # The stored text exactly: no newline translation, so a file reads back byte for byte.
            tmp.write_bytes(text.encode("utf-8"))
        for tmp, final in temporary:
            os.replace(tmp, final)
    except OSError:
        for tmp, _ in temporary:
            tmp.unlink(missing_ok=True)
        if made and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise
    return [final for _, final in temporary]
