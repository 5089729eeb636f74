"""netarena contestant: tornado.web.Application, one RequestHandler per route."""
import asyncio

import tornado.httpserver
import tornado.ioloop
import tornado.web

from netarena_shared.bodies import BYTES_BODIES
from netarena_shared.cli import parse_args
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


def make_app(static_dir):
    return tornado.web.Application([
        (r"/hello", HelloHandler),
        (r"/bytes/([0-9]+)", BytesHandler),
        (r"/json", JsonHandler),
        (r"/sleep/([0-9]+)", SleepHandler),
        (r"/mongo/([a-z]+)", MongoHandler),
        (r"/static/(.*)", tornado.web.StaticFileHandler, {"path": static_dir}),
    ])


def main():
    args = parse_args(__doc__)
    sockets = bind_and_fork(args.host, args.port, args.workers)
    server = tornado.httpserver.HTTPServer(make_app(args.static_dir), ssl_options=server_context())
    serve_until_stopped(server, sockets)


if __name__ == "__main__":
    main()
