"""A netarena contestant written by `netarena new`: the standard library only, so it installs instantly.

Every route of the scenario catalog (docs/scenarios.md) is here; the manifest lists the ones it claims.
What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of at least
1024, TCP_NODELAY, and the exact bodies below. Replace the handler with your framework's and keep those.
"""

import argparse
import http.server
import json
import os
import signal
import socket
import socketserver
import sys
import time

BACKLOG = 4096
bytes_bodies: dict[int, bytes] = {}  # built once per size, not per request (the catalog's rule)


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every response carries a Content-Length
    disable_nagle_algorithm = True  # TCP_NODELAY on each accepted connection

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/hello":
            self.reply("text/plain", b"Hello, World!")
        elif path == "/json":
            self.reply("application/json", json.dumps({"message": "Hello, World!"}).encode())
        elif path.startswith("/bytes/") and path[7:].isdigit():
            n = int(path[7:])
            self.reply("application/octet-stream", bytes_bodies.setdefault(n, b"*" * n))
        elif path.startswith("/sleep/") and path[7:].isdigit():
            ms = int(path[7:])
            time.sleep(ms / 1000)  # blocks this connection's thread only
            self.reply("text/plain", b"slept %d" % ms)
        elif path.startswith("/static/"):
            self.path = self.path[len("/static"):]  # served from --static-dir (translate_path stays inside it)
            super().do_GET()
        else:
            self.send_error(404)

    def reply(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass  # no access log: writing one per request would be measured too


class HTTPServer(http.server.ThreadingHTTPServer):
    request_queue_size = BACKLOG
    daemon_threads = True


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := self.request.recv(65536):
            self.request.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    request_queue_size = BACKLOG
    daemon_threads = True
    allow_reuse_address = True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--static-dir", default=".")
    parser.add_argument("--echo", action="store_true", help="serve the TCP echo scenario instead of HTTP")
    args = parser.parse_args()
    if args.echo:
        server = EchoServer(("127.0.0.1", args.port), Echo)
    else:
        handler = lambda *a: Handler(*a, directory=os.path.abspath(args.static_dir))  # noqa: E731
        server = HTTPServer(("127.0.0.1", args.port), handler)
    # SIGTERM (the manifest's stop_signal) ends serve_forever and the process cleanly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()
