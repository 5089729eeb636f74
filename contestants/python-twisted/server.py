"""netarena HTTP contestant: twisted.web with a Resource tree.

Shared by python-twisted (default reactor), python-twisted-asyncio (`--reactor asyncio`) and
pypy-twisted (the same code on PyPy). With NETARENA_TLS_CERT and NETARENA_TLS_KEY set (netarena's h1-tls) the
site is served over TLS: Twisted's TLSMemoryBIOFactory around it, pyOpenSSL underneath (pinned by python-twisted,
python-twisted-asyncio and python-tornado-on-twisted, which wraps its own Site with over_tls_when_asked; pypy-twisted
pins older releases in requirements-tls.txt, cryptography built from source for PyPy 3.9, its manifest says why).

NETARENA_PROTOCOL says which protocol (unset, as when started by hand: h1-tls with a certificate given, else h1).
Over TLS, ALPN offers http/1.1 alone for h1-tls, and h2 alone for h2, which twisted.web's own HTTP/2 serves
(Twisted's http2 extra, the h2 and priority packages, pinned by python-twisted and python-twisted-asyncio). Not h2c:
Twisted has no HTTP/2 server for a cleartext connection.
"""

from __future__ import annotations

import json
import os
import sys
from typing import NoReturn

from twisted.web import http, resource, server, static

from twisted_workers import argument_parser, check_args, serve

MAX_BYTES_N = 64 * 1024 * 1024
MAX_SLEEP_MS = 60_000
SERVED_PROTOCOLS = ("h1", "h1-tls", "h2")
OVER_TLS = ("h1-tls", "h2")


def parse_int(segment: bytes, maximum: int):
    if not segment.isdigit() or len(segment) > 9:
        return None
    value = int(segment)
    return value if value <= maximum else None


class Hello(resource.Resource):
    isLeaf = True

    def render_GET(self, request):
        request.setHeader(b"content-type", b"text/plain")
        return b"Hello, World!"


class Json(resource.Resource):
    isLeaf = True

    def render_GET(self, request):
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"message": "Hello, World!"}).encode()


class Bytes(resource.Resource):
    """/bytes/{n}: a static.Data (seed 001's fixed resource) per n, built on first use and then kept
    as a child, so later requests find it without calling getChild again."""

    def getChild(self, name, request):
        n = parse_int(name, MAX_BYTES_N)
        if n is None:
            return resource.NoResource()
        child = static.Data(b"*" * n, "application/octet-stream")
        self.putChild(name, child)
        return child


class Sleep(resource.Resource):
    def getChild(self, name, request):
        ms = parse_int(name, MAX_SLEEP_MS)
        if ms is None:
            return resource.NoResource()
        return SleepFor(ms)


class SleepFor(resource.Resource):
    isLeaf = True

    def __init__(self, ms: int) -> None:
        super().__init__()
        self.ms = ms

    def render_GET(self, request):
        from twisted.internet import reactor
        body = b"slept %d" % self.ms

        def finish():
            request.setHeader(b"content-type", b"text/plain")
            request.setHeader(b"content-length", b"%d" % len(body))
            request.write(body)
            request.finish()

        call = reactor.callLater(self.ms / 1000, finish)
        # A client that goes away mid-sleep must not leave a timer that writes to a dead request.
        request.notifyFinish().addErrback(lambda _failure: call.cancel() if call.active() else None)
        return server.NOT_DONE_YET


def answer_later(request, deferred, respond, what: str) -> None:
    """Finish `request` when `deferred` (work on a thread: a query) fires: `respond(result)` gives (status,
    content type or None, body); a failure answers 500 and is logged as `what` failed. A client that went away
    meanwhile gets nothing written."""
    gone = []
    request.notifyFinish().addErrback(lambda _failure: gone.append(True))

    def answer(result):
        if gone:  # the client went away while the work ran
            return
        status, content_type, body = respond(result)
        request.setResponseCode(status)
        if content_type is not None:
            request.setHeader(b"content-type", content_type)
        request.setHeader(b"content-length", b"%d" % len(body))
        request.write(body)
        request.finish()

    def failed(failure):
        if not gone:
            request.setResponseCode(500)
            request.finish()
        sys.stderr.write(f"{what} failed: {failure.getErrorMessage()}\n")

    deferred.addCallbacks(answer, failed)


class Mongo(resource.Resource):
    def getChild(self, name, request):
        return MongoDoc(name.decode("ascii", "replace"))


class MongoDoc(resource.Resource):
    """/mongo/{name}: one find_one by _id with pymongo's synchronous client, run on Twisted's thread pool
    (deferToThread: the reactor's pool, at most 10 threads by default) so the reactor never blocks on it."""

    isLeaf = True

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def render_GET(self, request):
        from twisted.internet.threads import deferToThread

        from netarena_shared.mongo import sync_docs_collection

        def respond(doc):
            if doc is None:
                return 404, None, b"no such document"
            return 200, b"application/json", json.dumps(doc).encode()

        answer_later(request, deferToThread(lambda: sync_docs_collection().find_one({"_id": self.name})), respond,
                     "mongo query")
        return server.NOT_DONE_YET


