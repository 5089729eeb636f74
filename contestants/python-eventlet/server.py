"""netarena contestant: a plain WSGI app on eventlet.wsgi, greenthread per connection.

For TechEmpower's database routes (and only then: the other scenarios run unpatched, as before) the standard
library is monkey-patched first, and psycopg 3 is its pure-Python implementation (PSYCOPG_IMPL=python, the
manifest's): its C implementation waits in C, where eventlet's patching cannot reach, and would block every green
thread of the process for each query; the pure-Python one waits in select.select on eventlet's patched selectors,
so a query blocks only its own green thread (psycopg_pool's threads are green too).

With NETARENA_TLS_CERT and NETARENA_TLS_KEY set (netarena's h1-tls) eventlet.wsgi serves HTTPS: the listening socket
wrapped by eventlet's green ssl module (its SSLContext, with netarena_shared.tls's settings), as eventlet's docs wrap
one with eventlet.wrap_ssl.
"""
import eventlet

from netarena_shared import world

if world.postgresql_url():  # empty when the measured scenario uses no database
    eventlet.monkey_patch()

import os  # noqa: E402  (after the patching)
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402

from eventlet.green import ssl as green_ssl  # noqa: E402
import eventlet.tpool  # noqa: E402
import eventlet.wsgi  # noqa: E402

from netarena_shared import prefork, tls  # noqa: E402
from netarena_shared.cli import parse_args  # noqa: E402
from netarena_shared.mongo import MONGO_URL_VAR, sync_docs_collection  # noqa: E402
from netarena_shared.wsgi_app import make_app  # noqa: E402

# eventlet.wsgi's default pool (1024) would leave connections beyond it waiting in the accept queue.
MAX_CONNECTIONS = 10000
# eventlet.wsgi.server waits for every in-flight request when it stops, and a /sleep can be long.
STOP_GRACE_S = 1.0


def find_document(name):
    # pymongo is not monkey-patched here (PyMongo documents gevent support, not eventlet's patching): the
    # blocking query runs in eventlet.tpool's pool of OS threads (20 by default, EVENTLET_THREADPOOL_SIZE) and
    # only this green thread waits for it.
    return eventlet.tpool.execute(lambda: sync_docs_collection().find_one({"_id": name}))


def main():
    args = parse_args(__doc__)
    app = make_app(args.static_dir, sleep=eventlet.sleep,
                   find_document=find_document if os.environ.get(MONGO_URL_VAR) else None)
    if world.postgresql_url():
        from psycopg import waiting

        from netarena_shared import psycopg_world

        if waiting.wait is getattr(waiting, "wait_c", None):  # wait_c exists only in the C implementation
            sys.exit("psycopg waits in C here, which blocks eventlet's hub on every query: "
                     "start with PSYCOPG_IMPL=python (the manifest sets it)")
        # The World cache for cached-queries is read now, before the port is bound and the workers forked.
        app = psycopg_world.wsgi_database_routes(app, "eventlet")
    listener = eventlet.listen((args.host, args.port), backlog=2048)
    # Linux copies TCP_NODELAY from the listening socket to every accepted one.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # h1-tls: a green SSLContext (its sockets wait on the hub; the standard library's would block the process, which
    # is patched only for the database scenarios). Its accept() wraps each connection without a handshake, which the
    # connection's own green thread then makes on its first read, so a slow handshake holds up no other.
    context = tls.server_context(green_ssl.SSLContext)
    if context is not None:
        listener = context.wrap_socket(listener, server_side=True)

    def stop(*_):
        eventlet.spawn_after(STOP_GRACE_S, os._exit, 0)
        sys.exit(0)

    def serve():
        signal.signal(signal.SIGTERM, stop)
        try:
            eventlet.wsgi.server(listener, app, max_size=MAX_CONNECTIONS, log_output=False)
        except SystemExit:  # stop()
            pass
        # Every process ends as prefork's children do (os._exit), never through the interpreter's finalization:
        # under the patching psycopg_pool's threads are green threads, and the pool's __del__ then fails
        # ("greenlet is being finalized").
        sys.stderr.flush()
        os._exit(0)

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
