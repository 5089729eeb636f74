"""TechEmpower's database scenarios on psycopg 3 with psycopg_pool, for the synchronous Python contestants (the
shared Flask app on gunicorn and uWSGI, python-gevent's and python-eventlet's raw WSGI servers): the pool, the World
cache and the queries each route makes. What a route returns and how the fortunes page is rendered stay with each
server (wsgi_database_routes: the raw WSGI servers').

Import this module only when the database is used (the contestants without psycopg import it never), and under
gevent or eventlet only after the monkey patching: psycopg picks its wait function as it is imported, gevent's
cooperative select.poll after the patching, its C wait (which blocks every greenlet of the process) before. Under
eventlet psycopg's C implementation always waits in C; its pure-Python one (PSYCOPG_IMPL=python) picks a
select-based wait on eventlet's patched selectors.
"""
import json
import os
import threading
from urllib.parse import parse_qs

import psycopg

from netarena_shared import world

# The world row by id, one statement per row.
WORLD_SELECT = "SELECT id, randomnumber FROM world WHERE id = %s"
WORLD_UPDATE = "UPDATE world SET randomnumber = %s WHERE id = %s"
# cached-queries' copy is read from cachedworld (World's rows again, the table TechEmpower's implementations fill
# their cache from): a server that binds its port before this read (uWSGI) may have a request waiting while it
# runs, and it must not count as one of that request's queries on world.
CACHE_ALL = "SELECT id, randomnumber FROM cachedworld"
FORTUNE_ALL = "SELECT id, message FROM fortune"


def read_world_cache():
    """cached-queries' in-process copy of World, {id: randomNumber}, through a connection of its own (opened and
    closed here: it must not cross a fork)."""
    with psycopg.connect(world.postgresql_url()) as conn:
        return dict(conn.execute(CACHE_ALL))


class ProcessPool:
    """One ConnectionPool per process, of the manifest's size (min = max = {db_pool}), opened on first use in the
    process that uses it: a pool's threads and connections must not cross a fork, and a server that loads its
    app before forking (gunicorn --preload, uWSGI) shares this object with every worker."""

    def __init__(self):
        self._pools = {}  # pid -> that process's pool
        self._lock = threading.Lock()

    def connection(self):
        """A connection of this process's pool, held for one request's queries (a context manager)."""
        with self._lock:
            pool = self._pools.get(os.getpid())
            if pool is None:
                # Imported here: python-twisted uses these queries on adbapi's pool and does not install it.
                from psycopg_pool import ConnectionPool

                size = world.pool_size()
                pool = self._pools[os.getpid()] = ConnectionPool(
                    world.postgresql_url(), min_size=size, max_size=size, kwargs={"autocommit": True}, open=True)
        return pool.connection()


def read_worlds(conn, n):
    """n random World rows as TechEmpower's objects, each row its own query, in turn."""
    return [{"id": i, "randomNumber": conn.execute(WORLD_SELECT, (i,)).fetchone()[1]} for i in world.random_ids(n)]


def some_worlds(conn, raw_count):
    """The queries scenario's rows; `raw_count` is the request's ?queries= as it came (None when absent)."""
    return read_worlds(conn, world.queries_count(raw_count))


def update_worlds(conn, raw_count):
    """The updates scenario: read the rows one query each, give each a new random number, write them all with one
    executemany (autocommitted, rows in id order); the rows as answered."""
    rows = some_worlds(conn, raw_count)
    for row in rows:
        row["randomNumber"] = world.random_id()
    with conn.cursor() as cur:
        cur.executemany(WORLD_UPDATE, world.updated_last(rows))
    return rows


def fortunes(conn):
    """The fortune table's rows plus the one added at request time, sorted by message: what the page renders."""
    return world.sorted_fortunes(conn.execute(FORTUNE_ALL).fetchall())


def wsgi_database_routes(app, server):
    """TechEmpower's database routes in front of the WSGI `app` (python-gevent's and python-eventlet's raw servers):
    a ProcessPool per worker process, and `server` as the Server header (neither server sends one; both send a Date
    header unless the response has one). The World cache for cached-queries is read here: call this in the parent
    before it binds the port and forks, so no request can wait while that read runs."""
    from netarena_shared.pg import cached_worlds

    cache = read_world_cache()
    pool = ProcessPool()

    def respond(start_response, content_type, body):
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body))),
                                  *world.server_date_headers(server)])
        return [body]

    def database_app(environ, start_response):
        path = environ["PATH_INFO"]
        # ?queries= / ?count= as it came (None when absent or empty: TechEmpower's clamp makes it 1).
        params = parse_qs(environ.get("QUERY_STRING", ""))
        if path == "/cached-queries":
            rows = cached_worlds(cache, params.get("count", [None])[0])
            return respond(start_response, "application/json", json.dumps(rows).encode())
        if path not in ("/db", "/queries", "/updates", "/fortunes"):
            return app(environ, start_response)
        # The request's green thread holds one connection of this worker's pool while it queries.
        with pool.connection() as conn:
            if path == "/fortunes":
                page = world.fortunes_page(fortunes(conn))
                return respond(start_response, "text/html; charset=utf-8", page.encode())
            if path == "/db":
                rows = read_worlds(conn, 1)[0]
            elif path == "/queries":
                rows = some_worlds(conn, params.get("queries", [None])[0])
            else:
                rows = update_worlds(conn, params.get("queries", [None])[0])
        return respond(start_response, "application/json", json.dumps(rows).encode())

    return database_app
