"""What TechEmpower's database scenarios share (db, queries, fortunes, updates; docs/techempower.md): the
postgresql service and its hello_world fixture, the `queries` suite field, and the checks before the load:
TechEmpower's required headers, World rows' JSON, the rows compared with the database's, and the queries a
request made, counted by pg_stat_statements.

Not a scenario itself (no SCENARIO): registry._SHARED.
"""

from __future__ import annotations

import dataclasses
import json
import time
from email.utils import parsedate_to_datetime
from typing import Annotated

from pydantic import Field

from ..fixtures import TECHEMPOWER_DB, WORLD_ROWS, database_url
from .checks import FETCH_MAX_BODY_BYTES, Check, _expect, _show, _Wrong, ok_status
from .load import LoadSpec
from .registry import Scenario

# TechEmpower's clamp of ?queries=N: a bad or missing value is 1, less than 1 is 1, more than 500 is 500.
QUERIES_MAX = 500
# A suite entry's `queries`, one level per value (TechEmpower runs 1, 5, 10, 15 and 20).
DEFAULT_QUERIES = 20
QUERIES_PARAM = (list[Annotated[int, Field(ge=1, le=QUERIES_MAX)]] | None, None)
# The ?queries= values checked before the load with the rows expected (TechEmpower's edge cases, and the
# parameter left out: None).
QUERIES_EDGE_CASES = (("0", 1), ("foo", 1), ("501", QUERIES_MAX), ("", 1), (None, 1))
# The request whose queries pg_stat_statements counts (each row read by its own query).
COUNTED_QUERIES = 20
# How long the count waits for the server's last statements to be recorded (PostgreSQL stores a statement's
# statistics when its transaction ends, which a server may answer HTTP before, with pipelined drivers).
COUNT_SETTLE_S = 1.0
# How many counts a request's queries get at most: a count above the expected one is taken again, since a
# statement of an earlier request can land after the reset on a slow host (its query still waiting in the server,
# or in the database connection's socket, while pg_stat_activity calls that connection idle; a 35% CPU quota did
# it to deno-serve: "2 queries on world for 1 row"). A server that makes more queries makes them every time.
COUNT_TRIES = 3


class TechEmpowerScenario(Scenario):
    """A TechEmpower database scenario: the postgresql service, its hello_world database checked (and
    reloaded when a contestant changed it) before every measurement."""

    service = "postgresql"
    cost_unit = "request"

    def ensure_fixture(self, running, level, static_dir, say):
        from ..fixtures import load_techempower_fixture, techempower_fixture_intact

        differs = techempower_fixture_intact(running.url) if running.fixture.get("techempower") else "not loaded"
        if differs is not None:
            say(f"loading TechEmpower's database {TECHEMPOWER_DB} ({differs}) ...")
            loaded = load_techempower_fixture(running.url)
            running.fixture["techempower"] = dict(loaded, reloaded=differs != "not loaded")

    def service_url(self, level, url):
        # The contestant connects to hello_world; the service's own URL names PostgreSQL's default database.
        return database_url(url, TECHEMPOWER_DB)

    def level_params(self, measure):
        # queries and updates: one level per `queries` value; db and fortunes take no parameter.
        return [(("queries", n),) for n in (measure.queries or [DEFAULT_QUERIES])] if "queries" in self.params \
            else [()]

    # The table whose SELECTs a request makes, and how many per request (selects_per_request), counted before
    # the load for one request (counted) and over the whole load (count_during_load).
    counted_table: Tables = "world"

    def selects_per_request(self, level) -> int:
        # queries and updates: the level's `queries` rows, each its own SELECT; db and fortunes: one.
        return level.param("queries", DEFAULT_QUERIES) if "queries" in self.params else 1

    def count_during_load(self, level, service_url):
        if service_url is None:  # a server netarena did not start: no database known
            return None
        per_request = self.selects_per_request(level)
        # Rows from a cache: each server process may fill its cache once, whenever it does (its workers'
        # processes start after the port opens, each reading the whole table), and no more.
        return LoadQueryCount(service_url, self.counted_table, per_request,
                              fills_allowed=level.workers if per_request == 0 else None)

    def expect_status_load(self, url: str, http_args: list[str]) -> LoadSpec:
        """Every response a 200 (its rows differ per request: no body to hold them to)."""
        return LoadSpec("http", url, http_args + ["--expect-status", "200"], {"status": 200})


