"""Plain records of one run, read from the results store (never from a live run).

``load_report`` turns the store's rows into a ``Report``: the run and its environment, every
measurement, and one ``Group`` per (contestant, scenario, level) holding the figures across repeats.
The figures themselves come from ``netarena.stats.summarize`` (median with min and max, CV, percentiles
of the merged HdrHistograms), so the HTML page, the terminal and ``netarena run``'s own summary agree;
this module adds what the renderers need beyond it: the measurement ids behind every figure, badges,
errors by class, the percentile curve, per-repeat p99 (for compare), echo completion times and the
client-delay probe.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import stats
from ..store import DB_NAME, SCHEMA_VERSION, row_to_dict

# Badge codes: short for the terminal, with a label and an explanation for the page's legend.
BADGES: dict[str, tuple[str, str]] = {
    "GEN": ("generator-bound", "netarena-load's threads were busy >= 90% of the time: the figure is a lower bound "
                               "on the server, not a measurement of it"),
    "CV": ("CV > 5%", f"the repeats' coefficient of variation of throughput exceeds "
                      f"{stats.CV_FLAG_THRESHOLD:.0%}: the median is unstable"),
    "ERR": ("errors > 1%", f"errors above {stats.ERROR_RATE_FLAG_THRESHOLD:.0%} of requests in at least one repeat"),
    "VERIFY": ("verification failed", "a response did not match the scenario (before the load, or sampled during "
                                      "it as verification_mismatch errors)"),
    "CRASH": ("crashed", "the contestant exited while under load in at least one repeat"),
    "HUNG": ("hung", "the contestant stopped answering under load in at least one repeat: its requests timed out "
                     "and a fresh request after the load got no answer either"),
    "FAIL": ("failed repeats", "at least one repeat produced no result (see Skipped and failed)"),
    "STOP": ("unclean stop", "the contestant needed SIGKILL to stop or left processes behind"),
    "RATE": ("rate not met", "open loop: fewer than 99% of the scheduled requests started, some were dropped, or "
                             "the send lag p99 exceeded 1 ms; the load was not what the level says"),
    "NOANS": ("connections unanswered", "in at least one repeat a sizeable share of the connections (netarena-load's "
                                        "NO_ANSWER_FLAG_FRACTION, 5%) got no answer at all during the measured phase: "
                                        "throughput and error rate describe the connections the server served; their "
                                        "waits are in the percentiles as censored lower bounds"),
    "WARM": ("longer warm-up", "the contestant's manifest (start.warmup_min_s) asks for a longer warm-up than the "
                               "suite's, for JIT compilation; its figures come after that warm-up (each measurement "
                               "shows its own)"),
}

# failure_kind (store.py / backend.py) -> badge; any other kind counts as a plain failed repeat.
_FAILURE_BADGES = {"verify_failed": "VERIFY", "crashed": "CRASH", "hung": "HUNG"}


class ReportError(Exception):
    """The store or the run asked for cannot be read; the message says which and what to do."""


@dataclass
class RunInfo:
    id: int
    suite_name: str
    status: str
    started_at: str
    ended_at: str | None
    netarena_version: str
    git_sha: str | None
    backend: str
    server_cpus: list[int]
    generator_cpus: list[int]
    planned_measurements: int
    environment: dict
    suite: dict
    args: dict


@dataclass
class Measurement:
    id: int
    contestant: str
    scenario: str
    level_key: str
    connections: int
    workers: int
    repeat_index: int
    status: str
    failure_kind: str | None
    flags: list[str]
    error: str | None
    requests_per_s: float | None
    error_rate: float | None
    latency_p99_us: float | None
    generator_argv: list[str] | None
    generator: dict | None
    monitor: dict | None
    started_at: str


@dataclass
class Group:
    """One (contestant, scenario, level) across its repeats; every figure names the measurements it came from."""

    contestant: str
    scenario: str
    level_key: str
    connections: int
    workers: int
    measurement_ids: list[int]          # every attempt, failed ones included
    ok_ids: list[int]                   # the repeats behind the figures
    repeats_ok: int
    repeats_failed: int
    requests_per_s_median: float | None
    requests_per_s_min: float | None
    requests_per_s_max: float | None
    cv: float | None
    latency_p50_us: float | None        # from the merged histogram of the ok repeats
    latency_p99_us: float | None
    latency_p99_9_us: float | None
    latency_max_us: float | None
    p99_us_by_repeat: list[float]       # each ok repeat's own p99, for compare's spreads
    error_rate_median: float | None
    unfinished: int                     # requests in flight at the end, summed over the ok repeats (not errors)
    latency_censored: int               # of the merged histogram's entries, lower bounds (the unfinished' waits)
    unanswered_connections: int         # connections without any answer in the measured phase, summed likewise
    errors_by_class: dict[str, int]     # summed over every repeat that has a generator result
    server_cpu_pct_median: float | None  # percent of one core, like top
    server_cpu_user_s_median: float | None
    server_cpu_sys_s_median: float | None
    server_rss_peak_bytes: int | None
    flags: list[str]
    badges: list[str]                   # codes of BADGES
    failures: list[str]
    percentile_curve: list[tuple[float, float]]  # (percentile, latency_us) of the merged histogram
    median_measurement_id: int | None   # the ok repeat whose throughput is the median (lower middle if even)
    echo_completion_s: list[float] = field(default_factory=list)   # fixed-bytes echo floods, per ok repeat
    echo_bytes_per_connection: int | None = None
    probe: dict | None = None           # merged client-delay probe: attempts, errors, p50/p99/max


@dataclass
class Skip:
    contestant: str
    scenario: str | None
    level_key: str | None
    reason: str
    detail: str | None = None           # e.g. the end of a failed install's log


@dataclass
class Report:
    store_path: str
    run: RunInfo
    contestants: list[dict]             # name, display_name, framework, version, runtime, model, status, install
    measurements: list[Measurement]
    groups: list[Group]
    skipped: list[Skip]

    def scenarios(self) -> list[str]:
        seen: list[str] = []
        for g in self.groups:
            if g.scenario not in seen:
                seen.append(g.scenario)
        return seen

    def groups_for(self, scenario: str) -> list[Group]:
        """A scenario's groups by level (fewest connections first), each level ranked by median throughput."""
        return sorted((g for g in self.groups if g.scenario == scenario), key=rank_key)

    def measurement(self, measurement_id: int) -> Measurement | None:
        for m in self.measurements:
            if m.id == measurement_id:
                return m
        return None


