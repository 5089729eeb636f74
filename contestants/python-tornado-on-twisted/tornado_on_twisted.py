"""netarena contestant: Tornado on Twisted (seed 004).

Twisted does the networking and the HTTP parsing (twisted.web's HTTPChannel and Request, on
AsyncioSelectorReactor); Tornado runs the application: python-tornado's own tornado.web.Application,
handed each request as a tornado.httputil.HTTPServerRequest whose `connection` writes the response back
through the Twisted request. This is what Tornado's Twisted integration of 2009 did (a Tornado
application behind Twisted's HTTP server); Tornado 6 has no such integration, and Tornado 5.1's
tornado.platform.twisted (which runs on PyPy 3.9 only) lets Tornado's own HTTPServer and IOStream read
the sockets and parse HTTP, so Twisted would do neither.

One event loop serves both: Twisted's asyncio reactor runs the asyncio loop, and Tornado's IOLoop is that
same loop (Tornado 6 is built on asyncio), so `await asyncio.sleep()` in a handler yields to Twisted, and so
does python-tornado's asyncpg pool (TechEmpower's database routes), opened on that loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_module(name: str, path: str):
    """Import a sibling contestant's file by path: python-tornado's and python-twisted's are both server.py."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Context:
    """What HTTPServerRequest reads from `connection.context`: the peer's address and the scheme ("https" over
    h1-tls's TLS, as Tornado's own HTTPServer says for a request that came over it)."""

    def __init__(self, remote_ip: str | None, secure: bool) -> None:
        self.remote_ip = remote_ip
        self.protocol = "https" if secure else "http"


def open_database(app) -> None:
    """python-tornado's asyncpg pool (netarena_shared.pg) and cached-queries' copy of World on the application's
    settings, where its database handlers look for them. Opened and read on the reactor's asyncio loop before the
    reactor runs (run_until_complete: the pool binds to that loop), so both are ready before this process accepts
    (a spawned worker's read comes after the master opened the port: netarena counts such a whole-table read as a
    cache fill, not as a waiting request's query); the pool closed when the reactor shuts down."""
    from twisted.internet import defer, reactor

    from netarena_shared import pg

    loop = asyncio.get_event_loop()  # the loop asyncioreactor.install() made current, the one the reactor runs
    pool = app.settings["pool"] = loop.run_until_complete(pg.open_pool())
    app.settings["world_cache"] = loop.run_until_complete(pg.read_world_table(pool))
    reactor.addSystemEventTrigger("before", "shutdown",
                                  lambda: defer.Deferred.fromFuture(asyncio.ensure_future(pool.close())))


