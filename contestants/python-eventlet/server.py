"""netarena contestant: a plain WSGI app on eventlet.wsgi, greenthread per connection."""
import os
import signal
import socket
import sys

import eventlet
import eventlet.wsgi

from netarena_shared import prefork
from netarena_shared.cli import parse_args
from netarena_shared.wsgi_app import make_app

# eventlet.wsgi's default pool (1024) would leave connections beyond it waiting in the accept queue.
MAX_CONNECTIONS = 10000
# eventlet.wsgi.server waits for every in-flight request when it stops, and a /sleep can be long.
STOP_GRACE_S = 1.0


def main():
    args = parse_args(__doc__)
    listener = eventlet.listen((args.host, args.port), backlog=2048)
    # Linux copies TCP_NODELAY from the listening socket to every accepted one.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    app = make_app(args.static_dir, sleep=eventlet.sleep)

    def stop(*_):
        eventlet.spawn_after(STOP_GRACE_S, os._exit, 0)
        sys.exit(0)

    def serve():
        signal.signal(signal.SIGTERM, stop)
        eventlet.wsgi.server(listener, app, max_size=MAX_CONNECTIONS, log_output=False)

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