def rank_key(g: Group) -> tuple:
    rps = g.requests_per_s_median
    return (g.connections, g.workers, g.level_key, rps is None, -(rps or 0.0), g.contestant)


def ranks(groups: list[Group]) -> dict[tuple, int]:
    """Rank (1 = highest median throughput) within each level; groups without a result get no rank."""
    out: dict[tuple, int] = {}
    counters: dict[tuple, int] = {}
    for g in sorted(groups, key=rank_key):
        if g.requests_per_s_median is None:
            continue
        level = (g.scenario, g.level_key)
        counters[level] = counters.get(level, 0) + 1
        out[(g.contestant, g.scenario, g.level_key)] = counters[level]
    return out


# ----------------------------------------------------------------------------- reading the store


def open_store(source) -> tuple[sqlite3.Connection, str]:
    """A read-only connection to a store given as a Store, a connection, a results folder or a .sqlite file."""
    if isinstance(source, sqlite3.Connection):
        return source, "(connection)"
    if hasattr(source, "db") and isinstance(source.db, sqlite3.Connection):  # netarena.store.Store
        return source.db, str(source.path)
    path = Path(source)
    if path.suffix != ".sqlite":  # a results folder, as --results gives it
        path = path / DB_NAME
    if not path.is_file():
        raise ReportError(f"no results store at {path} (run `netarena run` first, or pass --results DIR)")
    # Read-only: a report must never change the store it reads (or create one by mistake).
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise ReportError(f"{path} is not a netarena results store: {exc}") from None
    if row is None or int(row[0]) != SCHEMA_VERSION:
        db.close()
        raise ReportError(f"{path}: store schema version {row[0] if row else 'missing'}; this netarena reads "
                          f"{SCHEMA_VERSION}")
    return db, str(path)


def run_ids(db: sqlite3.Connection) -> list[int]:
    return [r[0] for r in db.execute("SELECT id FROM runs ORDER BY id").fetchall()]


def resolve_run(db: sqlite3.Connection, run: str | int | None, where: str) -> int:
    """RUN as given on the command line (an id, 'latest' or None) -> an existing run id."""
    known = run_ids(db)
    if not known:
        raise ReportError(f"no runs in {where} (run `netarena run` first)")
    if run is None or str(run) == "latest":
        return known[-1]
    try:
        run_id = int(run)
    except (TypeError, ValueError):
        raise ReportError(f"RUN {run!r} is not a run id: give a number or 'latest' "
                          f"(runs: {', '.join(map(str, known))})") from None
    if run_id not in known:
        raise ReportError(f"no run {run_id} in {where} (runs: {', '.join(map(str, known))})")
    return run_id


def _rows(db: sqlite3.Connection, sql: str, args: tuple) -> list[dict]:
    cur = db.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [row_to_dict(_Row(names, r)) for r in cur.fetchall()]


