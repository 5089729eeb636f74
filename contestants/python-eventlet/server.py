"""netarena contestant: a plain WSGI app on eventlet.wsgi, greenthread per connection."""
import argparse
import json
import mimetypes
import os
import signal
import socket
import sys
from wsgiref.util import FileWrapper

import eventlet
import eventlet.wsgi

import prefork

HELLO = b"Hello, World!"
BYTES_SIZES = (40, 10000, 524288)
# Built once at start: the catalog measures serving a body, not building it.
BYTES_BODIES = {n: b"*" * n for n in BYTES_SIZES}
# eventlet.wsgi's default pool (1024) would leave connections beyond it waiting in the accept queue.
MAX_CONNECTIONS = 10000
STATIC_CHUNK_BYTES = 65536
# eventlet.wsgi.server waits for every in-flight request when it stops, and a /sleep can be long.
STOP_GRACE_S = 1.0


def respond(start_response, status, content_type, body):
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def make_app(static_dir):
    static_root = os.path.realpath(static_dir)

    def serve_static(environ, start_response, rel_path):
        full_path = os.path.realpath(os.path.join(static_root, rel_path))
        if not full_path.startswith(static_root + os.sep) or not os.path.isfile(full_path):
            return respond(start_response, "404 Not Found", "text/plain", b"not found")
        content_type = mimetypes.guess_type(full_path)[0] or "application/octet-stream"
        f = open(full_path, "rb")
        start_response("200 OK", [("Content-Type", content_type),
                                  ("Content-Length", str(os.fstat(f.fileno()).st_size))])
        wrapper = environ.get("wsgi.file_wrapper", FileWrapper)
        return wrapper(f, STATIC_CHUNK_BYTES)

    def app(environ, start_response):
        path = environ["PATH_INFO"]
        if path == "/hello":
            return respond(start_response, "200 OK", "text/plain", HELLO)
        if path == "/json":
            body = json.dumps({"message": "Hello, World!"}).encode()
            return respond(start_response, "200 OK", "application/json", body)
        if path.startswith("/bytes/"):
            body = BYTES_BODIES.get(int(path[7:])) if path[7:].isdigit() else None
            if body is None:
                return respond(start_response, "404 Not Found", "text/plain", b"unknown size")
            return respond(start_response, "200 OK", "application/octet-stream", body)
        if path.startswith("/sleep/") and path[7:].isdigit():
            ms = int(path[7:])
            eventlet.sleep(ms / 1000)
            return respond(start_response, "200 OK", "text/plain", f"slept {ms}".encode())
        if path.startswith("/static/"):
            return serve_static(environ, start_response, path[8:])
        return respond(start_response, "404 Not Found", "text/plain", b"not found")

    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--static-dir", required=True)
    args = parser.parse_args()
    if not os.path.isdir(args.static_dir):
        sys.exit(f"--static-dir {args.static_dir!r} is not a directory; pass the generated static file set")

    listener = eventlet.listen(("127.0.0.1", args.port), backlog=2048)
    # Linux copies TCP_NODELAY from the listening socket to every accepted one.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    app = make_app(args.static_dir)

    def stop(*_):
        eventlet.spawn_after(STOP_GRACE_S, os._exit, 0)
        sys.exit(0)

    def serve():
        signal.signal(signal.SIGTERM, stop)
        eventlet.wsgi.server(listener, app, max_size=MAX_CONNECTIONS, log_output=False)

    prefork.run(args.workers, serve)


if __name__ == "__main__":
    main()
