"""netarena echo contestant: socketserver.ThreadingTCPServer, a thread per connection doing recv/sendall."""

import argparse
import signal
import socketserver
import sys

LISTEN_BACKLOG = 4096
RECV_BYTES = 64 * 1024


class EchoHandler(socketserver.BaseRequestHandler):
    def setup(self):
        import socket
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self):
        sock = self.request
        while data := sock.recv(RECV_BYTES):
            sock.sendall(data)


class Server(socketserver.ThreadingTCPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client closing or resetting its connection (every load generator does at the end) is
        # not a server error; socketserver would print a traceback for each one.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
    allow_reuse_address = True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), EchoHandler)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
