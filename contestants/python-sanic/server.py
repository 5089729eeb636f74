"""netarena contestant: a Sanic application on Sanic's own server (its worker manager, uvloop, httptools).

Started with app.run, Sanic's documented low-level way to run it, rather than the `sanic` command, because
only app.run takes the listen backlog (Sanic's default of 100 is below the catalog's minimum). Sanic spawns
its worker processes, which import this module again: the app is built at import, from the environment (the
manifest sets the static folder from {static_dir}); the command line is read by the main process only.
"""
import asyncio
import email.utils
import multiprocessing
import os

from sanic import Sanic
from sanic.exceptions import NotFound
from sanic.response import html, json, raw, text

from netarena_shared.bodies import BYTES_BODIES, HELLO
from netarena_shared.cli import parse_args
from netarena_shared import pg, world
from netarena_shared.mongo import docs_collection

STATIC_DIR_VAR = "NETARENA_STATIC_DIR"
# The catalog's minimum is 1024 (docs/scenarios.md); the other contestants ask for 2048.
LISTEN_BACKLOG = 2048

app = Sanic("netarena")
# A stop with /sleep requests in flight ends within the manifest's stop_timeout_s (Sanic waits 15 s by default).
app.config.GRACEFUL_SHUTDOWN_TIMEOUT = 2.0


@app.get("/hello")
async def hello(request):
    return text(HELLO.decode())


@app.get("/bytes/<n:int>")
async def bytes_body(request, n):
    body = BYTES_BODIES.get(n)
    if body is None:
        raise NotFound("unknown size")
    return raw(body, content_type="application/octet-stream")


@app.get("/json")
async def json_message(request):
    return json({"message": "Hello, World!"})


@app.get("/sleep/<ms:int>")
async def sleep(request, ms):
    await asyncio.sleep(ms / 1000)
    return text(f"slept {ms}")


@app.get("/mongo/<name:str>")
async def mongo(request, name):
    # One query by _id through PyMongo's asyncio client, one per worker process (netarena_shared.mongo).
    doc = await docs_collection().find_one({"_id": name})
    if doc is None:
        raise NotFound("no such document")
    return json(doc)


if world.postgresql_url():  # empty when the measured scenario uses no database
    import jinja2

    # Sanic has no template engine of its own; Jinja2 is the one its docs (and sanic-ext's templating) use, here
    # with autoescaping for .html templates: the messages are escaped by the engine.
    FORTUNES_PAGE = jinja2.Environment(loader=jinja2.FileSystemLoader(world.TEMPLATES_DIR),
                                       autoescape=jinja2.select_autoescape()).get_template("fortunes.html")

    @app.main_process_start
    async def read_world(app):
        """cached-queries' copy of World, read once by the main process before it binds the port: Sanic binds
        the socket before its workers start, so a worker reading World itself could do it with a request
        already waiting (a verification's count would see that read). Workers are spawned, not forked, so the
        copy reaches them through Sanic's shared_ctx as shared memory (a multiprocessing array indexed by id)."""
        table = await pg.read_world_table()
        numbers = multiprocessing.Array("i", max(table) + 1)
        for id_, number in table.items():
            numbers[id_] = number
        app.shared_ctx.world = numbers

    @app.before_server_start
    async def open_postgresql(app):
        """Each worker process's asyncpg pool (netarena_shared.pg), opened in its event loop before it serves,
        and its own dict of World copied from the shared array (no query)."""
        app.ctx.pool = await pg.open_pool()
        numbers = app.shared_ctx.world
        app.ctx.cache = {id_: numbers[id_] for id_ in range(1, len(numbers))}

    @app.after_server_stop
    async def close_postgresql(app):
        await app.ctx.pool.close()

    def te_headers():
        """The Server and Date headers TechEmpower requires, which Sanic does not send; set on these routes
        only, so the other scenarios' answers stay as Sanic makes them."""
        return {"Server": "sanic", "Date": email.utils.formatdate(usegmt=True)}

    # TechEmpower's database routes, on the pool and cache of app.ctx.
    @app.get("/db")
    async def db(request):
        return json(await pg.one_world(request.app.ctx.pool), headers=te_headers())

    @app.get("/queries")
    async def queries(request):
        return json(await pg.some_worlds(request.app.ctx.pool, request.args.get("queries")), headers=te_headers())

    @app.get("/updates")
    async def updates(request):
        return json(await pg.update_worlds(request.app.ctx.pool, request.args.get("queries")), headers=te_headers())

    @app.get("/cached-queries")
    async def cached_queries(request):
        return json(pg.cached_worlds(request.app.ctx.cache, request.args.get("count")), headers=te_headers())

    @app.get("/fortunes")
    async def fortunes(request):
        return html(FORTUNES_PAGE.render(fortunes=await pg.fortunes(request.app.ctx.pool)), headers=te_headers())


static_dir = os.environ.get(STATIC_DIR_VAR, "")
if not os.path.isdir(static_dir):
    raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
# Sanic's static route: files under the folder, streamed by Sanic's file response.
app.static("/static", static_dir)


if __name__ == "__main__":
    args = parse_args(__doc__, static_dir=False)
    # h1-tls: netarena names the run's certificate and key in these variables, and sets neither for a cleartext
    # start. Given as a dict, Sanic makes its own context (sanic.http.tls.CertSimple: TLS 1.2 and 1.3, ALPN
    # http/1.1 only), as its docs show.
    tls_cert = os.environ.get("NETARENA_TLS_CERT")
    tls = {"cert": tls_cert, "key": os.environ["NETARENA_TLS_KEY"]} if tls_cert else None
    app.run(host=args.host, port=args.port, workers=args.workers, backlog=LISTEN_BACKLOG, access_log=False,
            motd=False, single_process=False, ssl=tls)
