"""Plain records of one run, read from the results store (never from a live run).

``load_report`` turns the store's rows into a ``Report``: the run and its environment, every
measurement, and one ``Group`` per (contestant, scenario, level) holding the figures across repeats.
The figures themselves come from ``netarena.stats.summarize`` (median with min and max, CV, percentiles
of the merged HdrHistograms), so the HTML page, the terminal and ``netarena run``'s own summary agree;
this module adds what the renderers need beyond it: the measurement ids behind every figure, badges,
errors by class, the percentile curve, per-repeat p99 (for compare), echo completion times and the
client-delay probe; for open-loop levels the offered rate, the uncorrected latency and why a rate was not
met; for find-max levels the rate each repeat found; the per-interval series of the generator.

The level is kept as the structured record the store holds (``level_json``), never re-parsed from its
key: the offered rate, the series a level belongs to and the order of levels come from it.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import precision, stats
from ..profile import PROFILED
from . import fmt
from ..scenarios import Level, registry
from ..reference import ratio, reference_of
from ..store import DB_NAME, StoreError, check_store, row_to_dict, unreadable

# Badge codes: short for the terminal, with a label and an explanation for the page's legend.
BADGES: dict[str, tuple[str, str]] = {
    "GEN": ("generator-bound", "netarena-load's threads were busy >= 90% of the time: the figure is a lower bound "
                               "on the server, not a measurement of it"),
    "CV": ("CV > 5%", f"the repeats' coefficient of variation of throughput exceeds "
                      f"{stats.CV_FLAG_THRESHOLD:.0%}: the median is unstable"),
    "ERR": ("errors > 1%", f"errors above {stats.ERROR_RATE_FLAG_THRESHOLD:.0%} of requests in at least one repeat"),
    "VERIFY": ("verification failed", "a response did not match the scenario (before the load, or sampled during "
                                      "it as verification_mismatch errors), or the database queries counted over "
                                      "the load were not the ones its answered requests must make"),
    "CRASH": ("crashed", "the contestant exited while under load in at least one repeat"),
    "HUNG": ("hung", "the contestant stopped answering under load in at least one repeat: its requests timed out "
                     "and a fresh request after the load got no answer either"),
    "FAIL": ("failed repeats", "at least one repeat produced no result (see Skipped and failed)"),
    "STOP": ("unclean stop", "the contestant needed SIGKILL to stop or left processes behind"),
    "RATE": ("rate not met", "open loop: fewer than 99% of the scheduled requests started, some were dropped, or "
                             "the send lag p99 exceeded 1 ms; the load was not what the level says"),
    "THR": ("threshold failed", "at least one repeat failed a threshold (netarena run --threshold or the suite entry's "
                                "`thresholds`): the measured value is beside each verdict (see Thresholds)"),
    "NOANS": ("connections unanswered", "in at least one repeat a sizeable share of the connections (netarena-load's "
                                        "NO_ANSWER_FLAG_FRACTION, 5%) got no answer at all during the measured phase: "
                                        "throughput and error rate describe the connections the server served; their "
                                        "waits are in the percentiles as censored lower bounds"),
    "WARM": ("longer warm-up", "the contestant's manifest (start.warmup_min_s) asks for a longer warm-up than the "
                               "suite's, for JIT compilation; its figures come after that warm-up (each measurement "
                               "shows its own)"),
    "COLD": ("warm-up below the contestant's minimum", "the suite says apply_warmup_min = false (a check of "
                                                       "correctness): the warm-up was shorter than the "
                                                       "contestant's start.warmup_min_s, so a JIT may not have "
                                                       "compiled its hot paths yet; not a figure to compare"),
    "WARMUP": ("warm-up never settled", "the suite warms up until successive windows agree (warmup_until_steady); "
                                        "in at least one repeat they still did not at warmup_max_s, so the server "
                                        "may still have been warming up while measured"),
    "NOISY": ("noisy machine", f"in at least one counted repeat the machine took CPU time from the measurement: "
                               f"CPU steal above {stats.NOISY_STEAL_PCT:g}%, or other processes using more than "
                               f"{stats.NOISY_OTHERS_PCT:g}% of the server's or the generator's CPUs, and no "
                               "re-measurement was left (the suite's noisy_retries, its time_budget_s); its "
                               "throughput is the machine's as much as the server's, CPU per request still holds"),
    "PIPE": ("pipelined queries", "the contestant's database driver pipelines queries (its manifest's [database] "
                                  "pipelining): several of a connection's queries in flight at once, which a "
                                  "driver without it cannot match; compare with the others knowing it"),
    "PIPELINED": ("HTTP pipelining", "the level sends its requests pipelined (suite `pipeline`: that many on a "
                                     "connection before their answers), as TechEmpower's plaintext test does at 16; "
                                     "no browser or common HTTP client pipelines, so it shows what a server's parser "
                                     "and writes can do, not what its users see; people compare frameworks on it"),
    "UNOPT": ("unoptimized build", "the contestant was built or run unoptimized for the tests "
                                   "(NETARENA_QUICK_BUILDS: cargo's release profile at opt-level 0, no LTO; a JVM's "
                                   "JIT stopped at its first tier, -XX:TieredStopAtLevel=1; its install record says "
                                   "so): its figures are not the contestant's; compare nothing with them"),
    # On a measurement's own row only, never on a group: the group's figures come from its unprofiled repeats.
    "PROF": ("profiled", "a profiled repeat (netarena run --profile): the profiler ran during it, so it is kept out "
                         "of every figure; its throughput against its group's median is the profiling overhead "
                         "(see Profiles)"),
}

# A profiled repeat's `discarded` is netarena.profile.PROFILED: out of every figure because the profiler ran,
# which is expected, so the outputs count it apart from noisy or re-measured repeats.

# failure_kind (store.py / backends/base.py) -> badge; any other kind counts as a plain failed repeat.
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
    level: dict = field(default_factory=dict)   # the store's level_json: params, threads, pipeline, ...
    cost: dict | None = None                    # stats.cost_per_unit (as stored, else computed)
    contention: dict | None = None              # stats.contention, with "noisy": the reason or None
    discarded: str | None = None                # why it is out of every figure (noisy, re-measured), or None
    profile: dict | None = None                 # netarena.profile's document of a profiled repeat, or None


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
    level: dict = field(default_factory=dict)        # structured, as stored (level_json)
    latency_mean_us: float | None = None             # of the merged histogram
    latency_stdev_us: float | None = None
    bytes_per_s_median: float | None = None          # bytes received per second, median of the ok repeats
    requests_total: int = 0                          # successful requests summed over the ok repeats
    requests_completed_median: float | None = None   # successful requests of one repeat, median of the ok repeats
    errors_total: int = 0                            # errors summed over every repeat with a generator result
    status_codes: dict[str, int] = field(default_factory=dict)  # the "status" errors by code, summed likewise
    server_cpus: list[int] = field(default_factory=list)        # CPUs the server's processes were allowed on
    server_cpu_capacity_pct_median: float | None = None  # CPU in % of those CPUs' capacity (<= 100)
    # Open loop (rate / conn_rate levels): requests offered per second (conn_rate x requests_per_conn).
    offered_rate_per_s: float | None = None
    latency_uncorrected_p50_us: float | None = None  # from the actual send, merged over the ok repeats
    latency_uncorrected_p99_us: float | None = None
    rate_not_met_reasons: list[str] = field(default_factory=list)  # "#repeat: reason", every ok repeat's
    find_max: dict | None = None                     # find-max levels: see _find_max
    sweep: dict | None = None                        # connections_per_step sweeps: see _sweep
    # requests = N levels (weighttp -n): N, and the time each ok repeat took to get its N responses.
    requests_asked: int | None = None
    completion_s: list[float] = field(default_factory=list)
    generator_threads_asked: int | None = None       # the suite's generator_threads when it was capped

    # The generator's verdicts of each ok repeat: {measurement_id, repeat_index, expr, measured, pass, ...}.
    thresholds: list[dict] = field(default_factory=list)

    # A database behind the server (mongo): its process trees' CPU summed, % of one core, median of repeats;
    # and which side was saturated (bound_by, see saturated_side).
    database_cpu_pct_median: float | None = None
    bound_by: str | None = None

    # Cost per unit of work (stats.cost_per_unit: per request, or per MiB for echo), median of the ok repeats, and
    # the worst interference a counted repeat saw (stats.contention); see stats.GroupSummary.
    cost_unit: str | None = None
    server_cpu_us_median: float | None = None
    server_cpu_us_cv: float | None = None
    server_cpu_user_us_median: float | None = None
    server_cpu_sys_us_median: float | None = None
    server_ctx_voluntary_median: float | None = None
    server_ctx_involuntary_median: float | None = None
    generator_cpu_us_median: float | None = None
    steal_pct_max: float | None = None
    server_cpus_others_pct_max: float | None = None
    generator_cpus_others_pct_max: float | None = None
    server_wait_share_max: float | None = None
    generator_wait_share_max: float | None = None
    discarded: int = 0                  # measurements kept out of the figures (e.g. noisy, re-measured)
    discarded_reasons: list[str] = field(default_factory=list)
    profiled_ids: list[int] = field(default_factory=list)  # its profiled repeats: out of the figures, not noise
    # The figures relative to the run's reference pair (netarena.reference; None when the run has no calibration):
    # throughput, and server_cpu_us_median (HTTP, per request) divided by the reference server's.
    requests_per_s_vs_reference: float | None = None
    server_cpu_per_req_vs_reference: float | None = None
    # Warm-up until steady (suite warmup_until_steady): each ok repeat's warm-up time and whether it settled.
    warmups: list[dict] = field(default_factory=list)
    # The throughput median's interval (stats.median_interval): a 95% CI with enough repeats, else min–max.
    requests_per_s_ci_low: float | None = None
    requests_per_s_ci_high: float | None = None
    requests_per_s_ci_kind: str | None = None
    requests_per_s_ci_relative: float | None = None
    # A run with a precision target (suite `precision`): why this group's repeats stopped (STOPPED_* of
    # netarena.precision); None for a fixed number of repeats.
    stopped_because: str | None = None

    @property
    def open_loop(self) -> bool:
        return self.offered_rate_per_s is not None or self.find_max is not None or self.sweep is not None

    @property
    def series(self) -> str:
        """What stays the same along a line drawn against connections or against rate: the level without its
        connection count and its rate (e.g. "w=2,size=40"); "" when nothing else varies."""
        return Level.from_dict(self.level).series if self.level else ""


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

    def levels_for(self, scenario: str) -> list[tuple[str, list[Group]]]:
        """A scenario's levels in order, each with its groups ranked (the terminal's and Markdown's tables)."""
        levels: dict[str, list[Group]] = {}
        for g in self.groups_for(scenario):
            levels.setdefault(g.level_key, []).append(g)
        return list(levels.items())

    def measurement(self, measurement_id: int) -> Measurement | None:
        for m in self.measurements:
            if m.id == measurement_id:
                return m
        return None


