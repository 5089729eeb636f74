"""netarena HTTP contestant: the standard library's http.server.ThreadingHTTPServer, a thread per connection,
or with --threads N a fixed pool of N threads that take the connections in turn.

/sleep/{ms} blocks the connection's thread with time.sleep: that is what a threaded server does,
and the contrast with the event loops is seed 002's point.

With NETARENA_TLS_CERT and NETARENA_TLS_KEY set (netarena's h1-tls) it serves HTTPS: each accepted socket wrapped
by the standard library's ssl (netarena_shared.tls's context), its handshake made on the connection's own thread.
"""

import http.server
import json
import os
import ssl
import sys
import time

from netarena_shared import tls
from netarena_shared.cli import parse_args
from threaded_serving import PooledThreads, ThreadPerConnection, serve_until_stopped

MAX_BYTES_N = 64 * 1024 * 1024
MAX_SLEEP_MS = 60_000

# Built once per n on first use (catalog: not per request). A racing first use builds it twice; harmless.
bytes_bodies: dict[int, bytes] = {}


def parse_int(text: str, maximum: int) -> int | None:
    if not text.isdigit() or len(text) > 9:
        return None
    value = int(text)
    return value if value <= maximum else None


class Handler(http.server.SimpleHTTPRequestHandler):
    # HTTP/1.1 keeps the connection open between requests (every response has a Content-Length).
    protocol_version = "HTTP/1.1"
    # StreamRequestHandler's switch for TCP_NODELAY on the accepted socket.
    disable_nagle_algorithm = True
    server_version = "netarena-threads"

    def setup(self):
        super().setup()  # TCP_NODELAY first, so the handshake's last flight is not held back either
        if isinstance(self.request, ssl.SSLSocket):
            # h1-tls: the handshake Server.get_request left to this connection's thread.
            self.request.do_handshake()

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/hello":
            self.reply(b"text/plain", b"Hello, World!")
        elif path == "/json":
            self.reply(b"application/json", json.dumps({"message": "Hello, World!"}).encode())
        elif path.startswith("/bytes/"):
            n = parse_int(path[7:], MAX_BYTES_N)
            if n is None:
                self.send_error(404)
                return
            body = bytes_bodies.get(n)
            if body is None:
                body = bytes_bodies[n] = b"*" * n
            self.reply(b"application/octet-stream", body)
        elif path.startswith("/sleep/"):
            ms = parse_int(path[7:], MAX_SLEEP_MS)
            if ms is None:
                self.send_error(404)
                return
            time.sleep(ms / 1000)
            self.reply(b"text/plain", b"slept %d" % ms)
        elif path.startswith("/static/"):
            # SimpleHTTPRequestHandler serves self.path relative to `directory` (path traversal
            # is handled by its translate_path).
            self.path = self.path[len("/static"):]
            super().do_GET()
        else:
            self.send_error(404)

    def reply(self, content_type: bytes, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type.decode())
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        # Per-request access logging to stderr is off, as for every other contestant.
        pass


class Server(PooledThreads, ThreadPerConnection, http.server.ThreadingHTTPServer):
    tls_context: ssl.SSLContext | None = None  # h1-tls's (netarena_shared.tls), None for cleartext

    def get_request(self):
        request, client_address = super().get_request()
        if self.tls_context is not None:
            # Wrapped without a handshake: ThreadingHTTPServer accepts on one thread for every connection, where a
            # slow handshake would hold up the others; Handler.setup makes it on the connection's own thread.
            try:
                request = self.tls_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
            except OSError:  # the client is gone already; the accept loop goes on to the next one
                request.close()
                raise
        return request, client_address


def main() -> int:
    args = parse_args(__doc__, workers=False, threads=True)
    static_dir = os.path.abspath(args.static_dir)

    class StaticHandler(Handler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=static_dir, **kw)

    server = Server((args.host, args.port), StaticHandler)
    server.pool_size = args.threads
    server.tls_context = tls.server_context()
    return serve_until_stopped(server)


if __name__ == "__main__":
    sys.exit(main())