def build_site(static_dir: str | None, serving: bool):
    """The Twisted Site whose one resource hands every request to the Tornado application; `serving`: this
    process accepts connections (a single process or an adopted worker, not the master of several), and opens
    the database pool when the manifest gave a database.

    Imported here, after twisted_workers.serve installed the asyncio reactor: twisted.web pulls in the
    global reactor, which would otherwise be the default (epoll) one."""
    from tornado import httputil
    from twisted.internet import interfaces
    from twisted.web import resource, server
    from zope.interface import implementer

    from netarena_shared import world

    twisted_site = load_module("twisted_site", os.path.join(HERE, "..", "python-twisted", "server.py"))
    tornado_app = load_module("tornado_app", os.path.join(HERE, "..", "python-tornado", "server.py"))
    app = tornado_app.make_app(static_dir)
    if serving and world.postgresql_url() is not None:  # None when the measured scenario uses no database
        open_database(app)

    def done_future() -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    @implementer(interfaces.IPushProducer)
    class TwistedConnection(httputil.HTTPConnection):
        """Tornado's HTTPConnection interface on one twisted.web Request.

        Registered as the request's push producer, so Twisted's transport says when its send buffer is
        full: the Future of a write is then left pending until it drains, which is how Tornado's handlers
        (StaticFileHandler's chunks, `await self.flush()`) wait for a slow client."""

        def __init__(self, request) -> None:
            self.request = request
            self.context = _Context(getattr(request.getClientAddress(), "host", None), request.isSecure())
            self.close_callback = None
            self.waiting: list[asyncio.Future] = []
            self.paused = False
            self.finished = False
            request.registerProducer(self, True)
            request.notifyFinish().addErrback(self._lost)

        # -- Tornado's side: the handler's response
        def write_headers(self, start_line, headers, chunk=None):
            request = self.request
            request.setResponseCode(start_line.code, start_line.reason.encode("latin-1"))
            # Twisted set its own Server, Date and Content-Type before rendering; Tornado's replace them.
            request.responseHeaders.removeHeader(b"server")
            request.responseHeaders.removeHeader(b"date")
            request.responseHeaders.removeHeader(b"content-type")
            for name, value in headers.get_all():
                request.responseHeaders.addRawHeader(name.encode("latin-1"), value.encode("latin-1"))
            return self.write(chunk) if chunk else self._after_write()

        def write(self, chunk):
            if not self.finished:
                self.request.write(chunk)
            return self._after_write()

        def finish(self):
            if self.finished:
                return
            self.finished = True
            self.request.unregisterProducer()
            self.request.finish()

        def set_close_callback(self, callback):
            self.close_callback = callback

        def _after_write(self):
            if not self.paused or self.finished:
                return done_future()
            future = asyncio.get_running_loop().create_future()
            self.waiting.append(future)
            return future

        def _lost(self, _failure):
            # The client went away before the response was finished: nothing more is written (finish() is
            # then a no-op), and a handler waiting on a write or on_connection_close goes on.
            self.finished = True
            # A request whose channel is already gone (the connection closed while a query or a sleep ran: the end
            # of every load) has nothing left to unregister from; Request.unregisterProducer would fail on it.
            if self.request.producer is not None and self.request.channel is not None:
                self.request.unregisterProducer()
            self._release()
            if self.close_callback is not None:
                callback, self.close_callback = self.close_callback, None
                callback()

        def _release(self):
            waiting, self.waiting = self.waiting, []
            for future in waiting:
                if not future.done():
                    future.set_result(None)

        # -- Twisted's side: the transport's flow control
        def pauseProducing(self):
            self.paused = True

        def resumeProducing(self):
            self.paused = False
            self._release()

        def stopProducing(self):
            self.paused = False
            self._release()

    class TornadoResource(resource.Resource):
        """Every path: Twisted parsed the request; build Tornado's HTTPServerRequest and let the app run it."""

        isLeaf = True

        def render(self, request):
            headers = httputil.HTTPHeaders()
            for name, values in request.requestHeaders.getAllRawHeaders():
                for value in values:
                    headers.add(name.decode("latin-1"), value.decode("latin-1"))
            request.content.seek(0)
            start_line = httputil.RequestStartLine(request.method.decode("latin-1"),
                                                   request.uri.decode("latin-1"),
                                                   request.clientproto.decode("latin-1"))
            tornado_request = httputil.HTTPServerRequest(start_line=start_line, headers=headers,
                                                         body=request.content.read(),
                                                         connection=TwistedConnection(request))
            # The legacy HTTPServer interface: route, build the handler, run it (its own task on the loop).
            app(tornado_request)
            return server.NOT_DONE_YET

    # h1-tls: python-twisted's TLSMemoryBIOFactory around the Site when netarena gives a certificate and key.
    return twisted_site.over_tls_when_asked(twisted_site.QuietSite(TornadoResource()))


def main() -> int:
    from twisted_workers import argument_parser, check_args, serve

    parser = argument_parser(__doc__)
    parser.add_argument("--static-dir", required=True)
    args = parser.parse_args()
    check_args(parser, args)
    if args.reactor != "asyncio":
        parser.error("--reactor must be asyncio: Tornado's handlers run on the asyncio loop the reactor drives")
    if not os.path.isdir(args.static_dir):
        parser.error(f"--static-dir {args.static_dir!r} is not a directory; pass the folder holding the static file set")
    worker_argv = [sys.executable, os.path.abspath(__file__), "--port", str(args.port), "--workers", "1",
                   "--reactor", "asyncio", "--static-dir", args.static_dir]
    serving = args.workers == 1 or args.adopt_fd is not None
    return serve(args, lambda: build_site(args.static_dir, serving), worker_argv)


if __name__ == "__main__":
    sys.exit(main())