def rank_value(g: Group) -> float | None:
    """What a level ranks its contestants by, smaller first: the rate found (find-max levels: the highest rate
    that held is best), the merged p99 (open-loop levels: every contestant that kept up has the same
    throughput, so how long requests waited tells them apart), else the median throughput."""
    if g.find_max is not None:
        found = g.find_max.get("found_rate_per_s_median")
        return None if found is None else -found
    if g.offered_rate_per_s is not None:
        return g.latency_p99_us if g.requests_per_s_median is not None else None
    return None if g.requests_per_s_median is None else -g.requests_per_s_median


# Said wherever an open-loop figure appears (page, terminal, Markdown): such latencies include the time a request
# waited for its turn because the server fell behind, which a closed loop never counts.
OPEN_LOOP_NOTE = "latency from the intended send time"

RANK_BASIS = {"find_max": "highest rate found that meets the objective",
              "open_loop": "p99 latency from the intended send time, lowest first",
              "closed_loop": "median throughput"}


def level_title(scenario: str, g: Group) -> str:
    """"hello · c=4,w=1,rate=100", and for open-loop levels what the reader must know to read their figures:
    the offered rate, where latency counts from, what ranks them."""
    title = f"{scenario} · {g.level_key}"
    if g.offered_rate_per_s is not None:
        title += f" · offered {fmt.rps(g.offered_rate_per_s)} req/s"
    elif g.find_max is not None:
        title += " · find-max"
    elif g.sweep is not None:
        title += " · connection-rate sweep"
    if g.open_loop:
        title += f" · {OPEN_LOOP_NOTE} · ranked by {rank_basis(g)}"
    return title


