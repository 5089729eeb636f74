"""netarena contestant: aiohttp.web application, one coroutine per request."""
import asyncio

from aiohttp import web

from netarena_shared import prefork
from netarena_shared.bodies import BYTES_BODIES
from netarena_shared.cli import parse_args
from netarena_shared.mongo import docs_collection


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


async def sleep(request):
    ms = int(request.match_info["ms"])
    await asyncio.sleep(ms / 1000)
    return web.Response(text=f"slept {ms}")


def make_app(static_dir):
    app = web.Application()
    app.add_routes([
        web.get("/hello", hello),
        web.get(r"/bytes/{n:\d+}", bytes_body),
        web.get("/json", json_message),
        web.get(r"/sleep/{ms:\d+}", sleep),
        web.get(r"/mongo/{name:[a-z]+}", mongo),
        web.static("/static", static_dir),
    ])
    return app


def main():
    args = parse_args(__doc__)

    def serve():
        # run_app handles SIGTERM itself; a short shutdown_timeout keeps a stop with /sleep requests in
        # flight within the manifest's stop_timeout_s. aiohttp sets TCP_NODELAY on every connection.
        web.run_app(make_app(args.static_dir), host=args.host, port=args.port, backlog=2048,
                    reuse_port=args.workers > 1, access_log=None, print=None, shutdown_timeout=1.0)

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
