"""netarena contestant: aiohttp.web application, one coroutine per request."""
import asyncio

from aiohttp import web

from netarena_shared import prefork
from netarena_shared.bodies import BYTES_BODIES
from netarena_shared.cli import parse_args
from netarena_shared import pg, world
from netarena_shared.mongo import docs_collection
from netarena_shared.tls import server_context

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
    return web.json_response(await pg.one_world(request.app[POOL]))


async def queries(request):
    return web.json_response(await pg.some_worlds(request.app[POOL], request.query.get("queries")))


async def updates(request):
    return web.json_response(await pg.update_worlds(request.app[POOL], request.query.get("queries")))


async def cached_queries(request):
    return web.json_response(pg.cached_worlds(request.app[CACHE], request.query.get("count")))


async def fortunes(request):
    # aiohttp has no template engine of its own: the page is built by hand, every message escaped by html.escape.
    return web.Response(text=world.fortunes_page(await pg.fortunes(request.app[POOL])), content_type="text/html")


async def postgresql(app):
    """aiohttp's cleanup context: this process's asyncpg pool, opened in its own event loop after the fork."""
    app[POOL] = await pg.open_pool()
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
    # cached-queries' copy of World, read once in the parent before it forks: every worker inherits it, and none
    # reads it while another already serves (a verification's count would see that read).
    world_cache = asyncio.run(pg.read_world_table()) if world.postgresql_url() else {}

    def serve():
        # run_app handles SIGTERM itself; a short shutdown_timeout keeps a stop with /sleep requests in
        # flight within the manifest's stop_timeout_s. aiohttp sets TCP_NODELAY on every connection.
        web.run_app(make_app(args.static_dir, world_cache), host=args.host, port=args.port, backlog=2048,
                    reuse_port=args.workers > 1, access_log=None, print=None, shutdown_timeout=1.0,
                    ssl_context=server_context())

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
