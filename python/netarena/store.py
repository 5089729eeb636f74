"""The results store: one SQLite file (WAL) per results directory. Schema: docs/store.md.

Every write commits at once, so a crash, kill -9 or Ctrl-C loses at most the measurement in progress.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from .errors import ConfigError

SCHEMA_VERSION = 1


def file_name_part(text: str) -> str:
    """`text` as part of a file name under the results folder (logs, profiles, exported stacks): every run of
    characters other than letters, digits, '.', '_', '=' and '-' made one '_' (a level key has ',' and a
    parameter value may have '/')."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text) or "_"
DB_NAME = "netarena.sqlite"

# Measurement statuses. "interrupted" rows are redone by --resume; every other status is final.
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
FINAL_STATUSES = (STATUS_OK, STATUS_FAILED)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    suite_name TEXT NOT NULL,
    suite_path TEXT,
    suite_json TEXT NOT NULL,          -- the suite as run, after command-line overrides (replayed by --resume)
    args_json TEXT NOT NULL,           -- command-line arguments and resolved options
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
    started_at TEXT NOT NULL,          -- RFC 3339 UTC
    ended_at TEXT,
    netarena_version TEXT NOT NULL,
    git_sha TEXT,
    backend TEXT NOT NULL,             -- 'real' | 'mock'
    server_cpus_json TEXT NOT NULL,    -- e.g. [0]
    generator_cpus_json TEXT NOT NULL, -- e.g. [1]
    environment_json TEXT,             -- envinfo.collect(): CPU, kernel, sysctls, limits, versions, generator
    planned_measurements INTEGER NOT NULL,
    orchestrator_pid INTEGER,          -- with orchestrator_start_time: is the run still alive?
    orchestrator_start_time REAL
);
CREATE TABLE IF NOT EXISTS contestants (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    manifest_json TEXT NOT NULL,
    install_json TEXT,                 -- what install() recorded: pip freeze, executables, Debian versions
    status TEXT NOT NULL CHECK (status IN ('ready', 'skipped')),
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS skipped (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    contestant TEXT NOT NULL,
    scenario TEXT,                     -- NULL: the whole contestant
    level_key TEXT,                    -- NULL: every level
    reason TEXT NOT NULL,
    detail TEXT,                       -- e.g. the install log tail
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    contestant TEXT NOT NULL,
    scenario TEXT NOT NULL,
    level_key TEXT NOT NULL,           -- e.g. "c=50,w=1" or "c=50,w=1,size=40"
    connections INTEGER NOT NULL,
    workers INTEGER NOT NULL,
    level_json TEXT NOT NULL,          -- the full level (params, generator threads, pipeline, ...)
    repeat_index INTEGER NOT NULL,     -- 0-based
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'interrupted')),
    failure_kind TEXT,                 -- start_failed | not_ready | verify_failed | crashed | hung |
                                       -- generator_failed | no_successful_requests | service_failed |
                                       -- service_died | internal_error |
                                       -- not_attempted (docs/store.md says what each means)
    flags_json TEXT NOT NULL,          -- e.g. ["generator_saturated", "error_rate_above_1pct"]
    requests_per_s REAL,               -- copied from generator_json for easy queries
    error_rate REAL,                   -- errors / (successful requests + errors)
    latency_p50_us REAL,
    latency_p99_us REAL,
    generator_argv_json TEXT,          -- the exact netarena-load command line
    generator_json TEXT,               -- netarena-load's whole result document, histogram included
    monitor_json TEXT,                 -- monitor.Monitor.stop(): server/generator/system series + summary
    verification_json TEXT,            -- scenarios.Verification.to_dict() of the pre-load check
    stop_json TEXT,                    -- process.StopOutcome: signal, exit code, killed, leftover processes
    services_json TEXT,                -- the backing services it talked to: label, backend, CPUs, versions
    warmup_json TEXT,                  -- warmup.warm_up(): the windows of a warm-up until steady, if one ran
    cost_json TEXT,                    -- stats.cost_per_unit: server/generator CPU µs and switches per request (MiB)
    contention_json TEXT,              -- stats.contention: steal, run delay and wait shares; "noisy": why, or null
    profile_json TEXT,                 -- netarena.profile: where the server spent its time (a profiled repeat), or null
    discarded TEXT,                    -- why it is kept out of every figure (e.g. "noisy (steal 14%)"); NULL: counted
    error TEXT,
    stderr_tail TEXT,                  -- last bytes of the contestant's output, on failure
    log_path TEXT,
    port INTEGER,
    started_at TEXT NOT NULL,
    ended_at TEXT NOT NULL,
    UNIQUE (run_id, contestant, scenario, level_key, repeat_index)
);
CREATE TABLE IF NOT EXISTS live_processes (
    -- process groups started by a run and not yet confirmed stopped; cleaned up after a kill -9
    run_id INTEGER NOT NULL,
    pgid INTEGER NOT NULL,
    leader_start_time REAL,            -- NULL never matches: such a row is never signalled
    role TEXT NOT NULL,
    token TEXT,                        -- NETARENA_RUN_TOKEN in the group's environment (process.RUN_TOKEN)
    PRIMARY KEY (run_id, pgid)
);
CREATE INDEX IF NOT EXISTS measurements_by_run ON measurements(run_id, contestant, scenario, level_key);
"""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), default=str)


class StoreError(ConfigError):
    """The store cannot be used: damaged, not a store, or of another schema version (exit 2, one line)."""


def unreadable(path: Path | str, exc: Exception) -> StoreError:
    return StoreError(f"not a readable netarena store ({' '.join(str(exc).split())}): move it aside (and restore "
                      "a copy if you have one) or use another --results directory", path=path)


def check_store(db: sqlite3.Connection, path: Path | str) -> bool:
    """Raise StoreError unless `db` is an intact store of SCHEMA_VERSION; False when it has no schema yet.

    The version is read before anything is written, so a store of another version is never touched, and
    SQLite's quick_check reads every page, so damage anywhere is found here rather than halfway through a
    command (a report, or a run appending to a file it cannot read back).
    """
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
            if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise StoreError("has tables but no netarena schema version: not a netarena store; use another "
                                 "--results directory", path=path)
            return False
        version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        problems = [row[0] for row in db.execute("PRAGMA quick_check(3)").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise unreadable(path, exc) from None
    if problems != ["ok"]:
        raise unreadable(path, "; ".join(problems))
    if version is None or str(version[0]) != str(SCHEMA_VERSION):
        found = "none" if version is None else version[0]
        raise StoreError(f"store schema version {found}; this netarena reads version {SCHEMA_VERSION}: use another "
                         "--results directory, or the netarena version that wrote it", path=path)
    return True


class Store:
    def __init__(self, results_dir: Path):
        self.results_dir = Path(results_dir)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.results_dir / DB_NAME
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            existing = check_store(self.db, self.path)
            self.db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against process death (our concern); only an OS crash could lose the last commit.
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(SCHEMA)
            self._migrate()
            if not existing:
                self.db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            raise unreadable(self.path, exc) from None

    def _migrate(self) -> None:
        # Stores made before backing services existed lack this nullable column; adding it keeps them readable.
        measurement_columns = {r[1] for r in self.db.execute("PRAGMA table_info(measurements)")}
        if "services_json" not in measurement_columns:
            self.db.execute("ALTER TABLE measurements ADD COLUMN services_json TEXT")
        # Added within schema version 1: the warm-up until steady (NULL: a fixed warm-up), cost per request and
        # noise (older rows have NULL: reports compute the cost from their generator and monitor documents).
        for column in ("warmup_json", "cost_json", "contention_json", "discarded", "profile_json"):
            if column not in measurement_columns:
                self.db.execute(f"ALTER TABLE measurements ADD COLUMN {column} TEXT")
        # Added within schema version 1: a NULL token (a row written before it existed) never proves a process ours.
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(live_processes)")}
        if "token" not in columns:
            self.db.execute("ALTER TABLE live_processes ADD COLUMN token TEXT")

    def close(self) -> None:
        """Fold the write-ahead log into netarena.sqlite and close: the one file then holds every run (a copy of
        it alone is the whole store), and no empty -wal/-shm pair is left beside it."""
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # another connection still reads: SQLite checkpoints when the last one closes
        self.db.close()

    # -- runs

    def create_run(self, *, suite_name: str, suite_path: str | None, suite: dict, args: dict, backend: str,
                   server_cpus: list[int], generator_cpus: list[int], environment: dict | None,
                   planned: int, netarena_version: str, git_sha: str | None, orchestrator_start_time: float | None) -> int:
        cur = self.db.execute(
            "INSERT INTO runs(suite_name, suite_path, suite_json, args_json, status, started_at, netarena_version,"
            " git_sha, backend, server_cpus_json, generator_cpus_json, environment_json, planned_measurements,"
            " orchestrator_pid, orchestrator_start_time) VALUES (?,?,?,?,'running',?,?,?,?,?,?,?,?,?,?)",
            (suite_name, suite_path, _json(suite), _json(args), now_iso(), netarena_version, git_sha, backend,
             _json(server_cpus), _json(generator_cpus), _json(environment), planned, os.getpid(),
             orchestrator_start_time))
        return cur.lastrowid

    def add_to_run_environment(self, run_id: int, key: str, value) -> None:
        """Adds what is only known once the run has started (the backing services it installed) to its
        environment_json, beside what envinfo.collect() recorded at its creation."""
        row = self.db.execute("SELECT environment_json FROM runs WHERE id=?", (run_id,)).fetchone()
        environment = json.loads(row[0]) if row and row[0] else {}
        environment[key] = value
        self.db.execute("UPDATE runs SET environment_json=? WHERE id=?", (_json(environment), run_id))

    def set_run_status(self, run_id: int, status: str) -> None:
        ended = None if status == "running" else now_iso()
        self.db.execute("UPDATE runs SET status=?, ended_at=? WHERE id=?", (status, ended, run_id))

    def claim_run(self, run_id: int, orchestrator_start_time: float | None) -> None:
        self.db.execute("UPDATE runs SET status='running', ended_at=NULL, orchestrator_pid=?, "
                        "orchestrator_start_time=? WHERE id=?", (os.getpid(), orchestrator_start_time, run_id))

    def run(self, run_id: int) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()

    def latest_unfinished_run(self) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM runs WHERE status IN ('running', 'interrupted') "
                               "ORDER BY id DESC LIMIT 1").fetchone()

    def runs(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM runs ORDER BY id").fetchall()

    # -- contestants and skips

    def record_contestant(self, run_id: int, name: str, manifest: dict, install: dict | None, status: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO contestants(run_id, name, manifest_json, install_json, status) "
                        "VALUES (?,?,?,?,?)", (run_id, name, _json(manifest), _json(install), status))

    def record_skip(self, run_id: int, contestant: str, reason: str, *, scenario: str | None = None,
                    level_key: str | None = None, detail: str | None = None) -> None:
        exists = self.db.execute(
            "SELECT 1 FROM skipped WHERE run_id=? AND contestant=? AND scenario IS ? AND level_key IS ? AND reason=?",
            (run_id, contestant, scenario, level_key, reason)).fetchone()
        if not exists:  # a resumed run re-derives the same skips
            self.db.execute("INSERT INTO skipped(run_id, contestant, scenario, level_key, reason, detail, recorded_at)"
                            " VALUES (?,?,?,?,?,?,?)", (run_id, contestant, scenario, level_key, reason, detail,
                                                        now_iso()))

    def skipped(self, run_id: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM skipped WHERE run_id=? ORDER BY id", (run_id,)).fetchall()

    # -- measurements

    def done_keys(self, run_id: int) -> set[tuple]:
        rows = self.db.execute(
            "SELECT contestant, scenario, level_key, repeat_index FROM measurements WHERE run_id=? AND status IN "
            f"({','.join('?' * len(FINAL_STATUSES))})", (run_id, *FINAL_STATUSES)).fetchall()
        return {tuple(r) for r in rows}

    def record_measurement(self, run_id: int, m: dict) -> int:
        """Insert (or replace an interrupted attempt of) one measurement; committed on return."""
        columns = ["run_id", "contestant", "scenario", "level_key", "connections", "workers", "level_json",
                   "repeat_index", "status", "failure_kind", "flags_json", "requests_per_s", "error_rate",
                   "latency_p50_us", "latency_p99_us", "generator_argv_json", "generator_json", "monitor_json",
                   "verification_json", "stop_json", "services_json", "warmup_json", "cost_json", "contention_json",
                   "profile_json", "discarded", "error", "stderr_tail", "log_path", "port", "started_at",
                   "ended_at"]
        values = {
            "run_id": run_id, "contestant": m["contestant"], "scenario": m["scenario"], "level_key": m["level_key"],
            "connections": m["level"]["connections"], "workers": m["level"]["workers"],
            "level_json": _json(m["level"]), "repeat_index": m["repeat_index"], "status": m["status"],
            "failure_kind": m.get("failure_kind"), "flags_json": _json(m.get("flags") or []),
            "requests_per_s": m.get("requests_per_s"), "error_rate": m.get("error_rate"),
            "latency_p50_us": m.get("latency_p50_us"), "latency_p99_us": m.get("latency_p99_us"),
            "generator_argv_json": _json(m.get("generator_argv")), "generator_json": _json(m.get("generator")),
            "monitor_json": _json(m.get("monitor")), "verification_json": _json(m.get("verification")),
            "stop_json": _json(m.get("stop")), "services_json": _json(m.get("services")),
            "warmup_json": _json(m.get("warmup")), "cost_json": _json(m.get("cost")),
            "contention_json": _json(m.get("contention")), "profile_json": _json(m.get("profile")),
            "discarded": m.get("discarded"), "error": m.get("error"), "stderr_tail": m.get("stderr_tail"),
            "log_path": m.get("log_path"), "port": m.get("port"), "started_at": m["started_at"],
            "ended_at": m["ended_at"],
        }
        cur = self.db.execute(
            f"INSERT OR REPLACE INTO measurements({','.join(columns)}) VALUES ({','.join('?' * len(columns))})",
            [values[c] for c in columns])
        return cur.lastrowid

    def measurements(self, run_id: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM measurements WHERE run_id=? ORDER BY id", (run_id,)).fetchall()

    # -- process groups (for cleanup after the orchestrator was killed)

    def add_live_process(self, run_id: int, pgid: int, leader_start_time: float | None, role: str,
                         token: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO live_processes(run_id, pgid, leader_start_time, role, token) "
                        "VALUES (?,?,?,?,?)", (run_id, pgid, leader_start_time, role, token))

    def remove_live_process(self, run_id: int, pgid: int) -> None:
        self.db.execute("DELETE FROM live_processes WHERE run_id=? AND pgid=?", (run_id, pgid))

    def live_processes(self, run_id: int | None = None) -> list[sqlite3.Row]:
        if run_id is None:
            return self.db.execute("SELECT * FROM live_processes").fetchall()
        return self.db.execute("SELECT * FROM live_processes WHERE run_id=?", (run_id,)).fetchall()


def row_to_dict(row: sqlite3.Row) -> dict:
    out = {}
    for key in row.keys():
        value = row[key]
        if key.endswith("_json") and value is not None:
            out[key[: -len("_json")]] = json.loads(value)
        else:
            out[key] = value
    return out