def find_max_line(g: Group) -> str:
    """One line per find-max group: the rate found, its objective, each repeat's rate and the steps' verdicts."""
    fm = g.find_max or {}
    steps = " ".join(f"{fmt.rps_short(st['rate_per_s'])}{'✓' if st['passed'] else '✗'}" for st in fm.get("steps", []))
    return (f"{g.contestant}: highest rate that holds {found_rate_text(fm, fm.get('found_rate_per_s_median'))} "
            f"({fm.get('slo')}, errors ≤ {fmt.pct(fm.get('max_errors_fraction'))}); per repeat "
            + ", ".join(fmt.rps(f) for f in fm.get("found_by_repeat", [])) + f"; steps {steps}")


def found_rate_text(fm: dict, rate: float | None) -> str:
    """A rate of a find-max search in its unit: "800 conn/s (8,000 req/s)" for a conn_rate search."""
    if rate is None:
        return "-"
    unit, per_conn = fm.get("unit", "req/s"), fm.get("requests_per_conn", 1)
    text = f"{fmt.rps(rate)} {unit}"
    return text + (f" ({fmt.rps(rate * per_conn)} req/s)" if unit == "conn/s" else "")


def rank_basis(g: Group) -> str:
    return RANK_BASIS["find_max" if g.find_max is not None else "open_loop" if g.offered_rate_per_s is not None
                      else "closed_loop"]


def level_order(g: Group) -> tuple:
    """Levels in the order a reader expects: by connections, workers, the rest of the level, then offered rate
    (numerically: as text "rate=1000" would come before "rate=250")."""
    return (g.connections, g.workers, g.series, g.offered_rate_per_s or 0.0, g.level_key)


def one_server_line(run: RunInfo) -> str | None:
    """One sentence for a run whose suite keeps one server per level (server_per = "level"), None otherwise: what
    its intervals do not hold."""
    if (run.suite or {}).get("server_per") != "level":
        return None
    return ("one server per level (the suite's server_per = \"level\"): a level's repeats ran back to back on one "
            "server, started and warmed up once, so an interval shows that process's run-to-run noise, not the "
            "differences between starts (JIT decisions, memory layout) nor the machine's drift over the run; "
            "ties are read from narrower intervals than a server per repeat gives")


def external_line(run: RunInfo) -> str | None:
    """One sentence naming the server of a `netarena run --url` run (None for a run of contestants)."""
    ext = (run.args or {}).get("external")
    if not ext:
        return None
    process = f"process {ext['pid']} ({' '.join(ext.get('process') or [])})" if ext.get("pid") else \
        "its process not monitored"
    return (f"external server {ext['url']}: started, pinned and stopped by its owner, not by netarena; {process}; "
            "its responses were verified before each measurement")


def rank_key(g: Group) -> tuple:
    value = rank_value(g)
    return (*level_order(g), value is None, value or 0.0, g.contestant)


def rank_interval(g: Group) -> stats.MedianInterval | None:
    """The interval of what ranks a group (``rank_value``), from its repeats: the rate each found (find-max),
    each repeat's p99 (open loop), each repeat's throughput (closed loop); stats.median_interval each."""
    if g.find_max is not None:
        values = [f for f in g.find_max.get("found_by_repeat", []) if f is not None]
    elif g.offered_rate_per_s is not None:
        values = g.p99_us_by_repeat
    elif g.requests_per_s_ci_low is not None:
        return stats.MedianInterval(g.requests_per_s_median, g.requests_per_s_ci_low, g.requests_per_s_ci_high,
                                    g.repeats_ok, g.requests_per_s_ci_kind, None)
    else:
        values = []
    return stats.median_interval(values)


@dataclass(frozen=True)
class Rank:
    rank: int     # 1 = best
    tied: bool    # its interval overlaps another contestant's at the level: shown with TIE_MARK

    @property
    def text(self) -> str:
        return f"{self.rank}{TIE_MARK if self.tied else ''}"


