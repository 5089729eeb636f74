"""netarena contestant: a plain WSGI app on gevent.pywsgi.WSGIServer, one greenlet per connection.

The standard library is monkey-patched first, as gevent applications that use a blocking client library do:
pymongo's sockets and locks then yield to the hub (PyMongo supports gevent this way), so /mongo blocks only
its own greenlet. psycopg 3, for TechEmpower's database routes, is imported after the patching too, so its
waits are on gevent's cooperative select.poll (netarena_shared.psycopg_world).
"""
from gevent import monkey

monkey.patch_all()

import json  # noqa: E402  (after patch_all, as gevent requires)
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
from urllib.parse import parse_qs  # noqa: E402

import gevent  # noqa: E402
import gevent.socket  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402
import gridfs.errors  # noqa: E402  (pymongo's GridFS)

from netarena_shared import prefork  # noqa: E402
from netarena_shared.cli import parse_args  # noqa: E402
from netarena_shared import world  # noqa: E402
from netarena_shared.mongo import MONGO_URL_VAR, sync_docs_collection, sync_gridfs_bucket  # noqa: E402
from netarena_shared.wsgi_app import make_app  # noqa: E402


def find_document(name):
    # The synchronous client on patched sockets: the query waits in this greenlet, the hub serves the rest.
    return sync_docs_collection().find_one({"_id": name})


def open_gridfs_file(name):
    """The newest file stored under `name` in the bucket (pymongo's GridFS), or None."""
    try:
        return sync_gridfs_bucket().open_download_stream_by_name(name)
    except gridfs.errors.NoFile:
        return None


def with_database_routes(app):
    """TechEmpower's database routes (psycopg 3, a psycopg_pool per worker process: netarena_shared.psycopg_world)
    in front of the shared WSGI app. The World cache for cached-queries is read here, in the parent before it binds
    the port and forks, so no request can wait while that read runs. pywsgi sends a Date header but no Server: the
    answers carry both, as TechEmpower requires."""
    from netarena_shared import psycopg_world as pw
    from netarena_shared.pg import cached_worlds

    cache = pw.read_world_cache()
    pool = pw.ProcessPool()

    def respond(start_response, content_type, body):
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body))),
                                  *world.server_date_headers("gevent")])
        return [body]

    def database_app(environ, start_response):
        path = environ["PATH_INFO"]
        # ?queries= / ?count= as it came (None when absent or empty: TechEmpower's clamp makes it 1).
        params = parse_qs(environ.get("QUERY_STRING", ""))
        if path == "/cached-queries":
            rows = cached_worlds(cache, params.get("count", [None])[0])
            return respond(start_response, "application/json", json.dumps(rows).encode())
        if path not in ("/db", "/queries", "/updates", "/fortunes"):
            return app(environ, start_response)
        # The request's greenlet holds one connection of this worker's pool while it queries.
        with pool.connection() as conn:
            if path == "/fortunes":
                page = world.fortunes_page(pw.fortunes(conn))
                return respond(start_response, "text/html; charset=utf-8", page.encode())
            if path == "/db":
                rows = pw.read_worlds(conn, 1)[0]
            elif path == "/queries":
                rows = pw.some_worlds(conn, params.get("queries", [None])[0])
            else:
                rows = pw.update_worlds(conn, params.get("queries", [None])[0])
        return respond(start_response, "application/json", json.dumps(rows).encode())

    return database_app


def main():
    args = parse_args(__doc__)
    mongo = bool(os.environ.get(MONGO_URL_VAR))
    app = make_app(args.static_dir, sleep=gevent.sleep, find_document=find_document if mongo else None,
                   open_gridfs_file=open_gridfs_file if mongo else None)
    if world.postgresql_url():  # empty when the measured scenario uses no database
        app = with_database_routes(app)
    # A gevent socket: a plain one would block the whole hub in accept().
    listener = gevent.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # pywsgi writes headers and body separately: without TCP_NODELAY every response waits ~40 ms
    # (Nagle + delayed ACK). Linux copies the option from the listening socket to accepted ones.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind((args.host, args.port))
    listener.listen(2048)

    def serve():
        server = WSGIServer(listener, app, log=None)
        gevent.signal_handler(signal.SIGTERM, server.stop)
        server.serve_forever()

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
