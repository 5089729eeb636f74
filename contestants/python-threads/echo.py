"""netarena echo contestant: socketserver.ThreadingTCPServer, a thread per connection doing recv/sendall."""

import socket
import socketserver
import sys

from netarena_shared.cli import parse_args
from threaded_serving import ThreadPerConnection, serve_until_stopped

RECV_BYTES = 64 * 1024


class EchoHandler(socketserver.BaseRequestHandler):
    def setup(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self):
        sock = self.request
        while data := sock.recv(RECV_BYTES):
            sock.sendall(data)


class Server(ThreadPerConnection, socketserver.ThreadingTCPServer):
    pass


def main() -> int:
    args = parse_args(__doc__, workers=False, static_dir=False)
    return serve_until_stopped(Server((args.host, args.port), EchoHandler))


if __name__ == "__main__":
    sys.exit(main())