class _Row:
    """Just enough of sqlite3.Row for store.row_to_dict, whatever row_factory the connection has."""

    def __init__(self, names: list[str], values):
        self._names, self._values = names, tuple(values)

    def keys(self):
        return self._names

    def __getitem__(self, key):
        return self._values[self._names.index(key)]


def load_report(source, run_id: int) -> Report:
    db, where = open_store(source)
    runs = _rows(db, "SELECT * FROM runs WHERE id=?", (run_id,))
    if not runs:
        raise ReportError(f"no run {run_id} in {where} (runs: {', '.join(map(str, run_ids(db))) or 'none'})")
    r = runs[0]
    run = RunInfo(id=r["id"], suite_name=r["suite_name"], status=r["status"], started_at=r["started_at"],
                  ended_at=r["ended_at"], netarena_version=r["netarena_version"], git_sha=r["git_sha"],
                  backend=r["backend"], server_cpus=r.get("server_cpus") or [], generator_cpus=r.get("generator_cpus")
                  or [], planned_measurements=r["planned_measurements"], environment=r.get("environment") or {},
                  suite=r.get("suite") or {}, args=r.get("args") or {})
    rows = _rows(db, "SELECT * FROM measurements WHERE run_id=? ORDER BY id", (run_id,))
    measurements = [Measurement(
        id=m["id"], contestant=m["contestant"], scenario=m["scenario"], level_key=m["level_key"],
        connections=m["connections"], workers=m["workers"], repeat_index=m["repeat_index"], status=m["status"],
        failure_kind=m["failure_kind"], flags=m.get("flags") or [], error=m["error"],
        requests_per_s=m["requests_per_s"], error_rate=m["error_rate"], latency_p99_us=m["latency_p99_us"],
        generator_argv=m.get("generator_argv"), generator=m.get("generator"), monitor=m.get("monitor"),
        started_at=m["started_at"]) for m in rows]
    contestants = []
    for c in _rows(db, "SELECT * FROM contestants WHERE run_id=? ORDER BY name", (run_id,)):
        manifest = c.get("manifest") or {}
        contestants.append({"name": c["name"], "display_name": manifest.get("display_name", c["name"]),
                            "language": manifest.get("language"), "runtime": manifest.get("runtime"),
                            "framework": manifest.get("framework"),
                            "framework_version": manifest.get("framework_version"),
                            "concurrency_model": manifest.get("concurrency_model"), "status": c["status"],
                            "install": c.get("install")})
    skipped = [Skip(s["contestant"], s["scenario"], s["level_key"], s["reason"], s.get("detail"))
               for s in _rows(db, "SELECT * FROM skipped WHERE run_id=? ORDER BY id", (run_id,))]
    return Report(store_path=where, run=run, contestants=contestants, measurements=measurements,
                  groups=build_groups(rows), skipped=skipped)


# ----------------------------------------------------------------------------- groups


def build_groups(rows: list[dict]) -> list[Group]:
    """rows: measurement dicts as store.row_to_dict returns them."""
    by_key: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["status"] != "interrupted":  # redone by --resume; never a result
            by_key.setdefault((row["contestant"], row["scenario"], row["level_key"]), []).append(row)
    groups = []
    for summary in stats.summarize(rows):
        members = sorted(by_key[(summary.contestant, summary.scenario, summary.level_key)],
                         key=lambda m: m["repeat_index"])
        ok = [m for m in members if m["status"] == "ok" and m.get("generator")]
        with_generator = [m for m in members if m.get("generator")]
        errors_by_class: dict[str, int] = {}
        for m in with_generator:
            for name, count in ((m["generator"].get("errors") or {}).get("by_class") or {}).items():
                errors_by_class[name] = errors_by_class.get(name, 0) + int(count or 0)
        servers = [((m.get("monitor") or {}).get("summary") or {}).get("server") or {} for m in ok]
        echo = [m["generator"].get("echo") or {} for m in ok]
        groups.append(Group(
            contestant=summary.contestant, scenario=summary.scenario, level_key=summary.level_key,
            connections=members[0]["connections"], workers=members[0]["workers"],
            measurement_ids=[m["id"] for m in members], ok_ids=[m["id"] for m in ok],
            repeats_ok=summary.repeats_ok, repeats_failed=summary.repeats_failed,
            requests_per_s_median=summary.requests_per_s_median, requests_per_s_min=summary.requests_per_s_min,
            requests_per_s_max=summary.requests_per_s_max, cv=summary.cv,
            latency_p50_us=summary.latency_p50_us, latency_p99_us=summary.latency_p99_us,
            latency_p99_9_us=summary.latency_p99_9_us, latency_max_us=summary.latency_max_us,
            p99_us_by_repeat=[p for p in (_repeat_p99(m["generator"]) for m in ok) if p is not None],
            error_rate_median=summary.error_rate_median, unfinished=summary.unfinished,
            latency_censored=summary.latency_censored, unanswered_connections=summary.unanswered_connections,
            errors_by_class=errors_by_class,
            server_cpu_pct_median=_median([s.get("cpu_pct_mean") for s in servers]),
            server_cpu_user_s_median=_median([s.get("cpu_user_s") for s in servers]),
            server_cpu_sys_s_median=_median([s.get("cpu_sys_s") for s in servers]),
            server_rss_peak_bytes=summary.server_rss_peak_bytes,
            flags=summary.flags, badges=badges_for(summary.flags, members, errors_by_class),
            failures=summary.failures,
            percentile_curve=percentile_curve(stats.merge_histograms([m["generator"] for m in ok])),
            median_measurement_id=_median_id(ok),
            echo_completion_s=[e["completion_time_s"] for e in echo if e.get("completion_time_s") is not None],
            echo_bytes_per_connection=next((e.get("bytes_per_connection") for e in echo if e), None),
            probe=_probe([e.get("probe") for e in echo if e.get("probe")]),
        ))
    return groups