# ----------------------------------------------------------------------------- responses


def te_headers(headers: dict, content_type: str) -> None:
    """TechEmpower's required headers: Server, Date (an HTTP date), Content-Type (its media type
    `content_type`), and Content-Length or Transfer-Encoding: chunked."""
    for name in ("server", "date", "content-type"):
        _expect(headers.get(name), f"no {name.title()} header (TechEmpower requires Server, Date and Content-Type)")
    try:
        parsedate_to_datetime(headers["date"])
    except (TypeError, ValueError):
        raise _Wrong(f"Date header {headers['date']!r} is not an HTTP date") from None
    _expect("content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower(),
            "neither Content-Length nor Transfer-Encoding: chunked")
    media = headers["content-type"].split(";")[0].strip().lower()
    _expect(media == content_type, f"Content-Type {headers['content-type']!r}, expected {content_type}")


def world_json(status: int, headers: dict, body: bytes):
    """The parsed body of a 200 application/json response with TechEmpower's headers."""
    ok_status(status)
    te_headers(headers, "application/json")
    try:
        return json.loads(body)
    except ValueError:
        raise _Wrong(f"body is not JSON: {_show(body)}") from None


def world_row(value, where: str) -> tuple[int, int]:
    """(id, randomNumber) of a World object: keys exactly id and randomNumber, both integers in 1..10000."""
    _expect(isinstance(value, dict), f"{where}: {json.dumps(value)[:80]} is not a JSON object")
    _expect(set(value) == {"id", "randomNumber"},
            f"{where}: keys {sorted(value)}, expected exactly id and randomNumber")
    for key in ("id", "randomNumber"):
        number = value[key]
        _expect(isinstance(number, int) and not isinstance(number, bool),
                f"{where}: {key} is {json.dumps(number)}, expected a JSON integer")
        _expect(1 <= number <= WORLD_ROWS, f"{where}: {key} {number} outside 1..{WORLD_ROWS}")
    return value["id"], value["randomNumber"]


def world_rows(status: int, headers: dict, body: bytes, expected: int) -> list[tuple[int, int]]:
    """The (id, randomNumber) rows of a /queries or /updates answer: a JSON array of `expected` World objects."""
    value = world_json(status, headers, body)
    _expect(isinstance(value, list), f"body is not a JSON array: {_show(body)}")
    _expect(len(value) == expected, f"{len(value)} rows, expected {expected}")
    return [world_row(row, f"row {i}") for i, row in enumerate(value)]


# ----------------------------------------------------------------------------- the database


def _connect(url: str):
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        raise _Wrong(f"cannot read the database to check the answer: {type(exc).__name__}: {exc}") from None


def database_numbers(url: str, ids) -> dict[int, int]:
    """randomnumber by id in the database's World, for `ids`."""
    with _connect(url) as conn:
        return dict(conn.execute("SELECT id, randomnumber FROM world WHERE id = ANY(%s)", (list(set(ids)),)))


def same_as_database(url: str, rows: list[tuple[int, int]]) -> None:
    """Each row's randomNumber is the database's for its id (db, queries: read, not made up)."""
    held = database_numbers(url, [i for i, _ in rows])
    for row_id, number in rows:
        _expect(held.get(row_id) == number, f"row id {row_id}: randomNumber {number}, the database holds "
                f"{held.get(row_id)}: the rows must be read from table world")


