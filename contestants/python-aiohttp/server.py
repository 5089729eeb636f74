"""netarena contestant: aiohttp.web application, one coroutine per request."""
import asyncio
import html

from aiohttp import web

from netarena_shared import prefork
from netarena_shared.bodies import BYTES_BODIES
from netarena_shared.cli import parse_args
from netarena_shared import world
from netarena_shared.mongo import docs_collection
from netarena_shared.tls import server_context

# The world row by id, one statement per row (asyncpg prepares it once per connection and caches it).
WORLD_SELECT = "SELECT id, randomnumber FROM world WHERE id = $1"
WORLD_UPDATE = "UPDATE world SET randomnumber = $1 WHERE id = $2"
POOL = web.AppKey("pool", object)
CACHE = web.AppKey("cache", dict)


async def hello(request):
    return web.Response(text="Hello, World!")


async def bytes_body(request):
    body = BYTES_BODIES.get(int(request.match_info["n"]))
    if body is None:
        raise web.HTTPNotFound()
    return web.Response(body=body)


async def json_message(request):
    return web.json_response({"message": "Hello, World!"})


async def mongo(request):
    # One query by _id; the collection is PyMongo's asyncio client's (netarena_shared.mongo).
    doc = await docs_collection().find_one({"_id": request.match_info["name"]})
    if doc is None:
        raise web.HTTPNotFound()
    return web.json_response(doc)


async def db(request):
    async with request.app[POOL].acquire() as conn:
        row = await conn.fetchrow(WORLD_SELECT, world.random_id())
    return web.json_response({"id": row[0], "randomNumber": row[1]})


async def read_worlds(conn, n):
    # Each row its own query, awaited in turn: an asyncpg connection runs one query at a time.
    rows = []
    for id_ in world.random_ids(n):
        row = await conn.fetchrow(WORLD_SELECT, id_)
        rows.append({"id": row[0], "randomNumber": row[1]})
    return rows


async def queries(request):
    async with request.app[POOL].acquire() as conn:
        rows = await read_worlds(conn, world.queries_count(request.query.get("queries")))
    return web.json_response(rows)


async def updates(request):
    async with request.app[POOL].acquire() as conn:
        rows = await read_worlds(conn, world.queries_count(request.query.get("queries")))
        for row in rows:
            row["randomNumber"] = world.random_id()
        # One batched UPDATE (asyncpg's executemany), autocommitted, rows in id order.
        await conn.executemany(WORLD_UPDATE, world.updated_last(rows))
    return web.json_response(rows)


async def cached_queries(request):
    cache = request.app[CACHE]
    n = world.queries_count(request.query.get("count"))
    return web.json_response([{"id": i, "randomNumber": cache[i]} for i in world.random_ids(n)])


async def fortunes(request):
    async with request.app[POOL].acquire() as conn:
        rows = await conn.fetch("SELECT id, message FROM fortune")
    # aiohttp has no template engine of its own: the page is built here, every message escaped by html.escape.
    cells = "".join(f"<tr><td>{id_}</td><td>{html.escape(message)}</td></tr>"
                    for id_, message in world.sorted_fortunes(rows))
    return web.Response(text="<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
                             f"<tr><th>id</th><th>message</th></tr>{cells}</table></body></html>",
                        content_type="text/html")


async def read_world_table():
    """cached-queries' copy of World, read once in the parent before it forks: every worker inherits it, and
    none reads it while another already serves (a verification's count would see that read)."""
    import asyncpg

    conn = await asyncpg.connect(world.postgresql_url())
    try:
        return dict(await conn.fetch("SELECT id, randomnumber FROM world"))
    finally:
        await conn.close()


async def postgresql(app):
    """aiohttp's cleanup context: this process's asyncpg pool, opened in its own event loop after the fork."""
    import asyncpg

    size = world.pool_size()
    app[POOL] = await asyncpg.create_pool(world.postgresql_url(), min_size=size, max_size=size)
    yield
    await app[POOL].close()


async def sleep(request):
    ms = int(request.match_info["ms"])
    await asyncio.sleep(ms / 1000)
    return web.Response(text=f"slept {ms}")


def make_app(static_dir, world_cache):
    app = web.Application()
    app.add_routes([
        web.get("/hello", hello),
        web.get(r"/bytes/{n:\d+}", bytes_body),
        web.get("/json", json_message),
        web.get(r"/sleep/{ms:\d+}", sleep),
        web.get(r"/mongo/{name:[a-z]+}", mongo),
        web.static("/static", static_dir),
        web.get("/db", db),
        web.get("/queries", queries),
        web.get("/updates", updates),
        web.get("/cached-queries", cached_queries),
        web.get("/fortunes", fortunes),
    ])
    if world.postgresql_url():  # empty when the measured scenario uses no database
        app[CACHE] = world_cache
        app.cleanup_ctx.append(postgresql)
    return app


def main():
    args = parse_args(__doc__)
    world_cache = asyncio.run(read_world_table()) if world.postgresql_url() else {}

    def serve():
        # run_app handles SIGTERM itself; a short shutdown_timeout keeps a stop with /sleep requests in
        # flight within the manifest's stop_timeout_s. aiohttp sets TCP_NODELAY on every connection.
        web.run_app(make_app(args.static_dir, world_cache), host=args.host, port=args.port, backlog=2048,
                    reuse_port=args.workers > 1, access_log=None, print=None, shutdown_timeout=1.0,
                    ssl_context=server_context())

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
