"""TechEmpower's database scenarios on psycopg 3 with psycopg_pool, for the synchronous Python contestants (the
shared Flask app on gunicorn and uWSGI, python-gevent's raw WSGI server): the pool, the World cache and the
queries each route makes. What a route returns and how the fortunes page is rendered stay with each server.

Import this module only when the database is used (the contestants without psycopg import it never), and under
gevent only after the monkey patching: psycopg picks its wait function as it is imported, gevent's cooperative
select.poll after the patching, its C wait (which blocks every greenlet of the process) before.
"""
import os
import threading

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
