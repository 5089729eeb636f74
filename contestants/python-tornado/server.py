"""netarena contestant: tornado.web.Application, one RequestHandler per route."""
import asyncio
import os

import tornado.httpserver
import tornado.ioloop
import tornado.web

from netarena_shared.bodies import BYTES_BODIES
from netarena_shared.cli import parse_args
from tornado_workers import bind_and_fork, serve_until_stopped

MONGO_URL_VAR = "NETARENA_MONGO_URL"  # set by the manifest from {mongo_url}


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
    # PyMongo's asyncio client (pymongo.AsyncMongoClient, the successor of Motor), one per worker process,
    # created in the worker's own event loop on first use (a client must not cross the fork).
    collection = None

    async def get(self, name):
        if MongoHandler.collection is None:
            from pymongo import AsyncMongoClient

            MongoHandler.collection = AsyncMongoClient(os.environ[MONGO_URL_VAR]).get_default_database()["docs"]
        doc = await MongoHandler.collection.find_one({"_id": name})
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
    sockets = bind_and_fork(args.port, args.workers)
    server = tornado.httpserver.HTTPServer(make_app(args.static_dir))
    serve_until_stopped(server, sockets)


if __name__ == "__main__":
    main()
