"""netarena contestant: a plain WSGI app on gevent.pywsgi.WSGIServer, one greenlet per connection.

The standard library is monkey-patched first, as gevent applications that use a blocking client library do:
pymongo's sockets and locks then yield to the hub (PyMongo supports gevent this way), so /mongo blocks only
its own greenlet. psycopg 3, for TechEmpower's database routes, is imported after the patching too, so its
waits are on gevent's cooperative select.poll (netarena_shared.psycopg_world).

With NETARENA_TLS_CERT and NETARENA_TLS_KEY set (netarena's h1-tls) pywsgi serves HTTPS: its ssl_context argument,
netarena_shared.tls's context, which is gevent's own SSLContext once the standard library is patched.
"""
from gevent import monkey

monkey.patch_all()

import os  # noqa: E402  (after patch_all, as gevent requires)
import signal  # noqa: E402
import socket  # noqa: E402
import ssl  # noqa: E402

import gevent  # noqa: E402
import gevent.socket  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402
import gridfs.errors  # noqa: E402  (pymongo's GridFS)

from netarena_shared import prefork, tls  # noqa: E402
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


class Server(WSGIServer):
    """pywsgi's server, quiet about a client that leaves or fails its TLS handshake (netarena's readiness check connects
    and closes without one): not a server error, yet gevent would print a traceback for each."""

    def wrap_socket_and_handle(self, client_socket, address):
        try:
            return super().wrap_socket_and_handle(client_socket, address)
        except ssl.SSLError:
            pass


def main():
    args = parse_args(__doc__)
    mongo = bool(os.environ.get(MONGO_URL_VAR))
    app = make_app(args.static_dir, sleep=gevent.sleep, find_document=find_document if mongo else None,
                   open_gridfs_file=open_gridfs_file if mongo else None)
    if world.postgresql_url():  # empty when the measured scenario uses no database
        from netarena_shared import psycopg_world

        # TechEmpower's routes (psycopg 3, a psycopg_pool per worker process); the World cache for cached-queries
        # is read now, before the port is bound and the workers forked.
        app = psycopg_world.wsgi_database_routes(app, "gevent")
    # A gevent socket: a plain one would block the whole hub in accept().
    listener = gevent.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # pywsgi writes headers and body separately: without TCP_NODELAY every response waits ~40 ms
    # (Nagle + delayed ACK). Linux copies the option from the listening socket to accepted ones.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind((args.host, args.port))
    listener.listen(2048)

    # h1-tls: every accepted connection is wrapped (and its handshake made) in its own greenlet, by pywsgi.
    # Made after patch_all, so the context's sockets are gevent's and a handshake blocks only its greenlet.
    context = tls.server_context()
    ssl_args = {} if context is None else {"ssl_context": context}

    def serve():
        server = Server(listener, app, log=None, **ssl_args)
        gevent.signal_handler(signal.SIGTERM, server.stop)
        server.serve_forever()

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
