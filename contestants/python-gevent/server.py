"""netarena contestant: a plain WSGI app on gevent.pywsgi.WSGIServer, one greenlet per connection."""
import signal
import socket

import gevent
import gevent.socket
from gevent.pywsgi import WSGIServer

from netarena_shared import prefork
from netarena_shared.cli import parse_args
from netarena_shared.wsgi_app import make_app


def main():
    args = parse_args(__doc__)
    # A gevent socket: a plain one would block the whole hub in accept().
    listener = gevent.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # pywsgi writes headers and body separately: without TCP_NODELAY every response waits ~40 ms
    # (Nagle + delayed ACK). Linux copies the option from the listening socket to accepted ones.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind((args.host, args.port))
    listener.listen(2048)
    app = make_app(args.static_dir, sleep=gevent.sleep)

    def serve():
        server = WSGIServer(listener, app, log=None)
        gevent.signal_handler(signal.SIGTERM, server.stop)
        server.serve_forever()

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
