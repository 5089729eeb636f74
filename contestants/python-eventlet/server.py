"""netarena contestant: a plain WSGI app on eventlet.wsgi, greenthread per connection."""
import os
import signal
import socket
import sys

import eventlet
import eventlet.tpool
import eventlet.wsgi

from netarena_shared import prefork
from netarena_shared.cli import parse_args
from netarena_shared.mongo import MONGO_URL_VAR, sync_docs_collection
from netarena_shared.wsgi_app import make_app

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
    listener = eventlet.listen((args.host, args.port), backlog=2048)
    # Linux copies TCP_NODELAY from the listening socket to every accepted one.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    app = make_app(args.static_dir, sleep=eventlet.sleep,
                   find_document=find_document if os.environ.get(MONGO_URL_VAR) else None)

    def stop(*_):
        eventlet.spawn_after(STOP_GRACE_S, os._exit, 0)
        sys.exit(0)

    def serve():
        signal.signal(signal.SIGTERM, stop)
        eventlet.wsgi.server(listener, app, max_size=MAX_CONNECTIONS, log_output=False)

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