TIE_MARK = "="
TIE_RULE = ("ranked by the median; a contestant whose interval overlaps the interval of one placed above it "
            "takes the place of the best-placed one it overlaps (a chain of overlaps does not carry further: if "
            "B overlaps A and C overlaps only B, A and B are 1 and C is 2); \"=\" marks every contestant whose "
            "interval overlaps another's at the level: the data cannot tell them apart")


# The terminal's one-line form of TIE_RULE.
TIE_NOTE = (f"{TIE_MARK} = tied: its interval overlaps another's at the level (it shares the place of the best "
            "one it overlaps; docs/reports.md, Ties)")


def ranking(groups: list[Group]) -> dict[tuple, Rank]:
    """Rank within each level (TIE_RULE); groups without a result get no rank."""
    levels: dict[tuple, list[Group]] = {}
    for g in sorted(groups, key=rank_key):
        if rank_value(g) is not None:
            levels.setdefault((g.scenario, g.level_key), []).append(g)
    out: dict[tuple, Rank] = {}
    for members in levels.values():
        intervals = [rank_interval(g) for g in members]

        def overlap(i: int, j: int) -> bool:
            return intervals[i] is not None and intervals[j] is not None and intervals[i].overlaps(intervals[j])

        for i, g in enumerate(members):
            place = next((j for j in range(i) if overlap(i, j)), i) + 1
            tied = any(overlap(i, j) for j in range(len(members)) if j != i)
            out[(g.contestant, g.scenario, g.level_key)] = Rank(place, tied)
    return out


def ranks(groups: list[Group]) -> dict[tuple, int]:
    """The rank number of each group (``ranking`` without the tie marks), e.g. to sort by."""
    return {key: r.rank for key, r in ranking(groups).items()}


def rank_text(rank: dict[tuple, Rank], g: Group, missing: str = "–") -> str:
    """"1", "2=" (tied, TIE_RULE) or `missing` for a group without a result."""
    r = rank.get((g.contestant, g.scenario, g.level_key))
    return r.text if r else missing


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
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.DatabaseError as exc:
        raise ReportError(unreadable(path, exc).render()) from None
    try:
        if not check_store(db, path):
            raise StoreError("has no netarena tables: not a results store; use another --results directory",
                             path=path)
    except StoreError as exc:
        db.close()
        raise ReportError(exc.render()) from None
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
        started_at=m["started_at"], level=m.get("level") or {}, cost=stats.measurement_cost(m),
        contention=stats.measurement_contention(m) if m.get("generator") else None,
        discarded=m.get("discarded"), profile=m.get("profile")) for m in rows]
    contestants = []
    for c in _rows(db, "SELECT * FROM contestants WHERE run_id=? ORDER BY name", (run_id,)):
        manifest = c.get("manifest") or {}
        contestants.append({"name": c["name"], "display_name": manifest.get("display_name", c["name"]),
                            "language": manifest.get("language"), "runtime": manifest.get("runtime"),
                            "framework": manifest.get("framework"),
                            "framework_version": manifest.get("framework_version"),
                            "concurrency_model": manifest.get("concurrency_model"), "status": c["status"],
                            "database": manifest.get("database"), "install": c.get("install")})
    skipped = [Skip(s["contestant"], s["scenario"], s["level_key"], s["reason"], s.get("detail"))
               for s in _rows(db, "SELECT * FROM skipped WHERE run_id=? ORDER BY id", (run_id,))]
    groups = build_groups(rows)
    badge_pipelining(groups, contestants)
    badge_unoptimized(groups, contestants)
    apply_reference(groups, reference_of(run.environment))
    target = precision.settings(run.suite) if run.suite else None
    if target is not None:
        fraction, repeat_max, _ = target
        for g in groups:
            g.stopped_because = precision.stopped_because(g.requests_per_s_ci_relative, len(g.measurement_ids),
                                                          fraction, repeat_max, run.status == "complete")
    return Report(store_path=where, run=run, contestants=contestants, measurements=measurements,
                  groups=groups, skipped=skipped)


def apply_reference(groups: list[Group], reference: dict | None) -> None:
    """Each group's throughput and server CPU per request relative to the run's reference pair."""
    if reference is None:
        return
    for g in groups:
        g.requests_per_s_vs_reference = ratio(g.requests_per_s_median, reference["rps"])
        per_request = g.server_cpu_us_median if g.cost_unit == "request" else None
        g.server_cpu_per_req_vs_reference = ratio(per_request, reference["server_cpu_us_per_req"])


# ----------------------------------------------------------------------------- groups


def database_text(database: dict | None) -> str:
    """A contestant's [database] table as the report states it: its pool, and its pipelining when declared."""
    if not database:
        return "-"
    text = f"pool of {database['pool']} ({database.get('how', '')})" if database.get("how") else \
        f"pool of {database['pool']}"
    return text + ("; pipelines queries (PIPE)" if database.get("pipelining") else "")


def badge_pipelining(groups: list[Group], contestants: list[dict]) -> None:
    """PIPE on the groups of a database scenario whose contestant declares a pipelining driver; PIPELINED on the
    groups whose level pipelines HTTP requests (suite `pipeline` above 1)."""
    pipelining = {c["name"] for c in contestants if (c.get("database") or {}).get("pipelining")}
    for g in groups:
        if g.contestant in pipelining and registry.kind(g.scenario).service is not None and "PIPE" not in g.badges:
            g.badges.append("PIPE")
        if int(g.level.get("pipeline") or 1) > 1 and "PIPELINED" not in g.badges:
            g.badges.append("PIPELINED")