# The statements pg_stat_statements recorded on a table since the reset, in this database, without the
# counting's own (which name pg_stat_statements). Word boundaries: "world" and "\"world\"", not "worlds".
# Each pg_stat_statements row is one statement (its normalized text): a whole-table read is one in which every
# call returned all of World's rows (rows >= calls * WORLD_ROWS), what a cache fill at start does.
_COUNT_SQL = """
SELECT coalesce(sum(calls), 0)::int, coalesce(sum(rows), 0)::int,
       coalesce(sum(calls) FILTER (WHERE rows >= calls * %s), 0)::int,
       coalesce(sum(rows) FILTER (WHERE rows >= calls * %s), 0)::int
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query !~* 'pg_stat_statements' AND query ~* %s AND query ~* %s"""


# The database's other client connections that are not idle: running a statement, or between the statements of
# a transaction (more may follow at once).
_BUSY_SQL = """
SELECT count(*)::int FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
  AND state IS DISTINCT FROM 'idle'"""
# How long a count's reset waits for the database's other connections to go idle (see reset_when_quiet).
QUIET_WAIT_S = 5.0


def reset_when_quiet(conn) -> None:
    """pg_stat_statements_reset(), once every other client connection of the database is idle (at most
    QUIET_WAIT_S): a statement running at the reset is recorded when it ends, after it, and would be counted as
    the next request's. It happens: a server's start-up read (a cache warm-up) still running as it answers, a
    check retried after a timeout whose first try's request is still being served, the load's last requests,
    a busy machine delaying all of them."""
    deadline = time.monotonic() + QUIET_WAIT_S
    while conn.execute(_BUSY_SQL).fetchone()[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    conn.execute("SELECT pg_stat_statements_reset()")


# What a count is taken on: one table, or several counted together (cached-queries: world and cachedworld, the
# copy TechEmpower's implementations fill their cache from; a per-request read of either is a query).
Tables = str | tuple[str, ...]


def tables_text(table: Tables) -> str:
    return table if isinstance(table, str) else " or ".join(table)


@dataclasses.dataclass(frozen=True)
class Counted:
    """The statements of one kind on the counted table(s) since a reset: `calls` and the `rows` they returned,
    and of those the whole-table reads (`fills`, `fill_rows`: each call returned all of World's rows)."""

    calls: int
    rows: int
    fills: int
    fill_rows: int

    def without_fills(self) -> Counted:
        """The statements other than whole-table reads: cached-queries' per-request reads, its start-up cache
        fills left out (one per server process may land in any count: their servers listen before they fill)."""
        return Counted(self.calls - self.fills, self.rows - self.fill_rows, 0, 0)


def count_statements(conn, table: Tables, command: str) -> Counted:
    """The statements of kind `command` (select, update) on `table` (any of them) since the last reset."""
    names = (table,) if isinstance(table, str) else table
    return Counted(*conn.execute(_COUNT_SQL, (WORLD_ROWS, WORLD_ROWS, rf"\m({'|'.join(names)})\M",
                                              rf"^\s*{command}\M")).fetchone())


def counted(http, path: str, fn, expected_bytes: int, table: Tables, expected_selects: int,
            rows_asked: int | None = None) -> None:
    """GET path (its answer held by fn) between a pg_stat_statements reset and a count of the SELECTs on
    `table`: exactly `expected_selects` (each row read by its own query; 0 for rows served from the cache
    cached-queries fills at start, `rows_asked` then saying how many the request asked for, and whole-table
    reads left out: a server process filling its cache, Counted.without_fills). Without the service's address (a
    server netarena did not start) the answer alone is checked."""
    if http.service_url is None:
        http.run(path, fn, expected_bytes)
        return
    cached = expected_selects == 0
    found: list[Counted] = []

    def count_then_check(status, headers, body, elapsed_s):
        # Counted as soon as the answer is in, before fn reads the database itself (its reads would count).
        deadline = time.monotonic() + COUNT_SETTLE_S
        found[:] = [count_statements(conn, table, "select")]
        while found[0].calls < expected_selects and time.monotonic() < deadline:
            time.sleep(0.05)
            found[:] = [count_statements(conn, table, "select")]
        fn(status, headers, body, elapsed_s)

    # One answer first, uncounted: a server whose port opens before its start-up reads are done (its listener
    # bound first, its cache filled after) has done them once it answers, and no start-up read can then land
    # after the reset. CI saw it: rust-axum's whole-table read of world counted as a second query of GET /db.
    # (With several worker processes, one answer is one worker's: cached-queries leaves the others' fills out.)
    http.run(path, fn, expected_bytes)
    above: list[int] = []  # the earlier counts, each above expected_selects (COUNT_TRIES)
    with _connect(http.service_url) as conn:
        while True:
            reset_when_quiet(conn)
            http.run(path, count_then_check, expected_bytes)
            count = found[0].without_fills() if cached else found[0]
            if count.calls <= expected_selects or len(above) + 1 == COUNT_TRIES:
                break
            above.append(count.calls)
    calls, rows = count.calls, count.rows
    fills = (f"; {found[0].fills} whole-table {'read' if found[0].fills == 1 else 'reads'} (a cache fill at "
             "start) not counted" if cached and found[0].fills else "")
    table = tables_text(table)
    name = f"queries of GET {http.prefix}{path} (pg_stat_statements)"
    unit = "rows" if expected_selects > 1 else "row"
    if calls == expected_selects:
        unconfirmed = (f"; counted again after {', '.join(map(str, above))}, not confirmed (a late statement of an "
                       "earlier request counts once, a server's own queries every time)" if above else "")
        http.checks.append(Check(name, True, f"{calls} SELECT on {table}, {rows} rows{fills}{unconfirmed}"))
        return
    if cached:
        why = (f"{calls} {'query' if calls == 1 else 'queries'} on {table} for {rows_asked} rows: cached rows "
               "come from the in-process cache filled at start, without a query per request")
    elif calls == 0:
        why = (f"0 queries on {table}: the {'rows were' if expected_selects > 1 else 'row was'} served from a "
               "cache, each request must read the database")
    elif calls < expected_selects:
        why = (f"{calls} {'query' if calls == 1 else 'queries'} on {table} for {expected_selects} {unit}: "
               f"the rows were read in {'one query' if calls == 1 else 'fewer queries'}, each must be its own")
    else:
        why = f"{calls} queries on {table} for {expected_selects} {unit}, expected {expected_selects}"
    if above:
        why += f" (its counts, one request each: {', '.join(map(str, above + [calls]))})"
    http.checks.append(Check(name, False, why))
    raise _Wrong(why)


# How far the queries counted over a load may fall short of (or exceed) what the requests answered in it make:
# TechEmpower's margin.
LOAD_COUNT_MARGIN = 0.01


class LoadQueryCount:
    """The SELECTs on `table` over a whole load (pg_stat_statements, reset just before netarena-load starts),
    against the `per_request` each answered request must make: what catches a server that answers right while
    checked one request at a time and caches or batches under load. The load's requests are all it answered,
    warm-up included (netarena-load's totals.responses + totals.warmup_responses); those in flight at the end or
    that failed may or may not have made theirs, so they widen the upper bound only. With `fills_allowed` (cached
    rows, per_request 0) whole-table reads are cache fills, not counted as requests' queries: at most that many
    (one per server process), more is a cache refilled while serving."""

    def __init__(self, url: str, table: Tables, per_request: int, fills_allowed: int | None = None):
        self.url, self.tables, self.per_request, self.fills_allowed = url, table, per_request, fills_allowed
        self.error = None
        try:
            with _connect(url) as conn:
                reset_when_quiet(conn)  # the check before the load may have left a statement unrecorded
        except Exception as exc:  # _Wrong or psycopg.Error: the measurement fails with the database, not the run
            self.error = f"{type(exc).__name__}: {exc}"

    @property
    def table(self) -> str:
        """The counted table(s) as the verdict names them."""
        return tables_text(self.tables)

    def finish(self, generator: dict | None) -> dict | None:
        if generator is None:
            return None
        if self.error is not None:
            return {"table": self.table, "ok": False, "reason": f"the queries could not be counted: {self.error}"}
        try:
            return self._judge(generator)
        except Exception as exc:  # _Wrong or psycopg.Error
            return {"table": self.table, "ok": False,
                    "reason": f"the queries could not be counted: {type(exc).__name__}: {exc}"}

    def _judge(self, generator: dict) -> dict:
        totals = generator["totals"]
        answered = totals["responses"] + totals.get("warmup_responses", 0)
        # Requests in flight at the end, failed ones, and one per connection that the loop turn noticing the end
        # may have sent: the server may have made their queries, or not.
        connections = int((generator.get("config") or {}).get("connections") or 0)
        unsure = totals["unfinished"] + totals["errors"] + connections
        low = self.per_request * answered * (1 - LOAD_COUNT_MARGIN)
        high = self.per_request * (answered + unsure) * (1 + LOAD_COUNT_MARGIN) + (
            LOAD_COUNT_MARGIN * answered if self.per_request == 0 else 0)
        deadline = time.monotonic() + COUNT_SETTLE_S
        with _connect(self.url) as conn:
            count = count_statements(conn, self.tables, "select")
            while count.calls < low and time.monotonic() < deadline:  # the last transactions' statistics
                time.sleep(0.05)
                count = count_statements(conn, self.tables, "select")
        fills = count.fills if self.fills_allowed is not None else 0
        calls = count.calls - fills
        found = {"table": self.table, "selects": calls, "answered": answered, "uncertain": unsure,
                 "expected_per_request": self.per_request,
                 "per_request": round(calls / answered, 4) if answered else None}
        if self.fills_allowed is not None:
            found["cache_fills"] = fills
        ok = answered == 0 or low <= calls <= high
        found["ok"] = ok and fills <= (self.fills_allowed or 0)
        if not ok:
            found["reason"] = (
                f"{calls:,} SELECTs on {self.table} for {answered:,} answered requests ({found['per_request']:g} per "
                f"request, {self.per_request} expected; pg_stat_statements over the load)"
                + (": rows were served from a cache or read several to a query under load" if calls < low else
                   ": more queries than the requests explain" if self.per_request else
                   ": cached rows come from the in-process cache filled at start"))
        elif not found["ok"]:
            found["reason"] = (
                f"{fills:,} whole-table reads of {self.table} over the load (pg_stat_statements), at most "
                f"{self.fills_allowed} expected (one cache fill per server process): the cache was filled again "
                "while serving")
        else:
            found["reason"] = None
        return found


def queries_path(route: str, value: str | None, param: str = "queries") -> str:
    return f"/{route}" if value is None else f"/{route}?{param}={value}"


# cached-queries' rows: from the in-process cache, which TechEmpower's implementations fill from cachedworld (and
# netarena's contestants may fill from world, which holds the same rows): no request may read either.
CACHED_TABLES = ("world", "cachedworld")


def check_world_lists(http, route: str, after, param: str = "queries", cached: bool = False) -> None:
    """TechEmpower's cases of ?param=N on /route: COUNTED_QUERIES (its queries counted: one each, or none when
    `cached`) and 1, then the edge cases; after(rows) holds each answer's rows to the database."""
    def rows_of(expected):
        def check(status, headers, body, _):
            after(world_rows(status, headers, body, expected))
        return check

    counted(http, queries_path(route, str(COUNTED_QUERIES), param), rows_of(COUNTED_QUERIES),
            FETCH_MAX_BODY_BYTES - 1, CACHED_TABLES if cached else "world", 0 if cached else COUNTED_QUERIES,
            COUNTED_QUERIES)
    for value, expected in (("1", 1), *QUERIES_EDGE_CASES):
        http.run(queries_path(route, value, param), rows_of(expected), FETCH_MAX_BODY_BYTES - 1)