def badges_for(flags: list[str], members: list[dict], errors_by_class: dict[str, int]) -> list[str]:
    out: list[str] = []
    if stats.FLAG_GENERATOR_SATURATED in flags:
        out.append("GEN")
    if stats.FLAG_HIGH_CV in flags:
        out.append("CV")
    if stats.FLAG_ERROR_RATE in flags:
        out.append("ERR")
    kinds = {m.get("failure_kind") for m in members if m["status"] == "failed"}
    if "verify_failed" in kinds or errors_by_class.get("verification_mismatch"):
        out.append("VERIFY")
    if "crashed" in kinds:
        out.append("CRASH")
    if "hung" in kinds:
        out.append("HUNG")
    if kinds - set(_FAILURE_BADGES):
        out.append("FAIL")
    if stats.FLAG_LEFTOVER in flags or stats.FLAG_STOP_KILLED in flags:
        out.append("STOP")
    if stats.FLAG_RATE_NOT_MET in flags:
        out.append("RATE")
    if stats.FLAG_NO_ANSWER in flags:
        out.append("NOANS")
    if stats.FLAG_WARMUP_RAISED in flags:
        out.append("WARM")
    return out


def _repeat_p99(generator: dict) -> float | None:
    merged = stats.merge_histograms([generator])
    if merged is not None and merged.get_total_count():
        return float(merged.get_value_at_percentile(99))
    value = (generator.get("latency") or {}).get("p99_us")
    return float(value) if value is not None else None


def _median(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _median_id(ok: list[dict]) -> int | None:
    if not ok:
        return None
    ordered = sorted(ok, key=lambda m: m["generator"]["throughput"]["requests_per_s"])
    return ordered[(len(ordered) - 1) // 2]["id"]


# Percentiles drawn the HdrHistogram way: x = 1 / (1 - p), ten points per decade, up to the resolution
# the sample count supports (with n samples, percentiles beyond 1 - 1/n are all the maximum).
_POINTS_PER_DECADE = 10


def percentile_curve(hist) -> list[tuple[float, float]]:
    if hist is None or not hist.get_total_count():
        return []
    count = hist.get_total_count()
    decades = max(1.0, math.log10(count))
    targets = [round(100.0 * (1.0 - 10.0 ** (-i / _POINTS_PER_DECADE)), 6)
               for i in range(int(decades * _POINTS_PER_DECADE) + 1)]
    # One pass over the counts for every percentile (get_value_at_percentile rescans them each call).
    values = hist.get_percentile_to_value_dict(targets)
    curve = [(p, float(values[p])) for p in targets]
    curve.append((100.0, float(hist.get_max_value())))
    return curve


def _probe(probes: list[dict]) -> dict | None:
    if not probes:
        return None
    merged = stats.merge_histograms(probes, key="latency")
    out: dict[str, Any] = {"attempts": sum(int(p.get("attempts") or 0) for p in probes),
                           "completed": sum(int(p.get("completed") or 0) for p in probes),
                           "errors": sum(int(p.get("errors") or 0) for p in probes),
                           "interval_s": probes[0].get("interval_s")}
    if merged is not None and merged.get_total_count():
        out.update(p50_us=float(merged.get_value_at_percentile(50)), p99_us=float(merged.get_value_at_percentile(99)),
                   max_us=float(merged.get_max_value()))
    else:
        out.update(p50_us=None, p99_us=None, max_us=None)
    return out


def to_jsonable(value) -> Any:
    """Dataclasses and tuples as JSON-ready structures (for debugging and the tests)."""
    from dataclasses import asdict, is_dataclass
    if is_dataclass(value):
        return to_jsonable(asdict(value))
    return json.loads(json.dumps(value, default=str))