def badge_unoptimized(groups: list[Group], contestants: list[dict]) -> None:
    """UNOPT on every group of a contestant whose install record says it was built unoptimized (quick_build) or
    its JVM ran with the JIT's first tier alone (quick_jit)."""
    quick = {c["name"] for c in contestants if {"quick_build", "quick_jit"} & set(c.get("install") or {})}
    for g in groups:
        if g.contestant in quick and "UNOPT" not in g.badges:
            g.badges.append("UNOPT")


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
        # Discarded measurements (stats.summarize) stay in measurement_ids, never in the figures.
        ok = [m for m in members if m["status"] == "ok" and m.get("generator") and not m.get("discarded")]
        with_generator = [m for m in members if m.get("generator") and not m.get("discarded")]
        errors_by_class: dict[str, int] = {}
        for m in with_generator:
            for name, count in ((m["generator"].get("errors") or {}).get("by_class") or {}).items():
                errors_by_class[name] = errors_by_class.get(name, 0) + int(count or 0)
        servers = [((m.get("monitor") or {}).get("summary") or {}).get("server") or {} for m in ok]
        echo = [m["generator"].get("echo") or {} for m in ok]
        merged = stats.merge_histograms([m["generator"] for m in ok])
        level = Level.from_dict(members[0].get("level") or {"connections": members[0]["connections"]})
        server_cpus = _server_cpus(ok)
        status_codes: dict[str, int] = {}
        for m in with_generator:
            for code, count in ((m["generator"].get("errors") or {}).get("status_codes") or {}).items():
                status_codes[code] = status_codes.get(code, 0) + int(count or 0)
        group = Group(
            contestant=summary.contestant, scenario=summary.scenario, level_key=summary.level_key,
            connections=members[0]["connections"], workers=members[0]["workers"],
            measurement_ids=[m["id"] for m in members], ok_ids=[m["id"] for m in ok],
            repeats_ok=summary.repeats_ok, repeats_failed=summary.repeats_failed,
            requests_per_s_median=summary.requests_per_s_median, requests_per_s_min=summary.requests_per_s_min,
            requests_per_s_max=summary.requests_per_s_max, cv=summary.cv,
            requests_per_s_ci_low=summary.requests_per_s_ci_low, requests_per_s_ci_high=summary.requests_per_s_ci_high,
            requests_per_s_ci_kind=summary.requests_per_s_ci_kind,
            requests_per_s_ci_relative=summary.requests_per_s_ci_relative,
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
            percentile_curve=percentile_curve(merged),
            median_measurement_id=_median_id(ok),
            echo_completion_s=[e["completion_time_s"] for e in echo if e.get("completion_time_s") is not None],
            echo_bytes_per_connection=next((e.get("bytes_per_connection") for e in echo if e), None),
            probe=_probe([e.get("probe") for e in echo if e.get("probe")]),
            level=members[0].get("level") or {},
            bytes_per_s_median=_median([(m["generator"].get("throughput") or {}).get("bytes_per_s") for m in ok]),
            requests_total=sum(int((m["generator"].get("totals") or {}).get("requests") or 0) for m in ok),
            requests_completed_median=_median([(m["generator"].get("totals") or {}).get("requests") for m in ok]),
            errors_total=sum(errors_by_class.values()), status_codes=status_codes, server_cpus=server_cpus,
            server_cpu_capacity_pct_median=_median([capacity_pct(s.get("cpu_pct_mean"), server_cpus)
                                                    for s in servers]),
            offered_rate_per_s=None if level.find_max_slo else level.offered_rate_per_s,
            rate_not_met_reasons=[f"#{m['repeat_index'] + 1}: {reason}" for m in ok
                                  for reason in (m["generator"].get("open_loop") or {}).get("rate_not_met_reasons")
                                  or []],
            find_max=_find_max(ok),
            sweep=_sweep(ok),
            requests_asked=level.requests,
            completion_s=[float(m["generator"]["duration_s"]) for m in ok if level.requests is not None],
            generator_threads_asked=level.generator_threads_asked,
            thresholds=[dict(t, measurement_id=m["id"], repeat_index=m["repeat_index"]) for m in ok
                        for t in (m["generator"].get("thresholds") or [])],
            database_cpu_pct_median=_median([_database_cpu_pct(m) for m in ok]),
            bound_by=_majority([saturated_side(m.get("monitor")) for m in ok]),
            **{name: getattr(summary, name) for name in COST_FIELDS},
            warmups=[{"repeat_index": m["repeat_index"], "used_s": m["warmup"]["used_s"],
                      "settled": m["warmup"]["settled"]} for m in ok
                     if (m.get("warmup") or {}).get("mode") == "until_steady"],
        )
        if merged is not None and merged.get_total_count():
            group.latency_mean_us, group.latency_stdev_us = stats.mean_stdev(merged)
        uncorrected = stats.merge_histograms([m["generator"].get("open_loop") or {} for m in ok],
                                             key="latency_uncorrected")
        if uncorrected is not None and uncorrected.get_total_count():
            group.latency_uncorrected_p50_us = float(uncorrected.get_value_at_percentile(50))
            group.latency_uncorrected_p99_us = float(uncorrected.get_value_at_percentile(99))
        groups.append(group)
    return groups


# The stats.GroupSummary fields a Group takes as they are: cost per unit, contention, discarded measurements and
# profiled repeats.
COST_FIELDS = ("cost_unit", "server_cpu_us_median", "server_cpu_us_cv", "server_cpu_user_us_median",
               "server_cpu_sys_us_median", "server_ctx_voluntary_median", "server_ctx_involuntary_median",
               "generator_cpu_us_median", "steal_pct_max", "server_cpus_others_pct_max",
               "generator_cpus_others_pct_max", "server_wait_share_max", "generator_wait_share_max",
               "discarded", "discarded_reasons", "profiled_ids")