class Database:
    """TechEmpower's database routes' pool: Twisted's own database story, twisted.enterprise.adbapi, over psycopg 3
    (a DB-API driver): ConnectionPool runs each interaction on a thread of its own pool, cp_min = cp_max = the
    manifest's {db_pool} threads, each holding one psycopg connection (autocommit), so the reactor never waits on
    PostgreSQL. The queries are netarena_shared.psycopg_world's, given adbapi's connection (which forwards
    execute and cursor to psycopg's). Built in each process that serves (a worker builds its own), after the
    reactor is installed."""

    def __init__(self) -> None:
        from twisted.enterprise import adbapi

        from netarena_shared import world

        size = world.pool_size()
        self.pool = adbapi.ConnectionPool("psycopg", world.postgresql_url(), autocommit=True,
                                          cp_min=size, cp_max=size, cp_noisy=False)


class DatabaseRoute(resource.Resource):
    """One of /db, /queries, /updates, /fortunes: `query(conn, args)` run on the pool's thread with one connection
    (adbapi's runWithConnection), its result turned into the body by `to_body(rows)` on the reactor."""

    isLeaf = True

    def __init__(self, database: Database, query, content_type: bytes, to_body) -> None:
        super().__init__()
        self.database, self.query, self.content_type, self.to_body = database, query, content_type, to_body

    def render_GET(self, request):
        args = {key.decode(): values[0].decode() for key, values in request.args.items() if values}
        answer_later(request, self.database.pool.runWithConnection(self.query, args),
                     lambda rows: (200, self.content_type, self.to_body(rows)), "database query")
        return server.NOT_DONE_YET


class CachedQueries(resource.Resource):
    """/cached-queries?count=N: N rows from this process's copy of World (`cache`), no query, answered on the
    reactor at once."""

    isLeaf = True

    def __init__(self, cache: dict) -> None:
        super().__init__()
        self.cache = cache

    def render_GET(self, request):
        from netarena_shared.pg import cached_worlds

        count = request.args.get(b"count", [b""])[0].decode("ascii", "replace")
        request.setHeader(b"content-type", b"application/json")
        return json.dumps(cached_worlds(self.cache, count)).encode()


def add_database_routes(root: resource.Resource) -> None:
    """TechEmpower's db, queries, updates, fortunes and cached-queries. cached-queries' copy of World is read here,
    as the process builds its site: before it listens with one worker; with several, each spawned worker reads its
    own after the master opened the port (netarena counts such a whole-table read as a cache fill, not as a
    waiting request's query)."""
    from netarena_shared import psycopg_world as pw
    from netarena_shared import world

    database = Database()
    root.putChild(b"cached-queries", CachedQueries(pw.read_world_cache()))
    as_json = lambda rows: json.dumps(rows).encode()  # noqa: E731
    json_type = b"application/json"
    root.putChild(b"db", DatabaseRoute(database, lambda conn, args: pw.read_worlds(conn, 1)[0], json_type, as_json))
    root.putChild(b"queries", DatabaseRoute(database, lambda conn, args: pw.some_worlds(conn, args.get("queries")),
                                            json_type, as_json))
    root.putChild(b"updates", DatabaseRoute(database, lambda conn, args: pw.update_worlds(conn, args.get("queries")),
                                            json_type, as_json))
    # No template engine here (twisted.web.template builds pages from Python objects): the shared hand-built page,
    # every message escaped by html.escape.
    root.putChild(b"fortunes", DatabaseRoute(database, lambda conn, args: pw.fortunes(conn),
                                             b"text/html; charset=utf-8",
                                             lambda rows: world.fortunes_page(rows).encode()))


class NoDelayChannel(http.HTTPChannel):
    def connectionMade(self):
        # Twisted leaves Nagle on; small responses would then wait for the client's delayed ACK.
        self.transport.setTcpNoDelay(True)
        super().connectionMade()


class QuietSite(server.Site):
    # Per-request access logging is off, as in seed 001 (`--silence`): it costs more than a hello.
    protocol = NoDelayChannel
    noisy = False

    def log(self, request):
        pass

    def acceptableProtocols(self):
        # What ALPN offers over TLS: TLSMemoryBIOFactory asks the wrapped site (IProtocolNegotiationFactory), and
        # twisted.web's Site would put h2 first whenever the h2 package is installed, which NoDelayChannel never speaks.
        return [b"http/1.1"]


