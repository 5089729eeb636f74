"""netarena contestant: eventlet green echo server, as in seed 000 (one greenthread per connection)."""
import signal
import socket
import sys

import eventlet

from netarena_shared import prefork
from netarena_shared.cli import parse_args

RECV_BYTES = 16384


def handle(conn):
    with conn:
        while True:
            chunk = conn.recv(RECV_BYTES)
            if not chunk:
                break
            conn.sendall(chunk)


def main():
    args = parse_args(__doc__, static_dir=False)
    server = eventlet.listen((args.host, args.port), backlog=2048)
    # Inherited by accepted sockets: small echoes go out at once instead of waiting for an ACK.
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def serve():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        pool = eventlet.GreenPool(size=32768)
        while True:
            conn, _address = server.accept()
            pool.spawn_n(handle, conn)

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