# A side (server, database) counts as saturated when its CPUs were at least this busy.
SATURATED_BUSY_PCT = 90.0


def _database_cpu_pct(measurement: dict) -> float | None:
    services = (((measurement.get("monitor") or {}).get("summary") or {}).get("services") or {}).values()
    values = [s["cpu_pct_mean"] for s in services if s and s.get("cpu_pct_mean") is not None]
    return round(sum(values), 2) if values else None


def saturated_side(monitor: dict | None) -> str | None:
    """"server" when the server's processes used at least SATURATED_BUSY_PCT of its CPUs; else "database"
    when the database's processes, with the generator's where they share CPUs, used that much of the
    database's CPUs and the database the larger part; else "host" when the server and the database run on the
    same CPUs (the cluster mode's server host) and together used that much of them; else None (neither: look
    at latency and errors). Only the measured processes' own CPU time counts, so another program busy on the
    same CPU does not make a side look saturated."""
    summary = (monitor or {}).get("summary") or {}
    allowed = (monitor or {}).get("cpus_allowed") or {}
    services = summary.get("services") or {}
    if not services:
        return None
    server_cpus = allowed.get("server") or []
    if server_cpus and ((summary.get("server") or {}).get("cpu_pct_mean") or 0) >= \
            SATURATED_BUSY_PCT * len(server_cpus):
        return "server"
    db_cpus = {c for cpus in (allowed.get("services") or {}).values() for c in cpus}
    database_pct = sum((s or {}).get("cpu_pct_mean") or 0 for s in services.values())
    generator_pct = (summary.get("generator") or {}).get("cpu_pct_mean") or 0
    shared = generator_pct if db_cpus & set(allowed.get("generator") or []) else 0
    if db_cpus and database_pct + shared >= SATURATED_BUSY_PCT * len(db_cpus) and database_pct > shared:
        return "database"
    # One host for both (the generators elsewhere): neither alone may fill the CPUs they split between them.
    server_pct = (summary.get("server") or {}).get("cpu_pct_mean") or 0
    if db_cpus and db_cpus == set(server_cpus) and server_pct + database_pct >= SATURATED_BUSY_PCT * len(db_cpus):
        return "host"
    return None


def database_bound_note(groups: list[Group]) -> str | None:
    """What a level's database-bound contestants (bound_by "database") mean for its ranking, one sentence for
    every output; None when none was. A database-bound figure is the database's (FerretDB here) more than the
    framework's, so those contestants' order among themselves says nothing about the frameworks."""
    bound = [g.contestant for g in groups if g.bound_by == "database"]
    if not bound:
        return None
    if len(bound) == len(groups):
        return ("database-bound: every contestant at this level was held by the database (its processes kept their "
                "CPUs busy while the servers' were not): the level measures the database, not the frameworks, and "
                "does not rank them")
    return (f"database-bound: {', '.join(bound)} ({len(bound)} of {len(groups)}) were held by the database: their "
            "figures are the database's, so their order among themselves does not rank their frameworks")


def _majority(values: list):
    """The value more than half the repeats agree on, else None."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    top = max(set(known), key=known.count)
    return top if known.count(top) * 2 > len(values) else None


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
    if stats.FLAG_THRESHOLD_FAILED in flags:
        out.append("THR")
    if stats.FLAG_NO_ANSWER in flags:
        out.append("NOANS")
    if stats.FLAG_WARMUP_RAISED in flags:
        out.append("WARM")
    if stats.FLAG_WARMUP_BELOW_MIN in flags:
        out.append("COLD")
    if stats.FLAG_WARMUP_UNSETTLED in flags:
        out.append("WARMUP")
    if stats.FLAG_NOISY in flags:
        out.append("NOISY")
    return out


def capacity_pct(cpu_pct_of_one_core: float | None, cpus: list[int]) -> float | None:
    """CPU in % of what the CPUs a process was allowed on can give (one CPU pinned: 100% = that CPU busy).

    Never above 100: the monitor reads CPU time in clock ticks (10 ms) at sample instants a little apart from
    the wall-clock ones, so a server that kept its one CPU busy can read 101%; more than the CPUs can give
    is that rounding, not work. Without a known CPU set, the figure stays in % of one core."""
    if cpu_pct_of_one_core is None:
        return None
    if not cpus:
        return cpu_pct_of_one_core
    return min(100.0, cpu_pct_of_one_core / len(cpus))


def _server_cpus(members: list[dict]) -> list[int]:
    """The CPUs the server's processes were allowed on (the monitor reads them from the kernel), union of repeats."""
    cpus: set[int] = set()
    for m in members:
        cpus.update(((m.get("monitor") or {}).get("cpus_allowed") or {}).get("server") or [])
    return sorted(cpus)


