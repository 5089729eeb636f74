"""netarena contestant: tornado.web.Application, one RequestHandler per route."""
import asyncio
import contextlib
import os

import tornado.escape
import tornado.httpserver
import tornado.ioloop
import tornado.web

from netarena_shared.bodies import BYTES_BODIES
from netarena_shared.cli import parse_args
from netarena_shared import pg, world
from netarena_shared.mongo import docs_collection
from netarena_shared.tls import server_context
from tornado_workers import bind_and_fork, serve_until_stopped


class HelloHandler(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/plain")
        self.write("Hello, World!")


class BytesHandler(tornado.web.RequestHandler):
    def get(self, n):
        body = BYTES_BODIES.get(int(n))
        if body is None:
            raise tornado.web.HTTPError(404)
        self.set_header("Content-Type", "application/octet-stream")
        self.write(body)


class JsonHandler(tornado.web.RequestHandler):
    def get(self):
        # Tornado serializes a dict with json_encode and sets application/json itself.
        self.write({"message": "Hello, World!"})


class MongoHandler(tornado.web.RequestHandler):
    async def get(self, name):
        # One query by _id; the collection is PyMongo's asyncio client's (netarena_shared.mongo).
        doc = await docs_collection().find_one({"_id": name})
        if doc is None:
            raise tornado.web.HTTPError(404)
        self.write(doc)


class SleepHandler(tornado.web.RequestHandler):
    async def get(self, ms):
        await asyncio.sleep(int(ms) / 1000)
        self.set_header("Content-Type", "text/plain")
        self.write(f"slept {ms}")


# TechEmpower's database routes, on the pool and World cache in the application's settings (make_app, postgresql).
class WorldHandler(tornado.web.RequestHandler):
    def write_json(self, value):
        # RequestHandler.write takes a dict but refuses a list (a JSON array); the arrays go through Tornado's
        # json_encode with the header write would have set.
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.write(tornado.escape.json_encode(value))


class DbHandler(WorldHandler):
    async def get(self):
        self.write(await pg.one_world(self.settings["pool"]))


class QueriesHandler(WorldHandler):
    async def get(self):
        self.write_json(await pg.some_worlds(self.settings["pool"], self.get_query_argument("queries", None)))


class UpdatesHandler(WorldHandler):
    async def get(self):
        self.write_json(await pg.update_worlds(self.settings["pool"], self.get_query_argument("queries", None)))


class CachedQueriesHandler(WorldHandler):
    def get(self):
        self.write_json(pg.cached_worlds(self.settings["world_cache"], self.get_query_argument("count", None)))


class FortunesHandler(tornado.web.RequestHandler):
    async def get(self):
        # tornado.template, which escapes every {{ }} expression (autoescape xhtml_escape, Tornado's default).
        self.render("fortunes.html", fortunes=await pg.fortunes(self.settings["pool"]))


@contextlib.asynccontextmanager
async def postgresql(app):
    """This worker process's asyncpg pool (netarena_shared.pg), opened in its own event loop after the fork."""
    app.settings["pool"] = await pg.open_pool()
    try:
        yield
    finally:
        await app.settings["pool"].close()


def make_app(static_dir, world_cache=None):
    """The application; `world_cache` is cached-queries' copy of World (main), absent where no database is served.
    python-tornado-on-twisted serves this app with the database pool and the copy of World that its own
    open_database puts on the settings."""
    return tornado.web.Application([
        (r"/hello", HelloHandler),
        (r"/bytes/([0-9]+)", BytesHandler),
        (r"/json", JsonHandler),
        (r"/sleep/([0-9]+)", SleepHandler),
        (r"/mongo/([a-z]+)", MongoHandler),
        (r"/static/(.*)", tornado.web.StaticFileHandler, {"path": static_dir}),
        (r"/db", DbHandler),
        (r"/queries", QueriesHandler),
        (r"/updates", UpdatesHandler),
        (r"/cached-queries", CachedQueriesHandler),
        (r"/fortunes", FortunesHandler),
    ], template_path=os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates"), world_cache=world_cache)


def main():
    args = parse_args(__doc__)
    database = world.postgresql_url() is not None  # None when the measured scenario uses no database
    # cached-queries' copy of World, read once before the port is bound and the workers forked: every worker
    # inherits it, and none reads it while another already serves (a verification's count would see that read).
    world_cache = asyncio.run(pg.read_world_table()) if database else {}
    sockets = bind_and_fork(args.host, args.port, args.workers)
    app = make_app(args.static_dir, world_cache)
    server = tornado.httpserver.HTTPServer(app, ssl_options=server_context())
    serve_until_stopped(server, sockets, postgresql(app) if database else None)


if __name__ == "__main__":
    main()