class QuietHttp2Site(QuietSite):
    """QuietSite serving HTTP/2 alone over TLS: ALPN offers h2 only, and twisted.web's own channel factory
    (HTTPFactory's default, which QuietSite replaces) starts each connection as an HTTPChannel behind a proxy that, on
    the first bytes after the handshake, hands it to twisted.web._http2.H2Connection when the TLS transport negotiated
    h2. Both channels set TCP_NODELAY themselves (the TLS transport provides the TCP one's interfaces and passes the
    call on)."""

    protocol = server.Site.protocol

    def acceptableProtocols(self):
        return [b"h2"]


def build_site(static_dir: str | None, protocol: str = "h1") -> server.Site:
    root = resource.Resource()
    root.putChild(b"hello", Hello())
    root.putChild(b"json", Json())
    root.putChild(b"bytes", Bytes())
    root.putChild(b"sleep", Sleep())
    if os.environ.get("NETARENA_MONGO_URL"):  # where the manifest asks for the mongo scenario (and installs pymongo)
        root.putChild(b"mongo", Mongo())
    if os.environ.get("NETARENA_POSTGRESQL_URL"):  # where the manifest asks for them (and installs psycopg)
        add_database_routes(root)
    if static_dir is not None:
        # Twisted's default type for unknown extensions is text/html; the bytes/{n} files have none.
        root.putChild(b"static", static.File(static_dir, defaultType="application/octet-stream"))
    return (QuietHttp2Site if protocol == "h2" else QuietSite)(root)


def started_for() -> str:
    """The protocol netarena started this server for: NETARENA_PROTOCOL, or when it is unset (a start by hand) h1-tls
    with a certificate given and h1 without. One that is not served, or one over TLS without its PEM files, ends the
    process with its reason (exit 2)."""
    protocol = os.environ.get("NETARENA_PROTOCOL") or ("h1-tls" if os.environ.get("NETARENA_TLS_CERT") else "h1")
    if protocol == "h2c":
        refuse("NETARENA_PROTOCOL=h2c: Twisted has no HTTP/2 server for a cleartext connection (its HTTP/2 is "
               "chosen by ALPN over TLS only)")
    if protocol not in SERVED_PROTOCOLS:
        refuse(f"NETARENA_PROTOCOL must be h1, h1-tls or h2 (this server serves no other), got {protocol!r}")
    if protocol in OVER_TLS:
        for variable in ("NETARENA_TLS_CERT", "NETARENA_TLS_KEY"):
            if not os.environ.get(variable):
                refuse(f"NETARENA_PROTOCOL={protocol} is over TLS: set {variable} to a PEM file (netarena sets "
                       "NETARENA_TLS_CERT and NETARENA_TLS_KEY for an h1-tls or h2 level)")
    return protocol


def refuse(reason: str) -> NoReturn:
    sys.stderr.write(f"server.py: {reason}\n")
    sys.exit(2)


def over_tls_when_asked(site: server.Site):
    """The site as is for a cleartext start; wrapped in TLS (Twisted's TLSMemoryBIOFactory, pyOpenSSL's OpenSSL:
    TLS 1.2 and 1.3) for h1-tls and h2. ALPN offers what the site's acceptableProtocols says: http/1.1 for a QuietSite,
    h2 for a QuietHttp2Site, the one site an h2 start takes."""
    protocol = started_for()
    if protocol not in OVER_TLS:
        return site
    if protocol == "h2" and not isinstance(site, QuietHttp2Site):
        refuse("NETARENA_PROTOCOL=h2: this site's channels speak HTTP/1.1 only")
    from twisted.internet import ssl
    from twisted.protocols.tls import TLSMemoryBIOFactory

    try:
        with open(os.environ["NETARENA_TLS_CERT"], "rb") as cert_file, \
                open(os.environ["NETARENA_TLS_KEY"], "rb") as key_file:
            pem = ssl.PrivateCertificate.loadPEM(cert_file.read() + key_file.read())
    except OSError as err:
        refuse(f"cannot read the TLS certificate or key ({err}); NETARENA_TLS_CERT and NETARENA_TLS_KEY must name PEM "
               "files")
    options = ssl.CertificateOptions(privateKey=pem.privateKey.original, certificate=pem.original,
                                     raiseMinimumTo=ssl.TLSVersion.TLSv1_2)
    return TLSMemoryBIOFactory(options, False, site)


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--static-dir")
    args = parser.parse_args()
    check_args(parser, args)
    protocol = started_for()  # refused here, before the port is opened
    if args.static_dir is not None and not os.path.isdir(args.static_dir):
        parser.error(f"--static-dir {args.static_dir!r} is not a directory; pass the folder holding the static file set")
    worker_argv = [sys.executable, os.path.abspath(__file__), "--port", str(args.port), "--workers", "1",
                   "--reactor", args.reactor]
    if args.static_dir:
        worker_argv += ["--static-dir", args.static_dir]
    return serve(args, lambda: over_tls_when_asked(build_site(args.static_dir, protocol)), worker_argv)


if __name__ == "__main__":
    sys.exit(main())
