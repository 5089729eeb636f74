"""netarena contestant: tornado.web.Application, one RequestHandler per route."""
import argparse
import asyncio
import os
import signal
import sys

import tornado.httpserver
import tornado.ioloop
import tornado.netutil
import tornado.process
import tornado.web

BYTES_SIZES = (40, 10000, 524288)
# Built once at start: the catalog measures serving a body, not building it.
BYTES_BODIES = {n: b"*" * n for n in BYTES_SIZES}


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
        (r"/static/(.*)", tornado.web.StaticFileHandler, {"path": static_dir}),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--static-dir", required=True)
    args = parser.parse_args()
    if not os.path.isdir(args.static_dir):
        sys.exit(f"--static-dir {args.static_dir!r} is not a directory; pass the generated static file set")
    if args.workers < 1:
        sys.exit(f"--workers must be >= 1, got {args.workers}")

    sockets = tornado.netutil.bind_sockets(args.port, address="127.0.0.1", backlog=2048)
    if args.workers > 1:
        # Tornado's documented multi-process mode: bind first, then fork.
        # fork_processes' parent only supervises: it returns only in the children and exits 0 once every child
        # exited 0. So it ignores the stop signal (which reaches the whole process group) and waits for them,
        # rather than exiting first and leaving them orphaned.
        signal.signal(signal.SIGTERM, lambda *_: None)
        tornado.process.fork_processes(args.workers)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = tornado.httpserver.HTTPServer(make_app(args.static_dir))
    server.add_sockets(sockets)
    tornado.ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