def _find_max(ok: list[dict]) -> dict | None:
    """A find-max level: the rate each repeat found (median over them), the objective, and the steps the
    median repeat measured (rate, passed, why not, and that step's own figures)."""
    searches = [(m, m["generator"].get("find_max")) for m in ok if m["generator"].get("find_max")]
    if not searches:
        return None
    found = [s.get("found_rate_per_s") for _, s in searches]
    known = sorted((f, i) for i, f in enumerate(found) if f is not None)
    median_m, median_search = searches[known[(len(known) - 1) // 2][1]] if known else searches[0]
    documents = median_m["generator"].get("steps") or []
    resources = _step_resources(median_m)
    steps = []
    for index, verdict in enumerate(median_search.get("verdicts") or []):
        doc = documents[index] if index < len(documents) else {}
        steps.append({"rate_per_s": verdict.get("rate_per_s"), "passed": verdict.get("passed"),
                      "reasons": verdict.get("reasons") or [],
                      "requests_per_s": (doc.get("throughput") or {}).get("requests_per_s"),
                      **_step_latency(doc), "error_rate": stats.error_rate(doc) if doc.get("totals") else None,
                      "errors": (doc.get("totals") or {}).get("errors"),
                      **(resources[index] if index < len(resources) else _NO_STEP_RESOURCES)})
    open_loop = median_m["generator"].get("open_loop") or {}
    per_conn = int((median_m["generator"].get("config") or {}).get("requests_per_conn") or 1)
    return {"found_rate_per_s_median": _median(found), "found_by_repeat": found,
            # A conn_rate search finds connections per second, each doing requests_per_conn requests.
            "unit": "conn/s" if open_loop.get("kind") == "conn_rate" else "req/s",
            "requests_per_conn": per_conn if open_loop.get("kind") == "conn_rate" else 1,
            "slo": median_search.get("slo"), "max_errors_fraction": median_search.get("max_errors_fraction"),
            "stopped_because": median_search.get("stopped_because"), "steps": steps,
            "steps_measurement_id": median_m["id"]}


# A step's server figures (stats._step_cost), None where the monitor had no window for it.
_STEP_RESOURCE_FIELDS = ("server_cpu_pct", "server_cpu_us", "server_rss_peak_bytes", "server_ctx_per_request")
_NO_STEP_RESOURCES = dict.fromkeys(_STEP_RESOURCE_FIELDS)


def _step_resources(m: dict) -> list[dict]:
    """The server's CPU, RSS and context switches in each step of a sweep or a find-max measurement, from its
    stored cost (stats.cost_per_unit's `steps`); [] for a record made before steps had them."""
    cost = stats.measurement_cost(m) or {}
    return [{k: step.get(k) for k in _STEP_RESOURCE_FIELDS} for step in cost.get("steps") or []]


def _step_latency(doc: dict) -> dict:
    """A step's p50, p99 and mean latency (from the intended send time: these are open-loop steps)."""
    latency = doc.get("latency") or {}
    known = bool(latency.get("count"))
    return {k: latency.get(k) if known else None for k in ("p50_us", "p99_us", "mean_us")}


def _sweep(ok: list[dict]) -> dict | None:
    """A connections_per_step level (netarena-load --steps --conns-per-step): each step's figures (the asked and
    achieved connection rate, connections started and completed, req/s, p50/p99 from the intended send time,
    error rate, the step's length) from the repeat whose whole-sweep throughput is the median."""
    sweeps = [m for m in ok if (m["generator"].get("config") or {}).get("conns_per_step")]
    if not sweeps:
        return None
    median_m = sorted(sweeps, key=lambda m: m["generator"]["throughput"]["requests_per_s"])[(len(sweeps) - 1) // 2]
    config = median_m["generator"]["config"]
    documents = median_m["generator"].get("steps") or []
    resources = _step_resources(median_m)
    steps = []
    for index, doc in enumerate(documents):
        open_loop = doc.get("open_loop") or {}
        conns = open_loop.get("connections") or {}
        steps.append({"rate_per_s": open_loop.get("asked_rate_per_s"),
                      "achieved_per_s": open_loop.get("achieved_rate_per_s"),
                      "started": conns.get("started"), "completed": conns.get("completed"),
                      "requests_per_s": (doc.get("throughput") or {}).get("requests_per_s"), **_step_latency(doc),
                      "error_rate": stats.error_rate(doc) if doc.get("totals") else None,
                      "errors": (doc.get("totals") or {}).get("errors"), "duration_s": doc.get("duration_s"),
                      "rate_not_met": bool(open_loop.get("rate_not_met")),
                      # Over TLS: the step's completed handshakes, and how many of them resumed a session.
                      "handshakes": (doc.get("tls") or {}).get("handshakes"),
                      "resumed": (doc.get("tls") or {}).get("resumed"),
                      **(resources[index] if index < len(resources) else _NO_STEP_RESOURCES)})
    return {"conns_per_step": config.get("conns_per_step"), "requests_per_conn": config.get("requests_per_conn"),
            "steps": steps, "steps_measurement_id": median_m["id"]}


def sweep_line(g: Group) -> str:
    """One line per sweep group: each step's connection rate, the req/s it got and its error rate."""
    sw = g.sweep or {}
    steps = " ".join(f"{fmt.rps_short(st['rate_per_s'])}→{fmt.rps_short(st['requests_per_s'])}"
                     + (f"({fmt.pct(st['error_rate'], 1)} err)" if st.get("error_rate") else "")
                     for st in sw.get("steps", []))
    return (f"{g.contestant}: {len(sw.get('steps', []))} steps of {sw.get('conns_per_step') or 0:,} connections x "
            f"{sw.get('requests_per_conn')} requests (conn/s→req/s, measurement #{sw.get('steps_measurement_id')}): "
            + steps)


def stopped_line(g: Group) -> str:
    """A group of a run with a precision target: how many repeats, its interval's half-width, why it stopped."""
    width = "-" if g.requests_per_s_ci_relative is None else f"±{g.requests_per_s_ci_relative:.1%}"
    return (f"{g.contestant}: {len(g.measurement_ids)} repeat(s), interval {width} of the median "
            f"({g.requests_per_s_ci_kind or '-'}); stopped: {g.stopped_because}")


def requests_line(g: Group) -> str:
    """weighttp's figure for a requests = N level: the time N responses took (median of the ok repeats)."""
    times = g.completion_s
    if not times:
        return f"{g.contestant}: {g.requests_asked:,} requests: no successful repeat (see the failures)"
    return (f"{g.contestant}: {g.requests_asked:,} requests in {statistics.median(times):.3f} s (median; per repeat "
            + ", ".join(f"{t:.3f}" for t in times) + " s)")


# A healthy closed loop ends its measured phase with a request in flight on each connection (up to --pipeline on
# each), however fast or slow the server: that many are its normal state, not news (a 900 req/s server at 50
# connections has 3.5% of its requests in flight at the end of a 1.5 s measurement and nothing wrong). An open
# loop's requests in flight are its backlog: above this share of a group's requests they are enough to move
# the p99 (their censored waits are in the histogram), and the terminal says so.
UNFINISHED_NOTABLE_SHARE = 0.01


def unfinished_notable(g: Group) -> bool:
    """Whether a group's requests still in flight at the end deserve a line of their own: its connections went
    unanswered (NOANS); in a closed loop, more were in flight than its connections can hold (one each, or
    --pipeline each); in an open loop, more than UNFINISHED_NOTABLE_SHARE of its requests."""
    if not g.unfinished:
        return False
    if "NOANS" in g.badges:
        return True
    if g.open_loop:
        return g.unfinished > UNFINISHED_NOTABLE_SHARE * (g.requests_total + g.unfinished)
    per_connection = int(g.level.get("pipeline") or 1)
    return g.unfinished > g.connections * per_connection * max(g.repeats_ok, 1)


def capped_line(g: Group) -> str:
    return (f"{g.contestant} {g.level_key}: generator_threads = {g.generator_threads_asked} asked, "
            f"{g.level.get('generator_threads')} ran (one per generator CPU)")


def interval_series(generator: dict) -> list[dict]:
    """The generator's per-interval figures: t_s (start of the interval, from the start of the measured phase),
    requests/s and p99. Each rate is the interval's count over the time it covers: the last interval of a run
    is usually partial, and dividing it by a whole interval would draw a dip that never happened.

    A sweep (--steps, --find-max) pads each step to whole intervals and drains between steps, so its intervals
    are not on the wall clock: it gives one point per step instead, at the step's own start, with the step's
    throughput and p99."""
    if generator.get("steps"):
        try:
            origin = datetime.fromisoformat(generator["started_at"]).timestamp()
            return [{"t_s": datetime.fromisoformat(step["started_at"]).timestamp() - origin,
                     "requests_per_s": (step.get("throughput") or {}).get("requests_per_s") or 0.0,
                     "p99_us": (step.get("latency") or {}).get("p99_us") if (step.get("latency") or {}).get("count")
                     else None} for step in generator["steps"]]
        except (KeyError, TypeError, ValueError):
            return []
    intervals = generator.get("intervals") or {}
    length = intervals.get("interval_s") or 0
    entries = intervals.get("entries") or []
    end = generator.get("duration_s")
    out = []
    for index, entry in enumerate(entries):
        covered = length
        if index == len(entries) - 1 and end is not None:
            covered = min(length, end - entry["t_s"])
        count = entry.get("count", 0)
        if out and covered < length / 2:
            # A sliver at the end (the phase ran 2.0004 s: an interval of 0.4 ms) is noise as a rate of its own:
            # its requests join the interval before, the rate over both; that point's p99 becomes the larger of
            # the two (an upper bound: the intervals' histograms are not merged here).
            before = out[-1]
            before_count = before["requests_per_s"] * length
            before["requests_per_s"] = (before_count + count) / (length + covered)
            if count and entry.get("p99_us") is not None:
                before["p99_us"] = max(before["p99_us"] or 0, entry["p99_us"])
            continue
        if covered <= 0:
            continue
        out.append({"t_s": entry["t_s"], "requests_per_s": count / covered,
                    "p99_us": entry.get("p99_us") if count else None})
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


def summary_document(report: Report) -> dict:
    """The run and its per-(contestant, scenario, level) figures as JSON-ready data (`netarena show --json`):
    what the summary tables show, with ranks and the structured level; no raw series or histograms."""
    rank = ranking(report.groups)
    groups = []
    for g in sorted(report.groups, key=rank_key):
        data = to_jsonable(g)
        data.pop("percentile_curve", None)
        position = rank.get((g.contestant, g.scenario, g.level_key))
        data.update(rank=position.rank if position else None, tied=bool(position and position.tied),
                    ranked_by=rank_basis(g),
                    latency_from=("intended send time" if g.open_loop else "actual send"))
        groups.append(data)
    run = to_jsonable(report.run)
    run.pop("environment", None)
    # Measurements kept out of every figure (noisy, re-measured), counted with why: each group lists its own.
    discarded = [f"{m.contestant} {m.scenario} {m.level_key} #{m.repeat_index + 1}: {m.discarded}"
                 for m in report.measurements if m.discarded and m.discarded != PROFILED]
    profiled = [m.id for m in report.measurements if m.discarded == PROFILED]
    return {"store": report.store_path, "run": run, "groups": groups,
            "discarded": {"count": len(discarded), "reasons": discarded},
            "profiled": {"count": len(profiled), "measurement_ids": profiled},
            "skipped": [to_jsonable(s) for s in report.skipped]}


def to_jsonable(value) -> Any:
    """Dataclasses and tuples as JSON-ready structures (for debugging and the tests)."""
    from dataclasses import asdict, is_dataclass
    if is_dataclass(value):
        return to_jsonable(asdict(value))
    return json.loads(json.dumps(value, default=str))
