"""TechEmpower's database scenarios on asyncpg, for the asyncio contestants (aiohttp, FastAPI and Granian,
Litestar, Sanic, Tornado): the pool, the World cache and the queries each route makes. What a route returns
and how the fortunes page is rendered stay with each framework.

One asyncpg pool per worker process, opened in that process's running event loop (a pool binds to its loop and
must not cross a fork), of the manifest's size ({db_pool}, netarena_shared.world.pool_size). A request holds one
connection while it queries; asyncpg runs one query at a time on a connection (no pipelining). asyncpg is
imported inside the functions: a server started for a scenario without a database never needs it.
"""
from netarena_shared import world

# The world row by id, one statement per row (asyncpg prepares it once per connection and caches it).
WORLD_SELECT = "SELECT id, randomnumber FROM world WHERE id = $1"
WORLD_UPDATE = "UPDATE world SET randomnumber = $1 WHERE id = $2"
WORLD_ALL = "SELECT id, randomnumber FROM world"
FORTUNE_ALL = "SELECT id, message FROM fortune"


async def open_pool():
    """This process's pool, all its connections opened now (min_size = max_size = the manifest's pool)."""
    import asyncpg

    size = world.pool_size()
    return await asyncpg.create_pool(world.postgresql_url(), min_size=size, max_size=size)


async def read_world_table(pool=None):
    """cached-queries' in-process copy of World, {id: randomNumber}: through `pool`, or a connection of its own
    when there is none yet (a parent reading it before it forks its workers)."""
    if pool is not None:
        return dict(await pool.fetch(WORLD_ALL))
    import asyncpg

    conn = await asyncpg.connect(world.postgresql_url())
    try:
        return dict(await conn.fetch(WORLD_ALL))
    finally:
        await conn.close()


async def read_worlds(conn, n):
    """n random World rows as TechEmpower's objects, each row its own query, awaited in turn."""
    rows = []
    for id_ in world.random_ids(n):
        row = await conn.fetchrow(WORLD_SELECT, id_)
        rows.append({"id": row[0], "randomNumber": row[1]})
    return rows


async def one_world(pool):
    """The db scenario's row."""
    async with pool.acquire() as conn:
        return (await read_worlds(conn, 1))[0]


async def some_worlds(pool, raw_count):
    """The queries scenario's rows; `raw_count` is the request's ?queries= as it came (None when absent)."""
    async with pool.acquire() as conn:
        return await read_worlds(conn, world.queries_count(raw_count))


async def update_worlds(pool, raw_count):
    """The updates scenario: read the rows one query each, give each a new random number, write them all with
    one batched UPDATE (asyncpg's executemany, autocommitted, rows in id order); the rows as answered."""
    async with pool.acquire() as conn:
        rows = await read_worlds(conn, world.queries_count(raw_count))
        for row in rows:
            row["randomNumber"] = world.random_id()
        await conn.executemany(WORLD_UPDATE, world.updated_last(rows))
    return rows


def cached_worlds(cache, raw_count):
    """The cached-queries scenario's rows, from the copy read_world_table made; no query."""
    return [{"id": i, "randomNumber": cache[i]} for i in world.random_ids(world.queries_count(raw_count))]


async def fortunes(pool):
    """The fortune table's (id, message) rows plus the one added at request time, sorted by message: what each
    framework's template renders."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(FORTUNE_ALL)
    return world.sorted_fortunes(tuple(row) for row in rows)
