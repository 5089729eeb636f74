"""The plain WSGI app served unchanged by python-eventlet (eventlet.wsgi) and python-gevent (gevent.pywsgi).

Written against PEP 3333 alone, as users of those servers write one; the framework-specific pieces are
passed in: `sleep`, the server's cooperative sleep (eventlet.sleep, gevent.sleep), `find_document`, how
the server reads one document of the mongo fixture without blocking its hub (gevent: pymongo under
monkey-patching; eventlet: pymongo in eventlet.tpool's OS threads), and `open_gridfs_file`, how it opens a
file of the GridFS bucket (gevent: pymongo's GridFSBucket). Without them there is no /mongo or /gridfs.
"""
import json
import mimetypes
import os
from wsgiref.util import FileWrapper

from netarena_shared.bodies import BYTES_BODIES, HELLO

STATIC_CHUNK_BYTES = 65536


def respond(start_response, status, content_type, body):
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def make_app(static_dir, sleep, find_document=None, open_gridfs_file=None):
    static_root = os.path.realpath(static_dir)

    def serve_static(environ, start_response, rel_path):
        full_path = os.path.realpath(os.path.join(static_root, rel_path))
        if not full_path.startswith(static_root + os.sep) or not os.path.isfile(full_path):
            return respond(start_response, "404 Not Found", "text/plain", b"not found")
        content_type = mimetypes.guess_type(full_path)[0] or "application/octet-stream"
        f = open(full_path, "rb")
        start_response("200 OK", [("Content-Type", content_type),
                                  ("Content-Length", str(os.fstat(f.fileno()).st_size))])
        # Neither eventlet.wsgi nor gevent.pywsgi offers wsgi.file_wrapper; the stdlib one streams the file in chunks.
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
            sleep(ms / 1000)
            return respond(start_response, "200 OK", "text/plain", f"slept {ms}".encode())
        if path.startswith("/static/"):
            return serve_static(environ, start_response, path[8:])
        if find_document is not None and path.startswith("/mongo/"):
            # One query per request, by _id; the document as the database returned it, through json.dumps.
            doc = find_document(path[7:])
            if doc is None:
                return respond(start_response, "404 Not Found", "text/plain", b"no such document")
            return respond(start_response, "200 OK", "application/json", json.dumps(doc).encode())
        if open_gridfs_file is not None and path.startswith("/gridfs/"):
            # The whole file read out of the bucket, then sent in one piece. Iterating the GridOut instead
            # (a chunk per query) sent the head before the driver's last cursor round trip, so every
            # response's tail waited one FerretDB query (~40 ms), which the Nagle check flags.
            grid_out = open_gridfs_file(path[8:])
            if grid_out is None:
                return respond(start_response, "404 Not Found", "text/plain", b"not found")
            content_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
            return respond(start_response, "200 OK", content_type, grid_out.read())
        return respond(start_response, "404 Not Found", "text/plain", b"not found")

    return app
