"""netarena contestant: gevent.server.StreamServer echo, one greenlet per connection."""
import signal
import socket

import gevent
import gevent.socket
from gevent.server import StreamServer

from netarena_shared import prefork
from netarena_shared.cli import parse_args

RECV_BYTES = 16384


def handle(conn, _address):
    while True:
        chunk = conn.recv(RECV_BYTES)
        if not chunk:
            break
        conn.sendall(chunk)


def main():
    args = parse_args(__doc__, static_dir=False)
    # A gevent socket: a plain one would block the whole hub in accept().
    listener = gevent.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by accepted sockets: small echoes go out at once instead of waiting for an ACK.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind((args.host, args.port))
    listener.listen(2048)

    def serve():
        server = StreamServer(listener, handle)
        gevent.signal_handler(signal.SIGTERM, server.stop)
        server.serve_forever()

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
